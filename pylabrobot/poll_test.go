package pylabrobot_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/clock"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/pylabrobot"
	"github.com/openmhp/mhp-go/pylabrobot/plrtest"
)

// pollFixture is a device on a fake bridge (long-polling or not) whose
// job polls wait on a stepping clock under the default poll policy
// (250ms doubling to 5s, for 2m): the policy's waits take no real time.
func pollFixture(t *testing.T, longPoll bool, mut func(*pylabrobot.Config)) (*fixture, *plrtest.Bridge, *clock.Step) {
	t.Helper()
	b := plrtest.NewBridge()
	t.Cleanup(b.Close)
	b.LongPoll(longPoll)
	cfg := fastConfig(pylabrobot.ModeBridge, b.URL)
	cfg.PollRetry = adapters.PollRetry{}
	cfg.ActionTimeout = time.Hour // the window, not the job's deadline, must end it
	if mut != nil {
		mut(&cfg)
	}
	clk := clock.NewStep(time.Unix(1_800_000_000, 0))
	f := startWith(t, cfg, pylabrobot.Options{Options: adapters.Options{PollClock: clk}})
	t.Cleanup(b.In.ReleaseAll)
	return f, b, clk
}

// backoffs are the waits of the poll policy among a clock's waits (the
// poll interval of these tests is 2ms, the policy's first back-off 250ms).
func backoffs(clk *clock.Step) []time.Duration {
	var out []time.Duration
	for _, w := range clk.Waits() {
		if w >= 100*time.Millisecond {
			out = append(out, w)
		}
	}
	return out
}

