package opcua

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/clock"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/opcua/opcuatest"
)

// The server is down when the driver starts (a lab launcher started the
// device server first): the driver starts, serves, reports the backend
// down, refuses actuation with not_started, and works once the server is
// up, without a restart.
func TestStartBeforeServer(t *testing.T) {
	srv := startFake(t)
	srv.Down()
	d := startDriver(t, extraConfig(srv.URL), nil)
	ctx := ctxT(t)
	dev := mhp.AsSession(d, "s1")
	p, err := dev.Ping(ctx)
	if err != nil || p.Backend == nil || p.Backend.Connected || p.Backend.Error == "" {
		t.Fatalf("ping with the server down: %+v %v", p, err)
	}
	desc, err := dev.Describe(ctx, mhp.DescribeRequest{})
	if err != nil || desc.Backend == nil || desc.Backend.Connected {
		t.Fatalf("describe with the server down: %+v %v", desc, err)
	}
	r, err := dev.Read(ctx, []string{"temperature"})
	if err != nil || r.Values["temperature"] != nil || r.Unavailable["temperature"] == "" {
		t.Fatalf("read with the server down: %+v %v", r, err)
	}
	_, err = dev.Write(ctx, mhp.WriteRequest{Name: "setpoint", Value: 30.0})
	if e, ok := mhp.AsError(err); !ok || e.Data["outcome"] != mhp.OutcomeNotStarted {
		t.Fatalf("write with the server down: %v", err)
	}
	_, err = dev.Invoke(ctx, mhp.InvokeRequest{Name: conformance.ActionQuick})
	if e, ok := mhp.AsError(err); !ok || e.Data["outcome"] != mhp.OutcomeNotStarted {
		t.Fatalf("invoke with the server down: %v", err)
	}
	if s := d.State(); s != mhp.StateIdle {
		t.Fatalf("state with the server down: %s", s)
	}
	if err := srv.Up(); err != nil {
		t.Fatal(err)
	}
	conformance.EventuallyWithin(t, "the backend to come up", 10*time.Second, func() bool {
		l := d.Link()
		return l != nil && l.Connected
	})
	waitSignals(t, d)
	if r, err := dev.Write(ctx, mhp.WriteRequest{Name: "setpoint", Value: 30.0}); err != nil || !r.Applied {
		t.Fatalf("write once the server is up: %+v %v", r, err)
	}
	job := invokeWait(t, dev, conformance.ActionQuick, nil)
	if job.State != mhp.JobDone {
		t.Fatalf("invoke once the server is up: %+v", job)
	}
}

