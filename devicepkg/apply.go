package devicepkg

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
)

// approvalRank orders approval levels from loosest to strictest.
func approvalRank(a mhp.Approval) int {
	switch a {
	case mhp.ApprovalConfirm:
		return 1
	case mhp.ApprovalForbid:
		return 2
	}
	return 0
}

type merger struct {
	p     *Package
	probs Problems
}

func (m *merger) add(file, field, format string, args ...any) {
	line := 0
	if file == DescriptorFile {
		line = m.p.line(field)
	}
	m.probs = append(m.probs, Problem{File: file, Line: line, Field: field, Message: fmt.Sprintf(format, args...)})
}

// Apply merges the package over the bindings' specs in cfg: identity from the
// card, instructions from the DEVICE.md body, and each descriptor.yaml item
// over the binding of the same name. It refuses (returning Problems, and
// leaving cfg partly merged) an item with no binding, a type or unit that
// contradicts the binding, limits wider than the binding's, an approval
// looser than the binding's, a flag the binding cannot honour, an interlock
// naming no signal, and an example the final parameter shapes refuse.
func (p *Package) Apply(cfg *binding.Config) error {
	m := &merger{p: p}
	p.applyIdentity(cfg, m)
	d := p.Descriptor
	signals := map[string]int{}
	for i, s := range cfg.Signals {
		signals[s.Spec.Name] = i
	}
	checkLocks := func(field string, locks []string) {
		for _, l := range locks {
			if _, ok := signals[l]; !ok {
				m.add(DescriptorFile, field, "interlock %q names no signal of the driver", l)
			}
		}
	}
	for _, ref := range d.Signals {
		field := "signals." + ref.Name
		i, ok := signals[ref.Name]
		if !ok {
			m.add(DescriptorFile, field, "no signal %q in the driver's bindings (driver %q)", ref.Name, p.Card.Driver)
			continue
		}
		spec := &cfg.Signals[i].Spec
		m.typeUnit(field, spec.Type, ref.Type, &spec.Unit, ref.Unit)
		if ref.Notes != "" {
			spec.Notes = boundNotes(ref.Notes)
		}
		if r := ref.RequiredForRecovery; r != nil {
			if !*r && spec.RequiredForRecovery {
				m.add(DescriptorFile, field+".required_for_recovery", "the driver's config requires this signal for recovery; a package may only turn required_for_recovery on")
			} else {
				spec.RequiredForRecovery = *r
			}
		}
	}
	for _, ref := range d.Settings {
		field := "settings." + ref.Name
		i := -1
		for j := range cfg.Settings {
			if cfg.Settings[j].Spec.Name == ref.Name {
				i = j
			}
		}
		if i < 0 {
			m.add(DescriptorFile, field, "no setting %q in the driver's bindings (driver %q)", ref.Name, p.Card.Driver)
			continue
		}
		spec := &cfg.Settings[i].Spec
		m.typeUnit(field, spec.Type, ref.Type, &spec.Unit, ref.Unit)
		spec.Limits = m.narrow(field+".limits", spec.Limits, ref.Limits)
		spec.Approval = m.approval(field+".approval", spec.Approval, ref.Approval)
		checkLocks(field+".interlocks", ref.Interlocks)
		spec.Interlocks = union(spec.Interlocks, ref.Interlocks)
		if ref.DuringJob != nil {
			if *ref.DuringJob && !spec.DuringJob {
				m.add(DescriptorFile, field+".during_job", "the binding does not allow writes while a job runs; a package may only turn during_job off")
			} else {
				spec.DuringJob = *ref.DuringJob
			}
		}
		if ref.Notes != "" {
			spec.Notes = boundNotes(ref.Notes)
		}
	}
	for _, ref := range d.Actions {
		field := "actions." + ref.Name
		i := -1
		for j := range cfg.Actions {
			if cfg.Actions[j].Spec.Name == ref.Name {
				i = j
			}
		}
		if i < 0 {
			m.add(DescriptorFile, field, "no action %q in the driver's bindings (driver %q)", ref.Name, p.Card.Driver)
			continue
		}
		m.action(field, &cfg.Actions[i].Spec, ref, checkLocks)
	}
	if s := d.Safety; s != nil {
		if s.EStop != nil {
			switch {
			case *s.EStop && cfg.EStop == nil:
				m.add(DescriptorFile, "safety.estop", "the package declares estop but the driver has no estop hook")
			case !*s.EStop && cfg.EStop != nil:
				m.add(DescriptorFile, "safety.estop", "the driver implements estop; declare estop: true or leave it out")
			}
		}
		checkLocks("safety.interlocks", s.Interlocks)
		cfg.Safety.Interlocks = union(cfg.Safety.Interlocks, s.Interlocks)
		if s.WatchdogS != nil {
			w := *s.WatchdogS
			switch {
			case !(w > 0):
				m.add(DescriptorFile, "safety.watchdog_s", "must be a positive number of seconds, got %v", w)
			case cfg.Safety.WatchdogS > 0 && w > cfg.Safety.WatchdogS:
				m.add(DescriptorFile, "safety.watchdog_s", "%v s is longer than the driver's %v s; a package may only shorten the watchdog", w, cfg.Safety.WatchdogS)
			default:
				cfg.Safety.WatchdogS = w
			}
		}
		if s.Notes != "" {
			cfg.Safety.Notes = boundNotes(s.Notes)
		}
	}
	if len(m.probs) > 0 {
		return m.probs
	}
	return nil
}

