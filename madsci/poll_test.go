package madsci_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/clock"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/madsci"
	"github.com/openmhp/mhp-go/madsci/madscitest"
)

// statusRoute is the route every poll of a running v0.5+ action reads.
const statusRoute = "GET /action/{name}/{id}/status"

// TestPollPolicy: a running action whose status polls fail, under the
// default poll policy (250ms doubling to 5s, for 2m) on a stepping clock
// (its waits take no real time). A node answering 500 (or dropping
// connections) for less than the window is waited out and the job ends
// with the action's real result; answering 500 for longer ends it failed,
// outcome unknown, saying HTTP 500 and the window, never "unreachable"; a
// refused connection is "unreachable". The back-off grows and is capped.
// Before the policy a 500 was polled again without limit (every poll_max,
// up to the 1h action timeout) and a dropped connection gave up after 3
// polls.
func TestPollPolicy(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		name    string
		during  func(n *madscitest.Node)
		release bool
		state   mhp.JobState
		want    []string
		not     []string
		waits   []time.Duration
		prefix  bool // waits bounds them (the HTTP client retries a GET once on a dropped kept-alive connection)
	}{
		{name: "500_below_the_window_recovers",
			during:  func(n *madscitest.Node) { n.FailNext(statusRoute, http.StatusInternalServerError, 6) },
			release: true, state: mhp.JobDone,
			waits: []time.Duration{250 * ms, 500 * ms, time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second}},
		{name: "502_below_the_window_recovers",
			during:  func(n *madscitest.Node) { n.FailNext(statusRoute, http.StatusBadGateway, 3) },
			release: true, state: mhp.JobDone,
			waits: []time.Duration{250 * ms, 500 * ms, time.Second}},
		{name: "dropped_connections_below_the_window_recover",
			during:  func(n *madscitest.Node) { n.FailNext(statusRoute, 0, 4) },
			release: true, state: mhp.JobDone, prefix: true,
			waits: []time.Duration{250 * ms, 500 * ms, time.Second, 2 * time.Second}},
		{name: "500_beyond_the_window",
			during: func(n *madscitest.Node) { n.FailRoute(statusRoute, http.StatusInternalServerError) },
			state:  mhp.JobFailed,
			want:   []string{"the node answered HTTP 500 to 29 polls in a row", "poll_retry.window 2m0s", "outcome unknown"},
			not:    []string{"unreachable"},
			waits:  adapters.PollRetry{}.Backoffs()},
		{name: "refused_is_unreachable",
			during: func(n *madscitest.Node) { n.Refuse() },
			state:  mhp.JobFailed,
			want:   []string{"the node is unreachable", "got no answer", "poll_retry.window 2m0s", "connection refused"},
			not:    []string{"HTTP 5"},
			waits:  adapters.PollRetry{}.Backoffs()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clk := clock.NewStep(time.Unix(1_800_000_000, 0))
			f := newFixtureWith(t, madscitest.Options{}, func(cfg *madsci.Config) {
				cfg.PollRetry = adapters.PollRetry{}
				cfg.ActionTimeout = time.Hour // the window, not the job's deadline, must end it
			}, madsci.Options{Options: adapters.Options{PollClock: clk}})
			f.node.In.Script(conformance.ActionRun, conformance.Block)
			id := f.invoke(t, conformance.ActionRun, map[string]any{"duration_s": 1.0})
			f.nodeRuns(t, conformance.ActionRun)
			f.waitJob(t, id, "running", func(j *mhp.Job) bool { return j.Extra["node_status"] == madsci.StatusRunning })
			c.during(f.node)
			if c.release {
				conformance.Eventually(t, "the failing polls spent", func() bool { return f.node.FailingNext(statusRoute) == 0 })
				f.node.In.Release(conformance.ActionRun)
			}
			j := f.finish(t, id)
			if j.State != c.state {
				t.Fatalf("job %s (%v), want %s", j.State, j.Error, c.state)
			}
			if c.state == mhp.JobDone {
				if r, _ := j.Result.(map[string]any); r == nil || r["json_result"] == nil {
					t.Errorf("result %v, want the action's own", j.Result)
				}
				if s := f.state(t); s != mhp.StateIdle {
					t.Errorf("device %s after a recovered node, want idle", s)
				}
			} else {
				if j.Outcome != mhp.OutcomeUnknown {
					t.Errorf("outcome %q, want unknown", j.Outcome)
				}
				for _, w := range c.want {
					if !strings.Contains(j.Error.Message, w) {
						t.Errorf("error %q lacks %q", j.Error.Message, w)
					}
				}
				for _, w := range c.not {
					if strings.Contains(j.Error.Message, w) {
						t.Errorf("error %q says %q", j.Error.Message, w)
					}
				}
			}
			var got []time.Duration
			for _, w := range clk.Waits() {
				if w >= 100*ms { // the poll interval here is 2-10ms
					got = append(got, w)
				}
			}
			if c.prefix && len(got) > 0 && len(got) <= len(c.waits) {
				got = append(got, c.waits[len(got):]...)
			}
			if !slices.Equal(got, c.waits) {
				t.Errorf("back-offs %v, want %v", got, c.waits)
			}
		})
	}
}

// TestPollFailuresDeprecated: poll_failures still bounds the failed polls
// in a row (and says so), within the window.
func TestPollFailuresDeprecated(t *testing.T) {
	clk := clock.NewStep(time.Unix(1_800_000_000, 0))
	f := newFixtureWith(t, madscitest.Options{}, func(cfg *madsci.Config) { cfg.PollRetry, cfg.PollFailures = adapters.PollRetry{}, 3 },
		madsci.Options{Options: adapters.Options{PollClock: clk}})
	f.node.In.Script(conformance.ActionRun, conformance.Block)
	id := f.invoke(t, conformance.ActionRun, map[string]any{"duration_s": 1.0})
	f.nodeRuns(t, conformance.ActionRun)
	f.node.FailRoute(statusRoute, http.StatusInternalServerError)
	j := f.finish(t, id)
	if j.State != mhp.JobFailed || !strings.Contains(j.Error.Message, "answered HTTP 500 to 3 polls") || !strings.Contains(j.Error.Message, "poll_failures 3") {
		t.Fatalf("job %+v %v", j, j.Error)
	}
}
