//go:build !unix

package host

import (
	"errors"
	"os"
	"time"

	"github.com/openmhp/mhp-go"
)

// lock takes an exclusive lock file at path (O_EXCL), waiting at most
// wait; a lock file older than a minute is taken to be left by a crash.
func lock(path string, wait time.Duration) (unlock func(), err error) {
	deadline := time.Now().Add(wait)
	for pause := time.Millisecond; ; pause = min(2*pause, 50*time.Millisecond) {
		f, err := os.OpenFile(path+".held", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			f.Close()
			return func() { os.Remove(path + ".held") }, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return nil, err
		}
		if fi, err := os.Stat(path + ".held"); err == nil && time.Since(fi.ModTime()) > time.Minute {
			os.Remove(path + ".held")
			continue
		}
		if time.Now().After(deadline) {
			return nil, mhp.Errorf(mhp.CodeDeviceBusy, "the fleet file is locked by another process for over %s (%s)", wait, path).
				With(mhp.DataReason, "locked")
		}
		time.Sleep(pause)
	}
}
