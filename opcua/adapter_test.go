package opcua

import (
	"context"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/clock"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/opcua/opcuatest"
)

// extraConfig adds the fake's extra nodes to the fixture config.
func extraConfig(url string) Config {
	cfg := fixtureConfig(url, conformance.Options{})
	cfg.Signals = append(cfg.Signals, SignalItem{Signal: mhp.Signal{Name: "counter", Type: mhp.TypeInteger}, Node: opcuatest.NodeID("ro_counter")})
	cfg.Settings = append(cfg.Settings,
		SettingItem{Setting: mhp.Setting{Name: "small", Type: mhp.TypeInteger}, Node: opcuatest.NodeID("small")},
		SettingItem{Setting: mhp.Setting{Name: "counter_w", Type: mhp.TypeInteger}, Node: opcuatest.NodeID("ro_counter")},
		SettingItem{Setting: mhp.Setting{Name: "small_as_double", Type: mhp.TypeNumber}, Node: opcuatest.NodeID("small"), DataType: "Double"},
	)
	// A LADS function started with plain Start(Properties): no run id, the
	// RunningStateMachine's Complete says done.
	cfg.Actions = append(cfg.Actions, ActionItem{Action: mhp.Action{Name: "plain_start",
		Params: mhp.Params{{Name: "speed", Shape: &mhp.Shape{Type: mhp.TypeNumber}}}},
		LADS: &LADSSpec{FunctionalUnit: opcuatest.NodeID("FU_" + conformance.ActionMonitor), Start: "Start"}})
	return cfg
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestReadAndSubscribe(t *testing.T) {
	srv := startFake(t)
	d := startDriver(t, extraConfig(srv.URL), nil)
	waitSignals(t, d)
	ctx := ctxT(t)
	res, err := d.Read(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Values["temperature"] != 21.5 || res.Values["door_closed"] != true || res.Values["counter"] != int64(7) {
		t.Fatalf("values %+v", res.Values)
	}
	if res.Times["temperature"] == 0 {
		t.Fatalf("no source timestamp: %+v", res.Times)
	}
	// A subscription pushes changes; an unavailable value reads null.
	got := subscribeUpdates(t, d, "temperature")
	srv.In.SetSignal("temperature", 30.25)
	waitNotification(t, got, func(p map[string]any) bool { return p["name"] == "temperature" && p["value"] == 30.25 })
	srv.In.SetUnavailable("temperature", true)
	waitNotification(t, got, func(p map[string]any) bool { return p["name"] == "temperature" && p["value"] == nil })
	res, _ = d.Read(ctx, []string{"temperature"})
	if res.Values["temperature"] != nil || res.Unavailable["temperature"] == "" {
		t.Fatalf("bad value read as %+v", res)
	}
}

func TestStaleSignal(t *testing.T) {
	srv := startFake(t)
	cfg := extraConfig(srv.URL)
	cfg.Signals[0].StaleAfterS = 1
	clk := clock.NewManual(time.Now())
	d := startDriver(t, cfg, clk)
	waitSignals(t, d)
	// The fake stamps values with the real time (source timestamps) while
	// the driver runs on the manual clock: advance it past the real time the
	// last value can carry, not only past its start. On a loaded machine
	// the start-up took longer than stale_after_s, and a fixed 2 s advance
	// left the value fresh (the flake under load).
	clk.Advance(time.Since(clk.Now()) + 2*time.Second)
	res, err := d.Read(ctxT(t), []string{"temperature"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Values["temperature"] != nil {
		t.Fatalf("stale value served: %+v", res)
	}
}

func TestWriteOutcomes(t *testing.T) {
	srv := startFake(t)
	d := startDriver(t, extraConfig(srv.URL), nil)
	waitSignals(t, d)
	ctx := ctxT(t)
	dev := mhp.AsSession(d, "s1")
	cases := []struct {
		name   string
		value  any
		code   mhp.Code
		status string
	}{
		{"setpoint", 42.5, 0, ""},
		{"small", 50, 0, ""},
		{"small", 120, mhp.CodeLimitViolation, "BadOutOfRange"},
		{"small", 70000, mhp.CodeLimitViolation, ""}, // does not fit Int16: refused before sending
		{"counter_w", 3, mhp.CodeNotSupported, "BadNotWritable"},
		{"small_as_double", 5, mhp.CodeInvalidValue, "BadTypeMismatch"},
	}
	for _, c := range cases {
		res, err := dev.Write(ctx, mhp.WriteRequest{Name: c.name, Value: c.value})
		if c.code == 0 {
			if err != nil || !res.Applied {
				t.Fatalf("%s=%v: %+v %v", c.name, c.value, res, err)
			}
			continue
		}
		e, ok := mhp.AsError(err)
		if !ok || e.Code != c.code {
			t.Fatalf("%s=%v: want %v, got %v", c.name, c.value, c.code, err)
		}
		if c.status != "" && e.Data["opcua_status"] != c.status {
			t.Fatalf("%s=%v: want status %s in %+v", c.name, c.value, c.status, e)
		}
	}
	if v, _ := srv.In.Written("setpoint"); v != 42.5 {
		t.Fatalf("setpoint at the backend %v", v)
	}
	// None of the refusals faulted the device.
	if p, _ := dev.Ping(ctx); p.State != mhp.StateIdle {
		t.Fatalf("state %s after refusals", p.State)
	}
	// A write whose reply never comes (link dropped) faults with outcome unknown.
	srv.In.Script("setpoint", conformance.FailUnknown)
	_, err := dev.Write(ctx, mhp.WriteRequest{Name: "setpoint", Value: 10.0})
	if e, ok := mhp.AsError(err); !ok || e.Code != mhp.CodeDeviceFault || !e.OutcomeUnknown() {
		t.Fatalf("dropped write: %v", err)
	}
}

func TestMethodCall(t *testing.T) {
	srv := startFake(t)
	d := startDriver(t, extraConfig(srv.URL), nil)
	waitSignals(t, d)
	ctx := ctxT(t)
	dev := mhp.AsSession(d, "s1")
	job := invokeWait(t, dev, conformance.ActionProfile, map[string]any{
		"steps": []any{map[string]any{"temp": 95.0, "hold_s": 30.0}}, "cycles": 3})
	if job.State != mhp.JobDone {
		t.Fatalf("profile: %+v", job)
	}
	r, _ := job.Result.(map[string]any)
	if r["ok"] != true || r["action"] != "profile" {
		t.Fatalf("result %+v", job.Result)
	}
	srv.In.Script(conformance.ActionQuick, conformance.Refuse)
	job = invokeWait(t, dev, conformance.ActionQuick, nil)
	if job.State != mhp.JobFailed || job.Outcome != mhp.OutcomeNotStarted {
		t.Fatalf("refused call: %+v", job)
	}
	srv.In.Script(conformance.ActionQuick, conformance.FailReported)
	job = invokeWait(t, dev, conformance.ActionQuick, nil)
	if job.State != mhp.JobFailed || job.Outcome != mhp.OutcomeFailed {
		t.Fatalf("failed call: %+v", job)
	}
	if p, _ := dev.Ping(ctx); p.State != mhp.StateIdle {
		t.Fatalf("state %s", p.State)
	}
	srv.In.Script(conformance.ActionQuick, conformance.FailUnknown)
	job = invokeWait(t, dev, conformance.ActionQuick, nil)
	if job.State != mhp.JobFailed || job.Outcome != mhp.OutcomeUnknown {
		t.Fatalf("dropped call: %+v", job)
	}
	if p, _ := dev.Ping(ctx); p.State != mhp.StateFault {
		t.Fatalf("state %s after an unknown outcome", p.State)
	}
}

// invokeWait invokes an action and waits for its terminal job.
func invokeWait(t *testing.T, dev mhp.Device, name string, params map[string]any) *mhp.Job {
	t.Helper()
	ctx := ctxT(t)
	res, err := dev.Invoke(ctx, mhp.InvokeRequest{Name: name, Params: params})
	if err != nil {
		t.Fatalf("invoke %s: %v", name, err)
	}
	return waitJob(t, dev, res.Job.ID)
}

func waitJob(t *testing.T, dev mhp.Device, id string) *mhp.Job {
	t.Helper()
	return conformance.WaitJob(t, dev, id, 15*time.Second, nil)
}

func TestLADSOutcomes(t *testing.T) {
	srv := startFake(t)
	d := startDriver(t, extraConfig(srv.URL), nil)
	waitSignals(t, d)
	ctx := ctxT(t)
	dev := mhp.AsSession(d, "s1")
	run := map[string]any{"duration_s": 5.0}

	job := invokeWait(t, dev, conformance.ActionRun, run)
	if job.State != mhp.JobDone {
		t.Fatalf("normal run: %+v", job)
	}
	if r := job.Result.(map[string]any); r["lads_state"] != "Stopped" || r["ok"] != true || r["device_program_run_id"] != "run-1" {
		t.Fatalf("result %+v", job.Result)
	}

	// Block honours Stop: the unit goes Stopping -> Stopped -> cancelled.
	srv.In.Script(conformance.ActionRun, conformance.Block)
	res, err := dev.Invoke(ctx, mhp.InvokeRequest{Name: conformance.ActionRun, Params: run})
	if err != nil {
		t.Fatal(err)
	}
	conformance.EventuallyWithin(t, "the work to run", 5*time.Second, func() bool { return srv.In.Calls(conformance.ActionRun) == 2 })
	if _, err := dev.CancelJob(ctx, res.Job.ID); err != nil {
		t.Fatal(err)
	}
	job = waitJob(t, dev, res.Job.ID)
	if job.State != mhp.JobCancelled {
		t.Fatalf("cancelled run: %+v", job)
	}

	// IgnoreCancel: the unit completes anyway -> done.
	srv.In.Script(conformance.ActionRun, conformance.IgnoreCancel)
	res, err = dev.Invoke(ctx, mhp.InvokeRequest{Name: conformance.ActionRun, Params: run})
	if err != nil {
		t.Fatal(err)
	}
	conformance.EventuallyWithin(t, "the work to run", 5*time.Second, func() bool {
		if j, _ := dev.Job(ctx, res.Job.ID); j.State.Terminal() {
			t.Fatalf("job ended early: %+v", j)
		}
		return srv.In.Calls(conformance.ActionRun) == 3
	})
	if _, err := dev.CancelJob(ctx, res.Job.ID); err != nil {
		t.Fatal(err)
	}
	srv.In.Release(conformance.ActionRun)
	job = waitJob(t, dev, res.Job.ID)
	if job.State != mhp.JobDone {
		t.Fatalf("ignored cancel: %+v", job)
	}

	// The device aborts by itself -> failed, outcome known.
	srv.In.Script(conformance.ActionRun, conformance.FailReported)
	job = invokeWait(t, dev, conformance.ActionRun, run)
	if job.State != mhp.JobFailed || job.Outcome != mhp.OutcomeFailed {
		t.Fatalf("aborted run: %+v", job)
	}
	conformance.EventuallyWithin(t, "the unit to be cleared", 5*time.Second, func() bool {
		p, _ := dev.Ping(ctx)
		return p.State == mhp.StateIdle
	})

	// Plain Start(Properties): done from the RunningStateMachine's Complete.
	job = invokeWait(t, dev, "plain_start", map[string]any{"speed": 3.5})
	if job.State != mhp.JobDone {
		t.Fatalf("plain start: %+v", job)
	}
	if got := srv.In.Calls(conformance.ActionMonitor); got != 1 {
		t.Fatalf("monitor unit started %d times", got)
	}

	// Refused start -> not started.
	srv.In.Script(conformance.ActionRun, conformance.Refuse)
	job = invokeWait(t, dev, conformance.ActionRun, run)
	if job.State != mhp.JobFailed || job.Outcome != mhp.OutcomeNotStarted {
		t.Fatalf("refused run: %+v", job)
	}
}

func TestReconnect(t *testing.T) {
	srv := startFake(t)
	d := startDriver(t, extraConfig(srv.URL), nil)
	waitSignals(t, d)
	srv.DropConnections()
	srv.In.SetSignal("temperature", 25.0)
	conformance.EventuallyWithin(t, "a read after reconnecting", 10*time.Second, func() bool {
		res, err := d.Read(context.Background(), []string{"temperature"})
		return err == nil && res.Values["temperature"] == 25.0
	})
}

func TestConformance(t *testing.T) {
	conformance.Run(t, harness)
}

var _ = binding.Applied
