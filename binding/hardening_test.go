package binding_test

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openmhp/mhp-go/conformance"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/clock"
)

// Regression tests for defects the conformance suite did not catch.

// lagClock is a manual clock whose Now can run ahead of its timers, as a real
// clock does when a timer goroutine is late: a request may see a deadline
// passed before the timer for it has fired.
type lagClock struct {
	*clock.Manual
	mu   sync.Mutex
	skew time.Duration
}

func (c *lagClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Manual.Now().Add(c.skew)
}

func (c *lagClock) setSkew(d time.Duration) {
	c.mu.Lock()
	c.skew = d
	c.mu.Unlock()
}

// doneSignal is a context that reports when a caller first waits on it.
type doneSignal struct {
	context.Context
	once    sync.Once
	waiting chan struct{}
}

func newDoneSignal(ctx context.Context) *doneSignal {
	return &doneSignal{Context: ctx, waiting: make(chan struct{})}
}

func (c *doneSignal) Done() <-chan struct{} {
	c.once.Do(func() { close(c.waiting) })
	return c.Context.Done()
}

// jobDevice has a cooperative pausable action, a stubborn one, and hooks the
// tests drive. Fields set before newJobDevice returns are read-only after.
type jobDevice struct {
	drv     *binding.Driver
	stops   atomic.Int32
	steps   chan struct{} // the cooperative action returns when closed
	forever chan struct{}
	pause   func(ctx context.Context, j *binding.Job) error
	resume  func(ctx context.Context, j *binding.Job) error
	started chan string
}

func newJobDevice(t *testing.T, clk clock.Clock, watchdog float64, cfg func(*binding.Config)) *jobDevice {
	t.Helper()
	jd := &jobDevice{steps: make(chan struct{}), forever: make(chan struct{}), started: make(chan string, 16)}
	c := binding.Config{
		Device: mhp.DeviceInfo{ID: "jobs-01", Class: "test"},
		Clock:  clk,
		Safety: mhp.Safety{WatchdogS: watchdog},
		Signals: []binding.Signal{{Spec: mhp.Signal{Name: "door_closed", Type: mhp.TypeBoolean},
			Read: func(context.Context) (binding.Sample, error) { return binding.Sample{Value: true}, nil }}},
		Settings: []binding.Setting{{Spec: mhp.Setting{Name: "sp", Type: mhp.TypeNumber},
			Write: func(context.Context, any) (binding.WriteStatus, error) { return binding.Applied, nil }}},
		Actions: []binding.Action{
			{Spec: mhp.Action{Name: "steps", Pausable: true, Cancellable: true, Concurrent: true},
				Run: func(ctx context.Context, j *binding.Job) (any, error) {
					jd.started <- j.ID()
					for {
						if err := j.Checkpoint(ctx); err != nil {
							return nil, err
						}
						select {
						case <-jd.steps:
							return "done", nil
						case <-ctx.Done():
						}
					}
				},
				Pause: func(ctx context.Context, j *binding.Job) error {
					if jd.pause != nil {
						return jd.pause(ctx, j)
					}
					return nil
				},
				Resume: func(ctx context.Context, j *binding.Job) error {
					if jd.resume != nil {
						return jd.resume(ctx, j)
					}
					return nil
				}},
			{Spec: mhp.Action{Name: "stubborn", Cancellable: true, Concurrent: true},
				Run: func(ctx context.Context, j *binding.Job) (any, error) {
					jd.started <- j.ID()
					<-jd.forever
					return nil, nil
				}},
		},
		EStop: func(context.Context) error { jd.stops.Add(1); return nil },
	}
	if cfg != nil {
		cfg(&c)
	}
	drv, err := binding.New(c)
	if err != nil {
		t.Fatal(err)
	}
	jd.drv = drv
	t.Cleanup(func() {
		close(jd.forever)
		drv.Close()
	})
	return jd
}

