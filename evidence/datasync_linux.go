package evidence

import (
	"os"
	"syscall"
)

// syncData makes f's appended bytes durable. On Linux a chain file opened
// by the log is fdatasync'd: it writes the data and the size that reading
// it back needs, not the modification time, which is about a third less
// work per commit than fsync on ext4. Wrapped files (Config.WrapFile) are
// synced through their own Sync.
func syncData(f File) error {
	of, ok := f.(*os.File)
	if !ok {
		return f.Sync()
	}
	rc, err := of.SyscallConn()
	if err != nil {
		return f.Sync() // closed: Sync says so
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			if serr = syscall.Fdatasync(int(fd)); serr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return f.Sync()
	}
	if serr != nil {
		return &os.PathError{Op: "fdatasync", Path: of.Name(), Err: serr}
	}
	return nil
}
