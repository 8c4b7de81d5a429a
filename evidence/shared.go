package evidence

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/openmhp/mhp-go"
)

// A shared log is one chain in one directory that every device of a host
// writes ([Config.Shared]): each entry names its device, one committer
// writes and fsyncs a batch of receipts of every device at once, and its
// heads name the log ([Head.Log]), not a device. Its first entry (seq 1) is
// the log's own [MethodSharedLog] receipt, with no device and the log's
// name: that entry, covered by the chain's hashes and so by every signed
// head, is what lets Verify accept entries of several devices. A chain
// that does not begin with it is a device's chain, and an entry of another
// device in it is refused as before. Devices append through a handle,
// [Log.For], which is what the guard records into; the handle keeps only
// the device's id, so nothing per device grows in the log.

// MethodSharedLog is the method of a shared log's first entry (seq 1, no
// device, Name the log's name).
const MethodSharedLog = "evidence/shared"

// MethodContinued is the method of the receipt a shared log records for a
// device whose earlier receipts are in a chain of its own: its result names
// that directory and the chain's last seq and hash, so both chains stay
// verifiable and the hand-over is itself evidence.
const MethodContinued = "evidence/continued"

// Continued is the result of a [MethodContinued] receipt.
type Continued struct {
	// Dir is the device's own chain directory, as the host named it.
	Dir string `json:"dir"`
	// Seq and Hash are that chain's last entry when the shared log took over.
	Seq  uint64 `json:"seq"`
	Hash string `json:"hash"`
	// Error says why the chain could not be read, when it could not.
	Error string `json:"error,omitempty"`
}

// maxFirstLine bounds the first line read to learn a chain's kind.
const maxFirstLine = 1 << 20

// chainKind reads the first entry of the chain in dir: whether it starts a
// shared log (and its name), else the device it names. ok is false for a
// directory without entries.
func chainKind(dir string) (shared bool, name string, ok bool, err error) {
	f, err := openRegular(segmentPath(dir, 1))
	if errors.Is(err, os.ErrNotExist) || (err != nil && isNotExist(segmentPath(dir, 1))) {
		return false, "", false, nil
	}
	if err != nil {
		return false, "", false, err
	}
	defer f.Close()
	b, err := bufio.NewReaderSize(io.LimitReader(f, maxFirstLine), 64<<10).ReadBytes('\n')
	if err != nil {
		return false, "", false, nil // no complete first line: nothing appended yet (or torn; Open repairs it)
	}
	var e Entry
	if err := json.Unmarshal(b, &e); err != nil {
		return false, "", false, fmt.Errorf("evidence: %s line 1: %v", segmentPath(dir, 1), err)
	}
	if isSharedMarker(e) {
		return true, e.Name, true, nil
	}
	return false, e.Device, true, nil
}

// isSharedMarker reports whether e is a shared log's first entry.
func isSharedMarker(e Entry) bool {
	return e.Seq == 1 && e.Method == MethodSharedLog && e.Device == ""
}

// IsShared reports whether dir holds a shared log (false for a device's
// chain or a directory without entries).
func IsShared(dir string) (bool, error) {
	shared, _, _, err := chainKind(dir)
	return shared, err
}

// ChainDevice returns the device a device's own chain in dir names ("" and
// false for a shared log or a directory without entries).
func ChainDevice(dir string) (string, bool, error) {
	shared, name, ok, err := chainKind(dir)
	if err != nil || !ok || shared {
		return "", false, err
	}
	return name, true, nil
}

