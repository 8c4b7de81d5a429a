package mqtt

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/conformance"
)

// fakeDevice is a device speaking the plain-JSON MQTT convention of
// fixtureConfig, backed by a conformance.Instrument:
//
//	<p>/status            retained online / offline (its last will)
//	<p>/signal/<name>     retained {"value": v}; empty = unavailable
//	<p>/set/<name>        <- {"id", "value"}; reply on <p>/set/reply {"id","status"}
//	<p>/act/<name>        <- {...params, "job"}; replies on <p>/reply/<name>
//	<p>/cancel/<name>     <- {"job"}
//	<p>/estop             <- {"id", "estop"}; ack on <p>/estop/ack {"id","status"}
//
// When the instrument says the link dropped (FailUnknown), the fake cuts the
// adapter's broker connection, as a real network fault would.
type fakeDevice struct {
	t      testing.TB
	in     *conformance.Instrument
	c      *PahoClient
	prefix string
	drop   func() // cuts the adapter's connection

	mu      sync.Mutex
	work    map[string]*conformance.Work // job id -> work
	jobsGot []string
	closed  bool
	wg      sync.WaitGroup
}

func newFakeDevice(t testing.TB, addr, prefix, clientID string, in *conformance.Instrument, drop func()) *fakeDevice {
	t.Helper()
	f := &fakeDevice{t: t, in: in, prefix: prefix, drop: drop, work: map[string]*conformance.Work{}}
	will := &Will{Topic: prefix + "/status", Payload: []byte("offline"), QoS: 1, Retain: true}
	c, err := DialPaho(DialOptions{Broker: addr, ClientID: clientID, Will: will, ConnectTimeout: 5 * time.Second,
		MaxReconnectInterval: 200 * time.Millisecond, Logger: quietLogger(), OnConnect: f.announce})
	if err != nil {
		t.Fatalf("fake device: %v", err)
	}
	f.c = c
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	desc := conformance.FixtureDescriptor()
	for _, s := range desc.Settings {
		name := s.Name
		f.sub(ctx, prefix+"/set/"+name, func(m Message) { f.onSet(name, m) })
	}
	for _, a := range desc.Actions {
		name := a.Name
		f.sub(ctx, prefix+"/act/"+name, func(m Message) { f.onAct(name, m) })
		f.sub(ctx, prefix+"/cancel/"+name, func(m Message) { f.onCancel(m) })
	}
	f.sub(ctx, prefix+"/estop", f.onEStop)
	if err := WaitUp(ctx, c); err != nil {
		t.Fatalf("fake device: %v", err)
	}
	t.Cleanup(func() {
		in.ReleaseAll()
		f.mu.Lock()
		f.closed = true
		f.mu.Unlock()
		f.wg.Wait()
		_ = c.Close()
	})
	return f
}

func (f *fakeDevice) sub(ctx context.Context, filter string, fn func(Message)) {
	if err := f.c.Subscribe(ctx, filter, 1, fn); err != nil {
		f.t.Fatalf("fake device subscribe %s: %v", filter, err)
	}
}

// announce runs after every connect: online, then every signal, retained.
func (f *fakeDevice) announce(ctx context.Context, c Client) {
	_ = c.Publish(ctx, f.prefix+"/status", 1, true, []byte("online"))
	for _, s := range conformance.FixtureDescriptor().Signals {
		if err := c.Publish(ctx, f.prefix+"/signal/"+s.Name, 1, true, f.signalPayload(s.Name)); err != nil {
			f.t.Logf("fake device: publish %s: %v", s.Name, err)
		}
	}
}

// signalPayload is the retained payload of a signal: {"value": v}, or
// empty when the instrument has no value.
func (f *fakeDevice) signalPayload(name string) []byte {
	v, err := f.in.ReadSignal(name)
	if err != nil {
		return nil
	}
	b, _ := json.Marshal(map[string]any{"value": v})
	return b
}

func (f *fakeDevice) publishSignal(ctx context.Context, name string) []byte {
	p := f.signalPayload(name)
	if err := f.c.Publish(ctx, f.prefix+"/signal/"+name, 1, true, p); err != nil {
		f.t.Logf("fake device: publish %s: %v", name, err)
	}
	return p
}

// async runs fn off paho's message goroutine (handlers must not block).
func (f *fakeDevice) async(fn func(ctx context.Context)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
	}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		fn(ctx)
	}()
}

func (f *fakeDevice) reply(ctx context.Context, topic string, v any) {
	b, _ := json.Marshal(v)
	if err := f.c.Publish(ctx, topic, 1, false, b); err != nil {
		f.t.Logf("fake device: reply on %s: %v", topic, err)
	}
}

