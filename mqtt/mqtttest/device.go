package mqtttest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/mqtt"
)

// Device is a fake MQTT device speaking the plain-JSON convention of
// [FixtureConfig], backed by a [conformance.Instrument]; it talks to the
// broker through its own paho client and publishes its availability as
// its last will:
//
//	<p>/status            retained online / offline (its last will)
//	<p>/signal/<name>     retained {"value": v}; empty = unavailable
//	<p>/set/<name>        <- {"id", "value"}; reply on <p>/set/reply {"id","status"}
//	<p>/act/<name>        <- {...params, "job"}; replies on <p>/reply/<name>
//	<p>/cancel/<name>     <- {"job"}
//	<p>/estop             <- {"id", "estop"}; ack on <p>/estop/ack {"id","status"}
//
// When the instrument says the link dropped (FailUnknown), the device calls
// [DeviceConfig.Drop] to cut the adapter's broker connection, as a real
// network fault would.
type Device struct {
	log    *slog.Logger
	in     *conformance.Instrument
	c      *mqtt.PahoClient
	prefix string
	drop   func() // cuts the adapter's connection

	mu     sync.Mutex
	work   map[string]*conformance.Work // job id -> work
	closed bool
	wg     sync.WaitGroup // replies in flight
	once   sync.Once      // Close
}

// DeviceConfig says where a [Device] connects and what it plays.
type DeviceConfig struct {
	// Broker is the broker address (tcp://host:port).
	Broker string
	// Prefix starts every topic of the device ("lab/x": lab/x/status, ...).
	Prefix string
	// ClientID is the device's MQTT client id.
	ClientID string
	// Instrument is the device model; required.
	Instrument *conformance.Instrument
	// Drop cuts the adapter's broker connection (for example with
	// [Broker.Drop]); nil does nothing, so the outcome stays unknown only
	// until the job deadline.
	Drop func()
	// Logger receives what the device could not publish; default discard.
	Logger *slog.Logger
}

// NewDevice connects a fake device and waits, bounded by ctx, until it is
// connected and subscribed to its command topics; at every connect it
// announces itself online and publishes every signal, retained. Close
// disconnects it.
func NewDevice(ctx context.Context, cfg DeviceConfig) (*Device, error) {
	if cfg.Instrument == nil {
		return nil, errors.New("mqtttest: NewDevice needs an Instrument")
	}
	drop := cfg.Drop
	if drop == nil {
		drop = func() {}
	}
	log := cfg.Logger
	if log == nil {
		log = quiet()
	}
	prefix := cfg.Prefix
	f := &Device{log: log, in: cfg.Instrument, prefix: prefix, drop: drop, work: map[string]*conformance.Work{}}
	will := &mqtt.Will{Topic: prefix + "/status", Payload: []byte("offline"), QoS: 1, Retain: true}
	c, err := mqtt.DialPaho(mqtt.DialOptions{Broker: cfg.Broker, ClientID: cfg.ClientID, Will: will, ConnectTimeout: 5 * time.Second,
		MaxReconnectInterval: 200 * time.Millisecond, Logger: quiet(), OnConnect: f.announce})
	if err != nil {
		return nil, fmt.Errorf("mqtttest: device: %w", err)
	}
	f.c = c
	desc := conformance.FixtureDescriptor()
	for _, s := range desc.Settings {
		name := s.Name
		err = errors.Join(err, f.sub(ctx, prefix+"/set/"+name, func(m mqtt.Message) { f.onSet(name, m) }))
	}
	for _, a := range desc.Actions {
		name := a.Name
		err = errors.Join(err,
			f.sub(ctx, prefix+"/act/"+name, func(m mqtt.Message) { f.onAct(name, m) }),
			f.sub(ctx, prefix+"/cancel/"+name, func(m mqtt.Message) { f.onCancel(m) }))
	}
	err = errors.Join(err, f.sub(ctx, prefix+"/estop", f.onEStop))
	if err == nil {
		err = mqtt.WaitUp(ctx, c)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("mqtttest: device: %w", err)
	}
	return f, nil
}

// Close releases the instrument's blocked work, waits for the replies in
// flight and disconnects cleanly (the broker does not publish the will).
func (f *Device) Close() {
	f.once.Do(func() {
		f.in.ReleaseAll()
		f.mu.Lock()
		f.closed = true
		f.mu.Unlock()
		f.wg.Wait()
		_ = f.c.Close()
	})
}

