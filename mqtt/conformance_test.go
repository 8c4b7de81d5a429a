package mqtt

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/clock"
	"github.com/openmhp/mhp-go/conformance"
)

var fixtureSeq atomic.Int64

// mqttFixture is one device under test: embedded broker, fake device on
// it, and the adapter's driver, all fresh.
type mqttFixture struct {
	broker *testBroker
	in     *conformance.Instrument
	fake   *fakeDevice
	drv    *binding.Driver
	a      *adapter
	clk    *clock.Manual
	prefix string
}

func startFixture(t *testing.T, opt conformance.Options, edit func(*Config)) *mqttFixture {
	t.Helper()
	n := fixtureSeq.Add(1)
	b := newBroker(t)
	prefix := fmt.Sprintf("lab/fix%d", n)
	adapterID := fmt.Sprintf("adapter-%d", n)
	in := conformance.NewInstrument()
	f := &mqttFixture{broker: b, in: in, prefix: prefix, clk: clock.NewManual(time.Now())}
	f.fake = newFakeDevice(t, b, prefix, fmt.Sprintf("device-%d", n), in, func() { b.drop(adapterID) })
	cfg := fixtureConfig(prefix, b.addr, adapterID)
	cfg.Safety.WatchdogS = opt.WatchdogS
	if edit != nil {
		edit(&cfg)
	}
	client, err := DialPaho(DialOptions{Broker: b.addr, ClientID: adapterID, ConnectTimeout: 5 * time.Second,
		MaxReconnectInterval: 200 * time.Millisecond, Logger: quietLogger()})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	drv, a, err := newDriver(cfg, client, binding.Config{Clock: f.clk, Logger: quietLogger(), PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatalf("newDriver: %v", err)
	}
	f.drv, f.a = drv, a
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := drv.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		in.ReleaseAll()
		_ = drv.Close()
	})
	// the retained state must have arrived before the suite looks
	for _, s := range conformance.FixtureDescriptor().Signals {
		f.waitSeen(t, s.Name, f.fake.signalPayload(s.Name))
	}
	within(t, 5*time.Second, "availability online", func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.online != nil && *a.online && a.onlineConn == a.c.State().Conn
	})
	return f
}

// waitSeen waits until the adapter holds payload as the signal's last message.
func (f *mqttFixture) waitSeen(t testing.TB, name string, payload []byte) {
	t.Helper()
	var last string
	defer func() {
		if t.Failed() {
			topic := f.prefix + "/signal/" + name
			cl, ok := f.broker.srv.Clients.Get(f.a.cfg.ClientID)
			closed := ok && cl.Closed()
			t.Logf("last seen for %s: %s; retained at broker: %d; subscribers: %+v; client known %v closed %v; state %+v", name, last,
				len(f.broker.srv.Topics.Messages(topic)), f.broker.srv.Topics.Subscribers(topic), ok, closed, f.a.c.State())
		}
	}()
	within(t, 5*time.Second, fmt.Sprintf("adapter to see %s=%s", name, payload), func() bool {
		f.a.mu.Lock()
		defer f.a.mu.Unlock()
		s, ok := f.a.values[name]
		if ok {
			last = fmt.Sprintf("%s conn %d (client conn %+v)", s.raw, s.conn, f.a.c.State())
		}
		if !ok || s.conn != f.a.c.State().Conn {
			return len(payload) == 0 // nothing since the reconnect: as good as empty
		}
		return bytes.Equal(s.raw, payload)
	})
}

// mqttBackend is the suite's view of the fake: the instrument, plus signal
// changes published on the broker (and seen by the adapter) before return.
type mqttBackend struct {
	*conformance.Instrument
	f *mqttFixture
	t testing.TB
}

func (b mqttBackend) publish(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p := b.f.fake.publishSignal(ctx, name)
	b.f.waitSeen(b.t, name, p)
}

func (b mqttBackend) SetSignal(name string, v any) {
	b.Instrument.SetSignal(name, v)
	b.publish(name)
}

func (b mqttBackend) SetUnavailable(name string, u bool) {
	b.Instrument.SetUnavailable(name, u)
	b.publish(name)
}

func mqttHarness(t *testing.T, opt conformance.Options) *conformance.Fixture {
	t.Helper()
	f := startFixture(t, opt, nil)
	return &conformance.Fixture{
		Device:  mhp.AsSession(f.drv, conformance.MemorySessionA),
		Other:   mhp.AsSession(f.drv, conformance.MemorySessionB),
		Backend: mqttBackend{Instrument: f.in, f: f, t: t},
		Advance: f.clk.Advance,
	}
}

// TestConformance runs the whole conformance suite through the adapter,
// against the fake MQTT device on the embedded broker.
func TestConformance(t *testing.T) {
	conformance.Run(t, mqttHarness)
}
