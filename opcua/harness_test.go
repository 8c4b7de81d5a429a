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
	"github.com/openmhp/mhp-go/opcua/opcuatest"
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
		cfg.Signals = append(cfg.Signals, SignalItem{Signal: s, Node: opcuatest.NodeID(s.Name)})
	}
	for _, s := range desc.Settings {
		cfg.Settings = append(cfg.Settings, SettingItem{Setting: s, Node: opcuatest.NodeID(s.Name)})
	}
	for _, a := range desc.Actions {
		it := ActionItem{Action: a}
		switch a.Name {
		case conformance.ActionRun, conformance.ActionMonitor:
			it.LADS = &LADSSpec{FunctionalUnit: opcuatest.NodeID("FU_" + a.Name), ProgramTemplate: "fixture"}
		default:
			it.Method = &MethodSpec{Object: opcuatest.NodeID("Device"), Method: opcuatest.NodeID(a.Name), Outputs: []string{"ok", "action"}}
		}
		cfg.Actions = append(cfg.Actions, it)
	}
	cfg.EStop = &EStopSpec{Method: &MethodSpec{Object: opcuatest.NodeID("Device"), Method: opcuatest.NodeID("estop")}}
	return cfg
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// quietOptions are the options of a test's New: no log output, no keep-alive
// probe of Conn, and clk as the driver clock when it is not nil.
func quietOptions(clk clock.Clock) Options {
	return Options{Options: adapters.Options{Logger: quietLogger(), Clock: clk}, KeepAlive: -1}
}

// startFake starts a fake over a fresh instrument, closed at cleanup.
func startFake(t testing.TB) *opcuatest.Server {
	t.Helper()
	srv, err := opcuatest.Start(conformance.NewInstrument())
	if err != nil {
		t.Fatalf("opcuatest: %v", err)
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
	opt := quietOptions(clk)
	opt.Refine = func(bc *binding.Config) error {
		bc.PollInterval = 20 * time.Millisecond
		bc.JobGrace = 10 * time.Second
		return nil
	}
	return startWith(t, cfg, opt)
}

// startWith builds and starts the adapter's driver for cfg with opt.
func startWith(t testing.TB, cfg Config, opt Options) *binding.Driver {
	t.Helper()
	d, err := New(context.Background(), cfg, opt)
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
	cfg := fixtureConfig(srv.URL, opt)
	d := startDriver(t, cfg, clk)
	waitSignals(t, d)
	b := newServedBackend(t, d, srv, cfg)
	b.waitSubscribed()
	return &conformance.Fixture{
		Device:  mhp.AsSession(d, "session-a"),
		Other:   mhp.AsSession(d, "session-b"),
		Backend: b,
		Advance: clk.Advance,
	}
}

// waitSignals waits until every signal has its first value from the subscription.
func waitSignals(t testing.TB, d *binding.Driver) {
	t.Helper()
	conformance.EventuallyWithin(t, "every signal to have a value", 5*time.Second, func() bool {
		res, err := d.Read(context.Background(), nil)
		return err == nil && len(res.Unavailable) == 0
	})
}

// subscribeUpdates subscribes session s1 to the named signals and returns
// the driver's notifications (a full channel drops, never blocks the
// driver); the listener ends at cleanup.
func subscribeUpdates(t *testing.T, d *binding.Driver, names ...string) <-chan mhp.Notification {
	t.Helper()
	got := make(chan mhp.Notification, 256)
	stop := d.Listen(func(n mhp.Notification) {
		select {
		case got <- n:
		default:
		}
	})
	t.Cleanup(stop)
	if _, err := mhp.AsSession(d, "s1").Subscribe(ctxT(t), names); err != nil {
		t.Fatal(err)
	}
	return got
}

// waitNotification waits for a signals update whose params match.
func waitNotification(t *testing.T, ch <-chan mhp.Notification, match func(map[string]any) bool) {
	t.Helper()
	conformance.EventuallyWithin(t, "a matching signals update", 5*time.Second, func() bool {
		for {
			select {
			case n := <-ch:
				if n.Method == mhp.NotifySignalsUpdate && n.Params != nil && match(n.Params) {
					return true
				}
			default:
				return false
			}
		}
	})
}
