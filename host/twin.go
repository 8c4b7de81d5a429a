package host

import (
	"context"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/devicepkg"
	"github.com/openmhp/mhp-go/examples/sim"
)

// TwinSuffix is added to a package's id for its simulated twin.
const TwinSuffix = "-sim"

// twinLong is how long a long action of a twin runs.
const twinLong = time.Second

// buildTwin builds a package's simulated twin: the simulated driver itself
// for a sim:… package, else bindings made from descriptor.yaml's own items
// (a signal reads what was last written to it or its zero, a boolean
// interlock reads true so a rehearsal can pass it, a write is stored, an
// action ends at once or, when long, after a second). The twin is tagged
// simulated, its id suffixed -sim, its description prefixed [SIMULATED].
func (f *Fleet) buildTwin(pkg *devicepkg.Package) (*devicepkg.Device, error) {
	var cfg binding.Config
	if sim.IsDriver(pkg.Card.Driver) {
		c, err := sim.Config(pkg.Card.Driver, f.cfg.Sim)
		if err != nil {
			return nil, err
		}
		cfg = c
	} else {
		cfg = twinConfig(withDriverItems(pkg))
	}
	cfg.Logger = f.cfg.Logger
	if err := pkg.Apply(&cfg); err != nil {
		return nil, err
	}
	if !strings.HasSuffix(cfg.Device.ID, TwinSuffix) {
		cfg.Device.ID += TwinSuffix
	}
	cfg.Device.Tags = append(append([]string(nil), cfg.Device.Tags...), "simulated")
	cfg.Device.Description = "[SIMULATED] " + cfg.Device.Description
	cfg.Device.Location = "simulated"
	drv, err := binding.New(cfg)
	if err != nil {
		return nil, err
	}
	return devicepkg.NewDevice(drv, pkg), nil
}

// twinConfig makes bindings for every item descriptor.yaml declares.
func twinConfig(d devicepkg.Descriptor) binding.Config {
	var mu sync.Mutex
	values := map[string]any{}
	locks := map[string]bool{}
	for _, s := range d.Settings {
		for _, l := range s.Interlocks {
			locks[l] = true
		}
	}
	for _, a := range d.Actions {
		for _, l := range a.Interlocks {
			locks[l] = true
		}
	}
	if d.Safety != nil {
		for _, l := range d.Safety.Interlocks {
			locks[l] = true
		}
	}
	var cfg binding.Config
	for _, s := range d.Signals {
		typ := s.Type
		if typ == "" {
			typ = mhp.TypeNumber
		}
		values[s.Name] = zeroOf(typ, locks[s.Name])
		cfg.Signals = append(cfg.Signals, binding.Signal{Spec: mhp.Signal{Name: s.Name, Type: typ, Unit: s.Unit},
			Read: func(context.Context) (binding.Sample, error) {
				mu.Lock()
				defer mu.Unlock()
				return binding.Sample{Value: values[s.Name]}, nil
			}})
	}
	for _, s := range d.Settings {
		typ := s.Type
		if typ == "" {
			typ = mhp.TypeNumber
		}
		cfg.Settings = append(cfg.Settings, binding.Setting{
			Spec: mhp.Setting{Name: s.Name, Type: typ, Unit: s.Unit, Limits: s.Limits, Approval: s.Approval,
				DuringJob: s.DuringJob == nil || *s.DuringJob},
			Write: func(_ context.Context, v any) (binding.WriteStatus, error) {
				mu.Lock()
				values[s.Name] = v
				mu.Unlock()
				return binding.Applied, nil
			}})
	}
	for _, a := range d.Actions {
		long := a.Duration == mhp.DurationLong
		dur := a.Duration
		if dur == "" {
			dur = mhp.DurationShort
		}
		spec := mhp.Action{Name: a.Name, Duration: dur, Approval: a.Approval, Params: a.Params,
			Concurrent: a.Concurrent != nil && *a.Concurrent, Pausable: true, Cancellable: true}
		cfg.Actions = append(cfg.Actions, binding.Action{Spec: spec, Run: func(ctx context.Context, j *binding.Job) (any, error) {
			if long {
				t := time.NewTimer(twinLong)
				defer t.Stop()
				select {
				case <-ctx.Done():
					return nil, binding.ErrCancelled
				case <-t.C:
				}
			}
			return map[string]any{"simulated": true, "action": j.Action(), "params": j.Params()}, nil
		}})
	}
	if d.Safety == nil || d.Safety.EStop == nil || *d.Safety.EStop {
		cfg.EStop = func(context.Context) error { return nil }
	}
	return cfg
}

