package madsci_test

import (
	"context"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/clock"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/madsci"
	"github.com/openmhp/mhp-go/madsci/madscitest"
)

// fixtureConfig maps the fake node onto exactly the conformance fixture:
// the fixture's specs are config overrides over what the node describes.
func fixtureConfig(url string, opt conformance.Options) madsci.Config {
	desc := conformance.FixtureDescriptor()
	f := false
	cfg := baseConfig(url, "")
	cfg.Device = desc.DeviceInfo
	cfg.Safety = desc.Safety
	cfg.Safety.WatchdogS = opt.WatchdogS
	cfg.StatusSignals = &f
	cfg.ReadyInterlock = &f
	cfg.Result = madsci.ResultJSON
	cfg.StateSignals = []string{conformance.SignalTemperature, conformance.SignalDoorClosed}
	cfg.Signals = map[string]madsci.SignalOverride{}
	for _, s := range desc.Signals {
		cfg.Signals[s.Name] = madsci.SignalOverride{Type: s.Type, Unit: s.Unit}
	}
	cfg.Settings = map[string]madsci.SettingOverride{}
	for _, s := range desc.Settings {
		cfg.Settings[s.Name] = madsci.SettingOverride{Type: s.Type, Unit: s.Unit, Limits: s.Limits, Approval: s.Approval,
			Interlocks: s.Interlocks, DuringJob: s.DuringJob}
	}
	cfg.Actions = map[string]madsci.ActionOverride{"transfer": {Hide: true}}
	for _, a := range desc.Actions {
		a := a
		o := madsci.ActionOverride{Approval: a.Approval, Duration: a.Duration, Interlocks: a.Interlocks,
			Cancellable: &a.Cancellable, Pausable: &a.Pausable, Concurrent: &a.Concurrent, Params: map[string]*mhp.Shape{}}
		for _, p := range a.Params {
			o.Params[p.Name] = p.Shape
		}
		cfg.Actions[a.Name] = o
	}
	return cfg
}

// harness is the conformance Harness of the MADSci adapter over the fake node.
func harness(t *testing.T, opt conformance.Options) *conformance.Fixture {
	t.Helper()
	n := madscitest.New(madscitest.Options{})
	clk := clock.NewManual(time.Now())
	cfg := fixtureConfig(n.URL, opt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := madsci.New(ctx, cfg, madsci.Options{Options: adapters.Options{Clock: clk, Refine: func(bc *binding.Config) error {
		bc.PollInterval = 20 * time.Millisecond
		return nil
	}}})
	if err != nil {
		n.Close()
		t.Fatalf("madsci.New: %v", err)
	}
	if err := d.Start(ctx); err != nil {
		n.Close()
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		n.In.ReleaseAll()
		if err := d.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		n.Close()
	})
	return &conformance.Fixture{
		Device:  mhp.AsSession(d, conformance.MemorySessionA),
		Other:   mhp.AsSession(d, conformance.MemorySessionB),
		Backend: n.In,
		Advance: clk.Advance,
		Skip: map[string]string{
			"jobs/progress_reported": "MADSci nodes report no action progress (only running): progress is indeterminate",
		},
	}
}

func TestConformance(t *testing.T) {
	conformance.Run(t, harness)
}
