package ros2

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/clock"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/ros2/rosbridgetest"
)

// TestConformance runs the whole MHP behavioural suite through the adapter,
// over a real WebSocket, against the fake rosbridge server backed by the
// conformance Instrument.
func TestConformance(t *testing.T) {
	conformance.Run(t, rosHarness)
}

// Fixture items on the fake robot: signals are latched topics, settings
// are services (an honest ack, so refusals are expressible), long actions are
// ROS 2 action servers, short ones services, estop a Trigger service.
var fixtureTopics = map[string]struct{ topic, typ string }{
	conformance.SignalTemperature: {"/fixture/temperature", "std_msgs/msg/Float64"},
	conformance.SignalDoorClosed:  {"/fixture/door_closed", "std_msgs/msg/Bool"},
}

// rosBackend is the Instrument plus the fake robot's topics: a signal change
// is published and awaited at the adapter, as a sensor update would be.
type rosBackend struct {
	*conformance.Instrument
	t   *testing.T
	srv *rosbridgetest.Server
	a   *adapter

	mu     sync.Mutex
	sticky map[string]bool // released before the start reached the robot
}

// Release lets blocked work go. A check may release right after the job
// turned running, before the goal crossed the WebSocket and started at the
// instrument; the release then applies to that start too.
func (b *rosBackend) Release(name string) {
	b.mu.Lock()
	b.sticky[name] = true
	b.mu.Unlock()
	b.Instrument.Release(name)
}

// Script sets a behaviour and forgets an earlier release.
func (b *rosBackend) Script(name string, bh conformance.Behaviour) {
	b.mu.Lock()
	delete(b.sticky, name)
	b.mu.Unlock()
	b.Instrument.Script(name, bh)
}

// start starts work at the instrument, honouring an early release.
func (b *rosBackend) start(name string, params map[string]any) (*conformance.Work, error) {
	w, err := b.Instrument.Start(name, params)
	b.mu.Lock()
	early := b.sticky[name]
	delete(b.sticky, name)
	b.mu.Unlock()
	if err == nil && early {
		b.Instrument.Release(name)
	}
	return w, err
}

func (b *rosBackend) SetSignal(name string, v any) {
	b.Instrument.SetSignal(name, v)
	b.publish(name)
}

func (b *rosBackend) SetUnavailable(name string, u bool) {
	b.Instrument.SetUnavailable(name, u)
	b.publish(name)
}

// publish sends the instrument's current value (NaN, which rosbridge sends
// as null, when unavailable) and waits until the adapter has taken it in.
func (b *rosBackend) publish(name string) {
	v, err := b.Instrument.ReadSignal(name)
	if err != nil {
		v = math.NaN()
	}
	tv := b.a.signals[name]
	before := tv.sequence()
	b.srv.Publish(fixtureTopics[name].topic, map[string]any{"data": v})
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := tv.waitSeq(ctx, before); err != nil {
		b.t.Errorf("signal %s: the adapter never received the update: %v", name, err)
	}
	// A check may have cut the link (an unknown outcome): every signal is
	// fresh again once the client resubscribed and got the latched values.
	for n, other := range b.a.signals {
		if err := other.waitSeq(ctx, 0); err != nil {
			b.t.Errorf("signal %s: no fresh message after a reconnect: %v", n, err)
		}
	}
}