func (f *fakeDevice) onSet(name string, m Message) {
	var req struct {
		ID    string `json:"id"`
		Value any    `json:"value"`
	}
	if json.Unmarshal(m.Payload, &req) != nil {
		return
	}
	f.async(func(ctx context.Context) {
		err := f.in.WriteSetting(ctx, name, req.Value)
		switch {
		case err == nil:
			f.reply(ctx, f.prefix+"/set/reply", map[string]any{"id": req.ID, "status": "ok"})
		case errors.Is(err, conformance.ErrRefused), errors.Is(err, conformance.ErrReported):
			f.reply(ctx, f.prefix+"/set/reply", map[string]any{"id": req.ID, "status": "refused", "error": err.Error()})
		default:
			f.drop()
		}
	})
}

func (f *fakeDevice) onAct(name string, m Message) {
	var params map[string]any
	if json.Unmarshal(m.Payload, &params) != nil {
		return
	}
	id, _ := params["job"].(string)
	delete(params, "job")
	topic := f.prefix + "/reply/" + name
	f.mu.Lock()
	f.jobsGot = append(f.jobsGot, id)
	f.mu.Unlock()
	w, err := f.in.Start(name, params)
	if err != nil {
		f.async(func(ctx context.Context) {
			f.reply(ctx, topic, map[string]any{"job": id, "status": "rejected", "error": err.Error()})
		})
		return
	}
	f.mu.Lock()
	f.work[id] = w
	f.mu.Unlock()
	f.async(func(ctx context.Context) {
		defer func() {
			f.mu.Lock()
			delete(f.work, id)
			f.mu.Unlock()
		}()
		last := -1.0
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			if p := w.Progress(); p != last {
				last = p
				select {
				case <-w.Done():
				default:
					f.reply(ctx, topic, map[string]any{"job": id, "status": "running", "progress": p})
				}
			}
			select {
			case <-w.Done():
				st, res, werr := w.State()
				switch st {
				case conformance.WorkSucceeded:
					f.reply(ctx, topic, map[string]any{"job": id, "status": "done", "result": res})
				case conformance.WorkFailed:
					f.reply(ctx, topic, map[string]any{"job": id, "status": "failed", "error": werr.Error()})
				case conformance.WorkCancelled:
					f.reply(ctx, topic, map[string]any{"job": id, "status": "cancelled"})
				default:
					f.drop() // the link dropped mid-work: nobody learns the end
				}
				return
			case <-tick.C:
			case <-ctx.Done():
				return
			}
		}
	})
}

func (f *fakeDevice) onCancel(m Message) {
	var req struct {
		Job string `json:"job"`
	}
	if json.Unmarshal(m.Payload, &req) != nil {
		return
	}
	f.mu.Lock()
	w := f.work[req.Job]
	f.mu.Unlock()
	if w != nil {
		w.Cancel()
	}
}

func (f *fakeDevice) onEStop(m Message) {
	var req struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(m.Payload, &req)
	err := f.in.Stop()
	f.async(func(ctx context.Context) {
		if err != nil {
			f.reply(ctx, f.prefix+"/estop/ack", map[string]any{"id": req.ID, "status": "failed", "error": err.Error()})
			return
		}
		f.reply(ctx, f.prefix+"/estop/ack", map[string]any{"id": req.ID, "status": "ok"})
	})
}

// fixtureConfig maps the conformance fixture onto the fake's topics.
func fixtureConfig(prefix, broker, clientID string) Config {
	desc := conformance.FixtureDescriptor()
	cfg := Config{
		Common:       adapters.Common{Adapter: Kind, Device: desc.DeviceInfo, Safety: desc.Safety},
		Broker:       broker,
		ClientID:     clientID,
		Availability: &Availability{Topic: prefix + "/status"},
		EStop:        &EStopConfig{Topic: prefix + "/estop", Ack: &Ack{Topic: prefix + "/estop/ack"}},
	}
	for _, s := range desc.Signals {
		cfg.Signals = append(cfg.Signals, SignalConfig{Signal: s, Topic: prefix + "/signal/" + s.Name, Path: "/value"})
	}
	for _, s := range desc.Settings {
		cfg.Settings = append(cfg.Settings, SettingConfig{Setting: s, CommandTopic: prefix + "/set/" + s.Name,
			Ack: &Ack{Topic: prefix + "/set/reply"}, Timeout: 8 * time.Second})
	}
	for _, a := range desc.Actions {
		ac := ActionConfig{Action: a, CommandTopic: prefix + "/act/" + a.Name, ReplyTopic: prefix + "/reply/+",
			ResultField: "result"}
		if a.Cancellable {
			ac.CancelTopic = prefix + "/cancel/" + a.Name
		}
		cfg.Actions = append(cfg.Actions, ac)
	}
	return cfg
}
