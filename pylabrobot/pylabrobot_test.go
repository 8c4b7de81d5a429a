package pylabrobot_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/pylabrobot"
	"github.com/openmhp/mhp-go/pylabrobot/plrtest"
)

// patience bounds every wait of these tests (conformance.EventuallyWithin).
const patience = 5 * time.Second

type fixture struct {
	drv *binding.Driver
	dev mhp.Device
}

func fastConfig(mode, url string) pylabrobot.Config {
	return pylabrobot.Config{Mode: mode, URL: url, RequestTimeout: 5 * time.Second, PollInterval: 2 * time.Millisecond,
		ActionTimeout: 10 * time.Second, CancelWait: 3 * time.Second, SignalCache: -1,
		PollRetry: adapters.PollRetry{Backoff: 2 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, Window: 200 * time.Millisecond}}
}

func start(t *testing.T, cfg pylabrobot.Config) *fixture {
	t.Helper()
	return startWith(t, cfg, pylabrobot.Options{})
}

func startWith(t *testing.T, cfg pylabrobot.Config, opt pylabrobot.Options) *fixture {
	t.Helper()
	if cfg.Device.ID == "" {
		cfg.Device = mhp.DeviceInfo{ID: "plr-01", Class: "liquid_handler"}
	}
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	d, err := pylabrobot.New(ctx, cfg, opt)
	if err != nil {
		t.Fatalf("pylabrobot.New: %v", err)
	}
	if err := d.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return &fixture{drv: d, dev: mhp.AsSession(d, "s1")}
}

func bridgeFixture(t *testing.T, mut func(*pylabrobot.Config)) (*fixture, *plrtest.Bridge) {
	t.Helper()
	b := plrtest.NewBridge()
	t.Cleanup(b.Close)
	cfg := fastConfig(pylabrobot.ModeBridge, b.URL)
	if mut != nil {
		mut(&cfg)
	}
	f := start(t, cfg)
	t.Cleanup(b.In.ReleaseAll) // runs before the driver closes
	return f, b
}

func (f *fixture) invoke(t *testing.T, name string, params map[string]any) string {
	t.Helper()
	res, err := f.dev.Invoke(context.Background(), mhp.InvokeRequest{Name: name, Params: params})
	if err != nil {
		t.Fatalf("invoke %s: %v", name, err)
	}
	return res.Job.ID
}

func (f *fixture) waitJob(t *testing.T, id, what string, pred func(*mhp.Job) bool) *mhp.Job {
	t.Helper()
	t.Logf("waiting for job %s: %s", id, what)
	return conformance.WaitJob(t, f.dev, id, patience, pred)
}

func (f *fixture) finish(t *testing.T, id string) *mhp.Job {
	t.Helper()
	return f.waitJob(t, id, "terminal", func(j *mhp.Job) bool { return j.State.Terminal() })
}

