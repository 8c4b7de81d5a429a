//go:build unix

package host

import (
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/openmhp/mhp-go"
)

// lock takes an exclusive flock on path (created if missing), waiting at
// most wait; unlock releases it. flock locks belong to the open file, so two
// handles in one process exclude each other as two processes do.
func lock(path string, wait time.Duration) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(wait)
	for pause := time.Millisecond; ; pause = min(2*pause, 50*time.Millisecond) {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}, nil
		}
		if err != syscall.EWOULDBLOCK && err != syscall.EINTR {
			f.Close()
			return nil, fmt.Errorf("host: lock %s: %w", path, err)
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, mhp.Errorf(mhp.CodeDeviceBusy, "the fleet file is locked by another process for over %s (%s)", wait, path).
				With(mhp.DataReason, "locked")
		}
		time.Sleep(pause) // polling a non-blocking flock: a blocking one could not honour the deadline
	}
}
