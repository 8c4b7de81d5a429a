package adapters

import (
	"context"
	"fmt"
	"log/slog"
	"path"
	"sort"
	"strings"
	"time"
	"unicode"
)

// DiscoverOptions are the options every adapter's discovery shares.
type DiscoverOptions struct {
	// Depth bounds how deep a browsing discovery walks (OPC UA); zero is
	// the adapter's default.
	Depth int
	// Include and Exclude select items by their path at the backend (an
	// OPC UA browse path "Objects/Plant/Temperature", a topic, a feature):
	// a pattern is a path.Match glob, or a prefix of whole segments.
	// Without Include every item is included; Exclude wins.
	Include, Exclude []string
	// Listen is how long a listening discovery (MQTT) watches; zero is
	// the adapter's default.
	Listen time.Duration
	// DeviceID is the generated device's id; default one derived from the
	// backend's own name or the target.
	DeviceID string
	// Snapshot is the file name of the descriptor snapshot of a
	// self-describing backend, beside the config; default
	// <device id>.descriptor.json.
	Snapshot string
	// Logger receives progress; default slog.Default().
	Logger *slog.Logger
	// Flags are the adapter's own options by name, as `mhp init` passes
	// them through ("root", "security-policy", "ca", ...); an adapter
	// refuses a flag it does not know ([DiscoverOptions.CheckFlags]).
	Flags map[string]string
}

// CheckFlags refuses a flag the adapter does not know, naming the ones it does.
func (o DiscoverOptions) CheckFlags(kind string, known ...string) error {
	names := make([]string, 0, len(o.Flags))
	for k := range o.Flags {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		ok := false
		for _, x := range known {
			ok = ok || x == k
		}
		if !ok {
			return fmt.Errorf("%s discovery has no option --%s (it takes %v)", kind, k, known)
		}
	}
	return nil
}

// Log returns the logger, slog.Default() when none was given.
func (o DiscoverOptions) Log() *slog.Logger {
	if o.Logger != nil {
		return o.Logger
	}
	return slog.Default()
}

// SnapshotFile returns the snapshot file name for a device id.
func (o DiscoverOptions) SnapshotFile(id string) string {
	if o.Snapshot != "" {
		return o.Snapshot
	}
	return id + ".descriptor.json"
}

// Selected reports whether the item at path p is included by the options.
func (o DiscoverOptions) Selected(p string) bool {
	for _, x := range o.Exclude {
		if pathMatch(x, p) {
			return false
		}
	}
	if len(o.Include) == 0 {
		return true
	}
	for _, x := range o.Include {
		// An ancestor of an included path is walked (every path, for a glob).
		if pathMatch(x, p) || pathMatch(p, x) || strings.ContainsAny(x, "*?[") {
			return true
		}
	}
	return false
}

// Included reports whether the item at p is itself included (not merely on
// the way to an included item).
func (o DiscoverOptions) Included(p string) bool {
	if !o.Selected(p) {
		return false
	}
	if len(o.Include) == 0 {
		return true
	}
	for _, x := range o.Include {
		if pathMatch(x, p) {
			return true
		}
	}
	return false
}

// pathMatch: pattern is a glob of p, or a whole-segment prefix of it.
func pathMatch(pattern, p string) bool {
	pattern, p = strings.Trim(pattern, "/"), strings.Trim(p, "/")
	if ok, err := path.Match(pattern, p); err == nil && ok {
		return true
	}
	return p == pattern || strings.HasPrefix(p, pattern+"/")
}

// Item is one thing a discovery found: mapped onto a signal, setting or
// action, or skipped with the reason.
type Item struct {
	// Kind is signal, setting or action (mapped items), or what the
	// backend called it (skipped items).
	Kind string `json:"kind"`
	// Name is the MHP name a mapped item got.
	Name string `json:"name,omitempty"`
	// Source is where it is at the backend (browse path, topic, feature).
	Source string `json:"source"`
	// Why says why an item was skipped, or a note on a mapped one.
	Why string `json:"why,omitempty"`
}

