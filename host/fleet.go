// Package host is the host's fleet: the devices a scientist's machine knows,
// persisted in $MHP_HOME/fleet.yaml, and the device packages it owns under
// $MHP_HOME/devices/<id>/, hosted in-process so that a laptop runs no
// separate device servers. The CLI (mhp lab …) and the MCP bridge (mhp_lab
// ops) share one Fleet over the same files.
//
// The fleet file is changed only through one read-modify-write under an
// exclusive lock on $MHP_HOME/fleet.lock (flock on unix), and written
// atomically (a temporary file, fsync, rename, fsync of the folder): two
// processes adding at once both land, and a crash mid-write leaves the old
// file intact (and a temporary file the next writer removes).
//
// Whether an entry is simulated is the host's decision, never the device's
// tags: a simulated twin or a package whose driver is sim:… is simulated;
// everything else (a URL, a serial, manual or adapter package, an adapter
// config) is hardware.
package host

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/openmhp/mhp-go"
)

// Files and folders inside the home.
const (
	FleetFile  = "fleet.yaml"
	lockFile   = "fleet.lock"
	DevicesDir = "devices"
)

// Bounds: the fleet file and the number of entries it may hold.
const (
	MaxFleetBytes = 4 << 20
	MaxEntries    = 4096
)

// Entry kinds: how the host reaches the device.
const (
	// KindRemote is an MHP server at an http(s):// URL.
	KindRemote = "remote"
	// KindPackage is a device package hosted in-process on its driver.
	KindPackage = "package"
	// KindTwin is a package's simulated twin, hosted in-process.
	KindTwin = "twin"
	// KindAdapter is an adapter config file hosted in-process.
	KindAdapter = "adapter"
	// KindSim is a built-in simulated device (sim:thermocycler, sim:arm).
	KindSim = "sim"
)

// Card is what the fleet keeps of a device's card: its identity and the
// names of its items (enough to find it without connecting).
type Card struct {
	mhp.DeviceInfo `yaml:",inline"`
	Signals        []string `json:"signals,omitempty" yaml:"signals,omitempty"`
	Settings       []string `json:"settings,omitempty" yaml:"settings,omitempty"`
	Actions        []string `json:"actions,omitempty" yaml:"actions,omitempty"`
}

// Entry is one device of the fleet.
type Entry struct {
	// ID is the device's id in this fleet (the card's, or suffixed -sim for a twin).
	ID string `json:"id" yaml:"id"`
	// Target reaches it: http(s)://host:port, pkg:DIR, twin:DIR, config:FILE
	// or sim:NAME; DIR and FILE are absolute or relative to the home.
	Target string `json:"target" yaml:"target"`
	// Kind is one of KindRemote, KindPackage, KindTwin, KindAdapter, KindSim.
	Kind string `json:"kind" yaml:"kind"`
	// Simulated is the host's decision (see the package doc).
	Simulated bool `json:"simulated" yaml:"simulated"`
	// Added is when the entry was added.
	Added time.Time `json:"added" yaml:"added"`
	// Location is where the device stands, as the person said (locate).
	Location string `json:"location,omitempty" yaml:"location,omitempty"`
	// Card is the device's card when it was added.
	Card Card `json:"card" yaml:"card"`
}

// fleetDoc is fleet.yaml.
type fleetDoc struct {
	Devices []Entry `yaml:"devices"`
}

var idPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// ValidID checks a fleet id: lowercase letters, digits, '.', '_' and '-',
// starting with a letter or digit, at most 64 characters, no "..".
func ValidID(id string) error {
	if !idPattern.MatchString(id) || strings.Contains(id, "..") {
		return mhp.Errorf(mhp.CodeInvalidParams, "device id %q: use 1-64 lowercase letters, digits, '.', '_' or '-', starting with a letter or digit, without \"..\"",
			mhp.Truncate(id, 80)).With(mhp.DataField, "id")
	}
	return nil
}

