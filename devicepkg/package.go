// Package devicepkg loads, validates and serves MHP device packages: a folder
// whose DEVICE.md front matter is the device's card and whose body is the
// operating instructions, with descriptor.yaml (refinements of the driver's
// items: notes, narrower limits, stricter approval, interlocks, examples,
// physical data, safety), references/ and scripts/.
//
//	pkg, err := devicepkg.Load("examples/devices/thermocycler-01")
//	cfg := sim.Thermocycler(sim.Options{})   // the bindings named by pkg.Card.Driver
//	dev, err := devicepkg.Build(pkg, cfg)    // merge, build the driver, serve resources
//
// A package refines, it does not invent: every item in descriptor.yaml must
// name an item the bindings provide, limits may only narrow the bindings'
// limits, and approval may only get stricter (auto < confirm < forbid). The
// built device implements mhp.ResourceProvider over the package's files,
// refusing any path that leaves the package.
package devicepkg

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/openmhp/mhp-go"
)

// File names inside a package.
const (
	CardFile       = "DEVICE.md"
	DescriptorFile = "descriptor.yaml"
)

// MaxResourceBytes caps the text resources/read returns (64 KiB).
const MaxResourceBytes = 64 << 10

// MaxDescription is the description's length limit, in characters (exclusive).
const MaxDescription = 1024

// Card is DEVICE.md's front matter: the device's identity plus the driver
// that runs it and the protocol version the package was written for.
type Card struct {
	MHP            string `yaml:"mhp,omitempty"`
	mhp.DeviceInfo `yaml:",inline"`
	// Driver names the bindings: "sim:thermocycler", "sim:arm", "manual"
	// (operated by a person: package manual generates the bindings from
	// descriptor.yaml and the optional manual.yaml), or an adapter config
	// file relative to the package.
	Driver string `yaml:"driver,omitempty"`
}

// Descriptor is descriptor.yaml: refinements of the bindings' generated
// descriptor. Pointer fields distinguish "not said" from a zero value.
type Descriptor struct {
	Device   DeviceNotes   `yaml:"device,omitempty"`
	Physical *mhp.Physical `yaml:"physical,omitempty"`
	Signals  []SignalRef   `yaml:"signals,omitempty"`
	Settings []SettingRef  `yaml:"settings,omitempty"`
	Actions  []ActionRef   `yaml:"actions,omitempty"`
	Safety   *SafetyRef    `yaml:"safety,omitempty"`
}

// DeviceNotes is descriptor.yaml's device block.
type DeviceNotes struct {
	Notes string `yaml:"notes,omitempty"`
}

// SignalRef refines a bound signal.
type SignalRef struct {
	Name  string `yaml:"name"`
	Type  string `yaml:"type,omitempty"`
	Unit  string `yaml:"unit,omitempty"`
	Notes string `yaml:"notes,omitempty"`
	// RequiredForRecovery: safety/reset refuses while the signal is
	// unreadable. A package may only turn it on.
	RequiredForRecovery *bool `yaml:"required_for_recovery,omitempty"`
}

// SettingRef refines a bound setting.
type SettingRef struct {
	Name       string       `yaml:"name"`
	Type       string       `yaml:"type,omitempty"`
	Unit       string       `yaml:"unit,omitempty"`
	Limits     *mhp.Limits  `yaml:"limits,omitempty"`
	Approval   mhp.Approval `yaml:"approval,omitempty"`
	Interlocks []string     `yaml:"interlocks,omitempty"`
	DuringJob  *bool        `yaml:"during_job,omitempty"`
	Notes      string       `yaml:"notes,omitempty"`
}

// ActionRef refines a bound action.
type ActionRef struct {
	Name        string           `yaml:"name"`
	Duration    string           `yaml:"duration,omitempty"`
	Approval    mhp.Approval     `yaml:"approval,omitempty"`
	Interlocks  []string         `yaml:"interlocks,omitempty"`
	Params      mhp.Params       `yaml:"params,omitempty"`
	Returns     *mhp.Shape       `yaml:"returns,omitempty"`
	Examples    []map[string]any `yaml:"examples,omitempty"`
	Concurrent  *bool            `yaml:"concurrent,omitempty"`
	Pausable    *bool            `yaml:"pausable,omitempty"`
	Cancellable *bool            `yaml:"cancellable,omitempty"`
	Notes       string           `yaml:"notes,omitempty"`
}

