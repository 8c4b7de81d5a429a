// Package methods keeps a device's saved methods (spec 003 section 5.8): a
// method is a named, revised parameter set for one action, such as a PCR
// program for run_protocol, stored as one YAML file in the device package's
// methods/ folder. An agent lists, finds, reads and compares them without a
// lease and while jobs run, saves and deletes them under the store's lock
// (they touch files, not hardware), and runs one with actions/invoke
// {"method": NAME} — the invoke then passes the six gates like any other.
//
// The store is bounded: at most [MaxMethods] methods of at most [MaxFileBytes]
// each, names matching [NamePattern]. A store opened on a read-only package
// (an embedded demo) lists and runs methods but refuses save and delete with
// NotSupported.
package methods

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/clock"
)

// Bounds of a store.
const (
	MaxMethods   = 1000
	MaxFileBytes = 256 << 10
	// Folder is the package folder that holds the methods.
	Folder = "methods"
)

var namePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// NamePattern is the pattern method names must match.
const NamePattern = `^[a-z0-9][a-z0-9._-]{0,63}$`

// Method is one saved method.
type Method struct {
	Name        string         `json:"name" yaml:"name"`
	Action      string         `json:"action" yaml:"action"`
	Description string         `json:"description,omitempty" yaml:"description,omitempty"`
	Tags        []string       `json:"tags,omitempty" yaml:"tags,omitempty"`
	Params      map[string]any `json:"params" yaml:"params"`
	// Revision counts saves: 1 for a new method.
	Revision int `json:"revision" yaml:"revision"`
	// SavedBy is the label of the session that saved it; Saved is when (Unix seconds).
	SavedBy string  `json:"saved_by,omitempty" yaml:"saved_by,omitempty"`
	Saved   float64 `json:"saved,omitempty" yaml:"saved,omitempty"`
}

// Summary is a method without its params, for list and find.
type Summary struct {
	Name        string   `json:"name"`
	Action      string   `json:"action"`
	Description string   `json:"description,omitempty"`
	Tags        []string `json:"tags,omitempty"`
	Revision    int      `json:"revision"`
	Score       float64  `json:"score,omitempty"`
}

func (m Method) summary() Summary {
	return Summary{Name: m.Name, Action: m.Action, Description: m.Description, Tags: m.Tags, Revision: m.Revision}
}

// Store is the methods of one device. It is safe for concurrent use.
type Store struct {
	clk  clock.Clock
	root *os.Root // nil: read-only

	mu      sync.Mutex
	methods map[string]Method
}

// Open loads the methods/ folder of a device package directory; the store
// can save and delete. A package without the folder has no methods yet.
func Open(pkgDir string, clk clock.Clock) (*Store, error) {
	root, err := os.OpenRoot(pkgDir)
	if err != nil {
		return nil, fmt.Errorf("methods: %w", err)
	}
	s := &Store{clk: clk, root: root}
	if err := s.load(root.FS()); err != nil {
		root.Close()
		return nil, err
	}
	return s, nil
}

// OpenFS loads the methods/ folder of a read-only package (save and delete
// are refused).
func OpenFS(fsys fs.FS, clk clock.Clock) (*Store, error) {
	s := &Store{clk: clk}
	if err := s.load(fsys); err != nil {
		return nil, err
	}
	return s, nil
}

// Empty returns a store with no methods that refuses save: the answer of a
// device that is not method-capable.
func Empty() *Store { return &Store{methods: map[string]Method{}} }

// Close releases the package folder.
func (s *Store) Close() error {
	if s.root != nil {
		return s.root.Close()
	}
	return nil
}

func (s *Store) load(fsys fs.FS) error {
	if s.clk == nil {
		s.clk = clock.Real{}
	}
	s.methods = map[string]Method{}
	entries, err := fs.ReadDir(fsys, Folder)
	if err != nil {
		if errorsIsNotExist(err) {
			return nil
		}
		return fmt.Errorf("methods: %w", err)
	}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".yaml") {
			continue
		}
		if len(s.methods) >= MaxMethods {
			return fmt.Errorf("methods: more than %d methods in %s/", MaxMethods, Folder)
		}
		if !e.Type().IsRegular() {
			return fmt.Errorf("methods: %s/%s is not a regular file", Folder, e.Name())
		}
		m, err := readMethod(fsys, path.Join(Folder, e.Name()))
		if err != nil {
			return err
		}
		if m.Name+".yaml" != e.Name() {
			return fmt.Errorf("methods: %s/%s names method %q; the file must be NAME.yaml", Folder, e.Name(), m.Name)
		}
		s.methods[m.Name] = m
	}
	return nil
}

