package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/mqtt"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// startBroker runs an embedded mochi broker on addr ("127.0.0.1:0" for a
// random port) and returns a stop func and its host:port.
func startBroker(t *testing.T, addr string) (func(), string) {
	t.Helper()
	srv := mochi.New(&mochi.Options{InlineClient: true, Logger: quiet()})
	if err := srv.AddHook(new(auth.AllowHook), nil); err != nil {
		t.Fatal(err)
	}
	l := listeners.NewTCP(listeners.Config{ID: "t", Address: addr})
	if err := srv.AddListener(l); err != nil {
		t.Fatalf("listen %s: %v", addr, err)
	}
	go func() { _ = srv.Serve() }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			// mochi v2.7.9 can deadlock in Close when a client leaves at the
			// same moment (recursive read lock in Clients.GetByListener):
			// never let that hang the test.
			done := make(chan struct{})
			go func() { _ = srv.Close(); close(done) }()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
			}
		})
	}
	t.Cleanup(stop)
	return stop, l.Address()
}

// device is an in-memory MHP device (the conformance reference driver).
func device(t *testing.T) (*binding.Driver, *conformance.Instrument) {
	t.Helper()
	in := conformance.NewInstrument()
	d, err := conformance.MemoryDriver(in, conformance.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.ReleaseAll(); _ = d.Close() })
	return d, in
}

// runPublisher runs a publisher until the test ends.
func runPublisher(t *testing.T, dev mhp.Device, url string) *Publisher {
	t.Helper()
	p, err := New(dev, Config{URL: url, Host: "bench-7", SignalInterval: 20 * time.Millisecond, Logger: quiet(),
		Dial: func(o mqtt.DialOptions) (mqtt.Client, error) {
			o.MaxReconnectInterval = 200 * time.Millisecond // reconnect promptly after the test's outage
			return mqtt.DialPaho(o)
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("Run did not return after cancel")
		}
	})
	return p
}

// collector is a late subscriber recording messages by topic.
type collector struct {
	mu   sync.Mutex
	msgs []mqtt.Message
}

func (c *collector) add(m mqtt.Message) {
	c.mu.Lock()
	c.msgs = append(c.msgs, m)
	c.mu.Unlock()
}

func (c *collector) on(topic string) []mqtt.Message {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []mqtt.Message
	for _, m := range c.msgs {
		if m.Topic == topic {
			out = append(out, m)
		}
	}
	return out
}

func subscribe(t *testing.T, addr, filter string) *collector {
	t.Helper()
	c, err := mqtt.DialPaho(mqtt.DialOptions{Broker: addr, ClientID: "observer-" + randID(), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	col := &collector{}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Subscribe(ctx, filter, 1, col.add); err != nil {
		t.Fatal(err)
	}
	if err := mqtt.WaitUp(ctx, c); err != nil {
		t.Fatal(err)
	}
	return col
}

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		in, broker, prefix, user string
		bad                      bool
	}{
		{in: "mqtt://broker:1883/lab/site1", broker: "tcp://broker:1883", prefix: "lab/site1"},
		{in: "mqtt://broker", broker: "tcp://broker:1883", prefix: DefaultPrefix},
		{in: "broker:1884", broker: "tcp://broker:1884", prefix: DefaultPrefix},
		{in: "mqtts://u:p@broker/x", broker: "ssl://broker:8883", prefix: "x", user: "u"},
		{in: "http://broker", bad: true},
		{in: "mqtt://broker/a/+", bad: true},
	} {
		got, err := ParseURL(tc.in)
		if tc.bad {
			if err == nil {
				t.Errorf("%s: want an error, got %+v", tc.in, got)
			}
			continue
		}
		if err != nil || got.Broker != tc.broker || got.Prefix != tc.prefix || got.Username != tc.user {
			t.Errorf("%s: got %+v, %v; want broker %s prefix %s user %q", tc.in, got, err, tc.broker, tc.prefix, tc.user)
		}
	}
}

func TestRetainedCardVisibleToLateSubscriber(t *testing.T) {
	_, addr := startBroker(t, "127.0.0.1:0")
	dev, _ := device(t)
	p := runPublisher(t, dev, "mqtt://"+addr+"/lab")
	conformance.EventuallyWithin(t, "the publisher to announce", 5*time.Second, func() bool { return p.Status().Published >= 3 })

	// A subscriber that arrives after the fact still gets card, status and state.
	col := subscribe(t, "tcp://"+addr, "lab/conformance-01/#")
	conformance.EventuallyWithin(t, "retained card", 5*time.Second, func() bool { return len(col.on("lab/conformance-01/card")) > 0 })
	var card struct {
		Card map[string]any `json:"card"`
		Host string         `json:"host"`
	}
	if err := json.Unmarshal(col.on("lab/conformance-01/card")[0].Payload, &card); err != nil {
		t.Fatal(err)
	}
	if card.Card["id"] != "conformance-01" || card.Host != "bench-7" {
		t.Fatalf("card %+v, want device conformance-01 on host bench-7", card)
	}
	conformance.EventuallyWithin(t, "retained status online", 5*time.Second, func() bool {
		s := col.on("lab/conformance-01/status")
		return len(s) > 0 && string(s[len(s)-1].Payload) == "online"
	})
	conformance.EventuallyWithin(t, "retained signal", 5*time.Second, func() bool { return len(col.on("lab/conformance-01/signals/temperature")) > 0 })
}

