package madsci_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/clock"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/madsci"
	"github.com/openmhp/mhp-go/madsci/madscitest"
)

// fixture is a driver over a fake node.
type fixture struct {
	node  *madscitest.Node
	drv   *binding.Driver
	dev   mhp.Device
	files string
}

func baseConfig(url, files string) madsci.Config {
	f := false
	return madsci.Config{
		NodeURL:        url,
		RequestTimeout: 5 * time.Second,
		PollInterval:   2 * time.Millisecond,
		PollMax:        10 * time.Millisecond,
		ActionTimeout:  10 * time.Second,
		CancelWait:     3 * time.Second,
		ResetWait:      10 * time.Second, // headroom for a loaded machine; refusals wait it out
		SignalCache:    -1,
		FilesDir:       files,
		ReadyInterlock: &f,
		PollRetry:      adapters.PollRetry{Backoff: 2 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, Window: 200 * time.Millisecond},
	}
}

func newFixture(t *testing.T, opts madscitest.Options, mut func(*madsci.Config)) *fixture {
	t.Helper()
	return newFixtureWith(t, opts, mut, madsci.Options{})
}

func newFixtureWith(t *testing.T, opts madscitest.Options, mut func(*madsci.Config), mopt madsci.Options) *fixture {
	t.Helper()
	n := madscitest.New(opts)
	t.Cleanup(n.Close)
	files := t.TempDir()
	cfg := baseConfig(n.URL, files)
	cfg.Device = mhp.DeviceInfo{ID: "node-01", Class: "test"}
	if mut != nil {
		mut(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), conformance.WaitTimeout)
	defer cancel()
	d, err := madsci.New(ctx, cfg, mopt)
	if err != nil {
		t.Fatalf("madsci.New: %v", err)
	}
	if err := d.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { n.In.ReleaseAll(); _ = d.Close() })
	return &fixture{node: n, drv: d, dev: mhp.AsSession(d, "s1"), files: files}
}

func (f *fixture) invoke(t *testing.T, name string, params map[string]any) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), conformance.WaitTimeout)
	defer cancel()
	res, err := f.dev.Invoke(ctx, mhp.InvokeRequest{Name: name, Params: params})
	if err != nil {
		t.Fatalf("invoke %s: %v", name, err)
	}
	return res.Job.ID
}

// waitJob polls the job until pred holds (conformance.Eventually).
func (f *fixture) waitJob(t *testing.T, id string, what string, pred func(*mhp.Job) bool) *mhp.Job {
	t.Helper()
	t.Logf("waiting for job %s: %s", id, what)
	return conformance.WaitJob(t, f.dev, id, conformance.WaitTimeout, pred)
}

func (f *fixture) finish(t *testing.T, id string) *mhp.Job {
	return f.waitJob(t, id, "terminal", func(j *mhp.Job) bool { return j.State.Terminal() })
}

// running waits until the node runs the job's action.
func (f *fixture) nodeRuns(t *testing.T, action string) madscitest.ActionRecord {
	t.Helper()
	var rec madscitest.ActionRecord
	conformance.Eventually(t, "the node to start "+action, func() bool {
		var ok bool
		if rec, ok = f.node.Last(action); !ok {
			return false
		}
		st, ok := f.node.Action(rec.ID)
		return ok && st.ID != "" && f.node.Requests("POST /action/"+action+"/"+rec.ID+"/start") > 0
	})
	return rec
}

func (f *fixture) state(t *testing.T) mhp.DeviceState {
	t.Helper()
	p, err := f.dev.Ping(context.Background())
	if err != nil {
		t.Fatalf("ping: %v", err)
	}
	return p.State
}

