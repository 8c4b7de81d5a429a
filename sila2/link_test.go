package sila2_test

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/sila2"
	"github.com/openmhp/mhp-go/sila2/silatest"
)

// relaunch serves the lab's features again on its address with its
// certificate (the instrument restarted); extra FDLs change what it serves.
func relaunch(t *testing.T, l *lab, extra ...string) *silatest.Server {
	t.Helper()
	srv, err := silatest.New(silatest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.AddFeature(silatest.GreetingProviderFDL, silatest.Greeter(2024)); err != nil {
		t.Fatal(err)
	}
	if err := srv.AddFeature(silatest.TemperatureControllerFDL, silatest.NewThermostat(293.15).Handlers()); err != nil {
		t.Fatal(err)
	}
	for _, fdl := range extra {
		if err := srv.AddFeature(fdl, silatest.Handlers{}); err != nil {
			t.Fatal(err)
		}
	}
	var lis net.Listener
	conformance.Eventually(t, "the lab's port free again", func() bool {
		lis, err = net.Listen("tcp", l.addr)
		return err == nil
	})
	srv.Serve(lis, &l.cert.TLS)
	t.Cleanup(srv.Stop)
	return srv
}

func linkConfig(l *lab, cache string) sila2.Config {
	text := labConfig + fmt.Sprintf("endpoint: %s\ntls: {pin_sha256: %q}\n", l.addr, l.cert.PinSHA256) +
		fmt.Sprintf("link: {retry_min: 20ms, retry_max: 200ms, descriptor_cache: %q}\n", cache)
	cfg, err := sila2.Load(adapters.Source{Path: "lab.yaml", Data: []byte(text)})
	if err != nil {
		panic(err)
	}
	return cfg
}

func linkUp(d *binding.Driver, up bool) func() bool {
	return func() bool { l := d.Link(); return l != nil && l.Connected == up }
}

// TestServerDownAtStart: the server is down when the adapter starts. With a
// descriptor cache it starts, serves, reports the backend down and refuses
// actuation not_started (no fault); when the server comes back the device
// works without a restart. A server that comes back with other features is
// not adopted. fail_fast and a missing cache refuse to start.
func TestServerDownAtStart(t *testing.T) {
	l := startLab(t, silatest.Options{})
	cache := filepath.Join(t.TempDir(), "tc.descriptor.json")
	cfg := linkConfig(l, cache)
	d, err := sila2.New(ctxT(t), cfg, sila2.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := d.Descriptor()
	_ = d.Close()
	l.srv.Stop()

	for _, tc := range []struct {
		mut  func(*sila2.Config)
		want string
	}{
		{func(c *sila2.Config) { c.Link.FailFast = true }, "fail_fast"},
		{func(c *sila2.Config) { c.Link.DescriptorCache = "" }, "descriptor_cache"},
	} {
		c := linkConfig(l, cache)
		tc.mut(&c)
		if _, err := sila2.New(ctxT(t), c, sila2.Options{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("start with the server down: %v, want a refusal naming %s", err, tc.want)
		}
	}

	d, err = sila2.New(ctxT(t), cfg, sila2.Options{})
	if err != nil {
		t.Fatalf("start with the server down and a cache: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	if err := d.Start(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if !adapters.SameDescription(d.Descriptor().Actions, want.Actions) {
		t.Fatal("the cached description differs from the server's")
	}
	p, _ := d.Ping(ctxT(t))
	if p.Backend == nil || p.Backend.Connected {
		t.Fatalf("ping backend %+v, want connected:false", p.Backend)
	}
	_, err = d.Invoke(ctxT(t), mhp.InvokeRequest{Name: "say_hello", Params: map[string]any{"name": "x"}})
	if e, ok := mhp.AsError(err); !ok || e.Data["outcome"] != mhp.OutcomeNotStarted {
		t.Fatalf("invoke with the server down: %v, want not_started", err)
	}
	if st := deviceState(t, d); st != mhp.StateIdle {
		t.Fatalf("state %s with the server down, want idle", st)
	}

	srv := relaunch(t, l)
	conformance.Eventually(t, "the link up", linkUp(d, true))
	j := invoke(t, d, "say_hello", map[string]any{"name": "lab"})
	if got := waitJob(t, d, j.ID, terminal); got.State != mhp.JobDone {
		t.Fatalf("say_hello after the server came back: %+v", got)
	}

	// The server restarts with another feature: not adopted.
	srv.Stop()
	conformance.Eventually(t, "the link down", linkUp(d, false))
	if st := deviceState(t, d); st != mhp.StateIdle {
		t.Fatalf("state %s after an idle drop, want idle", st)
	}
	relaunch(t, l, silatest.CancelControllerFDL)
	conformance.Eventually(t, "the change reported", func() bool {
		l := d.Link()
		return l != nil && strings.Contains(l.Error, "differently")
	})
	if d.Link().Connected {
		t.Fatal("a server serving other features was adopted")
	}
}

// TestIdleDropNotStarted: the server goes away while nothing runs. The
// device reports the backend down, stays idle, and refuses a command
// not_started: nothing was sent.
func TestIdleDropNotStarted(t *testing.T) {
	l := startLab(t, silatest.Options{})
	d := openAdapter(t, l, "")
	l.srv.Stop()
	conformance.Eventually(t, "the link down", linkUp(d, false))
	for _, call := range []func() error{
		func() error {
			_, err := d.Invoke(ctxT(t), mhp.InvokeRequest{Name: "say_hello", Params: map[string]any{"name": "x"}})
			return err
		},
		func() error { _, err := d.Write(ctxT(t), mhp.WriteRequest{Name: "mode", Value: "heat"}); return err },
	} {
		if e, ok := mhp.AsError(call()); !ok || e.Data["outcome"] != mhp.OutcomeNotStarted {
			t.Fatalf("actuation after an idle drop: %v, want not_started", e)
		}
	}
	if st := deviceState(t, d); st != mhp.StateIdle {
		t.Fatalf("state %s after an idle drop, want idle (no fault)", st)
	}
}

// TestIntermediateResponsesDescribed: an observable command's intermediate
// responses are listed, with their types, in its action's notes.
func TestIntermediateResponsesDescribed(t *testing.T) {
	l := startLab(t, silatest.Options{})
	d := openAdapter(t, l, "")
	desc := d.Descriptor()
	a, ok := desc.Action("control_temperature")
	if !ok {
		t.Fatal("no control_temperature action")
	}
	if !strings.Contains(a.Notes, "Intermediate responses") || !strings.Contains(a.Notes, "current_temperature (number") {
		t.Fatalf("notes %q do not list the intermediate response current_temperature with its type", a.Notes)
	}
	if q, _ := desc.Action("say_hello"); strings.Contains(q.Notes, "Intermediate") {
		t.Fatalf("an unobservable command lists intermediate responses: %q", q.Notes)
	}
}

// TestBrokenStreamIsNotALinkDrop: a server that ends its streams
// UNAVAILABLE on a healthy connection has not gone away: the subscriptions
// resubscribe and the backend link never reports down.
func TestBrokenStreamIsNotALinkDrop(t *testing.T) {
	l := startLab(t, silatest.Options{})
	d := openAdapter(t, l, "")
	var downs atomic.Int32
	d.Listen(func(n mhp.Notification) {
		if b, ok := n.Params["backend"].(*mhp.BackendLink); ok && n.Method == mhp.NotifyBackendLink && !b.Connected {
			downs.Add(1)
		}
	})
	sub := "TemperatureController/CurrentTemperature"
	conformance.Eventually(t, "the subscription", func() bool { return l.srv.Calls(sub) > 0 })
	before := l.srv.Calls(sub)
	l.srv.BreakStreams()
	conformance.Eventually(t, "the resubscription", func() bool { return l.srv.Calls(sub) > before })
	if n := downs.Load(); n != 0 || !d.Link().Connected {
		t.Fatalf("a broken stream on a live connection reported the link down (%d times, link %+v)", n, d.Link())
	}
}

// TestRefusedConnectionNeverSent: the error gRPC gives for a server that is
// not listening is classified as never sent (what makes a command
// not_started rather than unknown).
func TestRefusedConnectionNeverSent(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c, err := sila2.Dial(ctxT(t), sila2.ClientConfig{Endpoint: addr, TLS: sila2.TLSConfig{InsecurePlaintext: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.FeatureDefinitions(ctxT(t))
	var ce *sila2.ConnectionError
	if !errors.As(err, &ce) || !ce.NeverSent() {
		t.Fatalf("refused connection: %v, want a ConnectionError that was never sent", err)
	}
	if c.Connected() {
		t.Fatal("a channel without a server reads connected")
	}
}
