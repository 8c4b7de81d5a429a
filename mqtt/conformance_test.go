package mqtt_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/clock"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/mqtt"
	"github.com/openmhp/mhp-go/mqtt/mqtttest"
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
	b := newBroker(t, "127.0.0.1:0")
	return brokerEnv{name: "mochi", deviceAddr: b.Addr(), adapterAddr: b.Addr(),
		dropAdapter: func(id string) {
			// The suite may drop an adapter that is still reconnecting
			// (not connected: nothing to drop); say so, it is not a failure.
			if !b.Drop(id) {
				t.Logf("broker: %s was not connected, or the broker did not forget it within 5s", id)
			}
		},
		killDevice: func(id string) func() {
			b.Ban(id, true)
			b.Kick(id)
			return func() {
				if !b.Gone(id) {
					t.Errorf("broker: %s was not forgotten within 5s of its kick", id)
				}
				b.Ban(id, false)
			}
		},
		retained: b.Retained,
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
	fake     *mqtttest.Device
	drv      *binding.Driver
	a        *mqtt.Adapter
	clk      *clock.Manual
	prefix   string
	deviceID string
}

// runID keeps topics and client ids of one test run apart on a shared broker.
var runID = func() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}()

func startFixture(t testing.TB, env brokerEnv, opt conformance.Options, edit func(*mqtt.Config)) *mqttFixture {
	t.Helper()
	return startFixtureLog(t, env, opt, edit, quietLogger())
}

// startFixtureLog is startFixture with clientLog as the logger of the
// adapter's broker client.
func startFixtureLog(t testing.TB, env brokerEnv, opt conformance.Options, edit func(*mqtt.Config), clientLog *slog.Logger) *mqttFixture {
	t.Helper()
	n := fixtureSeq.Add(1)
	prefix := fmt.Sprintf("lab/%s/fix%d", runID, n)
	adapterID := fmt.Sprintf("adapter-%s-%d", runID, n)
	in := conformance.NewInstrument()
	f := &mqttFixture{env: env, in: in, prefix: prefix, clk: clock.NewManual(time.Now()), deviceID: fmt.Sprintf("device-%s-%d", runID, n)}
	f.fake = newDevice(t, mqtttest.DeviceConfig{Broker: env.deviceAddr, Prefix: prefix, ClientID: f.deviceID,
		Instrument: in, Drop: func() { env.dropAdapter(adapterID) }})
	cfg := mqtttest.FixtureConfig(prefix, env.adapterAddr, adapterID)
	cfg.Safety.WatchdogS = opt.WatchdogS
	if edit != nil {
		edit(&cfg)
	}
	client, err := mqtt.DialPaho(mqtt.DialOptions{Broker: env.adapterAddr, ClientID: adapterID, ConnectTimeout: 5 * time.Second,
		MaxReconnectInterval: 200 * time.Millisecond, Logger: clientLog})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	drv, a, err := mqtt.NewWithAdapter(context.Background(), cfg, mqtt.Options{Client: client, Options: adapters.Options{
		Clock: f.clk, Logger: quietLogger(), Refine: pollEvery(20 * time.Millisecond)}})
	if err != nil {
		t.Fatalf("New: %v", err)
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
		f.waitSeen(t, s.Name, f.fake.SignalPayload(s.Name))
	}
	conformance.EventuallyWithin(t, "availability online", 5*time.Second, a.OnlineNow)
	return f
}

// pollEvery is a Refine that sets the driver's poll interval.
func pollEvery(d time.Duration) func(*binding.Config) error {
	return func(bc *binding.Config) error { bc.PollInterval = d; return nil }
}

// waitSeen waits until the adapter holds payload as the signal's last message.
func (f *mqttFixture) waitSeen(t testing.TB, name string, payload []byte) {
	t.Helper()
	var last string
	defer func() {
		if t.Failed() {
			t.Logf("last seen for %s: %s; retained at broker: %d; state %+v", name, last,
				f.env.retained(f.prefix+"/signal/"+name), f.a.Client().State())
		}
	}()
	conformance.EventuallyWithin(t, fmt.Sprintf("adapter to see %s=%s", name, payload), 5*time.Second, func() bool {
		raw, conn, ok := f.a.LastRaw(name)
		if ok {
			last = fmt.Sprintf("%s conn %d (client conn %+v)", raw, conn, f.a.Client().State())
		}
		if !ok || conn != f.a.Client().State().Conn {
			return len(payload) == 0 // nothing since the reconnect: as good as empty
		}
		return bytes.Equal(raw, payload)
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
	p := b.f.fake.PublishSignal(ctx, name)
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
