package binding

import (
	"math"
	"reflect"
	"slices"
	"sort"

	"github.com/openmhp/mhp-go"
)

// Refining a running driver: what the backend tells of its items once it
// is reached (an OPC UA server's EngineeringUnits and EURange) fills in
// what the driver's specs left open, and what a later connection tells
// replaces what an earlier one told. The specs a driver was built from are
// frozen and shared with every driver of the same content (frozen.go), so a
// refinement never changes them: it makes new frozen copies (shared in turn
// with drivers refined to the same content) and swaps them in with one
// atomic store. A request loads the view once, so a write sees either the
// old or the new limits, never a mix.

// Refinement is what a backend says of a driver's items beyond its
// config. Each entry applies only where the spec the driver was built
// from leaves it open: a unit to an item without one, limits to a setting
// without any. There it replaces what an earlier refinement said (the
// backend's range narrowed or moved), and an item or aspect a refinement
// does not name keeps what an earlier one said. What the spec states (the
// config's, a device package's) is never changed, so the gates never allow
// more than the config does. An empty unit or empty limits say nothing:
// they neither fill in nor clear.
type Refinement struct {
	// SignalUnits are units by signal name.
	SignalUnits map[string]string
	// SettingUnits are units by setting name.
	SettingUnits map[string]string
	// Limits are limits by setting name (an OPC UA EURange). Numeric bounds
	// apply to number and integer settings only; each bound must be finite
	// and min no more than max.
	Limits map[string]*mhp.Limits
}

// refinedView is a driver's descriptor and settings after a refinement:
// never changed once stored, replaced whole by the next one.
type refinedView struct {
	desc     mhp.Descriptor
	settings byName[Setting] // the driver's own bindings, with the refined specs and shapes
	frozen   []*frozenSpec   // the shared copies desc and settings point into
}

// descNow is the driver's current descriptor (one atomic load): the one
// built by New until a refinement replaced it. Never modified.
func (d *Driver) descNow() *mhp.Descriptor {
	if v := d.refined.Load(); v != nil {
		return &v.desc
	}
	return &d.desc
}

// settingsNow is the driver's current settings (one atomic load); a
// request takes its *Setting from it once and uses that throughout.
func (d *Driver) settingsNow() byName[Setting] {
	if v := d.refined.Load(); v != nil {
		return v.settings
	}
	return d.settings
}

// Refine fills in, from r, what the driver's specs leave open, replacing
// what an earlier refinement filled in (see [Refinement]), and returns the
// items it changed, as "signal NAME" or "setting NAME", sorted; nothing
// when every entry already says what the driver has.
// Describe, safety/limits and the limits gate use the refined specs from
// the moment Refine returns; a write in flight keeps the specs it started
// with. A name the driver does not have is refused UnknownName and limits
// that cannot apply InvalidValue, and then nothing is changed. Safe for
// concurrent use with every request and with other Refine calls.
func (d *Driver) Refine(r Refinement) ([]string, error) {
	if err := d.checkRefinement(r); err != nil {
		return nil, err
	}
	for {
		old := d.refined.Load()
		desc, settings := &d.desc, d.settings
		if old != nil {
			desc, settings = &old.desc, old.settings
		}
		next, changed := d.refineView(desc, settings, r)
		if len(changed) == 0 {
			return nil, nil
		}
		if d.refined.CompareAndSwap(old, next) {
			d.cfg.Logger.Info("descriptor refined from the backend", "device", d.cfg.Device.ID, "items", changed)
			return changed, nil
		}
		// Another Refine swapped meanwhile: start again from its view.
	}
}