func (m *merger) action(field string, spec *mhp.Action, ref ActionRef, checkLocks func(string, []string)) {
	if ref.Duration != "" {
		if ref.Duration != mhp.DurationShort && ref.Duration != mhp.DurationLong {
			m.add(DescriptorFile, field+".duration", "%q is not short or long", ref.Duration)
		} else {
			spec.Duration = ref.Duration
		}
	}
	spec.Approval = m.approval(field+".approval", spec.Approval, ref.Approval)
	checkLocks(field+".interlocks", ref.Interlocks)
	spec.Interlocks = union(spec.Interlocks, ref.Interlocks)
	for _, rp := range ref.Params {
		pf := field + ".params." + rp.Name
		bound, ok := spec.Params.Get(rp.Name)
		if !ok {
			m.add(DescriptorFile, pf, "the binding has no parameter %q (it has: %s)", rp.Name, strings.Join(spec.Params.Names(), ", "))
			continue
		}
		for i := range spec.Params {
			if spec.Params[i].Name == rp.Name {
				spec.Params[i].Shape = m.shape(pf, bound, rp.Shape)
			}
		}
	}
	if ref.Returns != nil && spec.Returns == nil {
		spec.Returns = ref.Returns
	}
	flag := func(name string, bound *bool, want *bool) {
		if want == nil {
			return
		}
		if *want && !*bound {
			m.add(DescriptorFile, field+"."+name, "the binding is not %s; a package may only turn it off", name)
			return
		}
		*bound = *want
	}
	flag("concurrent", &spec.Concurrent, ref.Concurrent)
	flag("pausable", &spec.Pausable, ref.Pausable)
	flag("cancellable", &spec.Cancellable, ref.Cancellable)
	if ref.Notes != "" {
		spec.Notes = boundNotes(ref.Notes)
	}
	for i, ex := range ref.Examples {
		if _, err := spec.Params.Check(spec.Name, ex); err != nil {
			m.add(DescriptorFile, fmt.Sprintf("%s.examples[%d]", field, i), "invalid example: %s", refusal(err))
		}
	}
	if len(ref.Examples) > 0 {
		spec.Examples = ref.Examples
	}
}

