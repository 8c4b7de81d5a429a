package mqtt_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/mqtt"
	"github.com/openmhp/mhp-go/mqtt/mqtttest"
)

// scriptDev is a device played by the test through the broker's inline
// client: it records commands and publishes whatever the test says.
type scriptDev struct {
	b       *mqtttest.Broker
	mu      sync.Mutex
	cmds    map[string][]map[string]any // topic -> decoded commands
	arrived map[string]chan struct{}    // topic -> closed at its first command
}

func newScriptDev(t *testing.T, b *mqtttest.Broker, filter string) *scriptDev {
	t.Helper()
	s := &scriptDev{b: b, cmds: map[string][]map[string]any{}, arrived: map[string]chan struct{}{}}
	err := b.Subscribe(filter, func(m mqtt.Message) {
		var doc map[string]any
		_ = json.Unmarshal(m.Payload, &doc)
		if doc == nil {
			doc = map[string]any{"raw": string(m.Payload)}
		}
		s.mu.Lock()
		s.cmds[m.Topic] = append(s.cmds[m.Topic], doc)
		if ch, ok := s.arrived[m.Topic]; ok && len(s.cmds[m.Topic]) == 1 {
			close(ch)
		}
		s.mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// first is closed when the first command on topic has arrived.
func (s *scriptDev) first(topic string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.arrived[topic]
	if !ok {
		ch = make(chan struct{})
		s.arrived[topic] = ch
		if len(s.cmds[topic]) > 0 {
			close(ch)
		}
	}
	return ch
}

// firstWithin waits for the first command on topic (off the test
// goroutine: it reports with t.Error, not t.Fatal).
func (s *scriptDev) firstWithin(t *testing.T, topic string, d time.Duration) bool {
	select {
	case <-s.first(topic):
		return true
	case <-time.After(d):
		t.Errorf("no command on %s within %v", topic, d)
		return false
	}
}

func (s *scriptDev) got(topic string) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string]any(nil), s.cmds[topic]...)
}

func (s *scriptDev) send(t *testing.T, topic string, v any, retain bool) {
	t.Helper()
	var b []byte
	switch x := v.(type) {
	case string:
		b = []byte(x)
	default:
		b, _ = json.Marshal(v)
	}
	if err := s.b.Publish(topic, b, retain, 1); err != nil {
		t.Fatal(err)
	}
}

var scriptSeq int64
var scriptMu sync.Mutex

