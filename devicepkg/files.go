package devicepkg

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/openmhp/mhp-go"
)

// Size bounds of a package's text. A file above its bound is not loaded;
// instructions or notes above theirs are problems for Validate, and what a
// device built from the package describes is cut to them (mhp.Truncate).
const (
	// MaxCardBytes caps DEVICE.md (front matter and instructions).
	MaxCardBytes = 256 << 10
	// MaxDescriptorBytes caps descriptor.yaml.
	MaxDescriptorBytes = 1 << 20
	// MaxInstructions caps the DEVICE.md body, in bytes: describe summary
	// and full return it, so it must fit a model's context with room to spare.
	MaxInstructions = 32 << 10
	// MaxNotes caps each notes field (device, safety, signal, setting,
	// action), in bytes.
	MaxNotes = 4 << 10
)

// readTimeout bounds the read of one package file.
const readTimeout = 10 * time.Second

// opener opens a package file with flags (an *os.Root); nil for an fs.FS
// without one.
type opener interface {
	OpenFile(name string, flag int, perm os.FileMode) (*os.File, error)
}

// readRegular reads a package file, at most limit bytes. Only a regular
// file is opened: its mode is checked before opening, the open does not
// block (a FIFO swapped in between cannot hang it), the opened file is
// checked again, and the read has a deadline.
func readRegular(fsys fs.FS, root opener, name string, limit int64) ([]byte, error) {
	b, err := readPrefix(fsys, root, name, limit+1)
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes, the limit for this file", name, limit)
	}
	return b, nil
}

// readResourceFile reads a listed resource, at most MaxResourceBytes+1 bytes.
func (p *Package) readResourceFile(name string) ([]byte, error) {
	return readPrefix(p.fsys, p.root, name, MaxResourceBytes+1)
}

// readPrefix reads at most n bytes of a regular package file (see readRegular).
func readPrefix(fsys fs.FS, root opener, name string, n int64) ([]byte, error) {
	info, err := fs.Stat(fsys, name)
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, notRegular(name, info.Mode())
	}
	var f fs.File
	if root != nil {
		f, err = root.OpenFile(name, os.O_RDONLY|openNonblock, 0)
	} else {
		f, err = fsys.Open(name)
	}
	if err != nil {
		return nil, err
	}
	if info, err = f.Stat(); err != nil || !info.Mode().IsRegular() {
		f.Close()
		if err != nil {
			return nil, err
		}
		return nil, notRegular(name, info.Mode())
	}
	type read struct {
		b   []byte
		err error
	}
	done := make(chan read, 1)
	go func() {
		b, err := io.ReadAll(io.LimitReader(f, n))
		done <- read{b, err}
	}()
	t := time.NewTimer(readTimeout)
	defer t.Stop()
	select {
	case r := <-done:
		f.Close()
		return r.b, r.err
	case <-t.C:
		f.Close() // unblocks the read where the file system allows it
		return nil, fmt.Errorf("%s: no data within %s", name, readTimeout)
	}
}

// notRegularError refuses a package path that is not a regular file.
type notRegularError struct{ name, kind string }

func (e *notRegularError) Error() string {
	return fmt.Sprintf("%s is %s: a package holds regular files only", e.name, e.kind)
}

func notRegular(name string, mode fs.FileMode) error {
	kind := "not a regular file"
	switch {
	case mode&fs.ModeNamedPipe != 0:
		kind = "a named pipe (FIFO)"
	case mode&fs.ModeDevice != 0, mode&fs.ModeCharDevice != 0:
		kind = "a device file"
	case mode&fs.ModeSocket != 0:
		kind = "a socket"
	case mode.IsDir():
		kind = "a folder"
	}
	return &notRegularError{name: name, kind: kind}
}

// boundNotes trims a notes field and cuts it to MaxNotes.
func boundNotes(s string) string { return mhp.Truncate(strings.TrimSpace(s), MaxNotes) }

// DriverFile is the path of the package's adapter config file, Card.Driver
// relative to the package folder. It must be a regular file inside the
// package: an absolute path, one that climbs with "..", or a symlink that
// leaves the package is refused (the check runs inside the package's
// os.Root, which never follows a link out).
func (p *Package) DriverFile() (string, error) {
	d := p.Card.Driver
	clean := strings.TrimPrefix(d, "./")
	if p.Dir == "" || d == "" || strings.ContainsRune(clean, '\\') || !fs.ValidPath(clean) || clean == "." {
		return "", fmt.Errorf("%s: driver %q: want sim:thermocycler, sim:arm, manual or an adapter config file inside the package",
			filepath.Join(p.Dir, CardFile), d)
	}
	info, err := fs.Stat(p.fsys, clean)
	if err != nil {
		return "", fmt.Errorf("%s: driver %q is not a file inside the package (a symlink may not leave it): %w",
			filepath.Join(p.Dir, CardFile), d, err)
	}
	if !info.Mode().IsRegular() {
		return "", fmt.Errorf("%s: driver: %w", filepath.Join(p.Dir, CardFile), notRegular(d, info.Mode()))
	}
	return filepath.Join(p.Dir, filepath.FromSlash(clean)), nil
}
