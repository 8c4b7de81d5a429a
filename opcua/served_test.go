package opcua

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/opcua/opcuatest"
)

// servedBackend is the suite's view of the fake: the instrument, plus a
// signal change waited for until the adapter serves it. The adapter serves
// every signal but the interlocks from its subscription, which hears of a
// change a sampling and a publishing interval after the instrument made it
// (the fake's watch loop notices it, then gopcua publishes it), while the
// suite reads right after SetSignal. Without the wait a read after the
// subscription's first value returned the value before the change (the
// TestConformance/read/named flake: it passed only while a slow start had
// not yet delivered the first value, so the read went to the server).
type servedBackend struct {
	*conformance.Instrument
	t    testing.TB
	d    *binding.Driver
	srv  *opcuatest.Server
	live map[string]bool // interlocks: read from the server, not the subscription
}

func newServedBackend(t testing.TB, d *binding.Driver, srv *opcuatest.Server, cfg Config) servedBackend {
	live := map[string]bool{}
	for _, n := range cfg.Safety.Interlocks {
		live[n] = true
	}
	for _, s := range cfg.Settings {
		for _, n := range s.Interlocks {
			live[n] = true
		}
	}
	for _, a := range cfg.Actions {
		for _, n := range a.Interlocks {
			live[n] = true
		}
	}
	return servedBackend{Instrument: srv.In, t: t, d: d, srv: srv, live: live}
}

// SetSignal implements conformance.Backend.
func (b servedBackend) SetSignal(name string, v any) {
	b.Instrument.SetSignal(name, v)
	b.waitServed(name)
}

// SetUnavailable implements conformance.Backend.
func (b servedBackend) SetUnavailable(name string, u bool) {
	b.Instrument.SetUnavailable(name, u)
	b.waitServed(name)
}

// waitSubscribed waits until every signal that is not an interlock is
// served from the subscription: the first values arrived.
func (b servedBackend) waitSubscribed() {
	b.t.Helper()
	for _, s := range conformance.FixtureDescriptor().Signals {
		b.waitServed(s.Name)
	}
}

// waitServed waits until a read of name answers the instrument's value
// (null when it is unavailable), served from the subscription unless name
// is an interlock. A read served from the subscription leaves the fake's
// read counter alone.
func (b servedBackend) waitServed(name string) {
	b.t.Helper()
	if b.t.Failed() {
		return // a deferred restore after a failure: nothing more to check
	}
	want, err := b.Instrument.ReadSignal(name)
	unavailable := err != nil
	desc := fmt.Sprintf("the adapter to serve %s=%v from its subscription", name, want)
	if unavailable {
		desc = fmt.Sprintf("the adapter to serve %s as unavailable", name)
	}
	conformance.EventuallyWithin(b.t, desc, 5*time.Second, func() bool {
		before := b.srv.Reads()
		r, err := b.d.Read(context.Background(), []string{name})
		if err != nil || !b.live[name] && b.srv.Reads() != before {
			return false
		}
		v, ok := r.Values[name]
		if unavailable {
			return ok && v == nil
		}
		return reflect.DeepEqual(v, want)
	})
}
