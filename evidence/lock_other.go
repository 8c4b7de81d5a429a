//go:build !unix

package evidence

// LockFile is the writer lock's file on unix; elsewhere only one Log per
// directory in this process is enforced.
const LockFile = "writer.lock"

// lockDir is a no-op where flock is not available.
func lockDir(string) (func(), error) { return func() {}, nil }
