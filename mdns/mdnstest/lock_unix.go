//go:build unix

package mdnstest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// lockZeroconf takes the machine-wide zeroconf lock (an flock on a file in
// the temporary directory), polling until ctx ends.
func lockZeroconf(t testing.TB, ctx context.Context) (unlock func()) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "mhp-go-zeroconf.lock"), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		t.Fatalf("zeroconf lock: %v", err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			t.Fatalf("zeroconf lock: %v", err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			t.Fatalf("zeroconf lock: another test's announcer held it until the deadline: %v", ctx.Err())
		case <-time.After(lockPoll):
		}
	}
}