// waitSeq waits until a message (not a lost link) arrived after sequence
// number after and the link is up.
func (tv *topicValue) waitSeq(ctx context.Context, after uint64) error {
	for {
		tv.mu.Lock()
		seq, ch, up := tv.seq, tv.changed, tv.lost == nil
		tv.mu.Unlock()
		if seq > after && up {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func rosHarness(t *testing.T, opt conformance.Options) *conformance.Fixture {
	t.Helper()
	in := conformance.NewInstrument()
	srv := rosbridgetest.New(rosbridgetest.Options{})
	bk := &rosBackend{Instrument: in, t: t, srv: srv, sticky: map[string]bool{}}
	for name, tp := range fixtureTopics {
		srv.AddTopic(tp.topic, tp.typ, true)
		v, _ := in.ReadSignal(name)
		srv.Publish(tp.topic, map[string]any{"data": v})
	}
	desc := conformance.FixtureDescriptor()
	cfg := Config{
		Common: adapters.Common{Adapter: Kind, Device: desc.DeviceInfo, Safety: desc.Safety},
		URL:    srv.URL(),
		EStop:  &EStopConfig{Service: "/fixture/estop", TimeoutS: 2},
	}
	cfg.Safety.WatchdogS = opt.WatchdogS
	cfg.Reconnect.InitialS = 0.01
	for _, s := range desc.Signals {
		tp := fixtureTopics[s.Name]
		cfg.Signals = append(cfg.Signals, SignalConfig{Signal: s, Topic: tp.topic, MsgType: tp.typ})
	}
	for _, s := range desc.Settings {
		service := "/fixture/set_" + s.Name
		cfg.Settings = append(cfg.Settings, SettingConfig{Setting: s, Service: service})
		srv.AddService(service, "fixture_msgs/srv/Set", settingService(in, s.Name))
	}
	for _, a := range desc.Actions {
		ac := ActionConfig{Action: a}
		if a.Duration == mhp.DurationLong {
			ac.ROSAction, ac.ActionType, ac.ProgressField = "/fixture/"+a.Name, "fixture_msgs/action/"+a.Name, "progress"
			srv.AddAction(ac.ROSAction, ac.ActionType, actionServer(srv, bk, a.Name))
		} else {
			ac.Service = "/fixture/" + a.Name
			srv.AddService(ac.Service, "fixture_msgs/srv/"+a.Name, actionService(bk, a.Name))
		}
		cfg.Actions = append(cfg.Actions, ac)
	}
	srv.AddService("/fixture/estop", "std_srvs/srv/Trigger", func(ctx context.Context, c *rosbridgetest.Call) (any, error) {
		if err := in.Stop(); err != nil {
			return map[string]any{"success": false, "message": err.Error()}, nil
		}
		return map[string]any{"success": true, "message": "stopped"}, nil
	})

	clk := clock.NewManual(time.Now())
	a, d, err := build(cfg, Options{Options: adapters.Options{Clock: clk, Logger: quiet(), Refine: func(bc *binding.Config) error {
		bc.PollInterval = 20 * time.Millisecond
		return nil
	}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := d.Start(ctx); err != nil {
		t.Fatalf("start: %v", err)
	}
	bk.a = a
	for name := range fixtureTopics {
		if err := a.signals[name].waitSeq(ctx, 0); err != nil {
			t.Fatalf("latched %s never arrived: %v", name, err)
		}
	}
	t.Cleanup(func() {
		in.ReleaseAll()
		if err := d.Close(); err != nil {
			t.Errorf("driver close: %v", err)
		}
		srv.Close()
	})
	return &conformance.Fixture{
		Device:  mhp.AsSession(d, "session-a"),
		Other:   mhp.AsSession(d, "session-b"),
		Backend: bk,
		Advance: clk.Advance,
	}
}

// settingService applies a write at the instrument: success, a refusal
// (success:false, nothing changed), a dropped link, or no answer.
func settingService(in *conformance.Instrument, name string) rosbridgetest.ServiceFunc {
	return func(ctx context.Context, c *rosbridgetest.Call) (any, error) {
		var args struct {
			Data any `json:"data"`
		}
		if err := c.Decode(&args); err != nil {
			return nil, rosbridgetest.BadArgs("fixture_msgs/SetRequest", "data", "value", "<unparsable>")
		}
		err := in.WriteSetting(ctx, name, args.Data)
		switch {
		case err == nil:
			return map[string]any{"success": true, "message": ""}, nil
		case errors.Is(err, conformance.ErrRefused), errors.Is(err, conformance.ErrReported):
			return map[string]any{"success": false, "message": err.Error()}, nil
		case errors.Is(err, conformance.ErrDropped):
			return nil, rosbridgetest.Drop
		}
		return nil, rosbridgetest.NoReply
	}
}

// actionService runs a short action's work as a service call.
func actionService(in *rosBackend, name string) rosbridgetest.ServiceFunc {
	return func(ctx context.Context, c *rosbridgetest.Call) (any, error) {
		var params map[string]any
		_ = c.Decode(&params)
		w, err := in.start(name, params)
		if err != nil {
			return map[string]any{"success": false, "message": err.Error()}, nil
		}
		select {
		case <-w.Done():
		case <-ctx.Done():
			return nil, rosbridgetest.NoReply
		}
		state, result, werr := w.State()
		switch state {
		case conformance.WorkSucceeded:
			out := map[string]any{"success": true}
			if m, ok := result.(map[string]any); ok {
				for k, v := range m {
					out[k] = v
				}
			}
			return out, nil
		case conformance.WorkDropped:
			return nil, rosbridgetest.Drop
		}
		return map[string]any{"success": false, "message": fmt.Sprintf("%s: %v", state, werr)}, nil
	}
}

// actionServer runs a long action's work as a ROS 2 goal: feedback with the
// work's progress, cancel requests passed to the work, the work's end as
// the terminal status; a dropped work cuts the link.
func actionServer(srv *rosbridgetest.Server, in *rosBackend, name string) rosbridgetest.ActionFunc {
	return func(g *rosbridgetest.Goal) {
		var params map[string]any
		_ = g.Decode(&params)
		w, err := in.start(name, params)
		if err != nil {
			g.Finish(rosbridgetest.StatusAborted, map[string]any{"error": err.Error()}, "")
			return
		}
		last := -1.0
		report := func() {
			if p := w.Progress(); p != last {
				last = p
				g.Feedback(map[string]any{"progress": p})
			}
		}
		report()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		cancel := g.CancelRequested()
	loop:
		for {
			select {
			case <-tick.C:
				report()
			case <-w.Done():
				break loop
			case <-cancel:
				w.Cancel()
				cancel = nil
			}
		}
		state, result, werr := w.State()
		switch state {
		case conformance.WorkSucceeded:
			g.Finish(rosbridgetest.StatusSucceeded, result, "")
		case conformance.WorkCancelled:
			g.Finish(rosbridgetest.StatusCanceled, map[string]any{}, "")
		case conformance.WorkFailed:
			g.Finish(rosbridgetest.StatusAborted, map[string]any{"error": fmt.Sprint(werr)}, "")
		default:
			srv.Drop()
		}
	}
}