func errorsIsNotExist(err error) bool {
	return err != nil && (os.IsNotExist(err) || strings.Contains(err.Error(), "file does not exist"))
}

func readMethod(fsys fs.FS, p string) (Method, error) {
	f, err := fsys.Open(p)
	if err != nil {
		return Method{}, fmt.Errorf("methods: %w", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return Method{}, fmt.Errorf("methods: %s is not a regular file", p)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return Method{}, fmt.Errorf("methods: %s: %w", p, err)
	}
	if len(b) > MaxFileBytes {
		return Method{}, fmt.Errorf("methods: %s is over %d bytes", p, MaxFileBytes)
	}
	var m Method
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&m); err != nil {
		return Method{}, fmt.Errorf("methods: %s: %w", p, err)
	}
	if err := validName(m.Name); err != nil {
		return Method{}, fmt.Errorf("methods: %s: %w", p, err)
	}
	if m.Action == "" {
		return Method{}, fmt.Errorf("methods: %s: action is required", p)
	}
	if m.Revision < 1 {
		m.Revision = 1
	}
	m.Params = normalise(m.Params)
	return m, nil
}

// normalise turns YAML's map[string]any / []any / int values into the JSON
// shapes the gates check (float64 numbers).
func normalise(p map[string]any) map[string]any {
	if p == nil {
		return map[string]any{}
	}
	out := make(map[string]any, len(p))
	for k, v := range p {
		out[k] = normValue(v)
	}
	return out
}

func normValue(v any) any {
	switch t := v.(type) {
	case map[string]any:
		return normalise(t)
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = normValue(e)
		}
		return out
	case int:
		return float64(t)
	case int64:
		return float64(t)
	case uint64:
		return float64(t)
	}
	return v
}

func validName(name string) error {
	if !namePattern.MatchString(name) {
		return mhp.Errorf(mhp.CodeInvalidParams, "method name %q must match %s", mhp.Truncate(name, 80), NamePattern).
			With(mhp.DataField, "name").With(mhp.DataPattern, NamePattern)
	}
	return nil
}

