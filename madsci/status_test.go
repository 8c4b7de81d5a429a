package madsci_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/clock"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/madsci"
	"github.com/openmhp/mhp-go/madsci/madscitest"
)

// countingNode counts the adapter's GET /status reads and their failures.
type countingNode struct {
	madsci.Node
	reads, failed atomic.Int64
}

func (c *countingNode) Status(ctx context.Context) (*madsci.NodeStatus, error) {
	st, err := c.Node.Status(ctx)
	c.reads.Add(1)
	if err != nil {
		c.failed.Add(1)
	}
	return st, err
}

// watched is a fixture whose driver runs on a manual clock, so the status
// watch reads only when the test advances it.
type watched struct {
	*fixture
	clk    *clock.Manual
	counts *countingNode
	faults chan string
}

const period = 2 * time.Second

func newWatched(t *testing.T, opts madscitest.Options, mut func(*madsci.Config)) *watched {
	t.Helper()
	n := madscitest.New(opts)
	t.Cleanup(n.Close)
	cfg := baseConfig(n.URL, t.TempDir())
	cfg.Device = mhp.DeviceInfo{ID: "node-01", Class: "test"}
	p := period
	cfg.StatusPoll = &p
	if mut != nil {
		mut(&cfg)
	}
	c, err := madsci.NewClient(madsci.ClientOptions{URL: n.URL, Layout: madsci.LayoutV5, RequestTimeout: 5 * time.Second,
		MaxRetryAfter: time.Second, MaxRetries: 1})
	if err != nil {
		t.Fatal(err)
	}
	counts := &countingNode{Node: c}
	clk := clock.NewManual(time.Now())
	ctx, cancel := context.WithTimeout(context.Background(), conformance.WaitTimeout)
	defer cancel()
	d, err := madsci.New(ctx, cfg, madsci.Options{Options: adapters.Options{Clock: clk}, Node: counts})
	if err != nil {
		t.Fatalf("madsci.New: %v", err)
	}
	w := &watched{fixture: &fixture{node: n, drv: d, dev: mhp.AsSession(d, "s1")}, clk: clk, counts: counts,
		faults: make(chan string, 16)}
	d.Listen(func(nt mhp.Notification) {
		if nt.Method == mhp.NotifySafetyFault {
			r, _ := nt.Params["reason"].(string)
			w.faults <- r
		}
	})
	if err := d.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { n.In.ReleaseAll(); _ = d.Close() })
	return w
}

// tick advances the clock one watch period and waits for the watch's read.
func (w *watched) tick(t *testing.T) {
	t.Helper()
	before := w.counts.reads.Load()
	conformance.Eventually(t, "the status watch to be armed", func() bool { return w.clk.Pending() > 0 })
	w.clk.Advance(period)
	conformance.Eventually(t, "the status watch to read /status", func() bool { return w.counts.reads.Load() > before })
}

func (w *watched) fault(t *testing.T) string {
	t.Helper()
	select {
	case r := <-w.faults:
		return r
	case <-time.After(conformance.WaitTimeout):
		t.Fatalf("no safety/fault notification; state %s", w.drv.State())
	}
	return ""
}

func (w *watched) refused(t *testing.T, want mhp.Code, why string) {
	t.Helper()
	ctx := context.Background()
	if _, err := w.dev.Write(ctx, mhp.WriteRequest{Name: conformance.SettingSetpoint, Value: 30.0}); mhp.CodeOf(err) != want {
		t.Errorf("write %s: %v, want %s", why, err, want)
	}
	if _, err := w.dev.Invoke(ctx, mhp.InvokeRequest{Name: conformance.ActionQuick}); mhp.CodeOf(err) != want {
		t.Errorf("invoke %s: %v, want %s", why, err, want)
	}
	if n := w.node.In.Calls(conformance.ActionQuick); n != 0 {
		t.Errorf("the node ran quick %d times %s", n, why)
	}
}

