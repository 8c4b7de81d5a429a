package opcua

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/opcua/opcuatest"
)

// A frozen server (process stopped, sockets open) sends nothing: the
// served value turns unavailable after the max age instead of repeating
// the last value forever, and comes back when the server does.
func TestFrozenServerGoesStale(t *testing.T) {
	srv := startFake(t)
	cfg := extraConfig(srv.URL)
	cfg.Timeouts.KeepAliveS = 0.3
	d := startDriver(t, cfg, nil)
	waitSignals(t, d)
	ctx := ctxT(t)
	dev := mhp.AsSession(d, "s1")
	got := subscribeUpdates(t, d, "temperature")
	// Healthy and quiet for several max ages: the heartbeat keeps it fresh.
	quiet := time.Now().Add(3 * seconds(cfg.withDefaults().Timeouts.MaxAgeS))
	for time.Now().Before(quiet) {
		r, err := dev.Read(ctx, []string{"temperature"})
		if err != nil || r.Values["temperature"] != 21.5 {
			t.Fatalf("a quiet healthy server went stale: %+v %v", r, err)
		}
		time.Sleep(50 * time.Millisecond) // samples a condition that must hold for the whole window: not a wait
	}
	srv.Freeze()
	conformance.EventuallyWithin(t, "the frozen server's signal to read unavailable", 15*time.Second, func() bool {
		r, err := dev.Read(ctx, []string{"temperature"})
		return err == nil && r.Values["temperature"] == nil && strings.Contains(r.Unavailable["temperature"], "frozen")
	})
	waitNotification(t, got, func(m map[string]any) bool { v, ok := m["value"]; return m["name"] == "temperature" && ok && v == nil })
	srv.Thaw()
	conformance.EventuallyWithin(t, "the value to come back after thawing", 15*time.Second, func() bool {
		r, err := dev.Read(ctx, []string{"temperature"})
		return err == nil && r.Values["temperature"] == 21.5
	})
	waitNotification(t, got, func(m map[string]any) bool { return m["name"] == "temperature" && m["value"] == 21.5 })
}

// countHandler counts log records whose message contains sub.
type countHandler struct {
	sub string
	n   *atomic.Int64
}

func (h countHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h countHandler) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.sub) {
		h.n.Add(1)
	}
	return nil
}
func (h countHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h countHandler) WithGroup(string) slog.Handler      { return h }

// The soak: a healthy link to node-opcua stays up across many keep-alive
// periods (gopcua's default timing dropped it once per keep-alive).
func TestNodeSoakNoSpontaneousDrop(t *testing.T) {
	p := startNode(t)
	cfg := plcConfig(p.url)
	cfg.Timeouts.KeepAliveS = 0.5
	var lost atomic.Int64
	d := startWith(t, cfg, Options{Options: adapters.Options{Logger: slog.New(countHandler{"connection lost", &lost}),
		Refine: func(bc *binding.Config) error { bc.PollInterval = 20 * time.Millisecond; return nil }}})
	waitSignals(t, d)
	ctx := ctxT(t)
	var changes atomic.Int64
	stop := d.Listen(func(n mhp.Notification) {
		if n.Method == mhp.NotifyBackendLink {
			changes.Add(1)
		}
	})
	defer stop()
	since := d.Link().Since
	soak := 10 * seconds(cfg.Timeouts.KeepAliveS) // ten keep-alive periods
	end := time.Now().Add(soak)
	dev := mhp.AsSession(d, "s1")
	for time.Now().Before(end) {
		r, err := dev.Read(ctx, []string{"temperature"})
		if err != nil || r.Values["temperature"] == nil {
			t.Fatalf("read during the soak: %+v %v", r, err)
		}
		time.Sleep(100 * time.Millisecond) // the soak's read rate, not a wait
	}
	if n := lost.Load(); n != 0 {
		t.Fatalf("%d spontaneous drops in %s (%d keep-alive periods)", n, soak, 10)
	}
	if l := d.Link(); !l.Connected || l.Since != since || changes.Load() != 0 {
		t.Fatalf("the link changed during the soak: %+v, %d notifications", l, changes.Load())
	}
}