func (f *fixture) state(t *testing.T) mhp.DeviceState {
	t.Helper()
	p, err := f.dev.Ping(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return p.State
}

func TestBridgeDescribeMapping(t *testing.T) {
	f, _ := bridgeFixture(t, func(c *pylabrobot.Config) {
		c.Settings = map[string]pylabrobot.SettingMapping{"setpoint": {Method: "set_setpoint", Type: mhp.TypeNumber, Unit: "degC", Limits: mhp.Range(0, 100)}}
	})
	desc := f.drv.Descriptor()
	asp, ok := desc.Action("aspirate")
	if !ok {
		t.Fatal("no aspirate action")
	}
	res, _ := asp.Params.Get("resources")
	mode, _ := asp.Params.Get("mode")
	if res.Type != mhp.TypeArray || res.Items.Type != mhp.TypeString || !strings.Contains(res.Notes, "deck resource") {
		t.Errorf("resources = %+v", res)
	}
	if mode.Limits == nil || len(mode.Limits.Enum) != 2 || !mode.Optional || mode.Default != "FAST" {
		t.Errorf("mode = %+v", mode)
	}
	prof, _ := desc.Action(conformance.ActionProfile)
	if c, _ := prof.Params.Get("cycles"); c.Type != mhp.TypeInteger || c.Default != 1.0 {
		t.Errorf("cycles = %+v", c)
	}
	mon, _ := desc.Action(conformance.ActionMonitor)
	if !mon.Concurrent || !mon.Cancellable {
		t.Errorf("monitor = %+v", mon)
	}
	if _, ok := desc.Action("set_setpoint"); ok {
		t.Errorf("a setter mapped to a setting is also an action")
	}
	if _, ok := desc.Action("set_mode"); !ok {
		t.Errorf("an unmapped setter is not an action")
	}
	if s, ok := desc.Setting("setpoint"); !ok || s.Type != mhp.TypeNumber {
		t.Errorf("setting setpoint = %+v", s)
	}
	if s, ok := desc.Signal(conformance.SignalTemperature); !ok || s.Type != mhp.TypeNumber {
		t.Errorf("signal temperature = %+v", s)
	}
	if !desc.Safety.EStop {
		t.Error("estop not declared though the machine has stop()")
	}
}

func TestBridgeTerminalStates(t *testing.T) {
	run := map[string]any{"duration_s": 1.0}
	cases := []struct {
		name        string
		action      string
		params      map[string]any
		mut         func(*pylabrobot.Config)
		setup       func(b *plrtest.Bridge)
		during      func(t *testing.T, f *fixture, b *plrtest.Bridge, job string)
		state       mhp.JobState
		outcome     string
		deviceAfter mhp.DeviceState
		check       func(t *testing.T, b *plrtest.Bridge, j *mhp.Job)
	}{
		{name: "done", action: conformance.ActionQuick, state: mhp.JobDone, deviceAfter: mhp.StateIdle,
			check: func(t *testing.T, b *plrtest.Bridge, j *mhp.Job) {
				if r, _ := j.Result.(map[string]any); r["ok"] != true {
					t.Errorf("result %v", j.Result)
				}
			}},
		{name: "done_after_running_with_progress", action: conformance.ActionRun, params: run,
			setup: func(b *plrtest.Bridge) { b.In.Script(conformance.ActionRun, conformance.Block) },
			during: func(t *testing.T, f *fixture, b *plrtest.Bridge, job string) {
				f.waitJob(t, job, "progress 0.5", func(j *mhp.Job) bool { return j.Progress == 0.5 })
				b.In.Release(conformance.ActionRun)
			},
			state: mhp.JobDone, deviceAfter: mhp.StateIdle},
		{name: "failed", action: conformance.ActionQuick,
			setup: func(b *plrtest.Bridge) { b.In.Script(conformance.ActionQuick, conformance.FailReported) },
			state: mhp.JobFailed, outcome: mhp.OutcomeFailed, deviceAfter: mhp.StateIdle,
			check: func(t *testing.T, b *plrtest.Bridge, j *mhp.Job) {
				if !strings.Contains(j.Error.Message, "simulated") || j.Error.Data["error_type"] != "RuntimeError" {
					t.Errorf("error %+v", j.Error)
				}
			}},
		{name: "cancelled", action: conformance.ActionRun, params: run,
			setup: func(b *plrtest.Bridge) { b.In.Script(conformance.ActionRun, conformance.Block) },
			during: func(t *testing.T, f *fixture, b *plrtest.Bridge, job string) {
				if _, err := f.dev.CancelJob(context.Background(), job); err != nil {
					t.Fatal(err)
				}
			},
			state: mhp.JobCancelled, deviceAfter: mhp.StateIdle,
			check: func(t *testing.T, b *plrtest.Bridge, j *mhp.Job) {
				if n := b.Requests("POST /tasks/{id}/cancel"); n != 1 {
					t.Errorf("cancel posted %d times", n)
				}
				// Before the fix extra kept the last poll's "running".
				if j.Extra["status"] != pylabrobot.TaskCancelled {
					t.Errorf("cancelled job's extra.status %v, want %s", j.Extra["status"], pylabrobot.TaskCancelled)
				}
			}},
		{name: "cancel_ignored_ends_done", action: conformance.ActionRun, params: run,
			setup: func(b *plrtest.Bridge) { b.In.Script(conformance.ActionRun, conformance.IgnoreCancel) },
			during: func(t *testing.T, f *fixture, b *plrtest.Bridge, job string) {
				if _, err := f.dev.CancelJob(context.Background(), job); err != nil {
					t.Fatal(err)
				}
				conformance.EventuallyWithin(t, "cancel posted", patience, func() bool { return b.Requests("POST /tasks/{id}/cancel") == 1 })
				if j, _ := f.dev.Job(context.Background(), job); j.State.Terminal() {
					t.Fatalf("job ended %s while the machine still ran", j.State)
				}
				b.In.Release(conformance.ActionRun)
			},
			state: mhp.JobDone, deviceAfter: mhp.StateIdle},
		{name: "cancelled_by_bridge", action: conformance.ActionQuick,
			setup: func(b *plrtest.Bridge) { b.ForceNext(conformance.ActionQuick, pylabrobot.TaskCancelled) },
			state: mhp.JobCancelled, deviceAfter: mhp.StateIdle},
		{name: "refused_not_started", action: conformance.ActionQuick,
			setup: func(b *plrtest.Bridge) { b.In.Script(conformance.ActionQuick, conformance.Refuse) },
			state: mhp.JobFailed, outcome: mhp.OutcomeNotStarted, deviceAfter: mhp.StateIdle},
		{name: "unknown_timeout_at_bridge", action: conformance.ActionQuick,
			setup: func(b *plrtest.Bridge) { b.ForceNext(conformance.ActionQuick, pylabrobot.TaskUnknown) },
			state: mhp.JobFailed, outcome: mhp.OutcomeUnknown, deviceAfter: mhp.StateFault},
		{name: "unknown_link_dropped", action: conformance.ActionQuick,
			setup: func(b *plrtest.Bridge) { b.In.Script(conformance.ActionQuick, conformance.FailUnknown) },
			state: mhp.JobFailed, outcome: mhp.OutcomeUnknown, deviceAfter: mhp.StateFault},
		{name: "bridge_restarted_task_lost", action: conformance.ActionRun, params: run,
			setup:  func(b *plrtest.Bridge) { b.In.Script(conformance.ActionRun, conformance.Block) },
			during: func(t *testing.T, f *fixture, b *plrtest.Bridge, job string) { b.Restart() },
			state:  mhp.JobFailed, outcome: mhp.OutcomeUnknown, deviceAfter: mhp.StateFault,
			check: func(t *testing.T, b *plrtest.Bridge, j *mhp.Job) {
				if !strings.Contains(j.Error.Message, "gone") {
					t.Errorf("error %v", j.Error)
				}
			}},
		{name: "bridge_vanishes_mid_action", action: conformance.ActionRun, params: run,
			setup:  func(b *plrtest.Bridge) { b.In.Script(conformance.ActionRun, conformance.Block) },
			during: func(t *testing.T, f *fixture, b *plrtest.Bridge, job string) { b.Vanish() },
			state:  mhp.JobFailed, outcome: mhp.OutcomeUnknown, deviceAfter: mhp.StateFault,
			check: func(t *testing.T, b *plrtest.Bridge, j *mhp.Job) {
				if !strings.Contains(j.Error.Message, "unreachable") {
					t.Errorf("error %v", j.Error)
				}
			}},
		// A bridge that answers 500 is not "unreachable". Before the fix
		// the job failed "bridge unreachable (3 polls failed)".
		{name: "polls_answered_500", action: conformance.ActionRun, params: run,
			setup: func(b *plrtest.Bridge) { b.In.Script(conformance.ActionRun, conformance.Block) },
			during: func(t *testing.T, f *fixture, b *plrtest.Bridge, job string) {
				b.FailPolls(http.StatusInternalServerError)
			},
			state: mhp.JobFailed, outcome: mhp.OutcomeUnknown, deviceAfter: mhp.StateFault,
			check: func(t *testing.T, b *plrtest.Bridge, j *mhp.Job) {
				b.FailPolls(0)
				if !strings.Contains(j.Error.Message, "answered HTTP 500") || strings.Contains(j.Error.Message, "unreachable") {
					t.Errorf("error %v, want it to say the bridge answered 500", j.Error)
				}
			}},
		{name: "no_terminal_status_before_deadline", action: conformance.ActionRun, params: run,
			mut: func(c *pylabrobot.Config) {
				c.Actions = map[string]pylabrobot.ActionOverride{conformance.ActionRun: {Timeout: 50 * time.Millisecond}}
			},
			setup: func(b *plrtest.Bridge) { b.In.Script(conformance.ActionRun, conformance.Block) },
			state: mhp.JobFailed, outcome: mhp.OutcomeUnknown, deviceAfter: mhp.StateFault},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, b := bridgeFixture(t, c.mut)
			if c.setup != nil {
				c.setup(b)
			}
			before := b.In.Calls(c.action)
			id := f.invoke(t, c.action, c.params)
			if c.during != nil {
				conformance.EventuallyWithin(t, "the machine runs "+c.action, patience, func() bool { return b.In.Calls(c.action) > before })
				f.waitJob(t, id, "running", func(j *mhp.Job) bool { return j.Extra["status"] == pylabrobot.TaskRunning })
				c.during(t, f, b, id)
			}
			j := f.finish(t, id)
			if j.State != c.state || j.Outcome != c.outcome {
				t.Fatalf("job %s outcome %q (%v), want %s outcome %q", j.State, j.Outcome, j.Error, c.state, c.outcome)
			}
			if s := f.state(t); s != c.deviceAfter {
				t.Errorf("device %s, want %s", s, c.deviceAfter)
			}
			if c.check != nil {
				c.check(t, b, j)
			}
		})
	}
}

