package devicepkg

import (
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"regexp"
	"strings"
	"unicode/utf8"

	"go.starlark.net/syntax"

	"github.com/openmhp/mhp-go"
)

var (
	idPattern   = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)
	namePattern = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
)

// scriptOptions are the Starlark dialect of scripts/*.star: top-level
// control flow, while loops and sets, as mhp run allows.
var scriptOptions = &syntax.FileOptions{Set: true, While: true, TopLevelControl: true, GlobalReassign: true}

// MaxIDLength bounds a device id.
const MaxIDLength = 64

// Classes that move or store energy: their packages must declare
// safety.estop (a mover or heater without an e-stop is not MHP Safe, §15).
var energyClasses = map[string]bool{
	"robot_arm": true, "plate_arm": true, "arm": true, "gantry": true, "xyz_stage": true, "stage": true,
	"liquid_handler": true, "centrifuge": true, "mobile_robot": true, "conveyor": true, "pump": true,
	"thermocycler": true, "incubator": true, "hotplate": true, "heater": true, "furnace": true, "oven": true,
	"shaker": true, "laser": true,
}

// Validate checks the package in dir against the spec's field rules and
// returns every problem found, each with its file and field; none means
// valid. It checks the package alone: that each item has a binding, and that
// limits only narrow the binding's, is Apply's job (mhp validate runs both
// when it can build the driver).
//
// Rules: DEVICE.md has front matter with id (lowercase letters, digits and
// dashes), class (lowercase snake_case), a description under 1024
// characters, a driver, a supported mhp version if given, and a non-empty
// body; descriptor.yaml decodes with no unknown fields; item names are
// snake_case and unique per kind; types are known, limits consistent (min <=
// max, non-empty enum, numeric bounds on numbers only), approval is auto,
// confirm or forbid, duration short or long; interlocks name signals the
// file declares; watchdog_s is positive; movers and heaters declare
// safety.estop; an action that declares params declares all of them and its
// examples pass them; physical values are non-negative; scripts/*.star
// parse as Starlark; references are UTF-8 text; no symlink leaves the
// package.
func Validate(dir string) []Problem {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return []Problem{{File: dir, Message: err.Error()}}
	}
	defer root.Close()
	return validate(root.FS(), root)
}

// ValidateFS is Validate over a file system.
func ValidateFS(fsys fs.FS) []Problem { return validate(fsys, nil) }

func validate(fsys fs.FS, root opener) []Problem {
	p, probs := parse(fsys, root)
	if p == nil {
		return probs
	}
	v := &validator{p: p, probs: probs}
	v.card()
	if !p.descBroken {
		v.descriptor()
		v.notes()
	}
	v.files()
	return v.probs
}

type validator struct {
	p     *Package
	probs []Problem
}

func (v *validator) add(file, field, format string, args ...any) {
	line := 0
	if file == DescriptorFile {
		line = v.p.line(field)
	}
	v.probs = append(v.probs, Problem{File: file, Line: line, Field: field, Message: fmt.Sprintf(format, args...)})
}

func (v *validator) card() {
	c := v.p.Card
	switch {
	case c.ID == "":
		v.add(CardFile, "id", "missing")
	case len(c.ID) > MaxIDLength:
		v.add(CardFile, "id", "%d characters, above %d", len(c.ID), MaxIDLength)
	case !idPattern.MatchString(c.ID):
		v.add(CardFile, "id", "%q: use lowercase letters, digits and dashes (not starting or ending with a dash)", c.ID)
	}
	switch {
	case c.Class == "":
		v.add(CardFile, "class", "missing: name the device class (thermocycler, robot_arm, ...)")
	case !namePattern.MatchString(c.Class):
		v.add(CardFile, "class", "%q: use lowercase snake_case", c.Class)
	}
	switch n := utf8.RuneCountInString(c.Description); {
	case strings.TrimSpace(c.Description) == "":
		v.add(CardFile, "description", "missing: say what the device is and when to pick it")
	case n >= MaxDescription:
		v.add(CardFile, "description", "%d characters; it must be under %d", n, MaxDescription)
	}
	if c.Driver == "" {
		v.add(CardFile, "driver", "missing: name the bindings (sim:thermocycler, sim:arm, or an adapter config file)")
	}
	if c.MHP != "" && c.MHP != mhp.ProtocolVersion && c.MHP != mhp.ProtocolVersionMinimum {
		v.add(CardFile, "mhp", "%q is not a supported protocol version (%s)", c.MHP, strings.Join(mhp.SupportedVersions(), ", "))
	}
	for i, t := range c.Tags {
		if strings.TrimSpace(t) == "" {
			v.add(CardFile, fmt.Sprintf("tags[%d]", i), "empty tag")
		}
	}
	switch body := v.p.Instructions; {
	case body == "":
		v.add(CardFile, "body", "empty: write the operating instructions below the front matter")
	case !utf8.ValidString(body):
		v.add(CardFile, "body", "not valid UTF-8 (first bad byte at offset %d of the body)", firstInvalid(body))
	case len(body) > MaxInstructions:
		v.add(CardFile, "body", "%d bytes of instructions, above the limit of %d (devicepkg.MaxInstructions): "+
			"move detail into references/ files, which are read on demand", len(body), MaxInstructions)
	}
}