func TestJobAndSafetyEventsCarryUniqueIDs(t *testing.T) {
	_, addr := startBroker(t, "127.0.0.1:0")
	dev, in := device(t)
	col := subscribe(t, "tcp://"+addr, "lab/conformance-01/#")
	p := runPublisher(t, dev, "mqtt://"+addr+"/lab")
	conformance.EventuallyWithin(t, "connected", 5*time.Second, func() bool { return p.Status().Connected })

	ctx := context.Background()
	in.Script(conformance.ActionMonitor, conformance.Block)
	r, err := dev.Invoke(ctx, mhp.InvokeRequest{Name: conformance.ActionMonitor})
	if err != nil {
		t.Fatal(err)
	}
	jobTopic := "lab/conformance-01/jobs/" + r.Job.ID
	conformance.EventuallyWithin(t, "job started event", 5*time.Second, func() bool { return len(col.on(jobTopic)) > 0 })
	if _, err := dev.EStop(ctx, "fleet test"); err != nil {
		t.Fatal(err)
	}
	conformance.EventuallyWithin(t, "safety event and job end", 5*time.Second, func() bool {
		return len(col.on("lab/conformance-01/safety")) > 0 && strings.Contains(lastPayload(col, jobTopic), "finished")
	})
	ids := map[string]bool{}
	var lastSeq float64
	for _, m := range col.on(jobTopic) {
		var ev struct {
			ID     string  `json:"id"`
			Seq    float64 `json:"seq"`
			Method string  `json:"method"`
		}
		if err := json.Unmarshal(m.Payload, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.ID == "" || ids[ev.ID] {
			t.Fatalf("event id %q missing or repeated", ev.ID)
		}
		ids[ev.ID] = true
		if ev.Seq <= lastSeq {
			t.Fatalf("seq %v after %v: events out of order", ev.Seq, lastSeq)
		}
		lastSeq = ev.Seq
	}
	if !strings.Contains(lastPayload(col, "lab/conformance-01/safety"), "estop") {
		t.Fatalf("safety event %s is not the estop", lastPayload(col, "lab/conformance-01/safety"))
	}
	conformance.EventuallyWithin(t, "state estop with no active job", 5*time.Second, func() bool {
		s := lastPayload(col, "lab/conformance-01/state")
		return strings.Contains(s, `"state":"estop"`) && strings.Contains(s, `"jobs":[]`)
	})
}

func lastPayload(c *collector, topic string) string {
	m := c.on(topic)
	if len(m) == 0 {
		return ""
	}
	return string(m[len(m)-1].Payload)
}

// syncBuf is a writer safe for the watcher goroutine and the test.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestWatchShowsFleet(t *testing.T) {
	_, addr := startBroker(t, "127.0.0.1:0")
	dev, in := device(t)
	p := runPublisher(t, dev, "mqtt://"+addr+"/lab")
	conformance.EventuallyWithin(t, "connected", 5*time.Second, func() bool { return p.Status().Connected })

	in.Script(conformance.ActionRun, conformance.Block)
	r, err := dev.Invoke(context.Background(), mhp.InvokeRequest{Name: conformance.ActionRun, Params: map[string]any{"duration_s": 5.0}})
	if err != nil {
		t.Fatal(err)
	}
	out := &syncBuf{}
	view := NewView()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- WatchWith(ctx, WatchConfig{URL: "mqtt://" + addr + "/lab", Every: 10 * time.Millisecond, Logger: quiet(), View: view}, out)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Watch: %v", err)
		}
	}()
	conformance.EventuallyWithin(t, "the running job in the view", 5*time.Second, func() bool {
		for _, d := range view.Devices() {
			if _, ok := d.Jobs[r.Job.ID]; ok && d.State == "busy" && d.Host == "bench-7" && d.Online == "online" {
				return true
			}
		}
		return false
	})
	if _, err := dev.EStop(context.Background(), "operator"); err != nil {
		t.Fatal(err)
	}
	conformance.EventuallyWithin(t, "estop in the printed view", 5*time.Second, func() bool {
		s := out.String()
		i := strings.LastIndex(s, "== fleet")
		if i < 0 {
			return false
		}
		last := s[i:]
		return strings.Contains(last, "conformance-01") && strings.Contains(last, `estop "operator"`) &&
			!strings.Contains(last, r.Job.ID)
	})
}

func TestBrokerOutageLosesNoDeviceFunction(t *testing.T) {
	// Reserve a port, then run a broker on it that we can stop and restart.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	stop, _ := startBroker(t, addr)
	dev, _ := device(t)
	p := runPublisher(t, dev, "mqtt://"+addr+"/lab")
	conformance.EventuallyWithin(t, "connected", 5*time.Second, func() bool { return p.Status().Connected })

	stop()
	conformance.EventuallyWithin(t, "the outage to be reported", 10*time.Second, func() bool {
		s := p.Status()
		return !s.Connected && s.Outages >= 1
	})
	// The device works as before, promptly.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := dev.Write(ctx, mhp.WriteRequest{Name: conformance.SettingSetpoint, Value: 42.0}); err != nil {
		t.Fatalf("write during the outage: %v", err)
	}
	if r, err := dev.EStop(ctx, "during outage"); err != nil || !r.Stopped {
		t.Fatalf("estop during the outage: %+v, %v", r, err)
	}
	if _, err := dev.Reset(ctx); err != nil {
		t.Fatalf("reset during the outage: %v", err)
	}
	if p.Status().Queued == 0 {
		t.Fatalf("events of the outage were not queued: %+v", p.Status())
	}
	// The broker comes back: the queued events go out.
	startBroker(t, addr)
	col := subscribe(t, "tcp://"+addr, "lab/conformance-01/#")
	conformance.EventuallyWithin(t, "the queued safety event after the outage", 15*time.Second, func() bool {
		return strings.Contains(lastPayload(col, "lab/conformance-01/safety"), "reset") && p.Status().Queued == 0
	})
	if !p.Status().Connected {
		t.Fatalf("status not back to connected: %+v", p.Status())
	}
}