func TestBridgeResourceParamsPassedByName(t *testing.T) {
	f, b := bridgeFixture(t, nil)
	id := f.invoke(t, "aspirate", map[string]any{"resources": []any{"plate_well_A1"}, "vols": []any{10}, "mode": "SLOW"})
	if j := f.finish(t, id); j.State != mhp.JobDone {
		t.Fatalf("aspirate: %+v %v", j, j.Error)
	}
	sub := b.Submitted("aspirate")
	if len(sub) != 1 || sub[0]["mode"] != "SLOW" || sub[0]["resources"].([]any)[0] != "plate_well_A1" {
		t.Fatalf("submitted %v", sub)
	}
	_, err := f.dev.Invoke(context.Background(), mhp.InvokeRequest{Name: "aspirate", Params: map[string]any{"resources": []any{"x"}, "vols": []any{1}, "mode": "MEDIUM"}})
	if mhp.CodeOf(err) != mhp.CodeLimitViolation {
		t.Fatalf("enum miss: %v", err)
	}
}

func TestBridgeEStopAndSettings(t *testing.T) {
	f, b := bridgeFixture(t, func(c *pylabrobot.Config) {
		c.Settings = map[string]pylabrobot.SettingMapping{"setpoint": {Method: "set_setpoint", Type: mhp.TypeNumber, Limits: mhp.Range(0, 100)}}
	})
	ctx := context.Background()
	w, err := f.dev.Write(ctx, mhp.WriteRequest{Name: "setpoint", Value: 55.0})
	if err != nil || !w.Applied {
		t.Fatalf("write %+v %v", w, err)
	}
	if v, _ := b.In.Written("setpoint"); v != 55.0 {
		t.Fatalf("machine setpoint %v", v)
	}
	b.In.Script("setpoint", conformance.Refuse)
	if _, err := f.dev.Write(ctx, mhp.WriteRequest{Name: "setpoint", Value: 56.0}); err == nil || f.state(t) != mhp.StateIdle {
		t.Fatalf("refused write: %v, state %s", err, f.state(t))
	}
	b.In.Script(conformance.ActionRun, conformance.Block)
	id := f.invoke(t, conformance.ActionRun, map[string]any{"duration_s": 3.0})
	conformance.EventuallyWithin(t, "run reaches the machine", patience, func() bool { return b.In.Calls(conformance.ActionRun) == 1 })
	r, err := f.dev.EStop(ctx, "test")
	// The run the estop cut off re-asserts the stop when it returns (the
	// binding's cut-off rule), which may already have happened: 1 or 2.
	if err != nil || !r.Stopped || b.In.StopCalls() < 1 {
		t.Fatalf("estop %+v %v, stop calls %d", r, err, b.In.StopCalls())
	}
	if j := f.finish(t, id); j.State != mhp.JobCancelled {
		t.Fatalf("job after estop: %s %v", j.State, j.Error)
	}
	conformance.EventuallyWithin(t, "the stop re-asserted after the cut-off run", patience, func() bool { return b.In.StopCalls() == 2 })
	b.In.FailStop(true)
	r, _ = f.dev.EStop(ctx, "again")
	if r.Stopped || !strings.Contains(r.StopError, "stop") {
		t.Fatalf("failing stop: %+v", r)
	}
	b.In.Script("setpoint", conformance.FailUnknown)
	b.In.FailStop(false)
	if _, err := f.dev.Reset(ctx); err != nil {
		t.Fatalf("reset: %v", err)
	}
	if _, err := f.dev.Write(ctx, mhp.WriteRequest{Name: "setpoint", Value: 57.0}); err == nil || f.state(t) != mhp.StateFault {
		t.Fatalf("dropped write: %v, state %s", err, f.state(t))
	}
}