// zeroOf is a twin signal's first value: true for an interlock, else the
// type's zero.
func zeroOf(typ string, interlock bool) any {
	switch typ {
	case mhp.TypeBoolean:
		return interlock
	case mhp.TypeString:
		return ""
	case mhp.TypeNumber, mhp.TypeInteger:
		return 0.0
	}
	return nil
}

// withDriverItems is the package's descriptor over the items its adapter
// config lists in MHP's own shape (the serial config's signals, settings
// and actions carry name, type, unit, limits, approval…), so a twin keeps
// the limits and approvals the real device has even where descriptor.yaml
// only refines. A config in another shape adds nothing.
func withDriverItems(pkg *devicepkg.Package) devicepkg.Descriptor {
	d := pkg.Descriptor
	file, err := pkg.DriverFile()
	if err != nil {
		return d
	}
	b, err := os.ReadFile(file)
	if err != nil || len(b) > 1<<20 {
		return d
	}
	var items struct {
		Signals  []mhp.Signal  `yaml:"signals"`
		Settings []mhp.Setting `yaml:"settings"`
		Actions  []mhp.Action  `yaml:"actions"`
	}
	if yaml.Unmarshal(b, &items) != nil {
		return d
	}
	out := d
	out.Signals, out.Settings, out.Actions = nil, nil, nil
	for _, x := range items.Signals {
		ref := devicepkg.SignalRef{Name: x.Name, Type: x.Type, Unit: x.Unit}
		if i := slices.IndexFunc(d.Signals, func(r devicepkg.SignalRef) bool { return r.Name == x.Name }); i >= 0 {
			ref.Type, ref.Unit = or(d.Signals[i].Type, ref.Type), or(d.Signals[i].Unit, ref.Unit)
		}
		out.Signals = append(out.Signals, ref)
	}
	for _, x := range items.Settings {
		ref := devicepkg.SettingRef{Name: x.Name, Type: x.Type, Unit: x.Unit, Limits: x.Limits, Approval: x.Approval, Interlocks: x.Interlocks}
		if i := slices.IndexFunc(d.Settings, func(r devicepkg.SettingRef) bool { return r.Name == x.Name }); i >= 0 {
			r := d.Settings[i]
			ref.Type, ref.Unit = or(r.Type, ref.Type), or(r.Unit, ref.Unit)
			if r.Limits != nil {
				ref.Limits = r.Limits
			}
			ref.Approval = stricter(ref.Approval, r.Approval)
			ref.Interlocks = append(ref.Interlocks, r.Interlocks...)
		}
		out.Settings = append(out.Settings, ref)
	}
	for _, x := range items.Actions {
		ref := devicepkg.ActionRef{Name: x.Name, Duration: x.Duration, Approval: x.Approval, Interlocks: x.Interlocks, Params: x.Params}
		if i := slices.IndexFunc(d.Actions, func(r devicepkg.ActionRef) bool { return r.Name == x.Name }); i >= 0 {
			r := d.Actions[i]
			ref.Duration, ref.Approval = or(r.Duration, ref.Duration), stricter(ref.Approval, r.Approval)
			if len(r.Params) > 0 {
				ref.Params = r.Params
			}
			ref.Interlocks, ref.Concurrent = append(ref.Interlocks, r.Interlocks...), r.Concurrent
		}
		out.Actions = append(out.Actions, ref)
	}
	// Items only the descriptor names (it may declare more than the config).
	for _, r := range d.Signals {
		if !slices.ContainsFunc(out.Signals, func(x devicepkg.SignalRef) bool { return x.Name == r.Name }) {
			out.Signals = append(out.Signals, r)
		}
	}
	for _, r := range d.Settings {
		if !slices.ContainsFunc(out.Settings, func(x devicepkg.SettingRef) bool { return x.Name == r.Name }) {
			out.Settings = append(out.Settings, r)
		}
	}
	for _, r := range d.Actions {
		if !slices.ContainsFunc(out.Actions, func(x devicepkg.ActionRef) bool { return x.Name == r.Name }) {
			out.Actions = append(out.Actions, r)
		}
	}
	return out
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// stricter is the stricter of two approvals (auto < confirm < forbid).
func stricter(a, b mhp.Approval) mhp.Approval {
	rank := map[mhp.Approval]int{mhp.ApprovalConfirm: 1, mhp.ApprovalForbid: 2}
	if rank[b] > rank[a] {
		return b
	}
	return a
}