func (f *Device) sub(ctx context.Context, filter string, fn func(mqtt.Message)) error {
	if err := f.c.Subscribe(ctx, filter, 1, fn); err != nil {
		return fmt.Errorf("subscribe %s: %w", filter, err)
	}
	return nil
}

// announce runs after every connect: online, then every signal, retained.
func (f *Device) announce(ctx context.Context, c mqtt.Client) {
	_ = c.Publish(ctx, f.prefix+"/status", 1, true, []byte("online"))
	for _, s := range conformance.FixtureDescriptor().Signals {
		if err := c.Publish(ctx, f.prefix+"/signal/"+s.Name, 1, true, f.SignalPayload(s.Name)); err != nil {
			f.log.Warn("mqtttest: device: publish", "signal", s.Name, "err", err)
		}
	}
}

// SignalPayload is the retained payload of a signal: {"value": v}, or
// empty when the instrument has no value.
func (f *Device) SignalPayload(name string) []byte {
	v, err := f.in.ReadSignal(name)
	if err != nil {
		return nil
	}
	b, _ := json.Marshal(map[string]any{"value": v})
	return b
}

// PublishSignal publishes the signal's current value (retained, QoS 1) as
// [Device.SignalPayload] and returns the payload; after
// [conformance.Instrument.SetSignal] it tells the adapter.
func (f *Device) PublishSignal(ctx context.Context, name string) []byte {
	p := f.SignalPayload(name)
	if err := f.c.Publish(ctx, f.prefix+"/signal/"+name, 1, true, p); err != nil {
		f.log.Warn("mqtttest: device: publish", "signal", name, "err", err)
	}
	return p
}

// async runs fn off paho's message goroutine (handlers must not block).
func (f *Device) async(fn func(ctx context.Context)) {
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

func (f *Device) reply(ctx context.Context, topic string, v any) {
	b, _ := json.Marshal(v)
	if err := f.c.Publish(ctx, topic, 1, false, b); err != nil {
		f.log.Warn("mqtttest: device: reply", "topic", topic, "err", err)
	}
}

func (f *Device) onSet(name string, m mqtt.Message) {
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

func (f *Device) onAct(name string, m mqtt.Message) {
	var params map[string]any
	if json.Unmarshal(m.Payload, &params) != nil {
		return
	}
	id, _ := params["job"].(string)
	delete(params, "job")
	topic := f.prefix + "/reply/" + name
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

func (f *Device) onCancel(m mqtt.Message) {
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

func (f *Device) onEStop(m mqtt.Message) {
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

// FixtureConfig is the adapter config of the conformance fixture
// ([conformance.FixtureDescriptor]) on a [Device]'s topics under prefix:
// availability, JSON signals at /value, settings acknowledged on
// <prefix>/set/reply, actions replying on <prefix>/reply/<name>, the
// estop acknowledged. The adapter connects to broker as clientID.
func FixtureConfig(prefix, broker, clientID string) mqtt.Config {
	desc := conformance.FixtureDescriptor()
	cfg := mqtt.Config{
		Common:       adapters.Common{Adapter: mqtt.Kind, Device: desc.DeviceInfo, Safety: desc.Safety},
		Broker:       broker,
		ClientID:     clientID,
		Availability: &mqtt.Availability{Topic: prefix + "/status"},
		EStop:        &mqtt.EStopConfig{Topic: prefix + "/estop", Ack: &mqtt.Ack{Topic: prefix + "/estop/ack"}},
	}
	for _, s := range desc.Signals {
		cfg.Signals = append(cfg.Signals, mqtt.SignalConfig{Signal: s, Topic: prefix + "/signal/" + s.Name, Path: "/value"})
	}
	for _, s := range desc.Settings {
		cfg.Settings = append(cfg.Settings, mqtt.SettingConfig{Setting: s, CommandTopic: prefix + "/set/" + s.Name,
			Ack: &mqtt.Ack{Topic: prefix + "/set/reply"}, Timeout: 8 * time.Second})
	}
	for _, a := range desc.Actions {
		ac := mqtt.ActionConfig{Action: a, CommandTopic: prefix + "/act/" + a.Name, ReplyTopic: prefix + "/reply/+",
			ResultField: "result"}
		if a.Cancellable {
			ac.CancelTopic = prefix + "/cancel/" + a.Name
		}
		cfg.Actions = append(cfg.Actions, ac)
	}
	return cfg
}
