package evidence

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/openmhp/mhp-go"
)

// ContinuedFile is the file Continue writes into a device's own chain
// directory once the shared log has recorded where that chain ended; the
// chain's own files are never changed by it.
const ContinuedFile = "continued.json"

// ContinueOptions are what Continue opens the earlier chain with.
type ContinueOptions struct {
	// Key signs the earlier chain's head as it is closed (its tail is
	// covered even when its last process was killed).
	Key ed25519.PrivateKey
	// Sync is the durability of the repair receipt, if one is needed.
	Sync SyncPolicy
}

// Continue hands a device's own chain in dir over to the shared log: it
// opens the chain (cutting and recording a torn last line as any Open
// does), closes it (a signed shutdown head with a key), and records in the
// shared log, as a receipt of the device, a [MethodContinued] receipt
// naming dir and that chain's last seq and hash; then it notes the same in
// dir/[ContinuedFile]. A chain already handed over at its current last
// entry is left alone (ok false, nothing recorded), so a host calls it each
// time it hosts the device. A directory without a chain is nothing to hand
// over. When the earlier chain cannot be opened, the receipt says why and
// the error is returned: receipts go to the shared log either way.
func Continue(shared *DeviceLog, dir string, opt ContinueOptions) (c Continued, ok bool, err error) {
	c.Dir = dir
	isShared, name, has, err := chainKind(dir)
	if err != nil || !has {
		if err == nil {
			return c, false, nil
		}
		c.Error = err.Error()
	}
	if err == nil {
		cfg := Config{Dir: dir, Device: name, Key: opt.Key, Sync: opt.Sync}
		if isShared {
			cfg.Device, cfg.Shared = "", true
		}
		var old *Log
		if old, err = Open(cfg); err == nil {
			err = old.Close()
			h := old.Head()
			c.Seq, c.Hash = h.Seq, h.Hash
		}
		if err != nil {
			c.Error = err.Error()
		}
	}
	if err == nil {
		var was Continued
		if b, rerr := os.ReadFile(filepath.Join(dir, ContinuedFile)); rerr == nil && json.Unmarshal(b, &was) == nil &&
			was.Seq == c.Seq && was.Hash == c.Hash {
			return c, false, nil
		}
	}
	if _, aerr := shared.Append(Receipt{Method: MethodContinued, Name: filepath.Base(dir), Outcome: OutcomeOK, Value: c}); aerr != nil {
		return c, false, fmt.Errorf("evidence: recording that %s continues in the shared log: %w", dir, aerr)
	}
	if err != nil {
		return c, true, mhp.Errorf(mhp.CodeServerError, "evidence: the earlier chain in %s could not be closed (%v); its receipts stay there, new ones go to the shared log", dir, err)
	}
	b, _ := json.Marshal(c)
	if werr := writeFileSynced(filepath.Join(dir, ContinuedFile), b); werr != nil {
		return c, true, fmt.Errorf("evidence: %w", werr)
	}
	return c, true, nil
}

// writeFileSynced replaces path with b atomically (a synced temporary file
// renamed over it, then the folder synced).
func writeFileSynced(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return err
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