// List returns every method (of one action when action is set), by name.
func (s *Store) List(action string) []Summary {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []Summary{}
	for _, m := range s.methods {
		if action == "" || m.Action == action {
			out = append(out, m.summary())
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Find ranks methods by how many query words their name, description, tags
// and action contain (name and tags count double), best first.
func (s *Store) Find(query, action string, limit int) []Summary {
	words := strings.Fields(strings.ToLower(query))
	if limit <= 0 || limit > 100 {
		limit = 20
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []Summary{}
	for _, m := range s.methods {
		if action != "" && m.Action != action {
			continue
		}
		score := 0.0
		name, desc, tags := strings.ToLower(m.Name), strings.ToLower(m.Description), strings.ToLower(strings.Join(m.Tags, " "))
		for _, w := range words {
			if strings.Contains(name, w) {
				score += 2
			}
			if strings.Contains(tags, w) {
				score += 2
			}
			if strings.Contains(desc, w) {
				score++
			}
			if strings.Contains(m.Action, w) {
				score++
			}
		}
		if score > 0 || len(words) == 0 {
			sm := m.summary()
			sm.Score = score
			out = append(out, sm)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Score != out[j].Score {
			return out[i].Score > out[j].Score
		}
		return out[i].Name < out[j].Name
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}

// Get returns one method.
func (s *Store) Get(name string) (Method, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.methods[name]
	if !ok {
		return Method{}, mhp.Errorf(mhp.CodeUnknownName, "no method %q", mhp.Truncate(name, 80)).With(mhp.DataKind, "method").With(mhp.DataName, mhp.Truncate(name, 80))
	}
	m.Params = deepCopy(m.Params).(map[string]any)
	return m, nil
}

func deepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = deepCopy(e)
		}
		return out
	}
	return v
}

// Writable reports whether save and delete can work.
func (s *Store) Writable() bool { return s.root != nil }

func (s *Store) readOnly() error {
	return mhp.Errorf(mhp.CodeNotSupported, "this device's methods are read-only (no writable methods/ folder)").With(mhp.DataReason, "read_only")
}

// Save writes m (already checked against its action by the caller) as a new
// revision and returns its summary. The file is replaced atomically.
func (s *Store) Save(m Method, by string) (Summary, error) {
	if s.root == nil {
		return Summary{}, s.readOnly()
	}
	if err := validName(m.Name); err != nil {
		return Summary{}, err
	}
	if len(m.Description) > 2048 || len(m.Tags) > 32 {
		return Summary{}, mhp.Errorf(mhp.CodeInvalidParams, "method description (max 2048 bytes) or tags (max 32) too long").With(mhp.DataField, "description")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	prev, exists := s.methods[m.Name]
	if !exists && len(s.methods) >= MaxMethods {
		return Summary{}, mhp.Errorf(mhp.CodeServerError, "the device keeps at most %d methods", MaxMethods).With(mhp.DataMax, MaxMethods)
	}
	m.Revision = 1
	if exists {
		m.Revision = prev.Revision + 1
	}
	m.SavedBy, m.Saved = mhp.Truncate(by, 128), mhp.UnixSeconds(s.clk.Now())
	m.Params = normalise(m.Params)
	b, err := yaml.Marshal(m)
	if err != nil {
		return Summary{}, mhp.Errorf(mhp.CodeInvalidParams, "method params cannot be stored: %v", err).With(mhp.DataField, "params")
	}
	if len(b) > MaxFileBytes {
		return Summary{}, mhp.Errorf(mhp.CodeInvalidParams, "method is %d bytes as a file, over %d", len(b), MaxFileBytes).With(mhp.DataField, "params")
	}
	if err := s.writeFile(m.Name, b); err != nil {
		return Summary{}, mhp.Errorf(mhp.CodeInternal, "method %s not saved: %v", m.Name, err)
	}
	s.methods[m.Name] = m
	return m.summary(), nil
}

func (s *Store) writeFile(name string, b []byte) error {
	if err := s.root.Mkdir(Folder, 0o750); err != nil && !os.IsExist(err) {
		return err
	}
	tmp := path.Join(Folder, fmt.Sprintf(".%s.%d.tmp", name, time.Now().UnixNano()))
	f, err := s.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		s.root.Remove(tmp)
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		s.root.Remove(tmp)
		return err
	}
	f.Close()
	if err := s.root.Rename(tmp, path.Join(Folder, name+".yaml")); err != nil {
		s.root.Remove(tmp)
		return err
	}
	return nil
}

// Delete removes a method.
func (s *Store) Delete(name string) error {
	if s.root == nil {
		return s.readOnly()
	}
	if err := validName(name); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.methods[name]; !ok {
		return mhp.Errorf(mhp.CodeUnknownName, "no method %q", name).With(mhp.DataKind, "method").With(mhp.DataName, name)
	}
	if err := s.root.Remove(path.Join(Folder, name+".yaml")); err != nil && !os.IsNotExist(err) {
		return mhp.Errorf(mhp.CodeInternal, "method %s not deleted: %v", name, err)
	}
	delete(s.methods, name)
	return nil
}

// Change is one difference between two param sets, at a JSON-pointer-like path.
type Change struct {
	Path string `json:"path"`
	// From and To are the values on each side; a missing side is absent.
	From any `json:"from,omitempty"`
	To   any `json:"to,omitempty"`
	// Kind is added, removed or changed.
	Kind string `json:"kind"`
}

// Diff compares two param sets; changes are sorted by path.
func Diff(a, b map[string]any) []Change {
	var out []Change
	diffValue("", a, b, &out)
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	if out == nil {
		out = []Change{}
	}
	return out
}

const maxChanges = 500

func diffValue(p string, a, b any, out *[]Change) {
	if len(*out) >= maxChanges {
		return
	}
	switch at := a.(type) {
	case map[string]any:
		if bt, ok := b.(map[string]any); ok {
			for k, av := range at {
				if bv, ok := bt[k]; ok {
					diffValue(p+"/"+k, av, bv, out)
				} else {
					*out = append(*out, Change{Path: p + "/" + k, From: av, Kind: "removed"})
				}
			}
			for k, bv := range bt {
				if _, ok := at[k]; !ok {
					*out = append(*out, Change{Path: p + "/" + k, To: bv, Kind: "added"})
				}
			}
			return
		}
	case []any:
		if bt, ok := b.([]any); ok {
			for i := 0; i < len(at) || i < len(bt); i++ {
				ip := fmt.Sprintf("%s/%d", p, i)
				switch {
				case i >= len(bt):
					*out = append(*out, Change{Path: ip, From: at[i], Kind: "removed"})
				case i >= len(at):
					*out = append(*out, Change{Path: ip, To: bt[i], Kind: "added"})
				default:
					diffValue(ip, at[i], bt[i], out)
				}
			}
			return
		}
	}
	an, aok := mhp.Number(a)
	bn, bok := mhp.Number(b)
	if (aok && bok && an == bn) || (!aok && !bok && fmt.Sprint(a) == fmt.Sprint(b) && sameKind(a, b)) {
		return
	}
	*out = append(*out, Change{Path: p, From: a, To: b, Kind: "changed"})
}

func sameKind(a, b any) bool { return fmt.Sprintf("%T", a) == fmt.Sprintf("%T", b) }