func TestBridgeUnavailableSignal(t *testing.T) {
	f, b := bridgeFixture(t, nil)
	b.In.SetUnavailable(conformance.SignalTemperature, true)
	r, err := f.dev.Read(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Values[conformance.SignalTemperature] != nil || r.Unavailable[conformance.SignalTemperature] == "" || r.Values[conformance.SignalDoorClosed] != true {
		t.Fatalf("read %+v", r)
	}
}

// ---- legacy server

func legacyFixture(t *testing.T, mut func(*pylabrobot.Config)) (*fixture, *plrtest.LegacyServer) {
	t.Helper()
	l := plrtest.NewLegacyServer()
	t.Cleanup(l.Close)
	cfg := fastConfig(pylabrobot.ModeLegacy, l.URL)
	if mut != nil {
		mut(&cfg)
	}
	f := start(t, cfg)
	t.Cleanup(l.In.ReleaseAll)
	return f, l
}

var tip = map[string]any{"type": "HamiltonTip", "name": "t", "total_tip_length": 95.1, "has_filter": true, "maximal_volume": 1065.0}

func liquid(well string) map[string]any {
	return map[string]any{"channels": []any{map[string]any{"resource_name": well, "tip": tip, "volume": 50.0, "offset": map[string]any{"z": 1.5}}}}
}

func TestLegacyTerminalStates(t *testing.T) {
	cases := []struct {
		name        string
		action      string
		params      map[string]any
		setup       func(l *plrtest.LegacyServer)
		during      func(t *testing.T, f *fixture, l *plrtest.LegacyServer, job string)
		state       mhp.JobState
		outcome     string
		deviceAfter mhp.DeviceState
		check       func(t *testing.T, f *fixture, l *plrtest.LegacyServer, j *mhp.Job)
		mut         func(*pylabrobot.Config)
	}{
		{name: "succeeded", action: "setup", state: mhp.JobDone, deviceAfter: mhp.StateIdle,
			check: func(t *testing.T, f *fixture, l *plrtest.LegacyServer, j *mhp.Job) {
				r, _ := f.dev.Read(context.Background(), []string{pylabrobot.SignalSetupFinished})
				if r.Values[pylabrobot.SignalSetupFinished] != true {
					t.Errorf("setup_finished = %v after setup", r.Values)
				}
			}},
		{name: "running_then_succeeded", action: "aspirate", params: liquid("plate_01_well_A1"),
			setup: func(l *plrtest.LegacyServer) { l.In.Script(plrtest.RouteAspirate, conformance.Block) },
			during: func(t *testing.T, f *fixture, l *plrtest.LegacyServer, job string) {
				l.In.Release(plrtest.RouteAspirate)
			},
			state: mhp.JobDone, deviceAfter: mhp.StateIdle,
			check: func(t *testing.T, f *fixture, l *plrtest.LegacyServer, j *mhp.Job) {
				b := l.Bodies(plrtest.RouteAspirate)
				ch := b[0]["channels"].([]any)[0].(map[string]any)
				off := ch["offset"].(map[string]any)
				if off["type"] != "Coordinate" || off["z"] != 1.5 || off["x"] != 0.0 {
					t.Errorf("offset %v", off)
				}
				if v, ok := ch["flow_rate"]; !ok || v != nil {
					t.Errorf("flow_rate key %v %v, want null", v, ok)
				}
				if u := b[0]["use_channels"].([]any); len(u) != 1 || u[0] != 0.0 {
					t.Errorf("use_channels %v", u)
				}
			}},
		{name: "error", action: "dispense", params: liquid("plate_01_well_A2"),
			setup: func(l *plrtest.LegacyServer) { l.In.Script(plrtest.RouteDispense, conformance.FailReported) },
			state: mhp.JobFailed, outcome: mhp.OutcomeFailed, deviceAfter: mhp.StateIdle},
		{name: "refused_400", action: "aspirate", params: liquid("plate_01_well_A1"),
			setup: func(l *plrtest.LegacyServer) { l.In.Script(plrtest.RouteAspirate, conformance.Refuse) },
			state: mhp.JobFailed, outcome: mhp.OutcomeNotStarted, deviceAfter: mhp.StateIdle},
		{name: "unknown_resource_500_html", action: "aspirate", params: liquid("plate_99_well_Z9"),
			state: mhp.JobFailed, outcome: mhp.OutcomeNotStarted, deviceAfter: mhp.StateIdle,
			check: func(t *testing.T, f *fixture, l *plrtest.LegacyServer, j *mhp.Job) {
				if !strings.Contains(j.Error.Message, "unknown resource") || l.In.Calls(plrtest.RouteAspirate) != 0 {
					t.Errorf("error %v, calls %d", j.Error, l.In.Calls(plrtest.RouteAspirate))
				}
			}},
		{name: "server_restarted_task_lost", action: "aspirate", params: liquid("plate_01_well_A1"),
			setup:  func(l *plrtest.LegacyServer) { l.In.Script(plrtest.RouteAspirate, conformance.Block) },
			during: func(t *testing.T, f *fixture, l *plrtest.LegacyServer, job string) { l.Restart() },
			state:  mhp.JobFailed, outcome: mhp.OutcomeUnknown, deviceAfter: mhp.StateFault},
		{name: "reply_lost", action: "setup",
			setup: func(l *plrtest.LegacyServer) { l.In.Script(plrtest.RouteSetup, conformance.FailUnknown) },
			state: mhp.JobFailed, outcome: mhp.OutcomeUnknown, deviceAfter: mhp.StateFault},
		{name: "server_vanishes_mid_action", action: "aspirate", params: liquid("plate_01_well_A1"),
			setup:  func(l *plrtest.LegacyServer) { l.In.Script(plrtest.RouteAspirate, conformance.Block) },
			during: func(t *testing.T, f *fixture, l *plrtest.LegacyServer, job string) { l.Vanish() },
			state:  mhp.JobFailed, outcome: mhp.OutcomeUnknown, deviceAfter: mhp.StateFault},
		// The shared poll policy: polls answered 500 for less than the
		// window (here a minute) are waited out; beyond it (the test
		// config's 200ms) the job ends saying the server answered 500.
		// Before the policy the job gave up after 3 polls as "server
		// unreachable".
		{name: "polls_answered_500_recover", action: "aspirate", params: liquid("plate_01_well_A1"),
			mut:   func(c *pylabrobot.Config) { c.PollRetry.Window = time.Minute },
			setup: func(l *plrtest.LegacyServer) { l.In.Script(plrtest.RouteAspirate, conformance.Block) },
			during: func(t *testing.T, f *fixture, l *plrtest.LegacyServer, job string) {
				l.FailNextPolls(http.StatusInternalServerError, 5)
				conformance.EventuallyWithin(t, "the failing polls spent", patience, func() bool { return l.PollsFailing() == 0 })
				l.In.Release(plrtest.RouteAspirate)
			},
			state: mhp.JobDone, deviceAfter: mhp.StateIdle},
		{name: "polls_answered_500_beyond_the_window", action: "aspirate", params: liquid("plate_01_well_A1"),
			setup: func(l *plrtest.LegacyServer) { l.In.Script(plrtest.RouteAspirate, conformance.Block) },
			during: func(t *testing.T, f *fixture, l *plrtest.LegacyServer, job string) {
				l.FailNextPolls(http.StatusInternalServerError, -1)
			},
			state: mhp.JobFailed, outcome: mhp.OutcomeUnknown, deviceAfter: mhp.StateFault,
			check: func(t *testing.T, f *fixture, l *plrtest.LegacyServer, j *mhp.Job) {
				if !strings.Contains(j.Error.Message, "the server answered HTTP 500") || !strings.Contains(j.Error.Message, "poll_retry.window") ||
					strings.Contains(j.Error.Message, "unreachable") {
					t.Errorf("error %v, want the server's 500 and the window, not unreachable", j.Error)
				}
			}},
		{name: "estop_cannot_cancel_job_ends_with_real_state", action: "aspirate", params: liquid("plate_01_well_A1"),
			setup: func(l *plrtest.LegacyServer) { l.In.Script(plrtest.RouteAspirate, conformance.Block) },
			during: func(t *testing.T, f *fixture, l *plrtest.LegacyServer, job string) {
				r, err := f.dev.EStop(context.Background(), "test")
				if err != nil || r.Stopped {
					t.Fatalf("estop on the legacy server: %+v %v, want stopped:false", r, err)
				}
				if j, _ := f.dev.Job(context.Background(), job); j.State.Terminal() {
					t.Fatalf("job ended %s although the server cannot stop it", j.State)
				}
				l.In.Release(plrtest.RouteAspirate)
			},
			state: mhp.JobDone, deviceAfter: mhp.StateEStop},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, l := legacyFixture(t, c.mut)
			if c.setup != nil {
				c.setup(l)
			}
			route := strings.ReplaceAll(c.action, "_", "-")
			before := l.In.Calls(route)
			id := f.invoke(t, c.action, c.params)
			if c.during != nil {
				conformance.EventuallyWithin(t, "the server runs "+route, patience, func() bool { return l.In.Calls(route) > before })
				f.waitJob(t, id, "running", func(j *mhp.Job) bool { return j.Extra["status"] == pylabrobot.LegacyRunning })
				c.during(t, f, l, id)
			}
			j := f.finish(t, id)
			if j.State != c.state || j.Outcome != c.outcome {
				t.Fatalf("job %s outcome %q (%v), want %s outcome %q", j.State, j.Outcome, j.Error, c.state, c.outcome)
			}
			if s := f.state(t); s != c.deviceAfter {
				t.Errorf("device %s, want %s", s, c.deviceAfter)
			}
			if c.check != nil {
				c.check(t, f, l, j)
			}
		})
	}
}