// Home is the default home: $MHP_HOME, else ~/.mhp.
func Home() (string, error) {
	if h := strings.TrimSpace(os.Getenv("MHP_HOME")); h != "" {
		return filepath.Abs(h)
	}
	u, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("host: no MHP_HOME and no home folder: %w", err)
	}
	return filepath.Join(u, ".mhp"), nil
}

// store is the fleet file in a home folder.
type store struct {
	home string
	// crash, in tests, is called after part of the temporary file is
	// written; an error it returns aborts the write there, as a crash would.
	crash func() error
}

func (s *store) path() string { return filepath.Join(s.home, FleetFile) }

// read loads the fleet file; a missing file is an empty fleet.
func (s *store) read() (fleetDoc, error) {
	var doc fleetDoc
	b, err := ReadFileLimited(s.path(), MaxFleetBytes)
	if errors.Is(err, os.ErrNotExist) {
		return doc, nil
	}
	if err != nil {
		return doc, fmt.Errorf("host: %w", err)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return doc, nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		return doc, fmt.Errorf("host: %s: %w (fix or move the file; it is never overwritten while it does not parse)", s.path(), err)
	}
	return doc, nil
}

// update runs one read-modify-write of the fleet file under the lock: fn
// changes the document; when it returns nil the document is written
// atomically.
func (s *store) update(fn func(*fleetDoc) error) error {
	unlock, err := lock(filepath.Join(s.home, lockFile), 10*time.Second)
	if err != nil {
		return err
	}
	defer unlock()
	s.removeTemps() // left by a writer that crashed: none runs while we hold the lock
	doc, err := s.read()
	if err != nil {
		return err
	}
	if err := fn(&doc); err != nil {
		return err
	}
	if len(doc.Devices) > MaxEntries {
		return mhp.Errorf(mhp.CodeInvalidParams, "the fleet holds %d devices, the most it keeps; remove one first", MaxEntries).
			With(mhp.DataLimit, MaxEntries)
	}
	sort.Slice(doc.Devices, func(i, j int) bool { return doc.Devices[i].ID < doc.Devices[j].ID })
	b, err := yaml.Marshal(doc)
	if err != nil {
		return err
	}
	return s.writeAtomic(b)
}

const tempPrefix = FleetFile + ".tmp-"

func (s *store) removeTemps() {
	matches, _ := filepath.Glob(filepath.Join(s.home, tempPrefix+"*"))
	for _, m := range matches {
		_ = os.Remove(m)
	}
}

// writeAtomic writes the fleet file: a temporary file in the same folder,
// fsync, rename over the old one, fsync of the folder.
func (s *store) writeAtomic(b []byte) error {
	var n [8]byte
	_, _ = rand.Read(n[:])
	tmp := filepath.Join(s.home, tempPrefix+hex.EncodeToString(n[:]))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	half := len(b) / 2
	if _, err := f.Write(b[:half]); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if s.crash != nil {
		if err := s.crash(); err != nil {
			f.Close() // a crash leaves the temporary file behind
			return err
		}
	}
	if _, err := f.Write(b[half:]); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, s.path()); err != nil {
		os.Remove(tmp)
		return err
	}
	syncDir(s.home)
	return nil
}

// syncDir makes a rename in dir durable (best effort: not every system can
// fsync a folder).
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}

// ReadFileLimited reads a file of at most max bytes: a larger one is an
// error naming it and the bound, never read whole into memory. A missing
// file is an error that wraps [os.ErrNotExist].
func ReadFileLimited(path string, max int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, int64(max)+1))
	if err != nil {
		return nil, err
	}
	if len(b) > max {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, max)
	}
	return b, nil
}

// WriteFileAtomic writes a file the way the fleet file is written (a
// temporary file in the same folder, fsync, rename), so a reader sees the
// old contents or the new, never half.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(tmp, perm)
	}
	if werr == nil {
		werr = os.Rename(tmp, path)
	}
	if werr != nil {
		os.Remove(tmp)
		return werr
	}
	syncDir(dir)
	return nil
}
