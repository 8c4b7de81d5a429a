//go:build !linux

package evidence

// syncData makes f's appended bytes durable (fsync).
func syncData(f File) error { return f.Sync() }