func (v *validator) descriptor() {
	d := v.p.Descriptor
	signals := map[string]bool{}
	seen := map[string]bool{}
	name := func(kind string, i int, n string) string {
		if n == "" {
			v.add(DescriptorFile, fmt.Sprintf("%s[%d].name", kind, i), "missing")
			return fmt.Sprintf("%s[%d]", kind, i)
		}
		field := kind + "." + n
		if !namePattern.MatchString(n) {
			v.add(DescriptorFile, field, "name %q: use lowercase snake_case", n)
		}
		if seen[field] {
			v.add(DescriptorFile, field, "declared twice")
		}
		seen[field] = true
		return field
	}
	for i, s := range d.Signals {
		f := name("signals", i, s.Name)
		signals[s.Name] = true
		v.typeName(f+".type", s.Type)
	}
	locks := func(field string, l []string) {
		for _, x := range l {
			if !signals[x] {
				v.add(DescriptorFile, field, "interlock %q names no signal declared in this file", x)
			}
		}
	}
	for i, s := range d.Settings {
		f := name("settings", i, s.Name)
		v.typeName(f+".type", s.Type)
		v.limits(f+".limits", s.Type, s.Limits)
		v.approval(f+".approval", s.Approval)
		locks(f+".interlocks", s.Interlocks)
	}
	for i, a := range d.Actions {
		f := name("actions", i, a.Name)
		v.approval(f+".approval", a.Approval)
		if a.Duration != "" && a.Duration != mhp.DurationShort && a.Duration != mhp.DurationLong {
			v.add(DescriptorFile, f+".duration", "%q is not short or long", a.Duration)
		}
		locks(f+".interlocks", a.Interlocks)
		structured := len(a.Params) > 0
		for _, p := range a.Params {
			if p.Shape == nil || p.Shape.Prose != "" {
				structured = false
				continue
			}
			v.shape(f+".params."+p.Name, p.Shape)
		}
		if !structured {
			continue
		}
		for j, ex := range a.Examples {
			if _, err := a.Params.Check(a.Name, ex); err != nil {
				v.add(DescriptorFile, fmt.Sprintf("%s.examples[%d]", f, j), "invalid example: %s", refusal(err))
			}
		}
	}
	if s := d.Safety; s != nil {
		locks("safety.interlocks", s.Interlocks)
		if s.WatchdogS != nil && !(*s.WatchdogS > 0 && !math.IsInf(*s.WatchdogS, 0)) {
			v.add(DescriptorFile, "safety.watchdog_s", "must be a positive number of seconds, got %v", *s.WatchdogS)
		}
	}
	if energyClasses[v.p.Card.Class] && (d.Safety == nil || d.Safety.EStop == nil || !*d.Safety.EStop) {
		v.add(DescriptorFile, "safety.estop", "class %q moves or stores energy: declare estop: true (and a driver that implements it)", v.p.Card.Class)
	}
	if ph := d.Physical; ph != nil {
		if ph.MassKg < 0 {
			v.add(DescriptorFile, "physical.mass_kg", "negative")
		}
		if ph.PowerW < 0 {
			v.add(DescriptorFile, "physical.power_w", "negative")
		}
		if len(ph.FootprintMm) > 0 && len(ph.FootprintMm) != 3 {
			v.add(DescriptorFile, "physical.footprint_mm", "want [width, depth, height], got %d numbers", len(ph.FootprintMm))
		}
		for i, x := range ph.FootprintMm {
			if x <= 0 {
				v.add(DescriptorFile, fmt.Sprintf("physical.footprint_mm[%d]", i), "must be positive")
			}
		}
	}
}

