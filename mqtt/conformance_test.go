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

// brokerEnv is where a fixture runs: the addresses the device and the
// adapter dial, and how to cut their links.
type brokerEnv struct {
	name        string
	deviceAddr  string
	adapterAddr string
	// dropAdapter cuts the adapter's link; it may reconnect at once.
	dropAdapter func(adapterID string)
	// killDevice cuts the device's link abruptly and keeps it away until
	// the returned restore runs.
	killDevice func(deviceID string) (restore func())
	// retained counts the broker's retained messages on a topic (-1: unknown).
	retained func(topic string) int
}

// mochiEnv is an embedded mochi broker.
func mochiEnv(t testing.TB) brokerEnv {
	b := newBroker(t)
	return brokerEnv{name: "mochi", deviceAddr: b.addr, adapterAddr: b.addr,
		dropAdapter: func(id string) { b.drop(id) },
		killDevice: func(id string) func() {
			b.ban(id, true)
			b.kick(id)
			return func() { b.gone(id); b.ban(id, false) }
		},
		retained: func(topic string) int { return len(b.srv.Topics.Messages(topic)) },
	}
}

// proxiedEnv is any broker at addr, reached through proxies that cut links.
func proxiedEnv(t testing.TB, name, addr string) brokerEnv {
	dev, ad := newProxy(t, addr), newProxy(t, addr)
	return brokerEnv{name: name, deviceAddr: dev.addr(), adapterAddr: ad.addr(),
		dropAdapter: func(string) { ad.drop() },
		killDevice: func(string) func() {
			dev.pause(true)
			dev.drop()
			return func() { dev.pause(false) }
		},
		retained: func(string) int { return -1 },
	}
}

// mqttFixture is one device under test: broker, fake device on it, and the
// adapter's driver, all fresh.
type mqttFixture struct {
	env      brokerEnv
	in       *conformance.Instrument
	fake     *fakeDevice
	drv      *binding.Driver
	a        *adapter
	clk      *clock.Manual
	prefix   string
	deviceID string
}

// runID keeps topics and client ids of one test run apart on a shared broker.
var runID = newID()[:8]

func startFixture(t testing.TB, env brokerEnv, opt conformance.Options, edit func(*Config)) *mqttFixture {
	t.Helper()
	n := fixtureSeq.Add(1)
	prefix := fmt.Sprintf("lab/%s/fix%d", runID, n)
	adapterID := fmt.Sprintf("adapter-%s-%d", runID, n)
	in := conformance.NewInstrument()
	f := &mqttFixture{env: env, in: in, prefix: prefix, clk: clock.NewManual(time.Now()), deviceID: fmt.Sprintf("device-%s-%d", runID, n)}
	f.fake = newFakeDevice(t, env.deviceAddr, prefix, f.deviceID, in, func() { env.dropAdapter(adapterID) })
	cfg := fixtureConfig(prefix, env.adapterAddr, adapterID)
	cfg.Safety.WatchdogS = opt.WatchdogS
	if edit != nil {
		edit(&cfg)
	}
	client, err := DialPaho(DialOptions{Broker: env.adapterAddr, ClientID: adapterID, ConnectTimeout: 5 * time.Second,
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
			t.Logf("last seen for %s: %s; retained at broker: %d; state %+v", name, last,
				f.env.retained(f.prefix+"/signal/"+name), f.a.c.State())
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

func harness(env func(t testing.TB) brokerEnv) conformance.Harness {
	return func(t *testing.T, opt conformance.Options) *conformance.Fixture {
		t.Helper()
		return startFixture(t, env(t), opt, nil).suiteFixture(t)
	}
}

func (f *mqttFixture) suiteFixture(t *testing.T) *conformance.Fixture {
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
	conformance.Run(t, harness(mochiEnv))
}