// TestNodeWordLatchesFault: a node reporting errored or stopped latches the
// device in fault, seen by the status watch alone; writes and invokes are
// refused DeviceFault; a reset is refused while the node still reports it
// and returns the device to idle once the node recovered.
func TestNodeWordLatchesFault(t *testing.T) {
	cases := []struct {
		name       string
		set        func(n *madscitest.Node)
		clear      func(n *madscitest.Node)
		wantReason string
	}{
		{name: "errored", set: func(n *madscitest.Node) { n.SetErrored("pump jammed at well B3") },
			clear: func(n *madscitest.Node) { n.SetErrored("") }, wantReason: "pump jammed at well B3"},
		{name: "stopped", set: func(n *madscitest.Node) { n.SetFlags(false, false, true, false) },
			clear: func(n *madscitest.Node) { n.SetFlags(false, false, false, false) }, wantReason: "stopped"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newWatched(t, madscitest.Options{}, func(cfg *madsci.Config) { cfg.ResetWait = 2 * time.Second })
			if s := w.drv.State(); s != mhp.StateIdle {
				t.Fatalf("state at start %s", s)
			}
			c.set(w.node)
			w.tick(t)
			reason := w.fault(t)
			if !strings.Contains(reason, c.wantReason) || !strings.Contains(reason, "madsci node reports") {
				t.Fatalf("fault reason %q, want the node's word (%q)", reason, c.wantReason)
			}
			if s := w.drv.State(); s != mhp.StateFault {
				t.Fatalf("state %s, want fault", s)
			}
			// Like every fault, the fault hook (the estop hook) posts the
			// node's safety_stop.
			conformance.Eventually(t, "the fault hook's safety_stop", func() bool { return w.node.Requests("POST /admin/safety_stop") == 1 })
			w.refused(t, mhp.CodeDeviceFault, "on a faulted device")
			// node.ready comes from the booleans: a stopped node's
			// description says "Node is ready", the signal must not.
			if r, _ := w.dev.Read(context.Background(), []string{madsci.SignalReady}); r.Values[madsci.SignalReady] != false {
				t.Errorf("node.ready = %v on a %s node", r.Values[madsci.SignalReady], c.name)
			}
			// A later tick does not latch again (the fault hook ran once).
			w.tick(t)
			select {
			case r := <-w.faults:
				t.Fatalf("fault latched twice: %q", r)
			default:
			}

			// The node's reset does not recover it: reset refused, still fault.
			w.node.ResetKeepsFault(true)
			_, err := w.dev.Reset(context.Background())
			if mhp.CodeOf(err) != mhp.CodeDeviceFault || !strings.Contains(err.Error(), "did not recover") {
				t.Fatalf("reset while the node still reports %s: %v, want DeviceFault (not recovered)", c.name, err)
			}
			if c.name == "errored" && !strings.Contains(err.Error(), "pump jammed") {
				t.Errorf("refusal %v does not carry the node's errors", err)
			}
			if n := w.node.Requests("POST /admin/reset"); n != 1 {
				t.Errorf("node reset posted %d times, want 1", n)
			}
			if s := w.drv.State(); s != mhp.StateFault {
				t.Fatalf("state after a refused reset %s, want fault", s)
			}

			// The node recovers: reset verifies and the device is idle.
			w.node.ResetKeepsFault(false)
			c.clear(w.node)
			rr, err := w.dev.Reset(context.Background())
			if err != nil || !rr.Verified || rr.State != mhp.StateIdle {
				t.Fatalf("reset after recovery: %+v %v", rr, err)
			}
			w.tick(t) // the watch sees a recovered node: no new fault
			if s := w.drv.State(); s != mhp.StateIdle {
				t.Fatalf("state after the watch read a recovered node: %s", s)
			}
			id := w.invoke(t, conformance.ActionQuick, nil)
			if j := w.finish(t, id); j.State != mhp.JobDone {
				t.Fatalf("quick after recovery: %+v", j)
			}
		})
	}
}

// TestStatusReadLatchesFault: without the watch (status_poll 0s), any status
// read the adapter makes (here a signal read) still checks the node's word.
func TestStatusReadLatchesFault(t *testing.T) {
	w := newWatched(t, madscitest.Options{}, func(cfg *madsci.Config) { off := time.Duration(0); cfg.StatusPoll = &off })
	if n := w.clk.Pending(); n != 0 {
		t.Fatalf("status_poll 0s armed %d timers", n)
	}
	w.node.SetErrored("lid sensor tripped")
	r, err := w.dev.Read(context.Background(), []string{madsci.SignalErrored})
	if err != nil || r.Values[madsci.SignalErrored] != true {
		t.Fatalf("read node.errored: %v %v", r, err)
	}
	if reason := w.fault(t); !strings.Contains(reason, "lid sensor tripped") {
		t.Fatalf("fault reason %q", reason)
	}
	w.refused(t, mhp.CodeDeviceFault, "after a status read saw errored")
}