// Report is what a discovery says besides the config: what it mapped, what
// it skipped and why, what it proposes (interlock candidates: never
// applied), warnings, the comments [Render] writes into the file, and the
// files to write beside the config (the descriptor snapshot).
type Report struct {
	Mapped    []Item   `json:"mapped"`
	Skipped   []Item   `json:"skipped,omitempty"`
	Proposals []string `json:"proposals,omitempty"`
	Warnings  []string `json:"warnings,omitempty"`
	// Comments are keyed by config path (see [Render]).
	Comments map[string]string `json:"-"`
	// Files are written beside the config, by name.
	Files map[string][]byte `json:"-"`
}

// Map records a mapped item.
func (r *Report) Map(kind, name, source, note string) {
	r.Mapped = append(r.Mapped, Item{Kind: kind, Name: name, Source: source, Why: note})
}

// Skip records a skipped item and why.
func (r *Report) Skip(kind, source, why string) {
	r.Skipped = append(r.Skipped, Item{Kind: kind, Source: source, Why: why})
}

// Warn records a warning.
func (r *Report) Warn(format string, args ...any) {
	r.Warnings = append(r.Warnings, fmt.Sprintf(format, args...))
}

// Comment adds a comment at a config path (appended to one already there).
func (r *Report) Comment(at, text string) {
	if r.Comments == nil {
		r.Comments = map[string]string{}
	}
	if old := r.Comments[at]; old != "" {
		text = old + "\n" + text
	}
	r.Comments[at] = text
}

// File adds a file to write beside the config.
func (r *Report) File(name string, data []byte) {
	if r.Files == nil {
		r.Files = map[string][]byte{}
	}
	r.Files[name] = data
}