// startScripted builds an adapter for cfg on a fresh broker and a script device.
func startScripted(t *testing.T, edit func(*mqtt.Config)) (*binding.Driver, *mqtt.Adapter, *scriptDev, *mqtttest.Broker) {
	t.Helper()
	scriptMu.Lock()
	scriptSeq++
	id := fmt.Sprintf("script-adapter-%d", scriptSeq)
	scriptMu.Unlock()
	b := newBroker(t, "127.0.0.1:0")
	dev := newScriptDev(t, b, "dev/cmd/#")
	zero, hundred := 0.0, 100.0
	cfg := mqtt.Config{
		Common:       adapters.Common{Adapter: mqtt.Kind, Device: mhp.DeviceInfo{ID: "script-01"}},
		Broker:       b.Addr(),
		ClientID:     id,
		Availability: &mqtt.Availability{Topic: "dev/status"},
		Signals: []mqtt.SignalConfig{
			{Signal: mhp.Signal{Name: "door_closed", Type: mhp.TypeBoolean}, Topic: "dev/door", Path: "/value"},
			{Signal: mhp.Signal{Name: "temp", Type: mhp.TypeNumber}, Topic: "dev/temp"},
		},
		Settings: []mqtt.SettingConfig{
			{Setting: mhp.Setting{Name: "setpoint", Type: mhp.TypeNumber, Limits: &mhp.Limits{Min: &zero, Max: &hundred}},
				CommandTopic: "dev/cmd/setpoint", StateTopic: "dev/state/setpoint", StatePath: "/value", Timeout: 3 * time.Second},
			{Setting: mhp.Setting{Name: "lamp", Type: mhp.TypeBoolean}, CommandTopic: "dev/cmd/lamp", Raw: true},
			{Setting: mhp.Setting{Name: "mode", Type: mhp.TypeString}, CommandTopic: "dev/cmd/mode",
				Ack: &mqtt.Ack{Topic: "dev/ack"}, Timeout: 2 * time.Second},
		},
		Actions: []mqtt.ActionConfig{
			{Action: mhp.Action{Name: "run", Interlocks: []string{"door_closed"}}, CommandTopic: "dev/cmd/run",
				ReplyTopic: "dev/reply", CancelTopic: "dev/cmd/cancel", CancelTimeout: 2 * time.Second},
			{Action: mhp.Action{Name: "pump"}, CommandTopic: "dev/cmd/pump", ReplyTopic: "dev/reply",
				Statuses: mqtt.Statuses{Done: []string{"FINISHED"}}},
			{Action: mhp.Action{Name: "slow"}, CommandTopic: "dev/cmd/slow", ReplyTopic: "dev/reply", Timeout: 300 * time.Millisecond},
		},
		EStop: &mqtt.EStopConfig{Topic: "dev/cmd/estop"},
	}
	if edit != nil {
		edit(&cfg)
	}
	client, err := mqtt.DialPaho(mqtt.DialOptions{Broker: b.Addr(), ClientID: id, ConnectTimeout: 5 * time.Second,
		MaxReconnectInterval: 200 * time.Millisecond, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	d, a, err := mqtt.NewWithAdapter(context.Background(), cfg, mqtt.Options{Client: client, Options: adapters.Options{
		Logger: quietLogger(), Refine: func(bc *binding.Config) error { bc.JobGrace = 2 * time.Second; return nil }}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	dev.send(t, "dev/status", "online", true)
	dev.send(t, "dev/door", map[string]any{"value": true}, true)
	dev.send(t, "dev/temp", "21.5", true)
	conformance.EventuallyWithin(t, "door closed", 5*time.Second, func() bool {
		r, err := d.Read(context.Background(), []string{"door_closed"})
		return err == nil && r.Values["door_closed"] == true
	})
	return d, a, dev, b
}

func invoke(t *testing.T, d mhp.Device, name string) *mhp.Job {
	t.Helper()
	r, err := d.Invoke(context.Background(), mhp.InvokeRequest{Name: name})
	if err != nil {
		t.Fatalf("invoke %s: %v", name, err)
	}
	return r.Job
}

func jobNow(t *testing.T, d mhp.Device, id string) *mhp.Job {
	t.Helper()
	j, err := d.Job(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func waitJob(t *testing.T, d mhp.Device, id, what string, ok func(*mhp.Job) bool) *mhp.Job {
	t.Helper()
	t.Logf("waiting for job %s: %s", id, what)
	return conformance.WaitJob(t, d, id, 5*time.Second, ok)
}

func state(t *testing.T, d mhp.Device) mhp.DeviceState {
	t.Helper()
	p, err := d.Ping(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return p.State
}

// commandOf waits for the action's command and returns it.
func commandOf(t *testing.T, dev *scriptDev, topic, jobID string) map[string]any {
	t.Helper()
	var cmd map[string]any
	conformance.EventuallyWithin(t, "command on "+topic, 5*time.Second, func() bool {
		for _, c := range dev.got(topic) {
			if c["job"] == jobID {
				cmd = c
				return true
			}
		}
		return false
	})
	return cmd
}

func TestProgressThenTerminal(t *testing.T) {
	for _, tc := range []struct {
		name, action string
		progress     []map[string]any // sent first; none may end the job
		terminal     map[string]any
		want         mhp.JobState
		outcome      string
		devState     mhp.DeviceState
	}{
		{name: "done", action: "run",
			progress: []map[string]any{{"progress": 0.2}, {"status": "running", "progress": 0.6, "message": "heating"}, {"status": "queued"}},
			terminal: map[string]any{"status": "done", "cycles": 3.0}, want: mhp.JobDone, devState: mhp.StateIdle},
		{name: "failed", action: "run",
			progress: []map[string]any{{"status": "running", "progress": 0.4}},
			terminal: map[string]any{"status": "failed", "error": "lid open"}, want: mhp.JobFailed, outcome: mhp.OutcomeFailed, devState: mhp.StateIdle},
		{name: "cancelled_by_device", action: "run",
			progress: []map[string]any{{"status": "running", "progress": 0.4}},
			terminal: map[string]any{"status": "cancelled"}, want: mhp.JobCancelled, devState: mhp.StateIdle},
		{name: "custom_terminal_name", action: "pump",
			// "done" is not a terminal name of this action: it is progress
			progress: []map[string]any{{"status": "done", "progress": 0.5}},
			terminal: map[string]any{"status": "FINISHED"}, want: mhp.JobDone, devState: mhp.StateIdle},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, _, dev, _ := startScripted(t, nil)
			var mu sync.Mutex
			var order []string
			stop := d.Listen(func(n mhp.Notification) {
				if n.Method == mhp.NotifyJobsProgress || n.Method == mhp.NotifyJobsFinished {
					mu.Lock()
					order = append(order, n.Method)
					mu.Unlock()
				}
			})
			defer stop()
			j := invoke(t, d, tc.action)
			commandOf(t, dev, "dev/cmd/"+tc.action, j.ID)
			// someone else's job on the same topic is ignored
			dev.send(t, "dev/reply", map[string]any{"job": "job_other", "status": "done"}, false)
			var lastP float64
			for _, p := range tc.progress {
				p["job"] = j.ID
				dev.send(t, "dev/reply", p, false)
				if f, ok := p["progress"].(float64); ok {
					lastP = f
				}
			}
			if lastP > 0 {
				waitJob(t, d, j.ID, "progress", func(j *mhp.Job) bool { return j.Progress == lastP })
			}
			if got := jobNow(t, d, j.ID); got.State != mhp.JobRunning {
				t.Fatalf("after progress messages the job is %s, want running", got.State)
			}
			tc.terminal["job"] = j.ID
			dev.send(t, "dev/reply", tc.terminal, false)
			dev.send(t, "dev/reply", tc.terminal, false) // a QoS 1 duplicate changes nothing
			got := waitJob(t, d, j.ID, "terminal", func(j *mhp.Job) bool { return j.State.Terminal() })
			if got.State != tc.want || got.Outcome != tc.outcome {
				t.Fatalf("job ended %s/%q, want %s/%q (%+v)", got.State, got.Outcome, tc.want, tc.outcome, got.Error)
			}
			if tc.want == mhp.JobDone && tc.name == "done" {
				res, _ := got.Result.(map[string]any)
				if res["cycles"] != 3.0 {
					t.Fatalf("result %v, want the reply's fields", got.Result)
				}
			}
			if s := state(t, d); s != tc.devState {
				t.Fatalf("device %s, want %s", s, tc.devState)
			}
			mu.Lock()
			defer mu.Unlock()
			if lastP > 0 {
				if len(order) < 2 || order[0] != mhp.NotifyJobsProgress || order[len(order)-1] != mhp.NotifyJobsFinished {
					t.Fatalf("notifications %v: want progress before finished", order)
				}
			}
		})
	}
}

func TestLostConnectionMidJobFaults(t *testing.T) {
	d, a, dev, b := startScripted(t, nil)
	j := invoke(t, d, "run")
	commandOf(t, dev, "dev/cmd/run", j.ID)
	dev.send(t, "dev/reply", map[string]any{"job": j.ID, "status": "running", "progress": 0.3}, false)
	waitJob(t, d, j.ID, "progress", func(j *mhp.Job) bool { return j.Progress == 0.3 })
	if !b.Drop(a.ClientID()) {
		t.Fatal("adapter not connected")
	}
	got := waitJob(t, d, j.ID, "failed", func(j *mhp.Job) bool { return j.State.Terminal() })
	if got.State != mhp.JobFailed || got.Outcome != mhp.OutcomeUnknown {
		t.Fatalf("job %s/%s, want failed/unknown", got.State, got.Outcome)
	}
	if s := state(t, d); s != mhp.StateFault {
		t.Fatalf("device %s, want fault", s)
	}
	// a terminal message arriving after the reconnect does not rewrite history
	conformance.EventuallyWithin(t, "reconnect", 5*time.Second, func() bool { return a.Client().State().Up })
	dev.send(t, "dev/reply", map[string]any{"job": j.ID, "status": "done"}, false)
	if got := jobNow(t, d, j.ID); got.State != mhp.JobFailed {
		t.Fatalf("job changed to %s after the fact", got.State)
	}
}

func TestNoTerminalBeforeDeadlineFaults(t *testing.T) {
	d, _, dev, _ := startScripted(t, nil)
	j := invoke(t, d, "slow")
	commandOf(t, dev, "dev/cmd/slow", j.ID)
	dev.send(t, "dev/reply", map[string]any{"job": j.ID, "status": "running", "progress": 0.9}, false)
	got := waitJob(t, d, j.ID, "failed", func(j *mhp.Job) bool { return j.State.Terminal() })
	if got.State != mhp.JobFailed || got.Outcome != mhp.OutcomeUnknown {
		t.Fatalf("job %s/%s, want failed/unknown", got.State, got.Outcome)
	}
	if s := state(t, d); s != mhp.StateFault {
		t.Fatalf("device %s, want fault", s)
	}
}

func TestCancelEndsAsTheDeviceReports(t *testing.T) {
	for _, tc := range []struct {
		reply string
		want  mhp.JobState
	}{{"cancelled", mhp.JobCancelled}, {"done", mhp.JobDone}} {
		t.Run(tc.reply, func(t *testing.T) {
			d, _, dev, _ := startScripted(t, nil)
			j := invoke(t, d, "run")
			commandOf(t, dev, "dev/cmd/run", j.ID)
			if _, err := d.CancelJob(context.Background(), j.ID); err != nil {
				t.Fatal(err)
			}
			conformance.EventuallyWithin(t, "the cancel command", 5*time.Second, func() bool {
				for _, c := range dev.got("dev/cmd/cancel") {
					if c["job"] == j.ID {
						return true
					}
				}
				return false
			})
			if got := jobNow(t, d, j.ID); got.State.Terminal() {
				t.Fatalf("job ended %s on the request alone", got.State)
			}
			dev.send(t, "dev/reply", map[string]any{"job": j.ID, "status": tc.reply}, false)
			got := waitJob(t, d, j.ID, "terminal", func(j *mhp.Job) bool { return j.State.Terminal() })
			if got.State != tc.want {
				t.Fatalf("job %s, want %s as the device reported", got.State, tc.want)
			}
		})
	}
	t.Run("no_cancel_topic", func(t *testing.T) {
		d, _, dev, _ := startScripted(t, nil)
		j := invoke(t, d, "pump")
		commandOf(t, dev, "dev/cmd/pump", j.ID)
		_, err := d.CancelJob(context.Background(), j.ID)
		if mhp.CodeOf(err) != mhp.CodeNotSupported {
			t.Fatalf("cancel of an action without cancel topic: %v, want NotSupported", err)
		}
		dev.send(t, "dev/reply", map[string]any{"job": j.ID, "status": "FINISHED"}, false)
		waitJob(t, d, j.ID, "done", func(j *mhp.Job) bool { return j.State == mhp.JobDone })
	})
}

func TestDeviceRejectsAction(t *testing.T) {
	d, _, dev, _ := startScripted(t, nil)
	j := invoke(t, d, "run")
	commandOf(t, dev, "dev/cmd/run", j.ID)
	dev.send(t, "dev/reply", map[string]any{"job": j.ID, "status": "rejected", "error": "busy"}, false)
	got := waitJob(t, d, j.ID, "failed", func(j *mhp.Job) bool { return j.State.Terminal() })
	if got.State != mhp.JobFailed || got.Outcome != mhp.OutcomeNotStarted {
		t.Fatalf("job %s/%s, want failed/not_started", got.State, got.Outcome)
	}
	if s := state(t, d); s != mhp.StateIdle {
		t.Fatalf("device %s after a refusal, want idle", s)
	}
}

func TestLastWillOfflineOpensInterlock(t *testing.T) { testLastWill(t, mochiEnv(t)) }

func testLastWill(t *testing.T, env brokerEnv) {
	f := startFixture(t, env, conformance.Options{}, nil)
	ctx := context.Background()
	run := func() error {
		_, err := f.drv.Invoke(ctx, mhp.InvokeRequest{Name: conformance.ActionRun, Params: map[string]any{"duration_s": 1.0}})
		return err
	}
	// the device dies without a clean disconnect (and stays away): the
	// broker publishes its will
	restore := env.killDevice(f.deviceID)
	conformance.EventuallyWithin(t, "door_closed unavailable", 5*time.Second, func() bool {
		r, err := f.drv.Read(ctx, []string{conformance.SignalDoorClosed})
		return err == nil && r.Values[conformance.SignalDoorClosed] == nil && r.Unavailable[conformance.SignalDoorClosed] != ""
	})
	r, _ := f.drv.Read(ctx, []string{conformance.SignalDoorClosed})
	if !strings.Contains(r.Unavailable[conformance.SignalDoorClosed], "offline") {
		t.Fatalf("reason %q does not say the device is offline", r.Unavailable[conformance.SignalDoorClosed])
	}
	before := f.in.Calls(conformance.ActionRun)
	if err := run(); mhp.CodeOf(err) != mhp.CodeInterlockOpen {
		t.Fatalf("invoke while the device is offline: %v, want InterlockOpen", err)
	}
	if f.in.Calls(conformance.ActionRun) != before {
		t.Fatal("the command reached the device")
	}
	// the device comes back (paho reconnects it) and says online
	restore()
	conformance.EventuallyWithin(t, "door_closed readable again", 10*time.Second, func() bool {
		r, err := f.drv.Read(ctx, []string{conformance.SignalDoorClosed})
		return err == nil && r.Values[conformance.SignalDoorClosed] == true
	})
	if err := run(); err != nil {
		t.Fatalf("invoke once online: %v", err)
	}
}

func TestReconnectResubscribes(t *testing.T) {
	d, a, dev, b := startScripted(t, nil)
	conn := a.Client().State().Conn
	if !b.Drop(a.ClientID()) {
		t.Fatal("the adapter was not connected, or the broker did not forget it")
	}
	conformance.EventuallyWithin(t, "reconnect", 5*time.Second, func() bool { s := a.Client().State(); return s.Up && s.Conn > conn })
	dev.send(t, "dev/temp", "30.25", true)
	defer func() {
		if t.Failed() {
			raw, rc, _ := a.LastRaw("temp")
			t.Logf("temp sample %s (conn %d); state %+v; subscribers %d", raw, rc, a.Client().State(), b.Subscribers("dev/temp"))
		}
	}()
	conformance.EventuallyWithin(t, "a value published after the reconnect", 5*time.Second, func() bool {
		r, err := d.Read(context.Background(), []string{"temp"})
		return err == nil && r.Values["temp"] == 30.25
	})
	// replies still reach a job started after the reconnect
	j := invoke(t, d, "pump")
	commandOf(t, dev, "dev/cmd/pump", j.ID)
	dev.send(t, "dev/reply", map[string]any{"job": j.ID, "status": "FINISHED"}, false)
	waitJob(t, d, j.ID, "done", func(j *mhp.Job) bool { return j.State == mhp.JobDone })
}

func TestSettingAcknowledgement(t *testing.T) {
	d, _, dev, _ := startScripted(t, nil)
	ctx := context.Background()
	write := func(name string, v any) (*mhp.WriteResult, error) {
		return d.Write(ctx, mhp.WriteRequest{Name: name, Value: v})
	}

	// state topic shows the target in time: applied
	done := make(chan struct{})
	go func() {
		defer close(done)
		if !dev.firstWithin(t, "dev/cmd/setpoint", 5*time.Second) {
			return
		}
		_ = dev.b.Publish("dev/state/setpoint", []byte(`{"value":42}`), true, 1)
	}()
	r, err := write("setpoint", 42.0)
	<-done
	if err != nil || !r.Applied {
		t.Fatalf("state-confirmed write: %+v, %v; want applied", r, err)
	}
	if got := dev.got("dev/cmd/setpoint")[0]["raw"]; got != "42" {
		t.Fatalf("command payload %v, want the bare value 42", got)
	}
	// state never shows it: sent, not applied, and no fault
	r, err = write("setpoint", 50.0)
	if err != nil || r.Applied || r.Status != mhp.WriteSent {
		t.Fatalf("unconfirmed write: %+v, %v; want sent", r, err)
	}
	// no acknowledgement configured: sent; raw payload
	r, err = write("lamp", true)
	if err != nil || r.Applied {
		t.Fatalf("fire-and-forget write: %+v, %v; want sent", r, err)
	}
	conformance.EventuallyWithin(t, "lamp command", 5*time.Second, func() bool { return len(dev.got("dev/cmd/lamp")) > 0 })
	if got := dev.got("dev/cmd/lamp")[0]["raw"]; got != "true" {
		t.Fatalf("raw payload %v, want true", got)
	}
	// ack refused: a refusal, state unchanged
	go func() {
		if !dev.firstWithin(t, "dev/cmd/mode", 5*time.Second) {
			return
		}
		c := dev.got("dev/cmd/mode")[0]
		for _, reply := range []map[string]any{{"id": "not-ours", "status": "ok"}, {"id": c["id"], "status": "refused", "error": "locked"}} {
			b, _ := json.Marshal(reply)
			_ = dev.b.Publish("dev/ack", b, false, 1)
		}
	}()
	_, err = write("mode", "heat")
	if e, ok := mhp.AsError(err); !ok || e.Code != mhp.CodeServerError {
		t.Fatalf("refused write: %v, want a ServerError refusal", err)
	}
	if s := state(t, d); s != mhp.StateIdle {
		t.Fatalf("device %s after a refusal, want idle", s)
	}
	if c := dev.got("dev/cmd/mode")[0]; c["value"] != "heat" || c["id"] == "" {
		t.Fatalf("ack command %v, want {value, id}", c)
	}
	// ack never comes: outcome unknown, fault
	_, err = write("mode", "cool")
	if mhp.CodeOf(err) != mhp.CodeDeviceFault {
		t.Fatalf("unacknowledged write: %v, want DeviceFault", err)
	}
}

// funcClient is a Client made of funcs, for failures a broker will not produce on demand.
type funcClient struct {
	publish func(topic string, qos byte, retain bool, payload []byte) error
	changed chan struct{}
}

func (f *funcClient) Publish(_ context.Context, topic string, qos byte, retain bool, payload []byte) error {
	return f.publish(topic, qos, retain, payload)
}
func (f *funcClient) Subscribe(context.Context, string, byte, func(mqtt.Message)) error {
	return nil
}
func (f *funcClient) State() mqtt.ConnState {
	return mqtt.ConnState{Up: true, Conn: 1, Changed: f.changed}
}
func (f *funcClient) Close() error { return nil }

func TestEStopTopic(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fail    error
		stopped bool
	}{{"published", nil, true}, {"publish_fails", errors.New("broker gone"), false}} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var qos byte
			var retained bool
			var topic string
			c := &funcClient{changed: make(chan struct{}), publish: func(tp string, q byte, r bool, _ []byte) error {
				mu.Lock()
				defer mu.Unlock()
				topic, qos, retained = tp, q, r
				return tc.fail
			}}
			cfg := mqtt.Config{Common: adapters.Common{Device: mhp.DeviceInfo{ID: "x"}}, Broker: "tcp://127.0.0.1:1",
				EStop: &mqtt.EStopConfig{Topic: "dev/estop"}}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			d, err := mqtt.New(ctx, cfg, mqtt.Options{Client: c, Options: adapters.Options{Logger: quietLogger()}})
			if err != nil {
				t.Fatal(err)
			}
			if err := d.Start(ctx); err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			r, err := d.EStop(ctx, "test")
			if err != nil {
				t.Fatal(err)
			}
			if r.State != mhp.StateEStop || r.Stopped != tc.stopped {
				t.Fatalf("estop %+v, want estop with stopped=%v", r, tc.stopped)
			}
			mu.Lock()
			defer mu.Unlock()
			if topic != "dev/estop" || qos != 1 || retained {
				t.Fatalf("estop published on %q qos %d retained %v; want dev/estop, QoS 1, not retained", topic, qos, retained)
			}
		})
	}
}

func TestEStopNeverRetainedAtBroker(t *testing.T) {
	d, _, dev, b := startScripted(t, nil)
	if _, err := d.EStop(context.Background(), "test"); err != nil {
		t.Fatal(err)
	}
	conformance.EventuallyWithin(t, "estop at the device", 5*time.Second, func() bool { return len(dev.got("dev/cmd/estop")) == 1 })
	if n := b.Retained("dev/cmd/estop"); n != 0 {
		t.Fatalf("the broker retains %d estop messages: a reconnecting device would stop again", n)
	}
}

func TestStaleAndUnparsableSignals(t *testing.T) {
	d, _, dev, _ := startScripted(t, func(c *mqtt.Config) { c.Signals[1].StaleAfter = 50 * time.Millisecond })
	ctx := context.Background()
	dev.send(t, "dev/temp", "not a number", true)
	conformance.EventuallyWithin(t, "unparsable value unavailable", 5*time.Second, func() bool {
		r, err := d.Read(ctx, []string{"temp"})
		return err == nil && r.Values["temp"] == nil && r.Unavailable["temp"] != ""
	})
	dev.send(t, "dev/temp", "22", true)
	conformance.EventuallyWithin(t, "fresh value", 5*time.Second, func() bool {
		r, err := d.Read(ctx, []string{"temp"})
		return err == nil && r.Values["temp"] == 22.0
	})
	conformance.EventuallyWithin(t, "stale value unavailable", 5*time.Second, func() bool {
		r, err := d.Read(ctx, []string{"temp"})
		return err == nil && r.Values["temp"] == nil
	})
}