// typeUnit checks a refinement's type and unit against the binding's.
func (m *merger) typeUnit(field, boundType, refType string, boundUnit *string, refUnit string) {
	if refType != "" && boundType != "" && refType != boundType {
		m.add(DescriptorFile, field+".type", "%q contradicts the binding's type %q", refType, boundType)
	}
	if refUnit != "" {
		if *boundUnit != "" && *boundUnit != refUnit {
			m.add(DescriptorFile, field+".unit", "%q contradicts the binding's unit %q", refUnit, *boundUnit)
		} else {
			*boundUnit = refUnit
		}
	}
}

// approval returns the stricter of the two, refusing a looser refinement.
func (m *merger) approval(field string, bound, want mhp.Approval) mhp.Approval {
	if want == "" {
		return bound
	}
	if approvalRank(want) == 0 && want != mhp.ApprovalAuto {
		m.add(DescriptorFile, field, "%q is not auto, confirm or forbid", want)
		return bound
	}
	b := bound
	if b == "" {
		b = mhp.ApprovalAuto
	}
	if approvalRank(want) < approvalRank(b) {
		m.add(DescriptorFile, field, "%q is looser than the binding's %q; a package may only make approval stricter", want, b)
		return bound
	}
	return want
}

// shape refines a bound parameter shape: notes, unit, narrower limits,
// recursively through items and properties. A prose refinement is kept out
// (the binding's structured shape stays in force).
func (m *merger) shape(field string, bound, ref *mhp.Shape) *mhp.Shape {
	if ref == nil || ref.Prose != "" {
		return bound
	}
	if bound == nil || bound.Prose != "" {
		return ref
	}
	out := *bound
	if ref.Type != "" && bound.Type != "" && ref.Type != bound.Type {
		m.add(DescriptorFile, field+".type", "%q contradicts the binding's type %q", ref.Type, bound.Type)
	}
	m.typeUnit(field, "", "", &out.Unit, ref.Unit)
	if ref.Notes != "" {
		out.Notes = boundNotes(ref.Notes)
	}
	out.Limits = m.narrow(field+".limits", bound.Limits, ref.Limits)
	if ref.Items != nil {
		out.Items = m.shape(field+".items", bound.Items, ref.Items)
	}
	if len(ref.Properties) > 0 {
		props := make(map[string]*mhp.Shape, len(bound.Properties))
		for k, v := range bound.Properties {
			props[k] = v
		}
		for k, v := range ref.Properties {
			b, ok := bound.Properties[k]
			if !ok {
				m.add(DescriptorFile, field+"."+k, "the binding's shape has no property %q", k)
				continue
			}
			props[k] = m.shape(field+"."+k, b, v)
		}
		out.Properties = props
	}
	return &out
}

// narrow returns want's limits if they lie inside bound's, else records a problem.
func (m *merger) narrow(field string, bound, want *mhp.Limits) *mhp.Limits {
	if want.Empty() {
		return bound
	}
	if msg := limitsProblem(want); msg != "" {
		m.add(DescriptorFile, field, "%s", msg)
		return bound
	}
	if bound.Empty() {
		return want
	}
	out := *bound
	widen := func(what string, w, b any) {
		m.add(DescriptorFile, field, "%s %v is wider than the binding's %v; a package may only narrow limits", what, w, b)
	}
	lower := func(name string, w, b **float64) {
		if *w == nil {
			return
		}
		if *b != nil && **w < **b {
			widen(name, **w, **b)
			return
		}
		*b = *w
	}
	upper := func(name string, w, b **float64) {
		if *w == nil {
			return
		}
		if *b != nil && **w > **b {
			widen(name, **w, **b)
			return
		}
		*b = *w
	}
	lower("min", &want.Min, &out.Min)
	upper("max", &want.Max, &out.Max)
	lower("exclusiveMin", &want.ExclusiveMin, &out.ExclusiveMin)
	upper("exclusiveMax", &want.ExclusiveMax, &out.ExclusiveMax)
	if len(want.Enum) > 0 {
		for _, v := range want.Enum {
			if _, err := (&mhp.Shape{Limits: bound}).Check("enum", v); err != nil {
				widen("enum value", v, "limits")
				return bound
			}
		}
		out.Enum = want.Enum
	}
	if want.Pattern != "" {
		if bound.Pattern != "" && bound.Pattern != want.Pattern {
			m.add(DescriptorFile, field, "pattern %q replaces the binding's %q; a package cannot prove it narrower", want.Pattern, bound.Pattern)
		} else {
			out.Pattern = want.Pattern
		}
	}
	if want.MinLength != nil {
		if bound.MinLength != nil && *want.MinLength < *bound.MinLength {
			widen("minLength", *want.MinLength, *bound.MinLength)
		} else {
			out.MinLength = want.MinLength
		}
	}
	if want.MaxLength != nil {
		if bound.MaxLength != nil && *want.MaxLength > *bound.MaxLength {
			widen("maxLength", *want.MaxLength, *bound.MaxLength)
		} else {
			out.MaxLength = want.MaxLength
		}
	}
	return &out
}