func (v *validator) typeName(field, t string) {
	if t != "" && !mhp.IsType(t) {
		v.add(DescriptorFile, field, "unknown type %q (number, integer, boolean, string, array, object, any)", t)
	}
}

func (v *validator) approval(field string, a mhp.Approval) {
	switch a {
	case "", mhp.ApprovalAuto, mhp.ApprovalConfirm, mhp.ApprovalForbid:
	default:
		v.add(DescriptorFile, field, "%q is not auto, confirm or forbid", a)
	}
}

func (v *validator) limits(field, typ string, l *mhp.Limits) {
	if l == nil {
		return
	}
	if l.Empty() && l.Enum == nil {
		v.add(DescriptorFile, field, "empty: give {min, max}, {enum} or remove it")
		return
	}
	if msg := limitsProblem(l); msg != "" {
		v.add(DescriptorFile, field, "%s", msg)
	}
	numeric := l.Min != nil || l.Max != nil || l.ExclusiveMin != nil || l.ExclusiveMax != nil
	if numeric && typ != "" && typ != mhp.TypeNumber && typ != mhp.TypeInteger {
		v.add(DescriptorFile, field, "numeric bounds on a %s", typ)
	}
	if l.Pattern != "" {
		if _, err := regexp.Compile(l.Pattern); err != nil {
			v.add(DescriptorFile, field+".pattern", "%v", err)
		}
	}
}

func (v *validator) shape(field string, s *mhp.Shape) {
	if s == nil || s.Prose != "" {
		return
	}
	v.typeName(field+".type", s.Type)
	v.limits(field+".limits", s.Type, s.Limits)
	if s.Items != nil {
		v.shape(field+".items", s.Items)
	}
	for k, p := range s.Properties {
		v.shape(field+"."+k, p)
	}
	for _, r := range s.Required {
		if s.Properties != nil && s.Properties[r] == nil {
			v.add(DescriptorFile, field+".required", "%q is not a property", r)
		}
	}
}

// firstInvalid is the offset of the first byte of s that is not valid UTF-8.
func firstInvalid(s string) int {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, n := utf8.DecodeRuneInString(s[i:]); n == 1 {
				return i
			}
		}
	}
	return len(s)
}

// notes checks the size of every notes field.
func (v *validator) notes() {
	d := v.p.Descriptor
	check := func(field, text string) {
		if len(text) > MaxNotes {
			v.add(DescriptorFile, field, "%d bytes of notes, above the limit of %d (devicepkg.MaxNotes)", len(text), MaxNotes)
		}
		if !utf8.ValidString(text) {
			v.add(DescriptorFile, field, "not valid UTF-8")
		}
	}
	check("device.notes", d.Device.Notes)
	for _, s := range d.Signals {
		check("signals."+s.Name+".notes", s.Notes)
	}
	for _, s := range d.Settings {
		check("settings."+s.Name+".notes", s.Notes)
	}
	for _, a := range d.Actions {
		check("actions."+a.Name+".notes", a.Notes)
	}
	if d.Safety != nil {
		check("safety.notes", d.Safety.Notes)
	}
}

// files checks the package's other files.
func (v *validator) files() {
	_, probs := listResources(v.p.fsys)
	v.probs = append(v.probs, probs...)
	for _, r := range v.p.resources {
		res, err := v.p.ReadResource(r)
		if err != nil {
			if e, ok := mhp.AsError(err); ok {
				v.add(r, "", "%s", e.Message)
			} else {
				v.add(r, "", "%v", err)
			}
			continue
		}
		if strings.HasPrefix(r, "scripts/") && path.Ext(r) == ".star" {
			if _, err := scriptOptions.Parse(r, res.Text, 0); err != nil {
				v.add(r, "", "Starlark syntax: %v", err)
			}
		}
	}
}

// refusal is the message of a check's refusal: an *mhp.Error's message
// without its code prefix.
func refusal(err error) string {
	if e, ok := mhp.AsError(err); ok {
		return e.Message
	}
	return err.Error()
}