// TestErroredAtStartFaults: a node errored when the driver starts
// (the Setup read) puts the device in fault from the start.
func TestErroredAtStartFaults(t *testing.T) {
	n := madscitest.New(madscitest.Options{})
	t.Cleanup(n.Close)
	n.SetErrored("startup failed: serial port busy")
	cfg := baseConfig(n.URL, "")
	cfg.Device = mhp.DeviceInfo{ID: "node-01"}
	ctx, cancel := context.WithTimeout(context.Background(), conformance.WaitTimeout)
	defer cancel()
	d, err := madsci.New(ctx, cfg, madsci.Options{Options: adapters.Options{Clock: clock.NewManual(time.Now())}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if s := d.State(); s != mhp.StateIdle {
		t.Fatalf("state before Start %s", s)
	}
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if s := d.State(); s != mhp.StateFault {
		t.Fatalf("state after starting on an errored node %s, want fault", s)
	}
}

// TestFailedActionErrorsNodeFaults: an exception inside an action fails the
// job with the node's errors and leaves the node errored; the device is in
// fault when the job ends (no watch tick needed).
func TestFailedActionErrorsNodeFaults(t *testing.T) {
	w := newWatched(t, madscitest.Options{ErrorOnFailure: true}, nil)
	w.node.In.Script(conformance.ActionQuick, conformance.FailReported)
	id := w.invoke(t, conformance.ActionQuick, nil)
	j := w.finish(t, id)
	if j.State != mhp.JobFailed || j.Outcome != mhp.OutcomeFailed {
		t.Fatalf("job %s outcome %q, want failed/failed", j.State, j.Outcome)
	}
	if s := w.drv.State(); s != mhp.StateFault {
		t.Fatalf("device %s after the node errored, want fault", s)
	}
	if reason := w.fault(t); !strings.Contains(reason, "simulated") {
		t.Fatalf("fault reason %q, want the node's error", reason)
	}
	conformance.Eventually(t, "the fault hook's safety_stop", func() bool { return w.node.Requests("POST /admin/safety_stop") == 1 })
	rr, err := w.dev.Reset(context.Background())
	if err != nil || rr.State != mhp.StateIdle {
		t.Fatalf("reset: %+v %v", rr, err)
	}
}

// TestOwnEStopIsNotAFault: safety_stop through MHP leaves the node stopped;
// the device stays in estop (no fault on top) and a reset recovers both.
func TestOwnEStopIsNotAFault(t *testing.T) {
	w := newWatched(t, madscitest.Options{}, nil)
	res, err := w.dev.EStop(context.Background(), "test")
	if err != nil || !res.Stopped {
		t.Fatalf("estop: %+v %v", res, err)
	}
	w.tick(t)
	if r, _ := w.dev.Read(context.Background(), []string{madsci.SignalStopped}); r.Values[madsci.SignalStopped] != true {
		t.Fatalf("node.stopped = %v after safety_stop", r.Values[madsci.SignalStopped])
	}
	if s := w.drv.State(); s != mhp.StateEStop {
		t.Fatalf("state %s, want estop", s)
	}
	select {
	case r := <-w.faults:
		t.Fatalf("a stopped node after our own estop latched a fault: %q", r)
	default:
	}
	if rr, err := w.dev.Reset(context.Background()); err != nil || rr.State != mhp.StateIdle {
		t.Fatalf("reset: %+v %v", rr, err)
	}
}

// TestBusyLockedPausedAreGatesNotState: a node busy with another client's
// action, locked or paused keeps the device idle (MHP busy means our jobs)
// and refuses blocking actions at the node.ready interlock.
func TestBusyLockedPausedAreGatesNotState(t *testing.T) {
	tr := true
	w := newWatched(t, madscitest.Options{}, func(c *madsci.Config) { c.ReadyInterlock = &tr })
	ctx := context.Background()
	// Another client starts a blocking action on the node.
	other, err := madsci.NewClient(madsci.ClientOptions{URL: w.node.URL, Layout: madsci.LayoutV5, RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	w.node.In.Script(conformance.ActionRun, conformance.Block)
	res, err := other.Submit(ctx, madsci.Submission{Action: conformance.ActionRun, Args: map[string]any{"duration_s": 1.0}})
	if err != nil || res.Status != madsci.StatusRunning {
		t.Fatalf("other client's start: %+v %v", res, err)
	}
	for _, flags := range []struct {
		name                   string
		locked, paused, others bool
	}{{name: "busy (another client)", others: true}, {name: "locked", locked: true, others: true}, {name: "paused", paused: true, others: true}} {
		w.node.SetFlags(flags.locked, false, false, flags.paused)
		w.tick(t)
		r, err := w.dev.Read(ctx, []string{madsci.SignalBusy, madsci.SignalReady, madsci.SignalLocked, madsci.SignalPaused})
		if err != nil || r.Values[madsci.SignalBusy] != true || r.Values[madsci.SignalReady] != false ||
			r.Values[madsci.SignalLocked] != flags.locked || r.Values[madsci.SignalPaused] != flags.paused {
			t.Fatalf("%s: signals %v %v", flags.name, r, err)
		}
		if s := w.drv.State(); s != mhp.StateIdle {
			t.Fatalf("%s: device state %s, want idle (the node's work is not our job)", flags.name, s)
		}
		if _, err := w.dev.Invoke(ctx, mhp.InvokeRequest{Name: conformance.ActionQuick}); mhp.CodeOf(err) != mhp.CodeInterlockOpen {
			t.Fatalf("%s: invoke %v, want InterlockOpen on node.ready", flags.name, err)
		}
	}
	w.node.SetFlags(false, false, false, false)
	w.node.In.Release(conformance.ActionRun)
	conformance.Eventually(t, "the other client's action to end", func() bool {
		r, _ := w.dev.Read(ctx, []string{madsci.SignalReady})
		return r.Values[madsci.SignalReady] == true
	})
	select {
	case r := <-w.faults:
		t.Fatalf("busy/locked/paused latched a fault: %q", r)
	default:
	}
	id := w.invoke(t, conformance.ActionQuick, nil)
	if j := w.finish(t, id); j.State != mhp.JobDone {
		t.Fatalf("quick on a ready node: %+v", j)
	}
}

// TestUnreachableNodeIsNotAFault: with no job running, a node that does not
// answer leaves the device state alone; its signals read null and the
// node.ready interlock refuses blocking actions; the watch keeps trying.
func TestUnreachableNodeIsNotAFault(t *testing.T) {
	tr := true
	w := newWatched(t, madscitest.Options{}, func(c *madsci.Config) { c.ReadyInterlock = &tr })
	ctx := context.Background()
	w.node.Vanish()
	failedBefore := w.counts.failed.Load()
	w.tick(t)
	w.tick(t)
	if w.counts.failed.Load()-failedBefore < 2 {
		t.Fatalf("the watch's reads of a vanished node did not fail")
	}
	if s := w.drv.State(); s != mhp.StateIdle {
		t.Fatalf("state with the node unreachable %s, want idle", s)
	}
	r, err := w.dev.Read(ctx, []string{madsci.SignalReady, madsci.SignalErrored})
	if err != nil {
		t.Fatal(err)
	}
	if r.Values[madsci.SignalReady] != nil || r.Values[madsci.SignalErrored] != nil {
		t.Fatalf("signals of an unreachable node %v, want null", r.Values)
	}
	// The link is down: actuation is refused before anything is sent.
	_, err = w.dev.Invoke(ctx, mhp.InvokeRequest{Name: conformance.ActionQuick})
	if e, ok := mhp.AsError(err); !ok || e.Data["outcome"] != mhp.OutcomeNotStarted || e.Data["reason"] != "backend_unavailable" {
		t.Fatalf("invoke on an unreachable node: %v, want refused not_started (backend_unavailable)", err)
	}
	if p, _ := w.dev.Ping(ctx); p.Backend == nil || p.Backend.Connected || p.Backend.Error == "" {
		t.Fatalf("ping with the node unreachable: backend %+v, want connected:false with the error", p.Backend)
	}
	select {
	case r := <-w.faults:
		t.Fatalf("an unreachable node latched a fault: %q", r)
	default:
	}
	w.node.Return()
	// The link's probe (real-time backoff from 500ms) brings it back.
	conformance.Eventually(t, "the link back up", func() bool { l := w.drv.Link(); return l != nil && l.Connected })
	if r, _ := w.dev.Read(ctx, []string{madsci.SignalReady}); r.Values[madsci.SignalReady] != true {
		t.Fatalf("node.ready after the node returned: %v", r.Values)
	}
	id := w.invoke(t, conformance.ActionQuick, nil)
	if j := w.finish(t, id); j.State != mhp.JobDone {
		t.Fatalf("quick after the node returned: %+v", j)
	}
}

// TestStatusWatchStopsOnClose: Close disarms the watch and waits for its
// read; advancing the clock afterwards reads nothing.
func TestStatusWatchStopsOnClose(t *testing.T) {
	w := newWatched(t, madscitest.Options{}, nil)
	w.tick(t)
	w.tick(t)
	if err := w.drv.Close(); err != nil {
		t.Fatal(err)
	}
	if n := w.clk.Pending(); n != 0 {
		t.Fatalf("%d timers still armed after Close", n)
	}
	reads := w.counts.reads.Load()
	for i := 0; i < 5; i++ {
		w.clk.Advance(period)
	}
	if got := w.counts.reads.Load(); got != reads {
		t.Fatalf("the watch read /status %d times after Close", got-reads)
	}
}

// TestStatusWatchCloseDuringRead: Close while the watch's read hangs on a
// slow node ends that read (no goroutine is left behind) within its bound.
func TestStatusWatchCloseDuringRead(t *testing.T) {
	n := madscitest.New(madscitest.Options{})
	t.Cleanup(n.Close)
	cfg := baseConfig(n.URL, "")
	cfg.Device = mhp.DeviceInfo{ID: "node-01"}
	c, err := madsci.NewClient(madsci.ClientOptions{URL: n.URL, Layout: madsci.LayoutV5, RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	hang := &hangingNode{Node: c, entered: make(chan struct{}, 1)}
	clk := clock.NewManual(time.Now())
	ctx, cancel := context.WithTimeout(context.Background(), conformance.WaitTimeout)
	defer cancel()
	d, err := madsci.New(ctx, cfg, madsci.Options{Options: adapters.Options{Clock: clk}, Node: hang})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	hang.hang.Store(true)
	conformance.Eventually(t, "the watch to be armed", func() bool { return clk.Pending() > 0 })
	clk.Advance(2 * time.Second)
	select {
	case <-hang.entered:
	case <-time.After(conformance.WaitTimeout):
		t.Fatal("the watch never read")
	}
	closed := make(chan error, 1)
	go func() { closed <- d.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(conformance.WaitTimeout):
		t.Fatal("Close did not end the watch's read in progress")
	}
	if hang.inside.Load() != 0 {
		t.Fatal("the watch's read was still running after Close returned")
	}
}

// hangingNode blocks Status until its context ends while hang is set.
type hangingNode struct {
	madsci.Node
	hang    atomic.Bool
	inside  atomic.Int64
	entered chan struct{}
	once    sync.Once
}

func (h *hangingNode) Status(ctx context.Context) (*madsci.NodeStatus, error) {
	if !h.hang.Load() {
		return h.Node.Status(ctx)
	}
	h.inside.Add(1)
	defer h.inside.Add(-1)
	h.once.Do(func() { h.entered <- struct{}{} })
	<-ctx.Done()
	return nil, ctx.Err()
}

func TestStatusPollConfig(t *testing.T) {
	c := madsci.Config{}
	c.Device = mhp.DeviceInfo{ID: "x"}
	c = c.Defaults()
	if c.StatusPoll == nil || *c.StatusPoll != 2*time.Second {
		t.Fatalf("default status_poll %v, want 2s", c.StatusPoll)
	}
	neg := -time.Second
	c.StatusPoll = &neg
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "status_poll") {
		t.Fatalf("negative status_poll: %v", err)
	}
	off := time.Duration(0)
	c.StatusPoll = &off
	if err := c.Validate(); err != nil {
		t.Fatalf("status_poll 0s (disabled): %v", err)
	}
}