func TestLegacyNotCancellableAndLabware(t *testing.T) {
	f, l := legacyFixture(t, nil)
	desc := f.drv.Descriptor()
	for _, a := range desc.Actions {
		if a.Cancellable {
			t.Errorf("legacy action %s is cancellable", a.Name)
		}
	}
	if desc.Safety.EStop {
		t.Error("legacy server declares an e-stop")
	}
	l.In.Script(plrtest.RouteSetup, conformance.Block)
	id := f.invoke(t, "setup", nil)
	conformance.EventuallyWithin(t, "setup runs", patience, func() bool { return l.In.Calls(plrtest.RouteSetup) == 1 })
	if _, err := f.dev.CancelJob(context.Background(), id); mhp.CodeOf(err) != mhp.CodeNotSupported {
		t.Fatalf("cancel on the legacy server: %v, want NotSupported", err)
	}
	l.In.Release(plrtest.RouteSetup)
	f.finish(t, id)
	deck := map[string]any{"name": "deck", "type": "HamiltonSTARDeck", "children": []any{}}
	res, err := f.dev.Invoke(context.Background(), mhp.InvokeRequest{Name: "labware", Params: map[string]any{"deck": deck}, Approved: true})
	if err != nil {
		t.Fatal(err)
	}
	if j := f.finish(t, res.Job.ID); j.State != mhp.JobDone || l.Deck()["type"] != "HamiltonSTARDeck" {
		t.Fatalf("labware: %+v, deck %v", j, l.Deck())
	}
}