// reconnect.fail_fast keeps the old behaviour: no server, no start.
func TestStartFailFast(t *testing.T) {
	srv := startFake(t)
	srv.Down()
	cfg := extraConfig(srv.URL)
	cfg.Reconn.FailFast = true
	cfg.Timeouts.DialS = 0.5
	d, err := New(context.Background(), cfg, quietOptions(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = d.Start(ctx)
	if err == nil || !strings.Contains(err.Error(), srv.URL) {
		t.Fatalf("Start with fail_fast and no server: %v", err)
	}
}

// The reconnect backoff runs on Options.LinkClock: with a manual one, a
// server that came up is not retried until that clock moves.
func TestLinkClockTimesBackoff(t *testing.T) {
	srv := startFake(t)
	srv.Down()
	cfg := extraConfig(srv.URL)
	link := clock.NewManual(time.Now())
	opt := quietOptions(nil)
	opt.LinkClock = link
	d := startWith(t, cfg, opt)
	if err := srv.Up(); err != nil {
		t.Fatal(err)
	}
	// Twenty backoffs of real time pass without a retry: the link, down
	// now, sends no backend/link notification (it does on every change of
	// up or down) and still reads down at the end.
	changed := make(chan struct{}, 1)
	stop := d.Listen(func(n mhp.Notification) {
		if n.Method == mhp.NotifyBackendLink {
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	})
	defer stop()
	if l := d.Link(); l == nil || l.Connected {
		t.Fatalf("the link is not down before the hold: %+v", l)
	}
	select {
	case <-changed:
		t.Fatalf("the link changed without the link clock moving: %+v", d.Link())
	case <-time.After(20 * seconds(cfg.Reconn.MinS)):
	}
	if l := d.Link(); l == nil || l.Connected {
		t.Fatalf("the link came up without the link clock moving: %+v", l)
	}
	conformance.EventuallyWithin(t, "the link to come up as the link clock moves", 10*time.Second, func() bool {
		link.Advance(time.Second)
		l := d.Link()
		return l != nil && l.Connected
	})
	// The listener sees the link come up, so the hold above watched something.
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no backend/link notification when the link came up")
	}
}

// A link that drops with nothing in flight does not fault the device; one
// that drops with a method call in flight does (outcome unknown).
func TestDropIdleVersusInFlight(t *testing.T) {
	srv := startFake(t)
	d := startDriver(t, extraConfig(srv.URL), nil)
	waitSignals(t, d)
	ctx := ctxT(t)
	dev := mhp.AsSession(d, "s1")
	srv.DropConnections()
	conformance.EventuallyWithin(t, "the drop to be noticed and healed", 10*time.Second, func() bool {
		l := d.Link()
		return l != nil && l.Connected && l.Since > 0
	})
	srv.Down()
	conformance.EventuallyWithin(t, "the link to be reported down", 10*time.Second, func() bool {
		l := d.Link()
		return l != nil && !l.Connected
	})
	if s := d.State(); s != mhp.StateIdle {
		t.Fatalf("an idle drop latched %s", s)
	}
	if err := srv.Up(); err != nil {
		t.Fatal(err)
	}
	waitSignals(t, d)
	conformance.EventuallyWithin(t, "the link to be up", 10*time.Second, func() bool { l := d.Link(); return l != nil && l.Connected })
	srv.In.Script(conformance.ActionQuick, conformance.Block)
	res, err := dev.Invoke(ctx, mhp.InvokeRequest{Name: conformance.ActionQuick})
	if err != nil {
		t.Fatal(err)
	}
	conformance.EventuallyWithin(t, "the call to reach the server", 10*time.Second, func() bool { return srv.In.Calls(conformance.ActionQuick) > 0 })
	srv.DropConnections()
	job := waitJob(t, dev, res.Job.ID)
	if job.Outcome != mhp.OutcomeUnknown {
		t.Fatalf("a call cut by the drop: %+v", job)
	}
	if s := d.State(); s != mhp.StateFault {
		t.Fatalf("a drop with a call in flight left the device %s", s)
	}
}

// A server restarted with its namespace indexes moved: nsu= node ids are
// resolved afresh and the subscription is rebuilt on the new ids (a change
// at the new server arrives as a notification).
func TestNamespaceMovedOnRestart(t *testing.T) {
	a, err := opcuatest.Start(conformance.NewInstrument())
	if err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(a.URL, "opc.tcp://")
	cfg := Config{Endpoint: a.URL}
	cfg.Device.ID = "ns-moves"
	cfg.Timeouts = Timeouts{RequestS: 2, DialS: 2}
	cfg.Reconn = Reconnect{MinS: 0.05, MaxS: 0.2}
	cfg.Signals = []SignalItem{{Signal: mhp.Signal{Name: "temperature", Type: mhp.TypeNumber}, Node: "nsu=" + opcuatest.Namespace + ";s=" + conformance.SignalTemperature}}
	d := startDriver(t, cfg, nil)
	waitSignals(t, d)
	got := subscribeUpdates(t, d, "temperature")
	a.In.ReleaseAll()
	_ = a.Close()
	b, err := opcuatest.StartWith(conformance.NewInstrument(), opcuatest.Options{Addr: addr, ExtraNamespaces: []string{"urn:openmhp:other"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.In.ReleaseAll(); _ = b.Close() })
	conformance.EventuallyWithin(t, "the link to come back", 15*time.Second, func() bool { l := d.Link(); return l != nil && l.Connected })
	b.In.SetSignal(conformance.SignalTemperature, 30.0)
	waitNotification(t, got, func(m map[string]any) bool { return m["name"] == "temperature" && m["value"] == 30.0 })
}
