//go:build unix

package evidence

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/openmhp/mhp-go"
)

// LockFile is the file in an evidence directory whose exclusive flock the
// writing process holds: a second process opening the directory is refused
// instead of forking the chain.
const LockFile = "writer.lock"

// lockDir takes the directory's writer lock without waiting.
func lockDir(dir string) (func(), error) {
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("evidence: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		if err == syscall.EWOULDBLOCK {
			return nil, mhp.Errorf(mhp.CodeDeviceBusy, "evidence: another process writes %s (it holds %s): a second writer would fork its chain", dir, LockFile).
				With(mhp.DataReason, "locked")
		}
		return nil, fmt.Errorf("evidence: lock %s: %w", path, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