// SafetyRef refines the safety block.
type SafetyRef struct {
	EStop      *bool    `yaml:"estop,omitempty"`
	Interlocks []string `yaml:"interlocks,omitempty"`
	WatchdogS  *float64 `yaml:"watchdog_s,omitempty"`
	Notes      string   `yaml:"notes,omitempty"`
}

// Package is a loaded device package.
type Package struct {
	// Dir is the folder it was loaded from ("" for an fs.FS).
	Dir string
	// Card is the DEVICE.md front matter.
	Card Card
	// Instructions is the DEVICE.md body.
	Instructions string
	// Descriptor is descriptor.yaml (zero when the package has none).
	Descriptor Descriptor
	// HasDescriptor reports whether descriptor.yaml exists.
	HasDescriptor bool

	descBroken bool // descriptor.yaml did not decode
	fsys       fs.FS
	root       opener // the package folder (nil for an fs.FS)
	resources  []string
	lines      map[string]int // "settings.target_temperature" -> line in descriptor.yaml
	closer     func() error
}

// Problem is one thing wrong with a package: the file, the field (a dotted
// path such as "settings.target_temperature.limits") and what is wrong.
type Problem struct {
	File    string `json:"file"`
	Line    int    `json:"line,omitempty"`
	Field   string `json:"field"`
	Message string `json:"message"`
}

// String renders "file:line: field: message".
func (p Problem) String() string {
	loc := p.File
	if p.Line > 0 {
		loc = fmt.Sprintf("%s:%d", p.File, p.Line)
	}
	if p.Field == "" {
		return loc + ": " + p.Message
	}
	return fmt.Sprintf("%s: %s: %s", loc, p.Field, p.Message)
}

// Problems is an error listing every problem found.
type Problems []Problem

// Error lists the problems, one a line.
func (ps Problems) Error() string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, "\n")
}

// Load reads the package in dir. Files are read through an os.Root, so a
// symlink that leaves the folder is never followed.
func Load(dir string) (*Package, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("device package %s: %w", dir, err)
	}
	p, probs := parse(root.FS(), root)
	if len(probs) > 0 {
		root.Close()
		return nil, fmt.Errorf("device package %s:\n%w", dir, probs)
	}
	p.Dir, p.closer = dir, root.Close
	return p, nil
}

// LoadFS reads a package from a file system (an embedded package).
func LoadFS(fsys fs.FS) (*Package, error) {
	p, probs := parse(fsys, nil)
	if len(probs) > 0 {
		return nil, probs
	}
	return p, nil
}

// Close releases the package folder (a no-op for an fs.FS).
func (p *Package) Close() error {
	if p.closer != nil {
		return p.closer()
	}
	return nil
}

// Resources lists the package's files except DEVICE.md, as slash-separated
// paths relative to the package, sorted.
func (p *Package) Resources() []string { return append([]string(nil), p.resources...) }

// FS is the package's file system.
func (p *Package) FS() fs.FS { return p.fsys }

// parse reads and decodes the package; problems are the ones that stop a load.
func parse(fsys fs.FS, root opener) (*Package, Problems) {
	p := &Package{fsys: fsys, root: root, lines: map[string]int{}}
	var probs Problems
	card, err := readRegular(fsys, root, CardFile, MaxCardBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, Problems{{File: CardFile, Message: "missing: every package needs DEVICE.md with the card in its front matter"}}
	}
	if err != nil {
		return nil, Problems{{File: CardFile, Message: err.Error()}}
	}
	front, body, ferr := splitFrontMatter(card)
	if ferr != nil {
		return nil, Problems{{File: CardFile, Message: ferr.Error()}}
	}
	if err := strictDecode(front, &p.Card); err != nil {
		probs = append(probs, Problem{File: CardFile, Field: "front matter", Message: yamlMessage(err, 1)})
	}
	p.Instructions = strings.TrimSpace(body)

	desc, err := readRegular(fsys, root, DescriptorFile, MaxDescriptorBytes)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		probs = append(probs, Problem{File: DescriptorFile, Message: err.Error()})
	default:
		p.HasDescriptor = true
		if err := strictDecode(desc, &p.Descriptor); err != nil {
			probs = append(probs, Problem{File: DescriptorFile, Message: yamlMessage(err, 0)})
			p.descBroken = true
		} else {
			p.lines = itemLines(desc)
		}
	}
	// Unlisted files (a symlink leaving the package) are not fatal here:
	// they are never served; Validate reports them.
	p.resources, _ = listResources(fsys)
	return p, probs
}

