package opcua

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/clock"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/opcua/internal/fakeua"
)

// fixtureConfig maps the conformance fixture onto the fake's nodes.
func fixtureConfig(url string, opt conformance.Options) Config {
	desc := conformance.FixtureDescriptor()
	cfg := Config{Endpoint: url}
	cfg.Device = desc.DeviceInfo
	cfg.Safety = desc.Safety
	cfg.Safety.WatchdogS = opt.WatchdogS
	cfg.Timeouts = Timeouts{RequestS: 2, DialS: 2, StartS: 2, CancelS: 5}
	cfg.Reconn = Reconnect{MinS: 0.05, MaxS: 0.5}
	for _, s := range desc.Signals {
		cfg.Signals = append(cfg.Signals, SignalItem{Signal: s, Node: fakeua.NodeID(s.Name)})
	}
	for _, s := range desc.Settings {
		cfg.Settings = append(cfg.Settings, SettingItem{Setting: s, Node: fakeua.NodeID(s.Name)})
	}
	for _, a := range desc.Actions {
		it := ActionItem{Action: a}
		switch a.Name {
		case conformance.ActionRun, conformance.ActionMonitor:
			it.LADS = &LADSSpec{FunctionalUnit: fakeua.NodeID("FU_" + a.Name), ProgramTemplate: "fixture"}
		default:
			it.Method = &MethodSpec{Object: fakeua.NodeID("Device"), Method: fakeua.NodeID(a.Name), Outputs: []string{"ok", "action"}}
		}
		cfg.Actions = append(cfg.Actions, it)
	}
	cfg.EStop = &EStopSpec{Method: &MethodSpec{Object: fakeua.NodeID("Device"), Method: fakeua.NodeID("estop")}}
	return cfg
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// startFake starts a fake over a fresh instrument, closed at cleanup.
func startFake(t testing.TB) *fakeua.Server {
	t.Helper()
	srv, err := fakeua.Start(conformance.NewInstrument())
	if err != nil {
		t.Fatalf("fakeua: %v", err)
	}
	t.Cleanup(func() {
		srv.In.ReleaseAll()
		_ = srv.Close()
	})
	return srv
}

// startDriver builds and starts the adapter's driver for cfg.
func startDriver(t testing.TB, cfg Config, clk clock.Clock) *binding.Driver {
	t.Helper()
	d, err := New(cfg, Options{Logger: quietLogger(), Clock: clk, KeepAlive: -1,
		Tune: func(bc *binding.Config) {
			bc.PollInterval = 20 * time.Millisecond
			bc.JobGrace = 10 * time.Second
		}})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// harness is the conformance Harness of the adapter over the fake server.
func harness(t *testing.T, opt conformance.Options) *conformance.Fixture {
	t.Helper()
	srv := startFake(t)
	clk := clock.NewManual(time.Now())
	d := startDriver(t, fixtureConfig(srv.URL, opt), clk)
	waitSignals(t, d)
	return &conformance.Fixture{
		Device:  mhp.AsSession(d, "session-a"),
		Other:   mhp.AsSession(d, "session-b"),
		Backend: srv.In,
		Advance: clk.Advance,
	}
}

// waitSignals waits until every signal has its first value from the subscription.
func waitSignals(t testing.TB, d *binding.Driver) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		res, err := d.Read(context.Background(), nil)
		if err == nil && len(res.Unavailable) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("signals never became available: %+v %v", res, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

var _ = adapters.Source{}
