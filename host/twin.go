package host

import (
	"context"
	"strings"
	"sync"
	"time"

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
		cfg = twinConfig(pkg.Descriptor)
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
