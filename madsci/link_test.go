package madsci_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/madsci"
	"github.com/openmhp/mhp-go/madsci/madscitest"
)

// TestStartsBeforeNode: with the node down at start, the adapter serves the
// cached description, reports the backend down, refuses actuation
// not_started (nothing sent, no fault), and works once the node comes back
// on its address, without a restart. fail_fast and a missing cache refuse
// to start, each saying why.
func TestStartsBeforeNode(t *testing.T) {
	cache := filepath.Join(t.TempDir(), "node.descriptor.json")
	first := madscitest.New(madscitest.Options{})
	addr := strings.TrimPrefix(first.URL, "http://")
	cfg := baseConfig(first.URL, t.TempDir())
	cfg.Device = mhp.DeviceInfo{ID: "node-01", Class: "test"}
	cfg.Link = adapters.LinkConfig{RetryMin: 20 * time.Millisecond, RetryMax: 100 * time.Millisecond, DescriptorCache: cache}
	ctx := context.Background()
	d, err := madsci.New(ctx, cfg, madsci.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := d.Descriptor()
	_ = d.Close()
	first.Close() // the node is gone; the cache stays

	for want, mut := range map[string]func(*madsci.Config){
		"fail_fast":        func(c *madsci.Config) { c.Link.FailFast = true },
		"descriptor_cache": func(c *madsci.Config) { c.Link.DescriptorCache = "" },
	} {
		c := cfg
		mut(&c)
		_, err := madsci.New(ctx, c, madsci.Options{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("start with the node down: %v, want a refusal naming %s", err, want)
		}
	}

	d, err = madsci.New(ctx, cfg, madsci.Options{})
	if err != nil {
		t.Fatalf("start with the node down and a cache: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	if err := d.Start(ctx); err != nil {
		t.Fatalf("Start with the node down: %v", err)
	}
	dev := mhp.AsSession(d, "s1")
	if got := d.Descriptor(); !adapters.SameDescription(got.Actions, want.Actions) || !adapters.SameDescription(got.Settings, want.Settings) {
		t.Fatalf("the cached description differs from the node's:\n%+v\n%+v", got.Actions, want.Actions)
	}
	p, _ := dev.Ping(ctx)
	if p.Backend == nil || p.Backend.Connected || !strings.Contains(p.Backend.Error, addr) {
		t.Fatalf("ping backend %+v, want connected:false naming the node", p.Backend)
	}
	r, err := dev.Read(ctx, []string{conformance.SignalTemperature})
	if err != nil || r.Values[conformance.SignalTemperature] != nil {
		t.Fatalf("read with the node down: %+v %v, want unavailable", r, err)
	}
	for _, call := range []func() error{
		func() error { _, err := dev.Invoke(ctx, mhp.InvokeRequest{Name: conformance.ActionQuick}); return err },
		func() error { _, err := dev.Write(ctx, mhp.WriteRequest{Name: "setpoint", Value: 5.0}); return err },
	} {
		e, ok := mhp.AsError(call())
		if !ok || e.Data["outcome"] != mhp.OutcomeNotStarted {
			t.Fatalf("actuation with the node down: %v, want not_started", e)
		}
	}
	if s := d.State(); s != mhp.StateIdle {
		t.Fatalf("state with the node down %s, want idle (no fault)", s)
	}

	back := madscitest.New(madscitest.Options{Addr: addr})
	t.Cleanup(back.Close)
	conformance.Eventually(t, "link", func() bool { l := d.Link(); return l != nil && l.Connected })
	res, err := dev.Invoke(ctx, mhp.InvokeRequest{Name: conformance.ActionQuick})
	if err != nil {
		t.Fatalf("invoke after the node came back: %v", err)
	}
	conformance.Eventually(t, "link", func() bool {
		j, _ := dev.Job(ctx, res.Job.ID)
		return j != nil && j.State == mhp.JobDone
	})

	// The node restarts describing itself differently: not adopted.
	back.Close()
	conformance.Eventually(t, "link", func() bool { l := d.Link(); return l != nil && !l.Connected })
	changed := madscitest.New(madscitest.Options{Addr: addr, AdminCommands: []string{"reset"}})
	t.Cleanup(changed.Close)
	conformance.Eventually(t, "link", func() bool {
		l := d.Link()
		return l != nil && strings.Contains(l.Error, "differently")
	})
	if l := d.Link(); l.Connected {
		t.Fatal("a node that changed its description was adopted")
	}
	if s := d.State(); s != mhp.StateIdle {
		t.Fatalf("state %s after idle link drops, want idle", s)
	}
}

// TestLinkDropMidJobFaults: a link that drops while an action runs ends the
// job outcome unknown (fault); the same drop while idle latches nothing.
func TestLinkDropMidJobFaults(t *testing.T) {
	f := newFixture(t, madscitest.Options{}, func(c *madsci.Config) { c.PollFailures = 2 })
	f.node.In.Script(conformance.ActionRun, conformance.Block)
	id := f.invoke(t, conformance.ActionRun, map[string]any{"duration_s": 1.0})
	f.nodeRuns(t, conformance.ActionRun)
	f.node.Vanish()
	j := f.finish(t, id)
	if j.State != mhp.JobFailed || j.Error == nil || j.Error.Data["outcome"] != mhp.OutcomeUnknown || f.state(t) != mhp.StateFault {
		t.Fatalf("job after a mid-job drop: %+v (state %s), want outcome unknown and fault", j, f.state(t))
	}
}

// TestResultRoute500FallsBack: an action that declares a return type and
// ends cancelled makes the node answer 500 on /action/{name}/{id}/result;
// the adapter reads /action/{id}/result instead and ends the job cancelled,
// with no fault.
func TestResultRoute500FallsBack(t *testing.T) {
	f := newFixture(t, madscitest.Options{}, nil)
	f.node.In.Script(conformance.ActionRun, conformance.Block)
	id := f.invoke(t, conformance.ActionRun, map[string]any{"duration_s": 1.0})
	rec := f.nodeRuns(t, conformance.ActionRun)
	if _, err := f.dev.CancelJob(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	j := f.finish(t, id)
	if j.State != mhp.JobCancelled {
		t.Fatalf("job %+v, want cancelled", j)
	}
	if f.state(t) != mhp.StateIdle {
		t.Fatalf("state %s after a 500 from one result route, want idle", f.state(t))
	}
	if n := f.node.Requests("GET /action/" + conformance.ActionRun + "/" + rec.ID + "/result"); n == 0 {
		t.Fatal("the named result route was never tried: the test proves nothing")
	}
	if n := f.node.Requests("GET /action/" + rec.ID + "/result"); n == 0 {
		t.Fatal("the adapter did not fall back to /action/{id}/result")
	}
}

// TestResultRoutesAll500UseStatus: with both result routes failing, the
// status route's terminal status ends the job.
func TestResultRoutesAll500UseStatus(t *testing.T) {
	n := madscitest.New(madscitest.Options{})
	t.Cleanup(n.Close)
	c, err := madsci.NewClient(madsci.ClientOptions{URL: n.URL, Layout: madsci.LayoutV5})
	if err != nil {
		t.Fatal(err)
	}
	n.In.Script(conformance.ActionRun, conformance.FailReported)
	ctx := context.Background()
	res, err := c.Submit(ctx, madsci.Submission{Action: conformance.ActionRun, Args: map[string]any{"duration_s": 1.0}})
	if err != nil {
		t.Fatal(err)
	}
	n.FailRoute("GET /action/{id}/result", 500)
	conformance.Eventually(t, "link", func() bool {
		r, err := c.ActionResult(ctx, conformance.ActionRun, res.ActionID)
		return err == nil && r.Status == madsci.StatusFailed && r.ActionID == res.ActionID
	})
}

// TestSettingsOnlyRuntimeKeys: the node's config carries its own wiring;
// only keys the node marks or the config file names become settings, and
// the wiring never does.
func TestSettingsOnlyRuntimeKeys(t *testing.T) {
	f := newFixture(t, madscitest.Options{}, func(c *madsci.Config) {
		c.Settings = map[string]madsci.SettingOverride{"read_timeout_s": {Unit: "s"}}
	})
	have := map[string]bool{}
	for _, s := range f.drv.Descriptor().Settings {
		have[s.Name] = true
	}
	for _, k := range []string{"setpoint", "mode", "fan", "read_timeout_s"} {
		if !have[k] {
			t.Errorf("setting %q missing (marked by the node or named in the config)", k)
		}
	}
	for _, k := range []string{"node_url", "node_id", "enable_rate_limiting", "uvicorn_kwargs"} {
		if have[k] {
			t.Errorf("node wiring %q became a setting", k)
		}
		_, err := f.dev.Write(context.Background(), mhp.WriteRequest{Name: k, Value: "http://evil", DryRun: true})
		if mhp.CodeOf(err) != mhp.CodeUnknownName {
			t.Errorf("dry-run write of %s: %v, want UnknownName", k, err)
		}
	}
	n := madscitest.New(madscitest.Options{})
	t.Cleanup(n.Close)
	cfg := baseConfig(n.URL, t.TempDir())
	cfg.Device = mhp.DeviceInfo{ID: "node-02", Class: "test"}
	cfg.Settings = map[string]madsci.SettingOverride{"node_url": {}}
	if _, err := madsci.New(context.Background(), cfg, madsci.Options{}); err == nil || !strings.Contains(err.Error(), "node_url") {
		t.Fatalf("a config naming node_url as a setting: %v, want refused", err)
	}
}

// TestResultFilesDownloaded: with results_dir set, a succeeded action's
// result files are downloaded from the node and listed in the job result;
// without it, the result lists the node's keys only.
func TestResultFilesDownloaded(t *testing.T) {
	for _, withDir := range []bool{true, false} {
		results := t.TempDir()
		f := newFixture(t, madscitest.Options{}, func(c *madsci.Config) {
			if withDir {
				c.ResultsDir = results
			}
		})
		if err := os.WriteFile(filepath.Join(f.files, "proto.txt"), []byte("aspirate 10"), 0o600); err != nil {
			t.Fatal(err)
		}
		id := f.invoke(t, "transfer", map[string]any{"volume": 1.0, "protocol": "proto.txt"})
		j := f.finish(t, id)
		if j.State != mhp.JobDone {
			t.Fatalf("transfer: %+v", j)
		}
		r := j.Result.(map[string]any)
		local, _ := r["local_files"].([]any)
		if !withDir {
			if local != nil || r["files_error"] != nil {
				t.Fatalf("without results_dir the result is %v", r)
			}
			continue
		}
		if len(local) != 1 {
			t.Fatalf("local_files %v (files_error %v), want the report", r["local_files"], r["files_error"])
		}
		e := local[0].(map[string]any)
		data, err := os.ReadFile(e["path"].(string))
		if err != nil || !strings.Contains(string(data), r["action_id"].(string)) || !strings.HasPrefix(e["path"].(string), results) {
			t.Fatalf("downloaded file %v: %q %v", e, data, err)
		}
	}
}

// TestNodeGoneBeforeSubmit: the node is gone but the link has not noticed
// yet. The action's create cannot connect: nothing ran (not_started, no
// fault), and the link reports down at once.
func TestNodeGoneBeforeSubmit(t *testing.T) {
	off := time.Duration(0)
	f := newFixture(t, madscitest.Options{}, func(c *madsci.Config) { c.StatusPoll = &off })
	f.node.Close()
	j := f.finish(t, f.invoke(t, conformance.ActionQuick, nil))
	if j.State != mhp.JobFailed || j.Outcome != mhp.OutcomeNotStarted {
		t.Fatalf("job on a gone node: %+v (%+v), want failed not_started", j, j.Error)
	}
	if f.state(t) != mhp.StateIdle {
		t.Fatalf("state %s, want idle (nothing was sent)", f.state(t))
	}
	conformance.Eventually(t, "the link down", func() bool { l := f.drv.Link(); return l != nil && !l.Connected })
}