// Summary is the report as the lines `mhp init` prints.
func (r Report) Summary() string {
	var b strings.Builder
	counts := map[string]int{}
	for _, m := range r.Mapped {
		counts[m.Kind]++
	}
	kinds := make([]string, 0, len(counts))
	for k := range counts {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	parts := make([]string, 0, len(kinds))
	for _, k := range kinds {
		parts = append(parts, fmt.Sprintf("%d %s(s)", counts[k], k))
	}
	if len(parts) == 0 {
		parts = []string{"nothing"}
	}
	fmt.Fprintf(&b, "mapped %s\n", strings.Join(parts, ", "))
	for _, m := range r.Mapped {
		fmt.Fprintf(&b, "  %-8s %-28s <- %s", m.Kind, m.Name, m.Source)
		if m.Why != "" {
			fmt.Fprintf(&b, " (%s)", m.Why)
		}
		b.WriteByte('\n')
	}
	if len(r.Skipped) > 0 {
		fmt.Fprintf(&b, "skipped %d\n", len(r.Skipped))
		for _, s := range r.Skipped {
			fmt.Fprintf(&b, "  %-8s %s: %s\n", s.Kind, s.Source, s.Why)
		}
	}
	for _, p := range r.Proposals {
		fmt.Fprintf(&b, "proposal: %s\n", p)
	}
	for _, w := range r.Warnings {
		fmt.Fprintf(&b, "warning: %s\n", w)
	}
	return b.String()
}

// SnakeName turns a backend's name ("TemperatureSetpoint", "Door Closed",
// "motor/1/speed") into an MHP name: lower snake_case of letters, digits
// and underscores, starting with a letter.
func SnakeName(s string) string {
	var b strings.Builder
	rs := []rune(s)
	under := func() {
		if b.Len() > 0 && !strings.HasSuffix(b.String(), "_") {
			b.WriteByte('_')
		}
	}
	for i, r := range rs {
		switch {
		case unicode.IsUpper(r):
			// A word starts at an upper case letter after a lower case one
			// or a digit, or before a lower case one in an acronym (EURange).
			if i > 0 && (unicode.IsLower(rs[i-1]) || unicode.IsDigit(rs[i-1]) ||
				(unicode.IsUpper(rs[i-1]) && i+1 < len(rs) && unicode.IsLower(rs[i+1]))) {
				under()
			}
			b.WriteRune(unicode.ToLower(r))
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if r > unicode.MaxASCII {
				under()
				continue
			}
			b.WriteRune(r)
		default:
			under()
		}
	}
	out := strings.Trim(b.String(), "_")
	if out == "" || !unicode.IsLetter(rune(out[0])) {
		out = "x_" + out
		out = strings.TrimSuffix(out, "_")
	}
	return out
}

// Namer hands out unique MHP names: a collision gets the parent's name in
// front ("unit1_state"), then a number.
type Namer struct{ used map[string]bool }

// Name returns a unique name for leaf (with parent as the tie breaker).
func (n *Namer) Name(leaf, parent string) string {
	if n.used == nil {
		n.used = map[string]bool{}
	}
	name := SnakeName(leaf)
	if n.used[name] && parent != "" {
		name = SnakeName(parent) + "_" + name
	}
	base := name
	for i := 2; n.used[name]; i++ {
		name = fmt.Sprintf("%s_%d", base, i)
	}
	n.used[name] = true
	return name
}

// Take reserves a name (one the config already uses).
func (n *Namer) Take(name string) {
	if n.used == nil {
		n.used = map[string]bool{}
	}
	n.used[name] = true
}

// UnitName spells a backend's unit text the way MHP descriptors do:
// "°C" and "℃" as degC, "°F" as degF; anything else as given.
func UnitName(u string) string {
	switch strings.TrimSpace(u) {
	case "°C", "℃", "degree Celsius", "Cel", "CEL":
		return "degC"
	case "°F", "℉", "degree Fahrenheit", "FAH":
		return "degF"
	}
	return strings.TrimSpace(u)
}

// InterlockWords are the words of a boolean's name that make it an
// interlock candidate.
var InterlockWords = []string{"door", "lid", "guard", "interlock", "ready"}

// InterlockCandidate reports whether a boolean named name looks like an
// interlock (its snake_case words contain door, lid, guard, interlock or
// ready).
func InterlockCandidate(name string) bool {
	for _, w := range strings.Split(SnakeName(name), "_") {
		for _, x := range InterlockWords {
			if w == x {
				return true
			}
		}
	}
	return false
}

// Texts every discovery writes into the file, so that they read the same
// for every adapter (and `mhp validate` finds the TODOs).
const (
	// TODOEStop heads the estop TODO.
	TODOEStop = "TODO(integrator): estop. Say what stops this device at the backend (see the adapter's docs); until then safety/estop only stops the MHP side."
	// TODOWatchdog heads the watchdog TODO.
	TODOWatchdog = "TODO(integrator): watchdog. Set safety.watchdog_s if the device must be made safe when its agent goes quiet."
	// ApprovalNote explains approval: confirm everywhere.
	ApprovalNote = "Every setting and action starts at approval: confirm (a person approves each use); relax to auto item by item once reviewed."
	// NoLimitsNote is the loud comment on a writable number without a range.
	NoLimitsNote = "WARNING: NO LIMITS. The backend gives no range for this writable value: any number is sent. TODO(integrator): add limits: {min: ..., max: ...}."
)

// DiscoverFunc is a discovery the registry dispatches to: the adapter's
// Discover with [DiscoverOptions] made into its own options.
type DiscoverFunc func(ctx context.Context, target string, opt DiscoverOptions) (any, Report, error)

// Discovery is an adapter's discovery as the registry holds it.
type Discovery struct {
	// Discover reads the backend and returns the adapter's Config.
	Discover DiscoverFunc
	// Load is the adapter's Load, for the round trip of a rendered file.
	Load func(Source) error
}

// NewDiscovery builds a registry entry from an adapter's typed Discover
// (opts makes its options from the shared ones) and Load.
func NewDiscovery[C any](discover func(context.Context, string, DiscoverOptions) (C, Report, error), load func(Source) (C, error)) Discovery {
	return Discovery{
		Discover: func(ctx context.Context, target string, o DiscoverOptions) (any, Report, error) {
			return discover(ctx, target, o)
		},
		Load: func(src Source) error { _, err := load(src); return err },
	}
}