// TestPollPolicy: a running task whose polls fail. A bridge answering 500
// (or dropping connections) for less than the window is waited out and the
// job ends with the task's real result; answering 500 for longer ends it
// failed, outcome unknown, saying HTTP 500 and the window, never
// "unreachable"; a refused connection is "unreachable". The back-off grows
// and is capped. Before the policy, the job gave up after 3 polls (~600ms
// at the default poll interval) as "unreachable" or "answered HTTP 500 to
// 3 polls", whatever the bridge was doing.
func TestPollPolicy(t *testing.T) {
	run := map[string]any{"duration_s": 1.0}
	cases := []struct {
		name    string
		during  func(t *testing.T, b *plrtest.Bridge)
		release bool // release the work once the failures are spent
		state   mhp.JobState
		want    []string // in the job's error
		not     []string
		waits   []time.Duration // the policy's back-offs
		// prefix: waits is only a bound (the HTTP client retries a GET
		// once on a kept-alive connection the server dropped).
		prefix bool
	}{
		{name: "500_below_the_window_recovers",
			during:  func(t *testing.T, b *plrtest.Bridge) { b.FailNextPolls(http.StatusInternalServerError, 6) },
			release: true, state: mhp.JobDone,
			waits: []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second}},
		{name: "dropped_connections_below_the_window_recover",
			during:  func(t *testing.T, b *plrtest.Bridge) { b.FailNextPolls(0, 4) },
			release: true, state: mhp.JobDone, prefix: true,
			waits: []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second}},
		{name: "500_beyond_the_window",
			during: func(t *testing.T, b *plrtest.Bridge) { b.FailPolls(http.StatusInternalServerError) },
			state:  mhp.JobFailed,
			want:   []string{"answered HTTP 500 to 29 polls in a row", "poll_retry.window 2m0s", "outcome unknown"},
			not:    []string{"unreachable"},
			waits:  adapters.PollRetry{}.Backoffs()},
		{name: "refused_is_unreachable",
			during: func(t *testing.T, b *plrtest.Bridge) { b.Refuse() },
			state:  mhp.JobFailed,
			want:   []string{"the bridge is unreachable", "got no answer", "poll_retry.window 2m0s", "connection refused"},
			not:    []string{"HTTP 5"},
			waits:  adapters.PollRetry{}.Backoffs()},
	}
	for _, long := range []bool{true, false} {
		for _, c := range cases {
			name := c.name + map[bool]string{true: "/long_poll", false: "/polling"}[long]
			t.Run(name, func(t *testing.T) {
				f, b, clk := pollFixture(t, long, nil)
				b.In.Script(conformance.ActionRun, conformance.Block)
				id := f.invoke(t, conformance.ActionRun, run)
				f.waitJob(t, id, "running", func(j *mhp.Job) bool { return j.Extra["status"] == pylabrobot.TaskRunning })
				if long {
					conformance.EventuallyWithin(t, "a long-poll held", patience, func() bool { return b.Waiting() > 0 })
				}
				c.during(t, b)
				if c.release {
					conformance.EventuallyWithin(t, "the failing polls spent", patience, func() bool { return b.PollsFailing() == 0 })
					b.In.Release(conformance.ActionRun)
				}
				j := f.finish(t, id)
				if j.State != c.state {
					t.Fatalf("job %s (%v), want %s", j.State, j.Error, c.state)
				}
				if c.state == mhp.JobDone {
					if r, _ := j.Result.(map[string]any); r["ok"] != true || r["action"] != conformance.ActionRun {
						t.Errorf("result %v, want the task's own", j.Result)
					}
					if s := f.state(t); s != mhp.StateIdle {
						t.Errorf("device %s after a recovered bridge, want idle", s)
					}
				} else {
					if j.Outcome != mhp.OutcomeUnknown || f.state(t) != mhp.StateFault {
						t.Errorf("outcome %q, device %s: want unknown and fault", j.Outcome, f.state(t))
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
				got := backoffs(clk)
				if c.prefix && len(got) > 0 && len(got) <= len(c.waits) {
					got = append(got, c.waits[len(got):]...)
				}
				if !slices.Equal(got, c.waits) {
					t.Errorf("back-offs %v, want %v", got, c.waits)
				}
			})
		}
	}
}

// TestPollFailuresDeprecated: poll_failures still bounds the failed polls
// in a row (and says so), within the window.
func TestPollFailuresDeprecated(t *testing.T) {
	f, b, _ := pollFixture(t, false, func(c *pylabrobot.Config) { c.PollFailures = 3 })
	b.In.Script(conformance.ActionRun, conformance.Block)
	id := f.invoke(t, conformance.ActionRun, map[string]any{"duration_s": 1.0})
	f.waitJob(t, id, "running", func(j *mhp.Job) bool { return j.Extra["status"] == pylabrobot.TaskRunning })
	b.FailPolls(http.StatusInternalServerError)
	j := f.finish(t, id)
	if j.State != mhp.JobFailed || !strings.Contains(j.Error.Message, "answered HTTP 500 to 3 polls") || !strings.Contains(j.Error.Message, "poll_failures 3") {
		t.Fatalf("job %+v %v", j, j.Error)
	}
}

// TestLongPollCarriesTheJob: against a long-polling bridge the task's end,
// its progress and a cancel or estop reach the job with no poll interval
// on the path (poll_interval is an hour here, and a long-poll may be held
// a minute); against an older bridge, or with long_poll off, the adapter
// polls and never sends a wait.
func TestLongPollCarriesTheJob(t *testing.T) {
	slow := func(c *pylabrobot.Config) { c.PollInterval, c.LongPollWait = time.Hour, time.Minute }
	ctx := context.Background()
	t.Run("timed_task_ends", func(t *testing.T) {
		b := plrtest.NewBridge()
		t.Cleanup(b.Close)
		b.AddTimedMethod("pick_drop", 20*time.Millisecond)
		cfg := fastConfig(pylabrobot.ModeBridge, b.URL)
		slow(&cfg)
		f := start(t, cfg)
		j := f.finish(t, f.invoke(t, "pick_drop", nil))
		if j.State != mhp.JobDone {
			t.Fatalf("pick_drop %+v %v", j, j.Error)
		}
		if n := b.Requests("GET /tasks/{id}?wait"); n < 1 || n > 3 {
			t.Errorf("%d long-polls for one 20ms task, want 1-3", n)
		}
	})
	t.Run("progress_flows", func(t *testing.T) {
		f, b, _ := pollFixture(t, true, slow)
		b.In.Script(conformance.ActionRun, conformance.Block)
		id := f.invoke(t, conformance.ActionRun, map[string]any{"duration_s": 1.0})
		j := f.waitJob(t, id, "running", func(j *mhp.Job) bool { return j.Extra["status"] == pylabrobot.TaskRunning })
		task, _ := j.Extra["task_id"].(string)
		conformance.EventuallyWithin(t, "a long-poll held", patience, func() bool { return b.Waiting() > 0 })
		b.SetTaskProgress(task, 0.7, "halfway there")
		f.waitJob(t, id, "progress 0.7", func(j *mhp.Job) bool { return j.Progress == 0.7 && j.Extra["message"] == "halfway there" })
		b.In.Release(conformance.ActionRun)
		if j := f.finish(t, id); j.State != mhp.JobDone {
			t.Fatalf("job %+v", j)
		}
	})
	for _, stop := range []string{"cancel", "estop"} {
		t.Run(stop+"_cuts_the_long_poll", func(t *testing.T) {
			f, b, _ := pollFixture(t, true, slow)
			b.In.Script(conformance.ActionRun, conformance.Block)
			id := f.invoke(t, conformance.ActionRun, map[string]any{"duration_s": 1.0})
			f.waitJob(t, id, "running", func(j *mhp.Job) bool { return j.Extra["status"] == pylabrobot.TaskRunning })
			conformance.EventuallyWithin(t, "a long-poll held", patience, func() bool { return b.Waiting() > 0 })
			if stop == "cancel" {
				if _, err := f.dev.CancelJob(ctx, id); err != nil {
					t.Fatal(err)
				}
			} else if r, err := f.dev.EStop(ctx, "test"); err != nil || !r.Stopped {
				t.Fatalf("estop %+v %v", r, err)
			}
			// finish waits patience (5s); the held long-poll would have
			// answered after a minute.
			if j := f.finish(t, id); j.State != mhp.JobCancelled || j.Extra["status"] != pylabrobot.TaskCancelled {
				t.Fatalf("job after %s: %+v %v, want cancelled with extra.status cancelled", stop, j, j.Error)
			}
			if b.In.Calls(conformance.ActionRun) != 1 {
				t.Fatal("the task ran twice")
			}
		})
	}
	for _, c := range []struct {
		name           string
		bridge, config bool
	}{{"older_bridge", false, true}, {"long_poll_off", true, false}} {
		t.Run(c.name+"_polls", func(t *testing.T) {
			b := plrtest.NewBridge()
			t.Cleanup(b.Close)
			b.LongPoll(c.bridge)
			b.AddTimedMethod("pick_drop", 20*time.Millisecond)
			cfg := fastConfig(pylabrobot.ModeBridge, b.URL)
			cfg.LongPoll = &c.config
			f := start(t, cfg)
			if j := f.finish(t, f.invoke(t, "pick_drop", nil)); j.State != mhp.JobDone {
				t.Fatalf("pick_drop %+v %v", j, j.Error)
			}
			if n := b.Requests("GET /tasks/{id}?wait"); n != 0 {
				t.Errorf("%d long-polls sent", n)
			}
			if n := b.Requests("GET /tasks/{id}"); n < 2 {
				t.Errorf("%d polls of a 20ms task at a 2ms interval", n)
			}
		})
	}
}
