package adapters

import (
	"fmt"
	"sort"
	"time"

	"github.com/openmhp/mhp-go"
)

// ActionOverride adjusts an action that a self-describing backend reports
// (a MADSci node's /info, a PyLabRobot bridge's /describe): the config file
// narrows or annotates what the backend said, by action name.
type ActionOverride struct {
	Approval   mhp.Approval `yaml:"approval,omitempty"`
	Duration   string       `yaml:"duration,omitempty"`
	Interlocks []string     `yaml:"interlocks,omitempty"`
	// Timeout bounds the action; zero keeps the adapter's default.
	Timeout time.Duration `yaml:"timeout,omitempty"`
	// Params adjust the backend's params: an override with a type replaces
	// the backend's shape; without one, its set fields (unit, limits,
	// default, notes, ...) replace the backend's.
	Params      map[string]*mhp.Shape `yaml:"params,omitempty"`
	Returns     *mhp.Shape            `yaml:"returns,omitempty"`
	Notes       string                `yaml:"notes,omitempty"`
	Cancellable *bool                 `yaml:"cancellable,omitempty"`
	Pausable    *bool                 `yaml:"pausable,omitempty"`
	Concurrent  *bool                 `yaml:"concurrent,omitempty"`
	// FaultOnFailure latches the device in fault even when the backend
	// reports the failure itself.
	FaultOnFailure bool `yaml:"fault_on_failure,omitempty"`
	// Hide leaves the action out of the device.
	Hide bool `yaml:"hide,omitempty"`
}

// ApplyTo lays the override over an action spec the backend described. An
// override of a parameter the backend does not declare is an error: a typo
// must not silently drop a limit.
func (o ActionOverride) ApplyTo(spec *mhp.Action) error {
	if o.Approval != "" {
		spec.Approval = o.Approval
	}
	if o.Duration != "" {
		spec.Duration = o.Duration
	}
	if o.Notes != "" {
		spec.Notes = o.Notes
	}
	for _, l := range o.Interlocks {
		if !contains(spec.Interlocks, l) {
			spec.Interlocks = append(spec.Interlocks, l)
		}
	}
	for _, f := range []struct {
		o *bool
		f *bool
	}{{o.Cancellable, &spec.Cancellable}, {o.Pausable, &spec.Pausable}, {o.Concurrent, &spec.Concurrent}} {
		if f.o != nil {
			*f.f = *f.o
		}
	}
	names := make([]string, 0, len(o.Params))
	for n := range o.Params {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if _, ok := spec.Params.Get(n); !ok {
			return fmt.Errorf("config overrides param %q of action %q, which the backend does not declare (it has %v)",
				n, spec.Name, spec.Params.Names())
		}
	}
	for i, p := range spec.Params {
		spec.Params[i].Shape = OverlayShape(p.Shape, o.Params[p.Name])
	}
	if o.Returns != nil {
		spec.Returns = o.Returns
	}
	return nil
}

// OverlayShape lays the set fields of o over base; an o with a type
// replaces base whole. Neither input is modified.
func OverlayShape(base, o *mhp.Shape) *mhp.Shape {
	if o == nil {
		return base
	}
	if base == nil || o.Type != "" {
		c := *o
		return &c
	}
	out := *base
	if o.Unit != "" {
		out.Unit = o.Unit
	}
	if o.Limits != nil {
		out.Limits = o.Limits
	}
	if o.Items != nil {
		out.Items = o.Items
	}
	if o.Properties != nil {
		out.Properties = o.Properties
	}
	if o.Required != nil {
		out.Required = o.Required
	}
	if o.Optional {
		out.Optional = true
	}
	if o.Default != nil {
		out.Default = o.Default
	}
	if o.Notes != "" {
		out.Notes = o.Notes
	}
	return &out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
