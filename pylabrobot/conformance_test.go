package pylabrobot_test

import (
	"context"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/clock"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/pylabrobot"
	"github.com/openmhp/mhp-go/pylabrobot/plrtest"
)

// fixtureConfig maps the fake bridge onto exactly the conformance fixture.
func fixtureConfig(url string, opt conformance.Options) pylabrobot.Config {
	desc := conformance.FixtureDescriptor()
	cfg := fastConfig(pylabrobot.ModeBridge, url)
	cfg.Device = desc.DeviceInfo
	cfg.Safety = desc.Safety
	cfg.Safety.WatchdogS = opt.WatchdogS
	cfg.Signals = map[string]pylabrobot.SignalOverride{"setup_finished": {Hide: true}}
	for _, s := range desc.Signals {
		cfg.Signals[s.Name] = pylabrobot.SignalOverride{Type: s.Type, Unit: s.Unit}
	}
	setters := plrtest.Setters()
	cfg.Settings = map[string]pylabrobot.SettingMapping{}
	for _, s := range desc.Settings {
		cfg.Settings[s.Name] = pylabrobot.SettingMapping{Method: setters[s.Name], Param: "value", Type: s.Type, Unit: s.Unit,
			Limits: s.Limits, Approval: s.Approval, Interlocks: s.Interlocks, DuringJob: s.DuringJob}
		cfg.SettingOrder = append(cfg.SettingOrder, s.Name)
	}
	cfg.Actions = map[string]pylabrobot.ActionOverride{"aspirate": {Hide: true}, "setup": {Hide: true},
		"drop_tips": {Hide: true}, "move_plate": {Hide: true}}
	for _, a := range desc.Actions {
		a := a
		o := pylabrobot.ActionOverride{Approval: a.Approval, Duration: a.Duration, Interlocks: a.Interlocks,
			Cancellable: &a.Cancellable, Concurrent: &a.Concurrent, Params: map[string]*mhp.Shape{}}
		for _, p := range a.Params {
			o.Params[p.Name] = p.Shape
		}
		cfg.Actions[a.Name] = o
	}
	return cfg
}

func harness(t *testing.T, opt conformance.Options) *conformance.Fixture {
	return harnessOf(t, opt, true)
}

// harnessOf is the conformance fixture on a long-polling bridge or on an
// older one the adapter polls.
func harnessOf(t *testing.T, opt conformance.Options, longPoll bool) *conformance.Fixture {
	t.Helper()
	b := plrtest.NewBridge()
	b.LongPoll(longPoll)
	clk := clock.NewManual(time.Now())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := pylabrobot.New(ctx, fixtureConfig(b.URL, opt), pylabrobot.Options{Options: adapters.Options{Clock: clk,
		Refine: func(bc *binding.Config) error { bc.PollInterval = 20 * time.Millisecond; return nil }}})
	if err != nil {
		b.Close()
		t.Fatalf("pylabrobot.New: %v", err)
	}
	if err := d.Start(ctx); err != nil {
		b.Close()
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		b.In.ReleaseAll()
		if err := d.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		b.Close()
	})
	return &conformance.Fixture{
		Device:  mhp.AsSession(d, conformance.MemorySessionA),
		Other:   mhp.AsSession(d, conformance.MemorySessionB),
		Backend: b.In,
		Advance: clk.Advance,
	}
}

func TestConformance(t *testing.T) {
	conformance.Run(t, harness)
}

// TestConformancePolling runs the suite against a bridge that does not
// long-poll (plrbridge 1): the adapter polls every poll_interval.
func TestConformancePolling(t *testing.T) {
	conformance.Run(t, func(t *testing.T, opt conformance.Options) *conformance.Fixture { return harnessOf(t, opt, false) })
}