// After a write reports applied, a read of the same node never shows the
// pre-write value, though the server's notifications lag (as node-opcua's
// did by 0.2-0.5 s).
func TestReadAfterWrite(t *testing.T) {
	for _, readBack := range []bool{true, false} {
		t.Run(map[bool]string{true: "read_back", false: "no_read_back"}[readBack], func(t *testing.T) {
			srv := startFake(t)
			srv.SetValueLag(400 * time.Millisecond)
			cfg := extraConfig(srv.URL)
			cfg.Signals = append(cfg.Signals, SignalItem{Signal: mhp.Signal{Name: "setpoint_now", Type: mhp.TypeNumber}, Node: opcuatest.NodeID(conformance.SettingSetpoint)})
			for i := range cfg.Settings {
				if cfg.Settings[i].Name == conformance.SettingSetpoint {
					rb := readBack
					cfg.Settings[i].ReadBack = &rb
				}
			}
			d := startDriver(t, cfg, nil)
			ctx := ctxT(t)
			dev := mhp.AsSession(d, "s1")
			if r, err := dev.Write(ctx, mhp.WriteRequest{Name: conformance.SettingSetpoint, Value: 20.0}); err != nil || !r.Applied {
				t.Fatalf("first write: %+v %v", r, err)
			}
			waitSignals(t, d)
			conformance.EventuallyWithin(t, "the first value to settle", 10*time.Second, func() bool {
				r, err := dev.Read(ctx, []string{"setpoint_now"})
				return err == nil && r.Values["setpoint_now"] == 20.0
			})
			for _, v := range []float64{31, 32, 33} {
				r, err := dev.Write(ctx, mhp.WriteRequest{Name: conformance.SettingSetpoint, Value: v})
				if err != nil || !r.Applied {
					t.Fatalf("write %v: %+v %v", v, r, err)
				}
				// Until the lagging notifications have all arrived, every read
				// shows the written value.
				end := time.Now().Add(600 * time.Millisecond)
				for time.Now().Before(end) {
					res, err := dev.Read(ctx, []string{"setpoint_now"})
					if err != nil || res.Values["setpoint_now"] != v {
						t.Fatalf("read after the applied write of %v: %+v %v", v, res, err)
					}
					time.Sleep(10 * time.Millisecond) // samples a condition that must hold for the whole window: not a wait
				}
			}
		})
	}
}

// With interlock_max_age_s, an interlock is served from a fresh
// subscription (no round trip) and still refuses as soon as the server's
// value reaches the adapter.
func TestInterlockFromFreshSubscription(t *testing.T) {
	srv := startFake(t)
	cfg := extraConfig(srv.URL)
	cfg.Timeouts.InterlockMaxAgeS = 5 // the fake's heartbeat comes every 0.2 s
	d := startDriver(t, cfg, nil)
	waitSignals(t, d)
	ctx := ctxT(t)
	dev := mhp.AsSession(d, "s1")
	// Once the subscription has delivered, interlock reads cost no round trip.
	conformance.EventuallyWithin(t, "20 interlock reads without a server read", 10*time.Second, func() bool {
		reads := srv.Reads()
		for i := 0; i < 20; i++ {
			if r, err := dev.Read(ctx, []string{conformance.SignalDoorClosed}); err != nil || r.Values[conformance.SignalDoorClosed] != true {
				t.Fatalf("interlock read: %+v %v", r, err)
			}
		}
		return srv.Reads()-reads <= 1
	})
	srv.In.SetSignal(conformance.SignalDoorClosed, false)
	conformance.EventuallyWithin(t, "the interlock to see the open door", 10*time.Second, func() bool {
		r, err := dev.Read(ctx, []string{conformance.SignalDoorClosed})
		return err == nil && r.Values[conformance.SignalDoorClosed] == false
	})
	_, err := dev.Invoke(ctx, mhp.InvokeRequest{Name: conformance.ActionRun, Params: map[string]any{}})
	if e, ok := mhp.AsError(err); !ok || e.Code != mhp.CodeInterlockOpen {
		t.Fatalf("run with the door open: %v", err)
	}
}