// splitFrontMatter separates "---\nyaml\n---\nbody".
func splitFrontMatter(b []byte) (front []byte, body string, err error) {
	s := strings.ReplaceAll(string(b), "\r\n", "\n")
	s = strings.TrimPrefix(s, "\ufeff")
	if !strings.HasPrefix(s, "---\n") {
		return nil, "", fmt.Errorf("no YAML front matter: the file must start with a line \"---\"")
	}
	rest := s[len("---\n"):]
	end := strings.Index(rest, "\n---\n")
	if end < 0 {
		if strings.HasSuffix(rest, "\n---") {
			return []byte(rest[:len(rest)-len("\n---")]), "", nil
		}
		return nil, "", fmt.Errorf("front matter is not closed by a line \"---\"")
	}
	return []byte(rest[:end]), rest[end+len("\n---\n"):], nil
}

func strictDecode(b []byte, v any) error {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	return dec.Decode(v)
}

// yamlMessage cleans a yaml.v3 error; lineOffset shifts line numbers (front
// matter starts on line 2 of DEVICE.md).
func yamlMessage(err error, lineOffset int) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if lineOffset == 0 {
		return msg
	}
	return msg + fmt.Sprintf(" (front matter lines count from line %d of the file)", lineOffset+1)
}

// itemLines maps "signals.NAME", "settings.NAME", "actions.NAME" and the
// top-level keys to their line in descriptor.yaml.
func itemLines(b []byte) map[string]int {
	out := map[string]int{}
	var doc yaml.Node
	if yaml.Unmarshal(b, &doc) != nil || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return out
	}
	top := doc.Content[0]
	for i := 0; i+1 < len(top.Content); i += 2 {
		key, val := top.Content[i], top.Content[i+1]
		out[key.Value] = key.Line
		if val.Kind != yaml.SequenceNode {
			continue
		}
		for _, item := range val.Content {
			if item.Kind != yaml.MappingNode {
				continue
			}
			for j := 0; j+1 < len(item.Content); j += 2 {
				if item.Content[j].Value == "name" {
					out[key.Value+"."+item.Content[j+1].Value] = item.Line
				}
			}
		}
	}
	return out
}

// line finds the line of a field path: the item's line, else its section's.
func (p *Package) line(field string) int {
	parts := strings.SplitN(field, ".", 3)
	if len(parts) >= 2 {
		if l, ok := p.lines[parts[0]+"."+parts[1]]; ok {
			return l
		}
	}
	return p.lines[parts[0]]
}

// listResources walks the package: every regular file (or symlink to one
// inside the package) except DEVICE.md and dot-files.
func listResources(fsys fs.FS) ([]string, Problems) {
	var out []string
	var probs Problems
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			probs = append(probs, Problem{File: p, Message: err.Error()})
			return nil
		}
		if p == "." {
			return nil
		}
		if strings.HasPrefix(path.Base(p), ".") {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() || p == CardFile {
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			info, err := fs.Stat(fsys, p)
			if err != nil {
				probs = append(probs, Problem{File: p, Message: "symlink leaves the package or is broken: " + err.Error()})
				return nil
			}
			if !info.Mode().IsRegular() {
				return nil
			}
		} else if !d.Type().IsRegular() {
			return nil
		}
		out = append(out, p)
		return nil
	})
	if err != nil {
		probs = append(probs, Problem{File: ".", Message: err.Error()})
	}
	sort.Strings(out)
	return out, probs
}