// TestWriteQueuedBehindSlowWriteReadsInterlocksFresh: a write that waited
// for the request lock behind a slow write is gated from when it got the
// lock. Before the fix its interlock window started when it arrived, so it
// was refused InterlockOpen ("reading them took 3s") although the interlock
// read true at once.
func TestWriteQueuedBehindSlowWriteReadsInterlocksFresh(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_800_000_000, 0))
	inHook, release := make(chan struct{}), make(chan struct{})
	drv, err := binding.New(binding.Config{
		Device: mhp.DeviceInfo{ID: "queue-01"},
		Clock:  clk,
		Signals: []binding.Signal{{Spec: mhp.Signal{Name: "door_closed", Type: mhp.TypeBoolean},
			Read: func(context.Context) (binding.Sample, error) { return binding.Sample{Value: true}, nil }}},
		Settings: []binding.Setting{
			{Spec: mhp.Setting{Name: "slow", Type: mhp.TypeNumber},
				Write: func(context.Context, any) (binding.WriteStatus, error) {
					close(inHook)
					<-release
					return binding.Applied, nil
				}},
			{Spec: mhp.Setting{Name: "guarded", Type: mhp.TypeNumber, Interlocks: []string{"door_closed"}},
				Write: func(context.Context, any) (binding.WriteStatus, error) { return binding.Applied, nil }},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	slowErr := make(chan error, 1)
	go func() {
		_, err := drv.Write(context.Background(), mhp.WriteRequest{Name: "slow", Value: 1.0})
		slowErr <- err
	}()
	waitClosed(t, inHook, "the slow write to enter its hook")
	qctx := newDoneSignal(context.Background())
	queued := make(chan error, 1)
	go func() {
		_, err := drv.Write(qctx, mhp.WriteRequest{Name: "guarded", Value: 2.0})
		queued <- err
	}()
	waitClosed(t, qctx.waiting, "the second write to queue for the request lock")
	clk.Advance(3 * time.Second) // the slow write takes longer than InterlockTimeout (2s)
	close(release)
	if err := <-slowErr; err != nil {
		t.Fatalf("slow write: %v", err)
	}
	if err := <-queued; err != nil {
		t.Fatalf("write queued behind a slow write: %v, want it to pass (its interlock reads true)", err)
	}
}

// TestLeaseExpirySeenFirstByARequestTripsWatchdog: on a watchdog device a
// lease that expires unreleased estops the device, also when a request
// notices the expiry before the expiry timer fires. Before the fix the
// request dropped the lease silently and the watchdog never tripped.
func TestLeaseExpirySeenFirstByARequestTripsWatchdog(t *testing.T) {
	clk := &lagClock{Manual: clock.NewManual(time.Unix(1_800_000_000, 0))}
	jd := newJobDevice(t, clk, 10, func(c *binding.Config) { c.JobGrace = time.Minute })
	a := mhp.AsSession(jd.drv, "a")
	ctx := context.Background()
	if _, err := a.Acquire(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	res, err := a.Invoke(ctx, mhp.InvokeRequest{Name: "stubborn"})
	if err != nil {
		t.Fatal(err)
	}
	<-jd.started
	clk.setSkew(1500 * time.Millisecond) // the lease expired; its timer has not fired yet
	_, err = a.Write(ctx, mhp.WriteRequest{Name: "sp", Value: 1.0})
	if mhp.CodeOf(err) != mhp.CodeNotLeased {
		t.Fatalf("write after the lease expired: %v, want NotLeased", err)
	}
	if st := jd.drv.State(); st != mhp.StateEStop {
		t.Fatalf("state %s after the lease expired unreleased on a watchdog device, want estop", st)
	}
	conformance.EventuallyWithin(t, "the stop hook", 5*time.Second, func() bool { return jd.stops.Load() == 1 })
	if j, _ := a.Job(ctx, res.Job.ID); !j.CancelRequested {
		t.Fatalf("job %+v not cancelled by the watchdog", j)
	}
	clk.Advance(30 * time.Second) // the late lease timers fire: no second trip
	if _, err := a.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if n := jd.stops.Load(); n != 1 {
		t.Fatalf("stop hook ran %d times, want once", n)
	}
}

// TestEndSessionOfHolderLeavesWatchdogArmed: the lease holder's connection
// going away (EndSession) is the agent dying mid-protocol, which is what the
// watchdog is for. Before the fix EndSession released the lease, which
// disarmed the watchdog: the job ran on unsupervised and the device never
// failed safe. Without a watchdog EndSession still releases the lease.
func TestEndSessionOfHolderLeavesWatchdogArmed(t *testing.T) {
	t.Run("watchdog", func(t *testing.T) {
		clk := clock.NewManual(time.Unix(1_800_000_000, 0))
		jd := newJobDevice(t, clk, 2, nil)
		a, b := mhp.AsSession(jd.drv, "a"), mhp.AsSession(jd.drv, "b")
		ctx := context.Background()
		if _, err := a.Acquire(ctx, time.Minute); err != nil {
			t.Fatal(err)
		}
		res, err := a.Invoke(ctx, mhp.InvokeRequest{Name: "stubborn"})
		if err != nil {
			t.Fatal(err)
		}
		<-jd.started
		a.EndSession(ctx)
		if _, err := b.Acquire(ctx, time.Minute); mhp.CodeOf(err) != mhp.CodeNotLeased {
			t.Fatalf("another session took the lease of a vanished holder before the watchdog ran out: %v", err)
		}
		clk.Advance(3 * time.Second)
		conformance.EventuallyWithin(t, "the watchdog to estop", 5*time.Second, func() bool { return jd.drv.State() == mhp.StateEStop && jd.stops.Load() == 1 })
		if j, _ := b.Job(ctx, res.Job.ID); !j.CancelRequested {
			t.Fatalf("job %+v not cancelled by the watchdog", j)
		}
		if _, err := b.Acquire(ctx, time.Minute); err != nil {
			t.Fatalf("acquire after the watchdog dropped the lease: %v", err)
		}
	})
	t.Run("no watchdog", func(t *testing.T) {
		jd := newJobDevice(t, clock.NewManual(time.Unix(1_800_000_000, 0)), 0, nil)
		a, b := mhp.AsSession(jd.drv, "a"), mhp.AsSession(jd.drv, "b")
		ctx := context.Background()
		if _, err := a.Acquire(ctx, time.Minute); err != nil {
			t.Fatal(err)
		}
		a.EndSession(ctx)
		if _, err := b.Acquire(ctx, time.Minute); err != nil {
			t.Fatalf("acquire after the holder's session ended: %v", err)
		}
	})
}

// TestResumeOnWatchdogDeviceNeedsLease: resuming a paused job restarts
// motion, so on a watchdog device it needs the lease like an invoke does.
// Before the fix anyone could resume while nobody held the lease, and the
// job ran with no watchdog supervising it.
func TestResumeOnWatchdogDeviceNeedsLease(t *testing.T) {
	jd := newJobDevice(t, clock.NewManual(time.Unix(1_800_000_000, 0)), 5, nil)
	a, b := mhp.AsSession(jd.drv, "a"), mhp.AsSession(jd.drv, "b")
	ctx := context.Background()
	if _, err := a.Acquire(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	res, err := a.Invoke(ctx, mhp.InvokeRequest{Name: "steps"})
	if err != nil {
		t.Fatal(err)
	}
	<-jd.started
	if _, err := a.PauseJob(ctx, res.Job.ID); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = b.ResumeJob(ctx, res.Job.ID)
	if e, _ := mhp.AsError(err); e == nil || e.Code != mhp.CodeNotLeased || e.Data["reason"] != "lease_required" || e.TS == 0 {
		t.Fatalf("unleased resume on a watchdog device: %v, want NotLeased lease_required", err)
	}
	if _, err := b.Acquire(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if j, err := b.ResumeJob(ctx, res.Job.ID); err != nil || j.Paused {
		t.Fatalf("resume by the holder: %+v, %v", j, err)
	}
}

// TestPauseOrResumeRacingJobEnd: when the job ends while the backend's
// pause or resume hook runs, the request fails DeviceBusy and the finished
// job is never marked paused nor followed by a paused/resumed notification.
func TestPauseOrResumeRacingJobEnd(t *testing.T) {
	for _, which := range []string{"pause", "resume"} {
		t.Run(which, func(t *testing.T) {
			finished := make(chan struct{})
			var mu sync.Mutex
			var after []string // notifications after jobs/finished
			jd := newJobDevice(t, clock.Real{}, 0, nil)
			ctx := mhp.WithSession(context.Background(), "a")
			var id string
			// The hook lets the job end (the backend finished the step, or a
			// cancel landed) and returns only once the job is terminal.
			endDuringHook := func(context.Context, *binding.Job) error {
				if which == "pause" {
					close(jd.steps)
				} else if _, err := jd.drv.CancelJob(ctx, id); err != nil {
					return err
				}
				select {
				case <-finished:
					return nil
				case <-time.After(5 * time.Second):
					return errors.New("job did not finish")
				}
			}
			var once sync.Once
			stop := jd.drv.Listen(func(n mhp.Notification) {
				mu.Lock()
				defer mu.Unlock()
				select {
				case <-finished:
					after = append(after, n.Method)
				default:
				}
				if n.Method == mhp.NotifyJobsFinished {
					once.Do(func() { close(finished) })
				}
			})
			defer stop()
			res, err := jd.drv.Invoke(ctx, mhp.InvokeRequest{Name: "steps"})
			if err != nil {
				t.Fatal(err)
			}
			id = res.Job.ID
			<-jd.started
			if which == "pause" {
				jd.pause = endDuringHook
				_, err = jd.drv.PauseJob(ctx, id)
			} else {
				if _, err := jd.drv.PauseJob(ctx, id); err != nil {
					t.Fatal(err)
				}
				jd.resume = endDuringHook
				_, err = jd.drv.ResumeJob(ctx, id)
			}
			if mhp.CodeOf(err) != mhp.CodeDeviceBusy {
				t.Fatalf("%s of a job that ended meanwhile: %v, want DeviceBusy", which, err)
			}
			j, _ := jd.drv.Job(ctx, id)
			if !j.State.Terminal() || j.Paused {
				t.Fatalf("job %+v, want terminal and not paused", j)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, m := range after {
				if m == mhp.NotifyJobsPaused || m == mhp.NotifyJobsResumed {
					t.Fatalf("%s published after jobs/finished: %v", m, after)
				}
			}
		})
	}
}

// TestCancelGraceFollowsTheJobDeadline: after a plain cancel the backend may
// take until the job's deadline to report; only after that plus JobGrace is
// the job abandoned. Before the fix the wait mixed the job's (real) deadline
// with the driver's clock: with a manual clock set in the past a stubborn job
// was never abandoned, and with one set in the future (the conformance
// memory driver's) a cancel the backend was about to honour was abandoned as
// outcome unknown, faulting the device, at the next clock step.
func TestCancelGraceFollowsTheJobDeadline(t *testing.T) {
	t.Run("past clock abandons after deadline and grace", func(t *testing.T) {
		clk := clock.NewManual(time.Unix(1_000_000_000, 0))
		jd := newJobDevice(t, clk, 0, func(c *binding.Config) { c.JobTimeout = time.Hour })
		ctx := mhp.WithSession(context.Background(), "a")
		res, err := jd.drv.Invoke(ctx, mhp.InvokeRequest{Name: "stubborn"})
		if err != nil {
			t.Fatal(err)
		}
		<-jd.started
		if _, err := jd.drv.CancelJob(ctx, res.Job.ID); err != nil {
			t.Fatal(err)
		}
		// The abandonment timer is armed once runJob saw the cancel.
		conformance.EventuallyWithin(t, "the grace timer", 5*time.Second, func() bool { return clk.Pending() > 0 })
		clk.Advance(time.Hour + time.Minute)
		j := waitJob(t, jd.drv, res.Job.ID)
		if j.State != mhp.JobFailed || j.Outcome != mhp.OutcomeUnknown {
			t.Fatalf("stubborn job past its deadline and grace: %+v, want failed with outcome unknown", j)
		}
	})
	t.Run("future clock waits for the backend", func(t *testing.T) {
		clk := clock.NewManual(time.Unix(1_893_456_000, 0))
		proceed, sawCancel := make(chan struct{}), make(chan struct{})
		jd := newJobDevice(t, clk, 0, func(c *binding.Config) {
			c.Actions = append(c.Actions, binding.Action{Spec: mhp.Action{Name: "slow_cancel", Cancellable: true},
				Run: func(ctx context.Context, j *binding.Job) (any, error) {
					<-ctx.Done()
					close(sawCancel)
					<-proceed // the backend takes a moment to confirm the stop
					return nil, binding.ErrCancelled
				}})
		})
		ctx := mhp.WithSession(context.Background(), "a")
		res, err := jd.drv.Invoke(ctx, mhp.InvokeRequest{Name: "slow_cancel"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := jd.drv.CancelJob(ctx, res.Job.ID); err != nil {
			t.Fatal(err)
		}
		<-sawCancel
		conformance.EventuallyWithin(t, "the grace timer", 5*time.Second, func() bool { return clk.Pending() > 0 })
		clk.Advance(time.Second) // a heartbeat's worth of time
		// Give a wrongly fired abandonment timer the chance to finish the job.
		conformance.EventuallyWithin(t, "the clock's timers to run", 5*time.Second, func() bool {
			j, _ := jd.drv.Job(ctx, res.Job.ID)
			return j.State.Terminal() || clk.Pending() > 0
		})
		close(proceed)
		j := waitJob(t, jd.drv, res.Job.ID)
		if j.State != mhp.JobCancelled || jd.drv.State() != mhp.StateIdle {
			t.Fatalf("job %+v, device %s; want cancelled and idle", j, jd.drv.State())
		}
	})
}

// TestHookErrorsAreNotMutated: a binding may return one *mhp.Error value
// for every refusal. The driver stamps and annotates a copy; before the fix
// it wrote ts and data.outcome into the binding's value, which raced when
// two requests failed at once.
func TestHookErrorsAreNotMutated(t *testing.T) {
	refusal := &mhp.Error{Code: mhp.CodeInvalidValue, Message: "backend refused", Data: map[string]any{"backend": "x"}}
	clk := clock.NewManual(time.Unix(1_800_000_000, 0))
	jd := newJobDevice(t, clk, 0, func(c *binding.Config) {
		c.Settings = append(c.Settings, binding.Setting{Spec: mhp.Setting{Name: "refused", Type: mhp.TypeNumber, DuringJob: true},
			Write: func(context.Context, any) (binding.WriteStatus, error) { return binding.Applied, refusal }})
		c.Actions = append(c.Actions, binding.Action{Spec: mhp.Action{Name: "refused", Concurrent: true},
			Run: func(context.Context, *binding.Job) (any, error) { return nil, refusal }})
	})
	ctx := mhp.WithSession(context.Background(), "a")
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, err := jd.drv.Write(ctx, mhp.WriteRequest{Name: "refused", Value: 1.0})
			if e, _ := mhp.AsError(err); e == nil || e.Code != mhp.CodeInvalidValue || e.TS != mhp.UnixSeconds(clk.Now()) {
				t.Errorf("write: %v, want the binding's refusal stamped with the driver clock", err)
			}
		}()
		go func() {
			defer wg.Done()
			res, err := jd.drv.Invoke(ctx, mhp.InvokeRequest{Name: "refused"})
			if err != nil {
				t.Error(err)
				return
			}
			j := waitJob(t, jd.drv, res.Job.ID)
			if j.Outcome != mhp.OutcomeNotStarted || j.Error == nil || j.Error.Data["outcome"] != mhp.OutcomeNotStarted {
				t.Errorf("job %+v, want failed not_started", j)
			}
		}()
	}
	wg.Wait()
	if refusal.TS != 0 || len(refusal.Data) != 1 {
		t.Fatalf("the binding's error was modified: ts %v data %v", refusal.TS, refusal.Data)
	}
}

// TestJobsListNewestFirstAtOneInstant: jobs/list is newest first even when
// jobs started at the same clock reading. Before the fix equal start times
// were ordered by the random job id.
func TestJobsListNewestFirstAtOneInstant(t *testing.T) {
	jd := newJobDevice(t, clock.NewManual(time.Unix(1_800_000_000, 0)), 0, nil)
	ctx := mhp.WithSession(context.Background(), "a")
	var ids []string
	for i := 0; i < 6; i++ {
		res, err := jd.drv.Invoke(ctx, mhp.InvokeRequest{Name: "stubborn"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.Job.ID)
	}
	list, err := jd.drv.Jobs(ctx, mhp.JobsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != len(ids) {
		t.Fatalf("listed %d jobs, want %d", len(list), len(ids))
	}
	for i, j := range list {
		if want := ids[len(ids)-1-i]; j.ID != want {
			t.Fatalf("jobs/list[%d] = %s, want %s (newest first)", i, j.ID, want)
		}
	}
}

// TestWriteAfterCloseRefused: a closed driver runs no hooks. Before the fix a
// write after Close reached the backend with no deadline (the write sweeper
// is not armed once closed).
func TestWriteAfterCloseRefused(t *testing.T) {
	var wrote atomic.Int32
	drv, err := binding.New(binding.Config{
		Device: mhp.DeviceInfo{ID: "closed-01"},
		Settings: []binding.Setting{{Spec: mhp.Setting{Name: "sp", Type: mhp.TypeNumber},
			Write: func(context.Context, any) (binding.WriteStatus, error) { wrote.Add(1); return binding.Applied, nil }}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := drv.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = drv.Write(context.Background(), mhp.WriteRequest{Name: "sp", Value: 1.0})
	if e, _ := mhp.AsError(err); e == nil || e.Code != mhp.CodeDeviceFault || wrote.Load() != 0 {
		t.Fatalf("write after Close: %v (hook ran %d times), want DeviceFault and no hook", err, wrote.Load())
	}
}

// TestParamDefaultsAreNormalised: a parameter's default reaches Run in the
// same form as a sent value (int64 for integers, float64 for numbers), and
// as a copy Run may modify. Before the fix the descriptor's default went
// through as declared (a Go int), so a Run asserting int64 panicked.
func TestParamDefaultsAreNormalised(t *testing.T) {
	got := make(chan []any, 2)
	jd := newJobDevice(t, clock.Real{}, 0, func(c *binding.Config) {
		c.Actions = append(c.Actions, binding.Action{Spec: mhp.Action{Name: "mix", Concurrent: true, Params: mhp.Params{
			{Name: "cycles", Shape: &mhp.Shape{Type: mhp.TypeInteger, Default: 3}},
			{Name: "speed", Shape: &mhp.Shape{Type: mhp.TypeNumber, Default: 5}},
			{Name: "wells", Shape: &mhp.Shape{Type: mhp.TypeArray, Items: &mhp.Shape{Type: mhp.TypeInteger}, Default: []any{1, 2}}},
		}},
			Run: func(ctx context.Context, j *binding.Job) (any, error) {
				p := j.Params()
				w, _ := p["wells"].([]any)
				if len(w) != 2 {
					return nil, errors.New("no wells")
				}
				got <- []any{p["cycles"], p["speed"], w[0]}
				w[0] = int64(99) // Run owns its params
				return nil, nil
			}})
	})
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		if _, err := jd.drv.Invoke(ctx, mhp.InvokeRequest{Name: "mix"}); err != nil {
			t.Fatal(err)
		}
		p := <-got
		if p[0] != int64(3) || p[1] != 5.0 {
			t.Fatalf("defaults reached Run as cycles %#v speed %#v, want int64(3) and 5.0", p[0], p[1])
		}
		if p[2] != int64(1) {
			t.Fatalf("default list's first item reached Run as %#v on invoke %d, want a fresh int64(1)", p[2], i)
		}
	}
}

// TestEStopDuringResetVerifyWins: an estop that arrives while safety/reset
// is verifying recovery is not undone by the reset. Before the fix the reset
// cleared the estop latched during its verify and the device went idle.
func TestEStopDuringResetVerifyWins(t *testing.T) {
	var jd *jobDevice
	var stopDuringVerify atomic.Bool
	jd = newJobDevice(t, clock.Real{}, 0, func(c *binding.Config) {
		c.Verify = func(ctx context.Context) error {
			if stopDuringVerify.Load() {
				if _, err := jd.drv.EStop(mhp.WithSession(ctx, "operator"), "pressed during reset"); err != nil {
					return err
				}
			}
			return nil
		}
	})
	ctx := mhp.WithSession(context.Background(), "a")
	if _, err := jd.drv.EStop(ctx, "first"); err != nil {
		t.Fatal(err)
	}
	stopDuringVerify.Store(true)
	_, err := jd.drv.Reset(ctx)
	if e, _ := mhp.AsError(err); e == nil || e.Code != mhp.CodeEStopActive || e.TS == 0 {
		t.Fatalf("reset with an estop during its verify: %v, want EStopActive", err)
	}
	if st := jd.drv.State(); st != mhp.StateEStop {
		t.Fatalf("state %s, want estop kept", st)
	}
	stopDuringVerify.Store(false)
	if r, err := jd.drv.Reset(ctx); err != nil || r.State != mhp.StateIdle {
		t.Fatalf("second reset: %+v, %v", r, err)
	}
}

// TestRunParamsAreItsOwn: the params Run gets are its own copy; changing
// them does not change what jobs/status reports (nor race with a client
// encoding the job). Before the fix both shared one map.
func TestRunParamsAreItsOwn(t *testing.T) {
	changed := make(chan struct{})
	jd := newJobDevice(t, clock.Real{}, 0, func(c *binding.Config) {
		c.Actions = append(c.Actions, binding.Action{Spec: mhp.Action{Name: "plate", Concurrent: true, Params: mhp.Params{
			{Name: "wells", Shape: &mhp.Shape{Type: mhp.TypeArray, Items: &mhp.Shape{Type: mhp.TypeObject}}}}},
			Run: func(ctx context.Context, j *binding.Job) (any, error) {
				p := j.Params()
				p["wells"].([]any)[0].(map[string]any)["vol"] = 999.0
				p["extra"] = true
				close(changed)
				<-ctx.Done()
				return nil, binding.ErrCancelled
			}})
	})
	ctx := context.Background()
	res, err := jd.drv.Invoke(ctx, mhp.InvokeRequest{Name: "plate",
		Params: map[string]any{"wells": []any{map[string]any{"vol": 10.0}}}})
	if err != nil {
		t.Fatal(err)
	}
	<-changed
	j, err := jd.drv.Job(ctx, res.Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	w := j.Params["wells"].([]any)[0].(map[string]any)
	if w["vol"] != 10.0 || j.Params["extra"] != nil {
		t.Fatalf("jobs/status params %v after Run changed its own, want the invoked ones", j.Params)
	}
}

// TestCloseEndsPollingBeforeTheBackendCloses: Close stops a poll in
// progress and waits for it before the Close hook releases the backend; no
// signal is read or published afterwards. Before the fix a poll in progress
// went on reading (and publishing) through and after the Close hook.
func TestCloseEndsPollingBeforeTheBackendCloses(t *testing.T) {
	var inRead, readsB, readsAfterClose atomic.Int32
	var closing atomic.Bool
	entered := make(chan struct{})
	var once sync.Once
	var readInFlightAtClose atomic.Bool
	drv, err := binding.New(binding.Config{
		Device: mhp.DeviceInfo{ID: "poll-01"},
		Signals: []binding.Signal{
			{Spec: mhp.Signal{Name: "a", Type: mhp.TypeNumber},
				Read: func(ctx context.Context) (binding.Sample, error) {
					inRead.Add(1)
					defer inRead.Add(-1)
					if closing.Load() {
						readsAfterClose.Add(1)
					}
					once.Do(func() { close(entered) })
					<-ctx.Done() // a slow backend that honours its deadline
					return binding.Sample{}, ctx.Err()
				}},
			{Spec: mhp.Signal{Name: "b", Type: mhp.TypeNumber},
				Read: func(ctx context.Context) (binding.Sample, error) {
					readsB.Add(1)
					if closing.Load() {
						readsAfterClose.Add(1)
					}
					return binding.Sample{Value: 1.0}, nil
				}},
		},
		InterlockTimeout: time.Minute,
		Close: func() error {
			readInFlightAtClose.Store(inRead.Load() > 0)
			closing.Store(true)
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	var published atomic.Int32
	stop := drv.Listen(func(n mhp.Notification) {
		if closing.Load() {
			published.Add(1)
		}
	})
	defer stop()
	ctx := mhp.WithSession(context.Background(), "a")
	if _, err := drv.Subscribe(ctx, []string{"a", "b"}); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, entered, "the poll to read signal a")
	start := time.Now()
	if err := drv.Close(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("Close took %s", took)
	}
	if readInFlightAtClose.Load() {
		t.Fatal("the Close hook ran while the poller was still reading the backend")
	}
	if n := readsB.Load(); n != 0 {
		t.Fatalf("signal b read %d times by a poll that Close ended", n)
	}
	if readsAfterClose.Load() != 0 || published.Load() != 0 {
		t.Fatalf("reads %d, notifications %d after the Close hook", readsAfterClose.Load(), published.Load())
	}
}

// TestIdleListeningSessionKeepsSubscriptions: a session that subscribed and
// then only listens (an open event stream, no requests) keeps getting
// updates however long the run. Before the fix the driver forgot its
// subscriptions after SessionIdle without a request, silently.
func TestIdleListeningSessionKeepsSubscriptions(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_800_000_000, 0))
	jd := newJobDevice(t, clk, 0, func(c *binding.Config) {
		c.Signals = append(c.Signals, binding.Signal{Spec: mhp.Signal{Name: "temp", Type: mhp.TypeNumber}, Pushed: true,
			Read: func(context.Context) (binding.Sample, error) { return binding.Sample{Value: 20.0}, nil }})
	})
	updates := make(chan any, 8)
	stop := jd.drv.Listen(func(n mhp.Notification) {
		if n.Signal() == "temp" {
			updates <- n.Params["value"]
		}
	})
	defer stop()
	for _, session := range []string{"a", ""} { // a transport's session, and an in-process anonymous caller
		ctx := mhp.WithSession(context.Background(), session)
		if _, err := jd.drv.Subscribe(ctx, []string{"temp"}); err != nil {
			t.Fatal(err)
		}
	}
	other := mhp.AsSession(jd.drv, "b")
	for i := 0; i < 4; i++ { // 80 minutes of other traffic
		clk.Advance(20 * time.Minute)
		if _, err := other.Ping(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	jd.drv.PublishSignal("temp", binding.Sample{Value: 95.0})
	select {
	case v := <-updates:
		if v != 95.0 {
			t.Fatalf("update %v, want 95", v)
		}
	default:
		t.Fatal("no signals/update for subscribers that were only listening")
	}
	a := mhp.AsSession(jd.drv, "a")
	if err := a.Unsubscribe(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	jd.drv.EndSession(mhp.WithSession(context.Background(), "a"))
	if err := jd.drv.Unsubscribe(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	jd.drv.PublishSignal("temp", binding.Sample{Value: 96.0})
	select {
	case v := <-updates:
		t.Fatalf("update %v after every subscriber left", v)
	default:
	}
}

// TestDescriptorCopyDoesNotReachTheGates: changing the descriptor Descriptor
// returns, or the Config the driver was built from, changes neither what the
// driver describes nor what its gates enforce. Before the fix both shared the
// limits and shapes the gates check (and New wrote defaults into the
// caller's Config).
func TestDescriptorCopyDoesNotReachTheGates(t *testing.T) {
	cfg := binding.Config{
		Device: mhp.DeviceInfo{ID: "copy-01"},
		Settings: []binding.Setting{{Spec: mhp.Setting{Name: "sp", Type: mhp.TypeNumber, Limits: mhp.Range(0, 100)},
			Write: func(context.Context, any) (binding.WriteStatus, error) { return binding.Applied, nil }}},
		Actions: []binding.Action{{Spec: mhp.Action{Name: "heat", Params: mhp.Params{
			{Name: "temp", Shape: &mhp.Shape{Type: mhp.TypeNumber, Limits: mhp.Range(4, 99)}}}},
			Run: func(context.Context, *binding.Job) (any, error) { return nil, nil }}},
	}
	drv, err := binding.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	if cfg.Settings[0].Spec.Approval != "" {
		t.Fatalf("New wrote approval %q into the caller's Config", cfg.Settings[0].Spec.Approval)
	}
	desc := drv.Descriptor()
	*desc.Settings[0].Limits.Max = 1000
	*desc.Actions[0].Params[0].Shape.Limits.Max = 1000
	*cfg.Settings[0].Spec.Limits.Max = 1000
	*cfg.Actions[0].Spec.Params[0].Shape.Limits.Max = 1000
	ctx := context.Background()
	if _, err := drv.Write(ctx, mhp.WriteRequest{Name: "sp", Value: 500.0}); mhp.CodeOf(err) != mhp.CodeLimitViolation {
		t.Fatalf("write 500 after changing a copy of the limits: %v, want LimitViolation", err)
	}
	if _, err := drv.Invoke(ctx, mhp.InvokeRequest{Name: "heat", Params: map[string]any{"temp": 500.0}}); mhp.CodeOf(err) != mhp.CodeLimitViolation {
		t.Fatalf("invoke 500 after changing a copy of the limits: %v, want LimitViolation", err)
	}
	if m := *drv.Descriptor().Settings[0].Limits.Max; m != 100 {
		t.Fatalf("descriptor max %v after changing a copy, want 100", m)
	}
}

// TestWriteInterlockReadBoundedByInterlockTimeout: a live interlock read
// during settings/write is cut at InterlockTimeout (the interlock is then
// open), not at the hook's HookTimeout. Before the fix a hung interlock read
// held the write (and the request lock) for HookTimeout.
func TestWriteInterlockReadBoundedByInterlockTimeout(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_800_000_000, 0))
	entered := make(chan struct{}, 4)
	var wrote atomic.Int32
	drv, err := binding.New(binding.Config{
		Device: mhp.DeviceInfo{ID: "lock-01"},
		Clock:  clk,
		Signals: []binding.Signal{{Spec: mhp.Signal{Name: "door_closed", Type: mhp.TypeBoolean},
			Read: func(ctx context.Context) (binding.Sample, error) {
				entered <- struct{}{}
				<-ctx.Done() // a slow backend that honours its context
				return binding.Sample{}, ctx.Err()
			}}},
		Settings: []binding.Setting{{Spec: mhp.Setting{Name: "sp", Type: mhp.TypeNumber, Interlocks: []string{"door_closed"}},
			Write: func(context.Context, any) (binding.WriteStatus, error) { wrote.Add(1); return binding.Applied, nil }}},
		InterlockTimeout: 2 * time.Second,
		HookTimeout:      time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	res := make(chan error, 1)
	go func() {
		_, err := drv.Write(context.Background(), mhp.WriteRequest{Name: "sp", Value: 1.0})
		res <- err
	}()
	<-entered
	clk.Advance(2 * time.Second)
	select {
	case err := <-res:
		if e, _ := mhp.AsError(err); e == nil || e.Code != mhp.CodeInterlockOpen || e.Data["interlock"] != "door_closed" {
			t.Fatalf("write with a hung interlock read: %v, want InterlockOpen on door_closed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("write still blocked on its interlock read after InterlockTimeout")
	}
	if wrote.Load() != 0 || drv.State() != mhp.StateIdle {
		t.Fatalf("hook ran %d times, state %s; want no write and idle", wrote.Load(), drv.State())
	}
}

// TestPollerIdleWithOnlyPushedSubscriptions: subscriptions to pushed
// signals only (the adapter publishes them) leave no poller ticking, and a
// later subscription to a polled signal starts it. Before the fix the
// poller re-armed itself every PollInterval for as long as any signal was
// subscribed, polling nothing.
func TestPollerIdleWithOnlyPushedSubscriptions(t *testing.T) {
	clk := &firedClock{Manual: clock.NewManual(time.Unix(1_800_000_000, 0)), fired: make(chan struct{}, 16)}
	var polled atomic.Int32
	jd := newJobDevice(t, clk, 0, func(c *binding.Config) {
		c.Signals = append(c.Signals,
			binding.Signal{Spec: mhp.Signal{Name: "pushed", Type: mhp.TypeNumber}, Pushed: true,
				Read: func(context.Context) (binding.Sample, error) { return binding.Sample{Value: 1.0}, nil }},
			binding.Signal{Spec: mhp.Signal{Name: "polled", Type: mhp.TypeNumber},
				Read: func(context.Context) (binding.Sample, error) {
					return binding.Sample{Value: float64(polled.Add(1))}, nil
				}})
	})
	ctx := mhp.WithSession(context.Background(), "a")
	if _, err := jd.drv.Subscribe(ctx, []string{"pushed"}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(0) // the first poll runs
	<-clk.fired
	if n := clk.Pending(); n != 0 {
		t.Fatalf("%d timers pending after a poll with only pushed signals subscribed, want none", n)
	}
	if _, err := jd.drv.Subscribe(ctx, []string{"polled"}); err != nil {
		t.Fatal(err)
	}
	// The poll the subscription armed is due at once; each later one a
	// PollInterval after the last. Advance runs each due callback before
	// it returns.
	for i := 1; i <= 3; i++ {
		conformance.EventuallyWithin(t, "the poller to be armed", 5*time.Second, func() bool { return clk.Pending() > 0 })
		step := time.Second
		if i == 1 {
			step = 0
		}
		clk.Advance(step)
		<-clk.fired
		if polled.Load() != int32(i) {
			t.Fatalf("%d polls after %d ticks", polled.Load(), i)
		}
	}
}

// firedClock is a manual clock that reports each timer function returning.
type firedClock struct {
	*clock.Manual
	fired chan struct{}
}

func (c *firedClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return c.Manual.AfterFunc(d, func() {
		f()
		c.fired <- struct{}{}
	})
}

// TestCloseLetsJobsStopBeforeTheBackendCloses: Close cancels running jobs
// and gives their Run (up to JobGrace) the chance to send the backend its
// cancel before the Close hook closes the connection. Before the fix the
// Close hook ran at once, so the backend's work could not be stopped and
// ran on unsupervised.
func TestCloseLetsJobsStopBeforeTheBackendCloses(t *testing.T) {
	backendClosed := make(chan struct{})
	var cancelSentAfterClose, jobRunningAtClose atomic.Bool
	running := make(chan struct{})
	var ran atomic.Bool
	drv, err := binding.New(binding.Config{
		Device: mhp.DeviceInfo{ID: "close-01"},
		Actions: []binding.Action{{Spec: mhp.Action{Name: "move", Cancellable: true},
			Run: func(ctx context.Context, j *binding.Job) (any, error) {
				close(running)
				<-ctx.Done()
				// Sending the backend's stop takes a moment; the link must
				// still be open for it.
				select {
				case <-backendClosed:
					cancelSentAfterClose.Store(true)
				case <-time.After(100 * time.Millisecond):
				}
				ran.Store(true)
				return nil, binding.ErrCancelled
			}}},
		JobGrace: time.Minute,
		Close: func() error {
			jobRunningAtClose.Store(!ran.Load())
			close(backendClosed)
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := drv.Invoke(context.Background(), mhp.InvokeRequest{Name: "move"})
	if err != nil {
		t.Fatal(err)
	}
	<-running
	if err := drv.Close(); err != nil {
		t.Fatal(err)
	}
	if jobRunningAtClose.Load() || cancelSentAfterClose.Load() {
		t.Fatal("the Close hook closed the backend while a job was still sending its cancel")
	}
	j, err := drv.Job(context.Background(), res.Job.ID)
	if err != nil || j.State != mhp.JobCancelled || !j.CancelRequested {
		t.Fatalf("job after Close: %+v, %v; want cancelled", j, err)
	}
	if _, err := drv.Write(context.Background(), mhp.WriteRequest{Name: "x"}); mhp.CodeOf(err) != mhp.CodeUnknownName {
		t.Fatalf("write after Close: %v", err)
	}
}

// TestEStopBeforeRunStartsSkipsRun: an estop that lands after a job was
// registered but before its Run was called cancels it without calling Run
// (nothing reached the backend). Before the fix Run was called with an
// already-cancelled context, and a backend call that does not check its
// context first would start motion after the estop.
func TestEStopBeforeRunStartsSkipsRun(t *testing.T) {
	var runs atomic.Int32
	var jd *jobDevice
	estopped := make(chan struct{})
	var once sync.Once
	jd = newJobDevice(t, clock.Real{}, 0, func(c *binding.Config) {
		c.EStop = func(context.Context) error {
			jd.stops.Add(1)
			once.Do(func() { close(estopped) })
			return nil
		}
		c.Actions = append(c.Actions, binding.Action{Spec: mhp.Action{Name: "move"},
			Run: func(ctx context.Context, j *binding.Job) (any, error) {
				runs.Add(1)
				return "moved", nil // a backend that does not look at ctx
			}})
	})
	stop := jd.drv.Listen(func(n mhp.Notification) {
		if n.Method != mhp.NotifyJobsStarted {
			return
		}
		// The operator hits estop as the job starts.
		go func() { _, _ = jd.drv.EStop(context.Background(), "operator") }()
		select { // the stop hook runs once the device latched in estop
		case <-estopped:
		case <-time.After(5 * time.Second):
			t.Error("estop did not run")
		}
	})
	defer stop()
	res, err := jd.drv.Invoke(context.Background(), mhp.InvokeRequest{Name: "move"})
	if err != nil {
		t.Fatal(err)
	}
	j := waitJob(t, jd.drv, res.Job.ID)
	if runs.Load() != 0 || j.State != mhp.JobCancelled || !j.CancelRequested {
		t.Fatalf("job %+v after an estop before Run, Run called %d times; want cancelled without Run", j, runs.Load())
	}
	conformance.EventuallyWithin(t, "the stop hook", 5*time.Second, func() bool { return jd.stops.Load() == 1 })
}

// TestListenerMayCallTheDriver: a listener that reads the driver (State,
// Job) or even makes a call that publishes, while other goroutines publish
// too, does not deadlock, and every listener sees notifications in order.
// Before the fix a publisher waited for the listener while holding the
// driver's lock, so a listener calling State deadlocked as soon as two
// notifications were published at once.
func TestListenerMayCallTheDriver(t *testing.T) {
	jd := newJobDevice(t, clock.Real{}, 0, func(c *binding.Config) {
		c.Signals = append(c.Signals, binding.Signal{Spec: mhp.Signal{Name: "temp", Type: mhp.TypeNumber}, Pushed: true,
			Read: func(context.Context) (binding.Sample, error) { return binding.Sample{Value: 0.0}, nil }})
	})
	ctx := mhp.WithSession(context.Background(), "a")
	if _, err := jd.drv.Subscribe(ctx, []string{"temp"}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []float64
	var nested atomic.Int32
	stop := jd.drv.Listen(func(n mhp.Notification) {
		if n.Signal() != "temp" {
			return
		}
		_ = jd.drv.State()
		if _, err := jd.drv.Jobs(ctx, mhp.JobsRequest{}); err != nil {
			t.Error(err)
		}
		v := n.Params["value"].(float64)
		if v == 10 && nested.Add(1) == 1 {
			// A call that publishes, from inside a listener.
			if _, err := jd.drv.Write(ctx, mhp.WriteRequest{Name: "sp", Value: 1.0}); err != nil {
				t.Error(err)
			}
		}
		mu.Lock()
		seen = append(seen, v)
		mu.Unlock()
	})
	defer stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 50; i++ {
					jd.drv.PublishSignal("temp", binding.Sample{Value: float64(w*1000 + i)})
					_ = jd.drv.State()
				}
			}()
		}
		wg.Wait()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("publishing deadlocked with a listener that calls the driver")
	}
	if nested.Load() != 1 {
		t.Fatalf("the nested write ran %d times", nested.Load())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 200 {
		t.Fatalf("listener saw %d updates, want 200", len(seen))
	}
	last := map[int]float64{}
	for _, v := range seen {
		w := int(v) / 1000
		if p, ok := last[w]; ok && v <= p {
			t.Fatalf("publisher %d's values out of order: %v after %v", w, v, p)
		}
		last[w] = v
	}
}

// TestEveryErrorCarriesTheDriverClock sweeps the refusals of every
// primitive: each is an *mhp.Error with the expected code and ts equal to
// the driver's (manual) clock, far from the system clock.
func TestEveryErrorCarriesTheDriverClock(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_900_000_000, 0))
	jd := newJobDevice(t, clk, 0, func(c *binding.Config) {
		c.Settings = append(c.Settings,
			binding.Setting{Spec: mhp.Setting{Name: "locked", Type: mhp.TypeNumber, Approval: mhp.ApprovalForbid},
				Write: func(context.Context, any) (binding.WriteStatus, error) { return binding.Applied, nil }},
			binding.Setting{Spec: mhp.Setting{Name: "ask", Type: mhp.TypeNumber, Approval: mhp.ApprovalConfirm},
				Write: func(context.Context, any) (binding.WriteStatus, error) { return binding.Applied, nil }},
			binding.Setting{Spec: mhp.Setting{Name: "ranged", Type: mhp.TypeInteger, Limits: mhp.Range(0, 10)},
				Write: func(context.Context, any) (binding.WriteStatus, error) { return binding.Applied, nil }})
		c.Actions = append(c.Actions, binding.Action{Spec: mhp.Action{Name: "plain", Concurrent: true},
			Run: func(context.Context, *binding.Job) (any, error) { return nil, nil }})
	})
	a, b := mhp.AsSession(jd.drv, "a"), mhp.AsSession(jd.drv, "b")
	ctx := context.Background()
	done, err := a.Invoke(ctx, mhp.InvokeRequest{Name: "plain"})
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, jd.drv, done.Job.ID)
	call := func(f func() error) func() error { return f }
	cases := []struct {
		name string
		code mhp.Code
		call func() error
	}{
		{"read unknown", mhp.CodeUnknownName, call(func() error { _, err := a.Read(ctx, []string{"nope"}); return err })},
		{"subscribe unknown", mhp.CodeUnknownName, call(func() error { _, err := a.Subscribe(ctx, []string{"nope"}); return err })},
		{"write unknown", mhp.CodeUnknownName, call(func() error { _, err := a.Write(ctx, mhp.WriteRequest{Name: "nope", Value: 1.0}); return err })},
		{"forbid", mhp.CodeForbidden, call(func() error { _, err := a.Write(ctx, mhp.WriteRequest{Name: "locked", Value: 1.0}); return err })},
		{"confirm", mhp.CodeApprovalRequired, call(func() error { _, err := a.Write(ctx, mhp.WriteRequest{Name: "ask", Value: 1.0}); return err })},
		{"type", mhp.CodeInvalidValue, call(func() error { _, err := a.Write(ctx, mhp.WriteRequest{Name: "ranged", Value: 2.5}); return err })},
		{"limit", mhp.CodeLimitViolation, call(func() error { _, err := a.Write(ctx, mhp.WriteRequest{Name: "ranged", Value: 11.0}); return err })},
		{"invoke unknown", mhp.CodeUnknownName, call(func() error { _, err := a.Invoke(ctx, mhp.InvokeRequest{Name: "nope"}); return err })},
		{"undeclared param", mhp.CodeInvalidValue, call(func() error {
			_, err := a.Invoke(ctx, mhp.InvokeRequest{Name: "plain", Params: map[string]any{"x": 1.0}})
			return err
		})},
		{"job unknown", mhp.CodeJobNotFound, call(func() error { _, err := a.Job(ctx, "job_00000000"); return err })},
		{"cancel unsupported", mhp.CodeNotSupported, call(func() error { _, err := a.CancelJob(ctx, done.Job.ID); return err })},
		{"pause unsupported", mhp.CodeNotSupported, call(func() error { _, err := a.PauseJob(ctx, done.Job.ID); return err })},
		{"acquire anonymous", mhp.CodeInvalidParams, call(func() error { _, err := jd.drv.Acquire(ctx, time.Minute); return err })},
		{"acquire ttl", mhp.CodeInvalidParams, call(func() error { _, err := a.Acquire(ctx, 2*time.Hour); return err })},
		{"renew unleased", mhp.CodeNotLeased, call(func() error { _, err := a.Renew(ctx); return err })},
		{"describe tier", mhp.CodeInvalidParams, call(func() error { _, err := a.Describe(ctx, mhp.DescribeRequest{Detail: "all"}); return err })},
		{"describe select", mhp.CodeUnknownName, call(func() error {
			_, err := a.Describe(ctx, mhp.DescribeRequest{Select: &mhp.Selection{Actions: []string{"nope"}}})
			return err
		})},
		{"other holder", mhp.CodeNotLeased, call(func() error {
			if _, err := b.Acquire(ctx, time.Minute); err != nil {
				return err
			}
			_, err := a.Write(ctx, mhp.WriteRequest{Name: "sp", Value: 1.0})
			return err
		})},
		{"release by other", mhp.CodeNotLeased, call(func() error { return a.Release(ctx) })},
		{"reset by other", mhp.CodeNotLeased, call(func() error { _, err := a.Reset(ctx); return err })},
		{"estop active", mhp.CodeEStopActive, call(func() error {
			if _, err := b.EStop(ctx, "sweep"); err != nil {
				return err
			}
			_, err := b.Write(ctx, mhp.WriteRequest{Name: "sp", Value: 1.0})
			return err
		})},
		{"resume in estop", mhp.CodeEStopActive, call(func() error { _, err := b.ResumeJob(ctx, done.Job.ID); return err })},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			e, ok := mhp.AsError(err)
			if !ok || e.Code != tc.code {
				t.Fatalf("got %v, want %s", err, tc.code)
			}
			if want := mhp.UnixSeconds(clk.Now()); e.TS != want {
				t.Fatalf("ts %v, want the driver clock %v", e.TS, want)
			}
			if e.Message == "" {
				t.Fatal("empty message")
			}
		})
	}
}

// TestJobRetentionAndPanics: finished jobs beyond KeepJobs are evicted
// oldest first, an active job never is, and a Run that panics ends failed
// with outcome unknown, faulting the device.
func TestJobRetentionAndPanics(t *testing.T) {
	jd := newJobDevice(t, clock.Real{}, 0, func(c *binding.Config) {
		c.KeepJobs = 2
		c.Actions = append(c.Actions,
			binding.Action{Spec: mhp.Action{Name: "quick", Concurrent: true},
				Run: func(context.Context, *binding.Job) (any, error) { return nil, nil }},
			binding.Action{Spec: mhp.Action{Name: "boom", Concurrent: true},
				Run: func(context.Context, *binding.Job) (any, error) { panic("wire fell off") }})
	})
	ctx := context.Background()
	active, err := jd.drv.Invoke(ctx, mhp.InvokeRequest{Name: "stubborn"})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := 0; i < 4; i++ {
		res, err := jd.drv.Invoke(ctx, mhp.InvokeRequest{Name: "quick"})
		if err != nil {
			t.Fatal(err)
		}
		waitJob(t, jd.drv, res.Job.ID)
		ids = append(ids, res.Job.ID)
	}
	for i, id := range ids {
		_, err := jd.drv.Job(ctx, id)
		if evicted := i < 2; evicted != (mhp.CodeOf(err) == mhp.CodeJobNotFound) {
			t.Fatalf("job %d of 4: %v (evicted should be %v)", i, err, evicted)
		}
	}
	if j, err := jd.drv.Job(ctx, active.Job.ID); err != nil || j.State.Terminal() {
		t.Fatalf("active job %+v, %v: evicted or ended", j, err)
	}
	res, err := jd.drv.Invoke(ctx, mhp.InvokeRequest{Name: "boom"})
	if err != nil {
		t.Fatal(err)
	}
	j := waitJob(t, jd.drv, res.Job.ID)
	if j.State != mhp.JobFailed || j.Outcome != mhp.OutcomeUnknown || j.Error == nil || jd.drv.State() != mhp.StateFault {
		t.Fatalf("panicking job %+v, device %s; want failed, outcome unknown, fault", j, jd.drv.State())
	}
}

// TestEStopDuringResumeHookRefusesResume: an estop that lands while the
// backend's resume hook runs cuts the hook's context and the resume is
// refused EStopActive (no jobs/resumed). Before the fix the hook's context
// ignored the estop and the job was reported resumed in estop.
func TestEStopDuringResumeHookRefusesResume(t *testing.T) {
	jd := newJobDevice(t, clock.Real{}, 0, nil)
	ctx := mhp.WithSession(context.Background(), "a")
	res, err := jd.drv.Invoke(ctx, mhp.InvokeRequest{Name: "steps"})
	if err != nil {
		t.Fatal(err)
	}
	<-jd.started
	if _, err := jd.drv.PauseJob(ctx, res.Job.ID); err != nil {
		t.Fatal(err)
	}
	var hookCtxEnded atomic.Bool
	jd.resume = func(hctx context.Context, j *binding.Job) error {
		if _, err := jd.drv.EStop(ctx, "operator"); err != nil {
			return err
		}
		select {
		case <-hctx.Done():
			hookCtxEnded.Store(true)
		case <-time.After(5 * time.Second):
		}
		return nil
	}
	var resumed atomic.Bool
	stop := jd.drv.Listen(func(n mhp.Notification) {
		if n.Method == mhp.NotifyJobsResumed {
			resumed.Store(true)
		}
	})
	defer stop()
	_, err = jd.drv.ResumeJob(ctx, res.Job.ID)
	if mhp.CodeOf(err) != mhp.CodeEStopActive || !hookCtxEnded.Load() || resumed.Load() {
		t.Fatalf("resume with an estop during its hook: %v (hook context ended %v, resumed published %v); want EStopActive",
			err, hookCtxEnded.Load(), resumed.Load())
	}
}

// TestPublishedNonFiniteSignalIsNull: a pushed NaN or ±Inf is published as
// null, as a polled one reads, so the notification can be encoded and a
// repeated NaN is not republished. Before the fix NaN went out as is (JSON
// cannot carry it) and, never equal to itself, was published on every push.
func TestPublishedNonFiniteSignalIsNull(t *testing.T) {
	jd := newJobDevice(t, clock.Real{}, 0, func(c *binding.Config) {
		c.Signals = append(c.Signals, binding.Signal{Spec: mhp.Signal{Name: "temp", Type: mhp.TypeNumber}, Pushed: true,
			Read: func(context.Context) (binding.Sample, error) { return binding.Sample{Value: float32(math.NaN())}, nil }})
	})
	var got []any
	stop := jd.drv.Listen(func(n mhp.Notification) {
		if n.Signal() == "temp" {
			got = append(got, n.Params["value"])
		}
	})
	defer stop()
	ctx := mhp.WithSession(context.Background(), "a")
	if _, err := jd.drv.Subscribe(ctx, []string{"temp"}); err != nil {
		t.Fatal(err)
	}
	jd.drv.PublishSignal("temp", binding.Sample{Value: 20.0})
	jd.drv.PublishSignal("temp", binding.Sample{Value: math.NaN()})
	jd.drv.PublishSignal("temp", binding.Sample{Value: math.NaN()})
	jd.drv.PublishSignal("temp", binding.Sample{Value: math.Inf(1)})
	if len(got) != 2 || got[0] != 20.0 || got[1] != nil {
		t.Fatalf("published %v, want [20 <nil>]", got)
	}
	r, err := jd.drv.Read(ctx, []string{"temp"})
	if err != nil || r.Values["temp"] != nil || r.Unavailable["temp"] == "" {
		t.Fatalf("read of a float32 NaN: %+v, %v; want null with a reason", r, err)
	}
}