// checkKind refuses to continue a chain of the other kind: a shared Open of
// a device's chain, a device's Open of a shared log or of another device's
// chain (either would fork what the chain means).
func (l *Log) checkKind() error {
	shared, name, ok, err := chainKind(l.cfg.Dir)
	if err != nil || !ok {
		return err
	}
	switch {
	case shared && !l.cfg.Shared:
		return mhp.Errorf(mhp.CodeInvalidParams, "evidence: %s holds the shared log %q: open it shared (Config.Shared) and append through For(%q)",
			l.cfg.Dir, name, l.cfg.Device)
	case !shared && l.cfg.Shared:
		return mhp.Errorf(mhp.CodeInvalidParams, "evidence: %s holds the chain of device %q, not a shared log: open it for that device, or give the shared log a directory of its own",
			l.cfg.Dir, name)
	case !shared && name != l.cfg.Device:
		return mhp.Errorf(mhp.CodeInvalidParams, "evidence: %s holds the chain of device %q, not of %q: its receipts would not verify there",
			l.cfg.Dir, name, l.cfg.Device)
	}
	if shared {
		l.name = name
	}
	return nil
}

// startIfShared writes a new shared log's first entry (an empty chain
// opened shared); on failure the log is stopped and its files closed.
func (l *Log) startIfShared() error {
	if !l.cfg.Shared || l.seq != 0 {
		return nil
	}
	name := l.cfg.Name
	if name == "" {
		name = filepath.Base(l.key)
	}
	l.name = name
	if _, err := l.appendAs("", Receipt{Method: MethodSharedLog, Name: name, Outcome: OutcomeOK}); err != nil {
		l.commit.stop()
		l.file.Close()
		return fmt.Errorf("evidence: starting the shared log in %s: %w", l.cfg.Dir, err)
	}
	return nil
}

// Shared reports whether the log is a shared log of several devices.
func (l *Log) Shared() bool { return l.cfg.Shared }

// Name is a shared log's name ("" for a device's chain).
func (l *Log) Name() string { return l.name }

// Dir is the directory the log writes.
func (l *Log) Dir() string { return l.cfg.Dir }

// logDevice is the device the log's own receipts (the shared marker, a
// repair) name: none in a shared log, the device in a device's chain.
func (l *Log) logDevice() string {
	if l.cfg.Shared {
		return ""
	}
	return l.cfg.Device
}

// headOf is the identity a head of this log carries.
func (l *Log) headOf(h Head) Head {
	if l.cfg.Shared {
		h.Log = l.name
	} else {
		h.Device = l.cfg.Device
	}
	return h
}

// For returns the handle a device appends through. On a shared log every
// device has one; on a device's own chain only that device (any other id
// gets a handle that refuses, so the guard refuses the actuation before it
// reaches the device).
func (l *Log) For(device string) *DeviceLog {
	d := &DeviceLog{l: l, device: device}
	switch {
	case device == "":
		d.err = mhp.Errorf(mhp.CodeInvalidParams, "evidence: a receipt must name its device (For with an empty id)")
	case !l.cfg.Shared && device != l.cfg.Device:
		d.err = mhp.Errorf(mhp.CodeInvalidParams, "evidence: the chain in %s is of device %q; %q cannot record into it", l.cfg.Dir, l.cfg.Device, device)
	}
	return d
}

// DeviceLog is one device's view of a log: it appends receipts naming the
// device and lists only them; its head is the log's. It holds nothing but
// the device's id.
type DeviceLog struct {
	l      *Log
	device string
	err    error // why this device cannot record here
}

// Device is the id the handle's receipts name.
func (d *DeviceLog) Device() string { return d.device }

// Log is the log the handle appends to.
func (d *DeviceLog) Log() *Log { return d.l }

// Append adds r to the log as an entry of the handle's device (see [Log.Append]).
func (d *DeviceLog) Append(r Receipt) (Entry, error) {
	if d.err != nil {
		return Entry{}, d.err
	}
	return d.l.appendAs(d.device, r)
}

// Err is the log's error, or why this device cannot record into it.
func (d *DeviceLog) Err() error {
	if d.err != nil {
		return d.err
	}
	return d.l.Err()
}

// Head is the log's head (a shared log's names the log).
func (d *DeviceLog) Head() Head { return d.l.Head() }

// List lists the device's entries only (q.Device is the handle's).
func (d *DeviceLog) List(q Query) (Page, error) {
	q.Device = d.device
	return d.l.List(q)
}
