package onboard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing/fstest"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/devicepkg"
	"github.com/openmhp/mhp-go/host"
)

// MaxFileBytes bounds one file the agent writes into a package.
const MaxFileBytes = 256 << 10

// maxPackageFiles bounds the files of a package the interview copies.
const maxPackageFiles = 256

// stagedDir is where a package is assembled and validated before any
// final file is written (a dot-folder: never served, never validated as
// part of the package).
const stagedDir = ".staged"

// NeedsConfirmation is the refusal of a change to the limits, approvals,
// interlocks, safety block or driver of a live package (one in the fleet):
// only a person's yes lets it through. What says what would change.
type NeedsConfirmation struct {
	ID   string
	What []string
}

// Error implements error.
func (n *NeedsConfirmation) Error() string {
	return fmt.Sprintf("%s is live: this change needs a person's confirmation (%s)", n.ID, strings.Join(n.What, "; "))
}

// cleanPath checks a path the agent names inside a package: relative,
// slash-separated, no "..", no dot-files, not absolute.
func cleanPath(p string) (string, error) {
	c := strings.TrimPrefix(p, "./")
	bad := c == "" || strings.ContainsRune(c, '\\') || strings.ContainsRune(c, 0) || !fs.ValidPath(c) || c == "."
	for _, part := range strings.Split(c, "/") {
		if strings.HasPrefix(part, ".") {
			bad = true
		}
	}
	if bad {
		return "", mhp.Errorf(mhp.CodeInvalidParams, "path %q: a relative path inside the package (no \"..\", not absolute, no dot-files)",
			mhp.Truncate(p, 200)).With(mhp.DataField, "path").With(mhp.DataReason, "outside_package")
	}
	return c, nil
}

// noLinks refuses a path inside dir any part of which is a symlink: a
// write never follows a link (one could lead out of the package).
func noLinks(dir, clean string) error {
	cur := dir
	for _, part := range strings.Split(clean, "/") {
		cur = filepath.Join(cur, part)
		fi, err := os.Lstat(cur)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			return mhp.Errorf(mhp.CodeInvalidParams, "%s: %s is a symlink; a package write never follows one", clean,
				strings.TrimPrefix(cur, dir+string(filepath.Separator))).With(mhp.DataField, "path").With(mhp.DataReason, "outside_package")
		}
	}
	return nil
}

// writeInside writes one file of a package (checked path, no symlink on
// the way), atomically.
func writeInside(dir, clean string, b []byte) error {
	if err := noLinks(dir, clean); err != nil {
		return err
	}
	p := filepath.Join(dir, filepath.FromSlash(clean))
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	if err := noLinks(dir, clean); err != nil { // a link swapped in while the folders were made
		return err
	}
	return host.WriteFileAtomic(p, b, 0o600)
}

// readPackage reads every file of a package folder (not dot-files), through
// an os.Root so no symlink leads out.
func readPackage(dir string) (map[string][]byte, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	out := map[string][]byte{}
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != "." && strings.HasPrefix(path.Base(p), ".") {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() || !d.Type().IsRegular() {
			return nil
		}
		if len(out) >= maxPackageFiles {
			return fmt.Errorf("more than %d files", maxPackageFiles)
		}
		f, err := root.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
		if err != nil {
			return err
		}
		if len(b) > MaxFileBytes {
			return fmt.Errorf("%s is larger than %d bytes", p, MaxFileBytes)
		}
		out[p] = b
		return nil
	})
	return out, err
}

// stage writes files into dir/.staged (emptied first) and validates them
// there: the package's field rules, then the build on its driver (every
// item bound, limits only narrowed). Nothing outside .staged is touched.
func (iv *Interview) stage(ctx context.Context, dir string, files map[string][]byte) (string, []devicepkg.Problem, error) {
	st := filepath.Join(dir, stagedDir)
	if err := os.RemoveAll(st); err != nil {
		return "", nil, err
	}
	for name, b := range files {
		p := filepath.Join(st, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return "", nil, err
		}
		if err := os.WriteFile(p, b, 0o600); err != nil {
			return "", nil, err
		}
	}
	return st, iv.validateDir(ctx, st), nil
}