// limitsProblem reports a self-contradicting limits block.
func limitsProblem(l *mhp.Limits) string {
	if l == nil {
		return ""
	}
	if l.Min != nil && l.Max != nil && *l.Min > *l.Max {
		return fmt.Sprintf("min %v is above max %v", *l.Min, *l.Max)
	}
	if l.ExclusiveMin != nil && l.ExclusiveMax != nil && *l.ExclusiveMin >= *l.ExclusiveMax {
		return fmt.Sprintf("exclusiveMin %v is not below exclusiveMax %v", *l.ExclusiveMin, *l.ExclusiveMax)
	}
	if l.MinLength != nil && l.MaxLength != nil && *l.MinLength > *l.MaxLength {
		return fmt.Sprintf("minLength %d is above maxLength %d", *l.MinLength, *l.MaxLength)
	}
	if l.MinLength != nil && *l.MinLength < 0 {
		return fmt.Sprintf("minLength %d is negative", *l.MinLength)
	}
	if l.Enum != nil && len(l.Enum) == 0 {
		return "enum is empty"
	}
	for i, v := range l.Enum {
		for _, w := range l.Enum[:i] {
			if reflect.DeepEqual(v, w) {
				return fmt.Sprintf("enum lists %v twice", v)
			}
		}
	}
	return ""
}

func union(a, b []string) []string {
	out := append([]string(nil), a...)
	for _, x := range b {
		found := false
		for _, y := range out {
			if x == y {
				found = true
				break
			}
		}
		if !found {
			out = append(out, x)
		}
	}
	return out
}

// ApplyIdentity merges only the package's identity over cfg: the card's
// device info, the instructions, the device notes and the physical
// description, not the items (for bindings that have none yet, such as
// those of an adapter whose backend was never reached).
func (p *Package) ApplyIdentity(cfg *binding.Config) error {
	m := &merger{p: p}
	p.applyIdentity(cfg, m)
	if len(m.probs) > 0 {
		return m.probs
	}
	return nil
}

func (p *Package) applyIdentity(cfg *binding.Config, m *merger) {
	if p.Card.ID == "" {
		m.add(CardFile, "id", "missing: the card needs the device id")
	}
	cfg.Device = p.Card.DeviceInfo
	// Validate refuses a description of MaxDescription characters or more; a
	// package served unvalidated is cut (a character is at most 4 bytes).
	cfg.Device.Description = mhp.Truncate(cfg.Device.Description, 4*MaxDescription)
	if p.Instructions != "" {
		cfg.Instructions = mhp.Truncate(p.Instructions, MaxInstructions)
	}
	if n := p.Descriptor.Device.Notes; n != "" {
		cfg.Notes = boundNotes(n)
	}
	if p.Descriptor.Physical != nil {
		cfg.Physical = p.Descriptor.Physical
	}
}