func TestDescribeMapsNodeInfo(t *testing.T) {
	f := newFixture(t, madscitest.Options{}, nil)
	desc := f.drv.Descriptor()
	tr, ok := desc.Action("transfer")
	if !ok {
		t.Fatalf("no transfer action in %+v", desc.Actions)
	}
	want := map[string]struct {
		typ      string
		optional bool
	}{"volume": {mhp.TypeNumber, false}, "note": {mhp.TypeString, true}, "protocol": {mhp.TypeString, false}, "extras": {mhp.TypeArray, true}}
	for name, w := range want {
		sh, ok := tr.Params.Get(name)
		if !ok {
			t.Fatalf("transfer has no param %s: %v", name, tr.Params.Names())
		}
		if sh.Type != w.typ || sh.Optional != w.optional {
			t.Errorf("param %s = %s optional=%v, want %s optional=%v", name, sh.Type, sh.Optional, w.typ, w.optional)
		}
	}
	prof, _ := desc.Action(conformance.ActionProfile)
	if sh, _ := prof.Params.Get("cycles"); sh == nil || sh.Type != mhp.TypeInteger || sh.Default != float64(1) {
		t.Errorf("profile.cycles = %+v, want integer default 1", sh)
	}
	if sh, _ := prof.Params.Get("steps"); sh == nil || sh.Type != mhp.TypeArray || sh.Items == nil || sh.Items.Type != mhp.TypeObject {
		t.Errorf("profile.steps = %+v, want array of object", sh)
	}
	mon, _ := desc.Action(conformance.ActionMonitor)
	run, _ := desc.Action(conformance.ActionRun)
	if !mon.Concurrent || run.Concurrent {
		t.Errorf("blocking mapping: monitor concurrent=%v run concurrent=%v", mon.Concurrent, run.Concurrent)
	}
	// Not pausable although the node lists pause and resume: MADSci's pause
	// ends the running action. Before the fix every action was advertised
	// pausable, and a pause left the node paused with the job failed.
	if !run.Cancellable || run.Pausable {
		t.Errorf("run cancellable=%v pausable=%v, want cancellable and not pausable by default", run.Cancellable, run.Pausable)
	}
	for _, s := range []struct{ name, typ string }{{madsci.SignalBusy, mhp.TypeBoolean}, {madsci.SignalReady, mhp.TypeBoolean},
		{madsci.SignalRunningActions, mhp.TypeInteger}, {"temperature", mhp.TypeNumber}, {"door_closed", mhp.TypeBoolean}} {
		sig, ok := desc.Signal(s.name)
		if !ok || sig.Type != s.typ {
			t.Errorf("signal %s = %+v, want type %s", s.name, sig, s.typ)
		}
	}
	for _, s := range []struct{ name, typ string }{{"setpoint", mhp.TypeNumber}, {"mode", mhp.TypeString}, {"fan", mhp.TypeBoolean}} {
		set, ok := desc.Setting(s.name)
		if !ok || set.Type != s.typ {
			t.Errorf("setting %s = %+v, want type %s", s.name, set, s.typ)
		}
	}
	if !desc.Safety.EStop {
		t.Errorf("safety.estop false with safety_stop listed")
	}
}

func TestStatusBooleansAreSignalsAndGate(t *testing.T) {
	tr := true
	f := newFixture(t, madscitest.Options{}, func(c *madsci.Config) { c.ReadyInterlock = &tr })
	ctx := context.Background()
	f.node.SetFlags(true, false, false, true) // locked, paused
	res, err := f.dev.Read(ctx, []string{madsci.SignalLocked, madsci.SignalPaused, madsci.SignalStopped, madsci.SignalReady, madsci.SignalErrored})
	if err != nil {
		t.Fatal(err)
	}
	if res.Values[madsci.SignalLocked] != true || res.Values[madsci.SignalPaused] != true || res.Values[madsci.SignalStopped] != false ||
		res.Values[madsci.SignalReady] != false || res.Values[madsci.SignalErrored] != false {
		t.Fatalf("status signals = %v", res.Values)
	}
	// Locked and paused are gates, not device state.
	_, err = f.dev.Invoke(ctx, mhp.InvokeRequest{Name: conformance.ActionQuick})
	if mhp.CodeOf(err) != mhp.CodeInterlockOpen {
		t.Fatalf("invoke on a locked, paused node: %v, want InterlockOpen on node.ready", err)
	}
	if s := f.state(t); s != mhp.StateIdle {
		t.Fatalf("device state on a locked, paused node: %s, want idle", s)
	}
	if n := f.node.In.Calls(conformance.ActionQuick); n != 0 {
		t.Fatalf("the node ran quick %d times behind a closed gate", n)
	}
	f.node.SetFlags(false, false, false, false)
	id := f.invoke(t, conformance.ActionQuick, nil)
	if j := f.finish(t, id); j.State != mhp.JobDone {
		t.Fatalf("quick on a ready node: %+v", j)
	}
}