// validateDir validates a package folder and builds it (not started).
func (iv *Interview) validateDir(ctx context.Context, dir string) []devicepkg.Problem {
	if probs := devicepkg.Validate(dir); len(probs) > 0 {
		return probs
	}
	pkg, err := devicepkg.Load(dir)
	if err != nil {
		return []devicepkg.Problem{{File: dir, Message: err.Error()}}
	}
	defer pkg.Close()
	dev, err := iv.cfg.Fleet.BuildPackage(ctx, pkg)
	if err != nil {
		var ps devicepkg.Problems
		if errors.As(err, &ps) {
			return ps
		}
		return []devicepkg.Problem{{File: devicepkg.CardFile, Field: "driver", Message: err.Error()}}
	}
	dev.Close()
	return nil
}

// safetyOf is what of a package only a person may change while it is live:
// the driver, every item's limits, approval and interlocks, action
// parameter shapes, the safety block, and the driver files themselves.
func safetyOf(files map[string][]byte) map[string]string {
	out := map[string]string{}
	front := struct {
		Driver string `yaml:"driver"`
	}{}
	var card devicepkg.Card
	if pkg, err := devicepkg.LoadFS(mapFS(files)); err == nil {
		card = pkg.Card
		d := pkg.Descriptor
		for _, s := range d.Settings {
			out["setting "+s.Name] = jsonOf([]any{s.Type, s.Limits, s.Approval, s.Interlocks, s.DuringJob})
		}
		for _, a := range d.Actions {
			out["action "+a.Name] = jsonOf([]any{a.Approval, a.Interlocks, a.Params, a.Concurrent})
		}
		out["safety"] = jsonOf(d.Safety)
	} else {
		out["package"] = "does not load: " + err.Error()
	}
	front.Driver = card.Driver
	out["driver"] = front.Driver
	for _, f := range []string{card.Driver, ManualFile} {
		if b, ok := files[f]; ok && f != "" {
			out["file "+f] = string(b)
		}
	}
	return out
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// changes lists what differs between two safety digests.
func changes(old, new map[string]string) []string {
	var out []string
	for k, v := range new {
		if old[k] != v {
			out = append(out, k+" changes")
		}
	}
	for k := range old {
		if _, ok := new[k]; !ok {
			out = append(out, k+" goes")
		}
	}
	sort.Strings(out)
	return out
}

// commit writes files into the package folder dir, replacing it: staged and
// validated first; when the package is live and its safety would change,
// refused with *NeedsConfirmation unless confirmed. Each final file is
// written atomically; files of the old package not in files are removed.
func (iv *Interview) commit(ctx context.Context, id, dir string, files map[string][]byte, confirmed bool) ([]devicepkg.Problem, error) {
	st, probs, err := iv.stage(ctx, dir, files)
	if err != nil || len(probs) > 0 {
		return probs, err
	}
	live, err := iv.cfg.Fleet.UsersOf(dir)
	if err != nil {
		return nil, err
	}
	old, _ := readPackage(dir)
	if len(live) > 0 && !confirmed {
		if what := changes(safetyOf(old), safetyOf(files)); len(what) > 0 {
			return nil, &NeedsConfirmation{ID: id, What: what}
		}
	}
	for name, b := range files {
		if prev, ok := old[name]; ok && bytes.Equal(prev, b) {
			continue
		}
		if err := writeInside(dir, name, b); err != nil {
			return nil, err
		}
	}
	for name := range old {
		if _, keep := files[name]; !keep {
			_ = os.Remove(filepath.Join(dir, filepath.FromSlash(name)))
		}
	}
	_ = os.RemoveAll(st)
	if len(live) > 0 {
		return nil, iv.cfg.Fleet.Reload(dir)
	}
	return nil, nil
}

// mapFS is a package held in memory, for reading its card and descriptor.
func mapFS(files map[string][]byte) fs.FS {
	m := fstest.MapFS{}
	for k, v := range files {
		m[k] = &fstest.MapFile{Data: v, Mode: 0o600}
	}
	return m
}

// Package reports what a package folder holds and whether it validates:
// the agent's op=validate.
func (iv *Interview) Package(ctx context.Context, id string) (*Result, error) {
	dir, err := iv.cfg.Fleet.DeviceDir(id)
	if err != nil {
		return nil, err
	}
	files, err := readPackage(dir)
	if err != nil {
		return nil, mhp.Errorf(mhp.CodeUnknownName, "no package %q under %s: %v", id, filepath.Dir(dir), err).With(mhp.DataName, id)
	}
	res := &Result{ID: id, Package: dir, Files: sizes(files)}
	res.Problems = iv.validateDir(ctx, dir)
	res.Valid = len(res.Problems) == 0
	return res, nil
}

// WriteFile writes one file of a package the host owns (HOME/devices/id):
// the path stays inside it, the content is bounded, and a change to the
// limits, approvals, interlocks, safety or driver of a live package needs
// confirmed (a person's yes), else it is refused with *NeedsConfirmation.
// The package is validated with the file in place; a live package is
// refused a file that breaks it, a package being written is not (the agent
// mends it file by file and asks op=validate).
func (iv *Interview) WriteFile(ctx context.Context, id, name string, content []byte, confirmed bool) (*Result, error) {
	clean, err := cleanPath(name)
	if err != nil {
		return nil, err
	}
	if len(content) > MaxFileBytes {
		return nil, mhp.Errorf(mhp.CodeInvalidParams, "%s is %d bytes, above the %d a package file may have", clean, len(content), MaxFileBytes).
			With(mhp.DataField, "content").With(mhp.DataLimit, MaxFileBytes)
	}
	dir, err := iv.cfg.Fleet.DeviceDir(id)
	if err != nil {
		return nil, err
	}
	files, err := readPackage(dir)
	if err != nil {
		return nil, mhp.Errorf(mhp.CodeUnknownName, "no package %q under %s (op=new makes one): %v", id, filepath.Dir(dir), err).With(mhp.DataName, id)
	}
	if err := noLinks(dir, clean); err != nil {
		return nil, err
	}
	files[clean] = content
	live, err := iv.cfg.Fleet.UsersOf(dir)
	if err != nil {
		return nil, err
	}
	if len(live) > 0 {
		probs, err := iv.commit(ctx, id, dir, files, confirmed)
		if err != nil {
			return nil, err
		}
		if len(probs) > 0 {
			return &Result{ID: id, Package: dir, Problems: probs, Next: "nothing was written: the live package would not validate"}, nil
		}
	} else if err := writeInside(dir, clean, content); err != nil {
		return nil, err
	}
	res, err := iv.Package(ctx, id)
	if err != nil {
		return nil, err
	}
	res.Next = "op=validate after the last file; op=add target=" + id + " once it is valid"
	return res, nil
}

// New makes an empty package the agent fills with op=write: a DEVICE.md
// and a descriptor.yaml to edit, under a fresh id.
func (iv *Interview) New(ctx context.Context, base string) (*Result, error) {
	b := slug(Name{Nickname: base})
	if b == "" {
		return nil, mhp.Errorf(mhp.CodeInvalidParams, "new: give the instrument a name (id)").With(mhp.DataField, "id")
	}
	id, err := newID(iv.cfg.Fleet, b)
	if err != nil {
		return nil, err
	}
	dir, _ := iv.cfg.Fleet.DeviceDir(id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	tmpl := map[string]string{
		devicepkg.CardFile: "---\nmhp: \"" + mhp.ProtocolVersion + "\"\nid: " + id + "\nclass: generic\ndescription: >-\n  What it is, when to pick it, what never to use it for.\ndriver: manual\n---\n\n# " + id +
			"\n\n## Operating procedure\n1. ...\n",
		devicepkg.DescriptorFile: "signals: []\nsettings: []\nactions: []\nsafety:\n  estop: true\n",
	}
	for name, text := range tmpl {
		if err := host.WriteFileAtomic(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			return nil, err
		}
	}
	res, err := iv.Package(ctx, id)
	if err != nil {
		return nil, err
	}
	res.Next = "write DEVICE.md and descriptor.yaml (op=write id=" + id + " path=... content=...), then op=validate"
	return res, nil
}

func sizes(files map[string][]byte) map[string]int {
	out := make(map[string]int, len(files))
	for k, v := range files {
		out[k] = len(v)
	}
	return out
}