// checkRefinement refuses a refinement naming an item the driver lacks or
// carrying limits that cannot apply, before anything is built.
func (d *Driver) checkRefinement(r Refinement) error {
	for name := range r.SignalUnits {
		if _, ok := d.signals.idx[name]; !ok {
			return d.errorf(mhp.CodeUnknownName, "refine: no signal %q", name).With(mhp.DataKind, "signal").With(mhp.DataName, name)
		}
	}
	for name := range r.SettingUnits {
		if _, ok := d.settings.idx[name]; !ok {
			return d.errorf(mhp.CodeUnknownName, "refine: no setting %q", name).With(mhp.DataKind, "setting").With(mhp.DataName, name)
		}
	}
	for name, l := range r.Limits {
		s, ok := d.settings.get(name)
		if !ok {
			return d.errorf(mhp.CodeUnknownName, "refine: no setting %q", name).With(mhp.DataKind, "setting").With(mhp.DataName, name)
		}
		if l.Empty() {
			continue
		}
		numeric := l.Min != nil || l.Max != nil || l.ExclusiveMin != nil || l.ExclusiveMax != nil
		if numeric && s.Spec.Type != mhp.TypeNumber && s.Spec.Type != mhp.TypeInteger {
			return d.errorf(mhp.CodeInvalidValue, "refine: setting %q is of type %s: numeric limits do not apply", name, s.Spec.Type).
				With(mhp.DataName, name)
		}
		for _, p := range []*float64{l.Min, l.Max, l.ExclusiveMin, l.ExclusiveMax} {
			if p != nil && (math.IsNaN(*p) || math.IsInf(*p, 0)) {
				return d.errorf(mhp.CodeInvalidValue, "refine: setting %q: limit %v is not a finite number", name, *p).With(mhp.DataName, name)
			}
		}
		if err := checkLimits(l); err != nil {
			return d.errorf(mhp.CodeInvalidValue, "refine: setting %q: %v", name, err).With(mhp.DataName, name)
		}
	}
	return nil
}

// refineView builds the view that applies r over desc and settings (the
// current view), or reports that nothing changes. Whether an aspect is open
// is the spec New built from (d.desc) to say, never the current view, so
// an earlier refinement's value is replaced and the config's never is. The
// frozen copies it makes are shared with any driver refined to the same
// content.
func (d *Driver) refineView(desc *mhp.Descriptor, settings byName[Setting], r Refinement) (*refinedView, []string) {
	var changed []string
	signals := slices.Clone(desc.Signals)
	for name, unit := range r.SignalUnits {
		if i := d.signals.idx[name]; unit != "" && d.desc.Signals[i].Unit == "" && signals[i].Unit != unit {
			signals[i].Unit = unit
			changed = append(changed, "signal "+name)
		}
	}
	specs := slices.Clone(desc.Settings)
	touched := map[int]bool{}
	for name, unit := range r.SettingUnits {
		if i := settings.idx[name]; unit != "" && d.desc.Settings[i].Unit == "" && specs[i].Unit != unit {
			specs[i].Unit = unit
			touched[i] = true
		}
	}
	for name, l := range r.Limits {
		if i := settings.idx[name]; !l.Empty() && d.desc.Settings[i].Limits.Empty() && !reflect.DeepEqual(specs[i].Limits, l) {
			specs[i].Limits = l // copied by freezeSetting: the caller's value is not kept
			touched[i] = true
		}
	}
	if len(changed) == 0 && len(touched) == 0 {
		return nil, nil
	}
	v := &refinedView{desc: *desc}
	items := slices.Clone(settings.items) // the bindings' hooks stay; a touched one gets the new spec
	for i := range touched {
		var f *frozenSpec
		specs[i], f = freezeSetting(specs[i])
		items[i].Spec, items[i].shape = specs[i], f.shape
		v.frozen = append(v.frozen, f)
		changed = append(changed, "setting "+specs[i].Name)
	}
	f := freezeLists(descLists{signals: signals, settings: specs, actions: desc.Actions})
	v.frozen = append(v.frozen, f)
	v.desc.Signals, v.desc.Settings, v.desc.Actions = f.lists.signals, f.lists.settings, f.lists.actions
	v.settings = byName[Setting]{idx: f.lists.settingIdx, items: items}
	sort.Strings(changed)
	return v, changed
}