// TestTerminalStates covers every node end state and what the job reports.
func TestTerminalStates(t *testing.T) {
	type tc struct {
		name   string
		opts   madscitest.Options
		mut    func(*madsci.Config)
		action string
		params map[string]any
		setup  func(t *testing.T, f *fixture)
		// during runs once the node started the action (for cancels, vanishing).
		during      func(t *testing.T, f *fixture, job string)
		state       mhp.JobState
		outcome     string
		deviceAfter mhp.DeviceState
		check       func(t *testing.T, f *fixture, j *mhp.Job)
	}
	run := map[string]any{"duration_s": 1.0}
	cases := []tc{
		{name: "succeeded", action: conformance.ActionQuick, state: mhp.JobDone, deviceAfter: mhp.StateIdle,
			check: func(t *testing.T, f *fixture, j *mhp.Job) {
				r, _ := j.Result.(map[string]any)
				jr, _ := r["json_result"].(map[string]any)
				if jr["ok"] != true || r["action_id"] == "" {
					t.Errorf("result = %v, want json_result {ok:true} and action_id", j.Result)
				}
			}},
		{name: "succeeded_after_running", action: conformance.ActionRun, params: run,
			setup:  func(t *testing.T, f *fixture) { f.node.In.Script(conformance.ActionRun, conformance.Block) },
			during: func(t *testing.T, f *fixture, job string) { f.node.In.Release(conformance.ActionRun) },
			state:  mhp.JobDone, deviceAfter: mhp.StateIdle},
		{name: "failed", action: conformance.ActionQuick, opts: madscitest.Options{ErrorOnFailure: true},
			setup: func(t *testing.T, f *fixture) { f.node.In.Script(conformance.ActionQuick, conformance.FailReported) },
			// The node is now errored: its word latches the device in fault.
			state: mhp.JobFailed, outcome: mhp.OutcomeFailed, deviceAfter: mhp.StateFault,
			check: func(t *testing.T, f *fixture, j *mhp.Job) {
				if j.Error == nil || j.Error.Data["node_errors"] == nil || !strings.Contains(j.Error.Message, "simulated") {
					t.Errorf("failed job error = %+v, want the node's errors", j.Error)
				}
				// The node is now errored: the signal says so.
				r, _ := f.dev.Read(context.Background(), []string{madsci.SignalErrored})
				if r.Values[madsci.SignalErrored] != true {
					t.Errorf("node.errored = %v after a failed action", r.Values[madsci.SignalErrored])
				}
			}},
		{name: "cancelled_by_cancel", action: conformance.ActionRun, params: run,
			setup: func(t *testing.T, f *fixture) { f.node.In.Script(conformance.ActionRun, conformance.Block) },
			during: func(t *testing.T, f *fixture, job string) {
				if _, err := f.dev.CancelJob(context.Background(), job); err != nil {
					t.Fatal(err)
				}
			},
			state: mhp.JobCancelled, deviceAfter: mhp.StateIdle,
			check: func(t *testing.T, f *fixture, j *mhp.Job) {
				if n := f.node.Requests("POST /admin/cancel"); n != 1 {
					t.Errorf("admin cancel posted %d times, want 1", n)
				}
			}},
		{name: "cancel_ignored_ends_done", action: conformance.ActionRun, params: run,
			setup: func(t *testing.T, f *fixture) { f.node.In.Script(conformance.ActionRun, conformance.IgnoreCancel) },
			during: func(t *testing.T, f *fixture, job string) {
				if _, err := f.dev.CancelJob(context.Background(), job); err != nil {
					t.Fatal(err)
				}
				conformance.Eventually(t, "the node's cancel posted", func() bool { return f.node.Requests("POST /admin/cancel") > 0 })
				if j, _ := f.dev.Job(context.Background(), job); j.State.Terminal() {
					t.Fatalf("job ended %s while the node still ran the action", j.State)
				}
				f.node.In.Release(conformance.ActionRun)
			},
			state: mhp.JobDone, deviceAfter: mhp.StateIdle,
			check: func(t *testing.T, f *fixture, j *mhp.Job) {
				if !j.CancelRequested {
					t.Errorf("cancel_requested not kept")
				}
			}},
		{name: "cancel_not_sent_when_node_runs_others", action: conformance.ActionRun, params: run,
			setup: func(t *testing.T, f *fixture) {
				f.node.In.Script(conformance.ActionRun, conformance.Block)
				f.node.In.Script(conformance.ActionMonitor, conformance.Block)
			},
			during: func(t *testing.T, f *fixture, job string) {
				mon := f.invoke(t, conformance.ActionMonitor, nil)
				f.nodeRuns(t, conformance.ActionMonitor)
				if _, err := f.dev.CancelJob(context.Background(), job); err != nil {
					t.Fatal(err)
				}
				f.waitJob(t, job, "cancel_requested", func(j *mhp.Job) bool { return j.CancelRequested })
				f.node.In.Release(conformance.ActionRun)
				f.node.In.Release(conformance.ActionMonitor)
				f.finish(t, mon)
			},
			state: mhp.JobDone, deviceAfter: mhp.StateIdle,
			check: func(t *testing.T, f *fixture, j *mhp.Job) {
				if n := f.node.Requests("POST /admin/cancel"); n != 0 {
					t.Errorf("node-wide cancel posted %d times while another action ran", n)
				}
			}},
		{name: "cancelled_by_node", action: conformance.ActionQuick,
			setup: func(t *testing.T, f *fixture) { f.node.EndNext(conformance.ActionQuick, madsci.StatusCancelled) },
			state: mhp.JobCancelled, deviceAfter: mhp.StateIdle},
		{name: "paused_ends_action", action: conformance.ActionRun, params: run,
			setup: func(t *testing.T, f *fixture) { f.node.In.Script(conformance.ActionRun, conformance.Block) },
			during: func(t *testing.T, f *fixture, job string) {
				// This node ends the action when paused, so the job may end
				// before jobs/pause answers: then the answer is DeviceBusy
				// ("ended failed before it paused"), which is as honest as
				// a paused job that ends a moment later. Either way the job
				// ends failed (checked below).
				j, err := f.dev.PauseJob(context.Background(), job)
				if err != nil {
					if e, ok := mhp.AsError(err); !ok || e.Code != mhp.CodeDeviceBusy || !strings.Contains(e.Message, "before it paused") {
						t.Fatalf("pause: %v", err)
					}
				} else if !j.Paused {
					t.Fatalf("pause answered a job that is not paused: %+v", j)
				}
			},
			state: mhp.JobFailed, outcome: mhp.OutcomeFailed, deviceAfter: mhp.StateIdle,
			check: func(t *testing.T, f *fixture, j *mhp.Job) {
				if f.node.Requests("POST /admin/pause") != 1 || !strings.Contains(j.Error.Message, "paused") {
					t.Errorf("pause posted %d times; error %v", f.node.Requests("POST /admin/pause"), j.Error)
				}
				// The job says that the node stays paused, what that
				// refuses and what clears it; the reset does.
				if !strings.Contains(j.Error.Message, "the node stays paused and refuses every later action") ||
					!strings.Contains(j.Error.Message, "safety/reset") || j.Error.Data["node_paused"] != true {
					t.Errorf("error %v (data %v), want it to say the node stays paused until safety/reset", j.Error, j.Error.Data)
				}
				ctx := context.Background()
				if r, err := f.dev.Reset(ctx); err != nil || !r.Verified {
					t.Fatalf("reset of the paused node: %+v %v", r, err)
				}
				f.node.In.Script(conformance.ActionRun, conformance.Normal)
				if j := f.finish(t, f.invoke(t, conformance.ActionRun, run)); j.State != mhp.JobDone {
					t.Errorf("run after the reset: %+v %v", j, j.Error)
				}
			}},
		{name: "paused_held_then_resumed", action: conformance.ActionRun, params: run, opts: madscitest.Options{PauseHolds: true},
			setup: func(t *testing.T, f *fixture) { f.node.In.Script(conformance.ActionRun, conformance.Block) },
			during: func(t *testing.T, f *fixture, job string) {
				if _, err := f.dev.PauseJob(context.Background(), job); err != nil {
					t.Fatal(err)
				}
				j := f.waitJob(t, job, "paused at the node", func(j *mhp.Job) bool { return j.Extra["node_status"] == madsci.StatusPaused })
				if !j.Paused || j.State.Terminal() {
					t.Fatalf("job while the node holds it paused: %+v", j)
				}
				if _, err := f.dev.ResumeJob(context.Background(), job); err != nil {
					t.Fatal(err)
				}
				f.waitJob(t, job, "running again", func(j *mhp.Job) bool { return j.Extra["node_status"] == madsci.StatusRunning })
				f.node.In.Release(conformance.ActionRun)
			},
			state: mhp.JobDone, deviceAfter: mhp.StateIdle},
		{name: "not_ready_refused_no_fault", action: conformance.ActionQuick,
			setup: func(t *testing.T, f *fixture) { f.node.SetFlags(true, false, false, false) },
			state: mhp.JobFailed, outcome: mhp.OutcomeNotStarted, deviceAfter: mhp.StateIdle,
			check: func(t *testing.T, f *fixture, j *mhp.Job) {
				if j.Error == nil || !strings.Contains(j.Error.Message, "never ran") {
					t.Errorf("not_ready error = %+v", j.Error)
				}
				if f.node.In.Calls(conformance.ActionQuick) != 0 {
					t.Errorf("the instrument ran the action")
				}
			}},
		{name: "unknown_faults", action: conformance.ActionQuick,
			setup: func(t *testing.T, f *fixture) { f.node.EndNext(conformance.ActionQuick, madsci.StatusUnknown) },
			state: mhp.JobFailed, outcome: mhp.OutcomeUnknown, deviceAfter: mhp.StateFault},
		{name: "reply_lost_at_start_faults", action: conformance.ActionQuick,
			setup: func(t *testing.T, f *fixture) { f.node.In.Script(conformance.ActionQuick, conformance.FailUnknown) },
			state: mhp.JobFailed, outcome: mhp.OutcomeUnknown, deviceAfter: mhp.StateFault},
		{name: "node_vanishes_mid_action", action: conformance.ActionRun, params: run,
			setup:  func(t *testing.T, f *fixture) { f.node.In.Script(conformance.ActionRun, conformance.Block) },
			during: func(t *testing.T, f *fixture, job string) { f.node.Vanish() },
			state:  mhp.JobFailed, outcome: mhp.OutcomeUnknown, deviceAfter: mhp.StateFault,
			check: func(t *testing.T, f *fixture, j *mhp.Job) {
				if !strings.Contains(j.Error.Message, "unreachable") {
					t.Errorf("error = %v, want node unreachable", j.Error)
				}
			}},
		{name: "no_terminal_state_before_deadline", action: conformance.ActionRun, params: run,
			mut: func(c *madsci.Config) {
				c.Actions = map[string]madsci.ActionOverride{conformance.ActionRun: {Timeout: 50 * time.Millisecond}}
			},
			setup: func(t *testing.T, f *fixture) { f.node.In.Script(conformance.ActionRun, conformance.Block) },
			state: mhp.JobFailed, outcome: mhp.OutcomeUnknown, deviceAfter: mhp.StateFault,
			check: func(t *testing.T, f *fixture, j *mhp.Job) {
				if !strings.Contains(j.Error.Message, "deadline") {
					t.Errorf("error = %v, want deadline", j.Error)
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mut := func(cfg *madsci.Config) {
				// The pause cases opt in, as a config for such a node does.
				yes := true
				if cfg.Actions == nil {
					cfg.Actions = map[string]madsci.ActionOverride{}
				}
				o := cfg.Actions[conformance.ActionRun]
				o.Pausable = &yes
				cfg.Actions[conformance.ActionRun] = o
				if c.mut != nil {
					c.mut(cfg)
				}
			}
			f := newFixture(t, c.opts, mut)
			if c.setup != nil {
				c.setup(t, f)
			}
			id := f.invoke(t, c.action, c.params)
			if c.during != nil {
				f.nodeRuns(t, c.action)
				f.waitJob(t, id, "running at the node", func(j *mhp.Job) bool { return j.Extra["node_status"] == madsci.StatusRunning })
				c.during(t, f, id)
			}
			j := f.finish(t, id)
			if j.State != c.state || j.Outcome != c.outcome {
				t.Fatalf("job = %s outcome %q (%v), want %s outcome %q", j.State, j.Outcome, j.Error, c.state, c.outcome)
			}
			if s := f.state(t); s != c.deviceAfter {
				t.Errorf("device state %s, want %s", s, c.deviceAfter)
			}
			if c.check != nil {
				c.check(t, f, j)
			}
		})
	}
}

func TestFilesAreUploaded(t *testing.T) {
	for _, layout := range []string{madsci.LayoutV5, madsci.LayoutLegacy} {
		t.Run(layout, func(t *testing.T) {
			f := newFixture(t, madscitest.Options{Layout: layout}, func(c *madsci.Config) { c.Layout = madsci.LayoutAuto })
			if err := os.WriteFile(filepath.Join(f.files, "proto.txt"), []byte("aspirate 10"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(f.files, "extra.csv"), []byte("a,b"), 0o600); err != nil {
				t.Fatal(err)
			}
			id := f.invoke(t, "transfer", map[string]any{"volume": 12.5, "protocol": "proto.txt", "extras": []any{"extra.csv"}})
			j := f.finish(t, id)
			if j.State != mhp.JobDone {
				t.Fatalf("transfer: %+v %v", j, j.Error)
			}
			rec, _ := f.node.Last("transfer")
			got := map[string]string{}
			for _, fl := range rec.Files {
				got[fl.Arg] = string(fl.Data)
			}
			if layout == madsci.LayoutLegacy {
				// v0.1-v0.4: one "files" part per file, named by its arg.
				if got["protocol"] != "aspirate 10" || got["extras"] != "a,b" {
					t.Fatalf("legacy upload = %v", got)
				}
			} else if got["protocol"] != "aspirate 10" || got["extras"] != "a,b" {
				t.Fatalf("uploaded = %v", got)
			}
			if rec.Args["volume"] != 12.5 || rec.Args["protocol"] != nil {
				t.Errorf("args = %v, want volume only (files go as uploads)", rec.Args)
			}
			r := j.Result.(map[string]any)
			if r["files"] == nil || r["datapoints"] == nil {
				t.Errorf("result = %v, want files and datapoints", r)
			}
		})
	}
}

func TestFilesOutsideFilesDirRefused(t *testing.T) {
	f := newFixture(t, madscitest.Options{}, nil)
	outside := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(outside, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{outside, "../" + filepath.Base(outside), "missing.txt"} {
		_, err := f.dev.Invoke(context.Background(), mhp.InvokeRequest{Name: "transfer", Params: map[string]any{"volume": 1.0, "protocol": p}})
		if c := mhp.CodeOf(err); c != mhp.CodeForbidden && c != mhp.CodeInvalidValue {
			t.Errorf("protocol=%q: %v, want Forbidden or InvalidValue", p, err)
		}
	}
	if n := f.node.Requests("POST /action/transfer"); n != 0 {
		t.Errorf("the node saw %d creates for refused uploads", n)
	}
}

func TestValidationErrorIsRefusal(t *testing.T) {
	// The node's 422 on create is a refusal: nothing ran, no fault. The
	// adapter's shapes would catch this, so drop them with an override.
	f := newFixture(t, madscitest.Options{}, func(c *madsci.Config) {
		c.Actions = map[string]madsci.ActionOverride{conformance.ActionRun: {Params: map[string]*mhp.Shape{"duration_s": {Type: mhp.TypeAny}}}}
	})
	id := f.invoke(t, conformance.ActionRun, map[string]any{"duration_s": "long"})
	j := f.finish(t, id)
	if j.State != mhp.JobFailed || j.Outcome != mhp.OutcomeNotStarted || f.state(t) != mhp.StateIdle {
		t.Fatalf("422 on create: %+v %v, state %s", j, j.Error, f.state(t))
	}
}

// recClock runs AfterFunc at once and records the waits asked for.
type recClock struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (c *recClock) Now() time.Time { return time.Now() }
func (c *recClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	c.mu.Lock()
	c.waits = append(c.waits, d)
	c.mu.Unlock()
	go f()
	return time.AfterFunc(time.Hour, func() {})
}

func TestRateLimitBackOff(t *testing.T) {
	n := madscitest.New(madscitest.Options{})
	defer n.Close()
	ctx := context.Background()

	rc := &recClock{}
	c, err := madsci.NewClient(madsci.ClientOptions{URL: n.URL, Clock: rc, MaxRetries: 5, MaxRetryAfter: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	n.RateLimit(2, "2")
	if _, err := c.Status(ctx); err != nil {
		t.Fatalf("status after two 429s: %v", err)
	}
	if n.Limited() != 2 || len(rc.waits) != 2 || rc.waits[0] != 2*time.Second || rc.waits[1] != 2*time.Second {
		t.Fatalf("429s=%d waits=%v, want two waits of 2s", n.Limited(), rc.waits)
	}

	// Retry-After is capped, and retries are bounded.
	rc2 := &recClock{}
	c2, _ := madsci.NewClient(madsci.ClientOptions{URL: n.URL, Clock: rc2, MaxRetries: 2, MaxRetryAfter: 5 * time.Second})
	n.RateLimit(10, "3600")
	_, err = c2.Submit(ctx, madsci.Submission{Action: conformance.ActionQuick})
	if mhp.CodeOf(err) != mhp.CodeDeviceBusy {
		t.Fatalf("submit while rate-limited: %v, want a DeviceBusy refusal", err)
	}
	if len(rc2.waits) != 2 || rc2.waits[0] != 5*time.Second {
		t.Fatalf("waits = %v, want 2 waits capped at 5s", rc2.waits)
	}
	if n.In.Calls(conformance.ActionQuick) != 0 {
		t.Fatalf("a rate-limited submit ran the action")
	}
	n.RateLimit(0, "")

	// HTTP-date form.
	rc3 := &recClock{}
	c3, _ := madsci.NewClient(madsci.ClientOptions{URL: n.URL, Clock: rc3, MaxRetries: 1, MaxRetryAfter: time.Minute})
	n.RateLimit(1, time.Now().Add(20*time.Second).UTC().Format(http1123))
	if _, err := c3.Info(ctx); err != nil {
		t.Fatal(err)
	}
	if len(rc3.waits) != 1 || rc3.waits[0] < 15*time.Second || rc3.waits[0] > 21*time.Second {
		t.Fatalf("HTTP-date Retry-After waits = %v, want ~20s", rc3.waits)
	}
}

const http1123 = "Mon, 02 Jan 2006 15:04:05 GMT"

func TestRateLimitedActionThroughDriver(t *testing.T) {
	f := newFixture(t, madscitest.Options{}, nil)
	// A real Retry-After of 1s through the driver: the action still completes.
	f.node.RateLimit(1, "0.05")
	id := f.invoke(t, conformance.ActionQuick, nil)
	if j := f.finish(t, id); j.State != mhp.JobDone {
		t.Fatalf("quick after a 429: %+v %v", j, j.Error)
	}
	if f.node.Limited() != 1 {
		t.Fatalf("429s sent: %d", f.node.Limited())
	}
}

func TestEStop(t *testing.T) {
	t.Run("safety_stop_listed", func(t *testing.T) {
		f := newFixture(t, madscitest.Options{}, nil)
		f.node.In.Script(conformance.ActionRun, conformance.Block)
		id := f.invoke(t, conformance.ActionRun, map[string]any{"duration_s": 5.0})
		f.nodeRuns(t, conformance.ActionRun)
		res, err := f.dev.EStop(context.Background(), "test")
		if err != nil || !res.Stopped {
			t.Fatalf("estop: %+v %v", res, err)
		}
		if f.node.In.StopCalls() != 1 {
			t.Fatalf("safety_stop reached the instrument %d times", f.node.In.StopCalls())
		}
		if j := f.finish(t, id); j.State != mhp.JobCancelled {
			t.Fatalf("job after estop: %s %v", j.State, j.Error)
		}
		r, _ := f.dev.Read(context.Background(), []string{madsci.SignalStopped})
		if r.Values[madsci.SignalStopped] != true {
			t.Fatalf("node.stopped = %v after safety_stop", r.Values[madsci.SignalStopped])
		}
		rr, err := f.dev.Reset(context.Background())
		if err != nil || !rr.Verified || rr.State != mhp.StateIdle {
			t.Fatalf("reset: %+v %v", rr, err)
		}
		if f.node.Requests("POST /admin/reset") != 1 {
			t.Fatalf("reset admin posted %d times", f.node.Requests("POST /admin/reset"))
		}
		r, _ = f.dev.Read(context.Background(), []string{madsci.SignalStopped})
		if r.Values[madsci.SignalStopped] != false {
			t.Fatalf("node.stopped after reset = %v", r.Values[madsci.SignalStopped])
		}
	})
	t.Run("safety_stop_not_listed", func(t *testing.T) {
		f := newFixture(t, madscitest.Options{AdminCommands: []string{"reset", "cancel", "lock", "unlock"}}, nil)
		res, err := f.dev.EStop(context.Background(), "test")
		if err != nil {
			t.Fatal(err)
		}
		if res.Stopped || res.State != mhp.StateEStop || !strings.Contains(res.StopError, "safety_stop") {
			t.Fatalf("estop without safety_stop: %+v", res)
		}
		if f.node.Requests("POST /admin/safety_stop") != 0 || f.node.Requests("POST /admin/lock") != 1 {
			t.Fatalf("sent safety_stop %d, lock %d", f.node.Requests("POST /admin/safety_stop"), f.node.Requests("POST /admin/lock"))
		}
		r, _ := f.dev.Read(context.Background(), []string{madsci.SignalLocked})
		if r.Values[madsci.SignalLocked] != true {
			t.Fatalf("node not locked after the fallback")
		}
	})
	t.Run("safety_stop_fails", func(t *testing.T) {
		f := newFixture(t, madscitest.Options{}, nil)
		f.node.In.FailStop(true)
		res, err := f.dev.EStop(context.Background(), "test")
		if err != nil || res.Stopped || res.StopError == "" {
			t.Fatalf("estop with a failing safety_stop: %+v %v", res, err)
		}
	})
}

func TestSettingsWriteConfig(t *testing.T) {
	f := newFixture(t, madscitest.Options{}, nil)
	ctx := context.Background()
	w, err := f.dev.Write(ctx, mhp.WriteRequest{Name: "setpoint", Value: 42.0})
	if err != nil || !w.Applied {
		t.Fatalf("write: %+v %v", w, err)
	}
	if v, _ := f.node.In.Written("setpoint"); v != 42.0 {
		t.Fatalf("node config setpoint = %v", v)
	}
	f.node.In.Script("setpoint", conformance.Refuse)
	if _, err := f.dev.Write(ctx, mhp.WriteRequest{Name: "setpoint", Value: 43.0}); err == nil || f.state(t) != mhp.StateIdle {
		t.Fatalf("refused write: %v, state %s", err, f.state(t))
	}
	f.node.In.Script("setpoint", conformance.FailUnknown)
	if _, err := f.dev.Write(ctx, mhp.WriteRequest{Name: "setpoint", Value: 44.0}); err == nil || f.state(t) != mhp.StateFault {
		t.Fatalf("dropped write: %v, state %s", err, f.state(t))
	}
}

func TestLegacyLayoutDetected(t *testing.T) {
	f := newFixture(t, madscitest.Options{Layout: madsci.LayoutLegacy}, func(c *madsci.Config) { c.Layout = madsci.LayoutAuto })
	f.node.In.Script(conformance.ActionRun, conformance.Block)
	id := f.invoke(t, conformance.ActionRun, map[string]any{"duration_s": 1.0})
	f.nodeRunsLegacy(t)
	if _, err := f.dev.CancelJob(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	if j := f.finish(t, id); j.State != mhp.JobCancelled {
		t.Fatalf("legacy cancel: %s %v", j.State, j.Error)
	}
	if f.node.Requests("POST /action") != 1 {
		t.Fatalf("legacy POST /action count %d", f.node.Requests("POST /action"))
	}
}

func (f *fixture) nodeRunsLegacy(t *testing.T) {
	t.Helper()
	conformance.Eventually(t, "the legacy action posted", func() bool { return f.node.Requests("POST /action") > 0 })
}

func TestPythonTypeMapping(t *testing.T) {
	for typ, want := range map[string]string{
		"str": mhp.TypeString, "int": mhp.TypeInteger, "float": mhp.TypeNumber, "bool": mhp.TypeBoolean,
		"dict": mhp.TypeObject, "dict[str, Any]": mhp.TypeObject, "list[int]": mhp.TypeArray, "Optional[float]": mhp.TypeNumber,
		"float | None": mhp.TypeNumber, "Union[int, None]": mhp.TypeInteger, "LocationArgument": mhp.TypeAny,
		"Literal['a', 'b']": mhp.TypeString, "Path": mhp.TypeString,
	} {
		if got := madsci.PythonType(typ); got != want {
			t.Errorf("%s -> %s, want %s", typ, got, want)
		}
	}
}

func TestNewULID(t *testing.T) {
	a := madsci.NewULID(time.UnixMilli(1))
	b := madsci.NewULID(time.UnixMilli(2))
	if len(a) != 26 || len(b) != 26 || a[:10] != "0000000001" || b[:10] != "0000000002" || a == b {
		t.Fatalf("ULIDs %q %q", a, b)
	}
}

// TestSchemaShapeMapsDeclaredResultTypes: a json result's declared type
// becomes json_result's shape (integer, object), not any. Before the fix
// every action returned json_result: any.
func TestSchemaShapeMapsDeclaredResultTypes(t *testing.T) {
	for _, c := range []struct {
		schema map[string]any
		want   string
	}{
		{map[string]any{"type": "object", "properties": map[string]any{"data": map[string]any{"type": "integer"}}}, mhp.TypeInteger},
		{map[string]any{"type": "object", "properties": map[string]any{"data": map[string]any{"type": "object"}}}, mhp.TypeObject},
		{map[string]any{"type": "number"}, mhp.TypeNumber},
	} {
		f := newFixture(t, madscitest.Options{ResultSchema: c.schema}, nil)
		desc := f.drv.Descriptor()
		run, _ := desc.Action(conformance.ActionRun)
		if run.Returns == nil || run.Returns.Properties["json_result"] == nil || run.Returns.Properties["json_result"].Type != c.want {
			t.Fatalf("schema %v: returns %+v, want json_result %s", c.schema, run.Returns, c.want)
		}
		// With result: json_result the job's result is the raw value, and
		// the action returns its type (before: the envelope's object).
		f = newFixture(t, madscitest.Options{ResultSchema: c.schema}, func(cfg *madsci.Config) { cfg.Result = madsci.ResultJSON })
		desc = f.drv.Descriptor()
		run, _ = desc.Action(conformance.ActionRun)
		if run.Returns == nil || run.Returns.Type != c.want {
			t.Fatalf("schema %v, result json_result: returns %+v, want %s", c.schema, run.Returns, c.want)
		}
	}
}

// TestPausableNeedsTheNodesPause: opting an action in to pause on a node
// without pause and resume is refused at build.
func TestPausableNeedsTheNodesPause(t *testing.T) {
	n := madscitest.New(madscitest.Options{AdminCommands: []string{"reset", "cancel"}})
	t.Cleanup(n.Close)
	yes := true
	cfg := baseConfig(n.URL, t.TempDir())
	cfg.Device = mhp.DeviceInfo{ID: "node-01", Class: "test"}
	cfg.Actions = map[string]madsci.ActionOverride{conformance.ActionRun: {Pausable: &yes}}
	ctx, cancel := context.WithTimeout(context.Background(), conformance.WaitTimeout)
	defer cancel()
	d, err := madsci.New(ctx, cfg, madsci.Options{})
	if err == nil {
		err = d.Start(ctx)
		_ = d.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "pausable needs") {
		t.Fatalf("pausable without the node's pause: %v", err)
	}
}
