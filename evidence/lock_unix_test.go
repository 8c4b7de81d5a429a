//go:build unix

package evidence

import (
	"testing"

	"github.com/openmhp/mhp-go"
)

// TestWriterLockExcludesAnotherHandle: the directory's flock is held while
// the log is open (another process, like another handle, is refused).
func TestWriterLockExcludesAnotherHandle(t *testing.T) {
	dir := t.TempDir()
	l := openShared(t, Config{Dir: dir})
	if unlock, err := lockDir(l.key); err == nil {
		unlock()
		t.Fatal("a second writer took the lock of an open log")
	} else if e, ok := mhp.AsError(err); ok && e.Code != mhp.CodeDeviceBusy {
		t.Fatalf("err = %v, want DeviceBusy", err)
	}
	l.Close()
	unlock, err := lockDir(l.key)
	if err != nil {
		t.Fatalf("the lock outlived Close: %v", err)
	}
	unlock()
}
