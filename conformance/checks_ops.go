package conformance

import (
	"context"
	"time"

	"github.com/openmhp/mhp-go"
)

func leaseChecks() []check {
	return []check{
		{name: "leases/other_refused_while_held", run: func(c *C) {
			l := c.acquire(c.Dev, time.Minute)
			before := c.snapshot()
			for _, a := range []attempt{wr(SettingSetpoint, 50.0), inv(ActionQuick, nil), inv(ActionRun, runParams())} {
				e := c.expect(c.do(c.Other, a), mhp.CodeNotLeased)
				if h, ok := e.Data[mhp.DataHolder]; ok && h != l.Holder {
					c.Fatalf("NotLeased names holder %v, want %s", h, l.Holder)
				}
			}
			c.noCallsSince(before, "another session held the lease")
			ctx, cancel := c.call()
			defer cancel()
			_, err := c.Other.Acquire(ctx, time.Minute)
			c.expect(err, mhp.CodeNotLeased)
			c.mustWrite(c.Dev, SettingSetpoint, 42.0)
			c.wantWritten(SettingSetpoint, 42.0, "the holder writes")
		}},
		{name: "leases/other_writes_after_release", run: func(c *C) {
			c.acquire(c.Dev, time.Minute)
			c.expect(c.do(c.Other, wr(SettingSetpoint, 50.0)), mhp.CodeNotLeased)
			ctx, cancel := c.call()
			defer cancel()
			c.ok(c.Dev.Release(ctx), "release")
			c.mustWrite(c.Other, SettingSetpoint, 50.0)
			c.wantWritten(SettingSetpoint, 50.0, "the lease was released")
			c.acquire(c.Other, time.Minute)
		}},
		{name: "leases/renew_by_holder_only", run: func(c *C) {
			ctx, cancel := c.call()
			defer cancel()
			_, err := c.Other.Renew(ctx)
			c.expect(err, mhp.CodeNotLeased) // nobody holds a lease
			l := c.acquire(c.Dev, time.Minute)
			_, err = c.Other.Renew(ctx)
			c.expect(err, mhp.CodeNotLeased)
			r, err := c.Dev.Renew(ctx)
			c.ok(err, "renew by the holder")
			if r.Holder != l.Holder {
				c.Fatalf("renewed lease holder %q, want %q", r.Holder, l.Holder)
			}
			c.expect(c.Other.Release(ctx), mhp.CodeNotLeased)
		}},
		{name: "leases/expire_after_ttl", run: func(c *C) {
			c.acquire(c.Dev, time.Second)
			c.expect(c.do(c.Other, wr(SettingSetpoint, 50.0)), mhp.CodeNotLeased)
			c.advance(1500 * time.Millisecond)
			c.eventually("the expired lease to free the device", func() bool {
				_, err := c.write(c.Other, SettingSetpoint, 50.0)
				return err == nil
			})
			c.wantWritten(SettingSetpoint, 50.0, "the lease expired")
		}},
		{name: "leases/never_block_reads_cancel_estop", run: func(c *C) {
			c.acquire(c.Dev, time.Minute)
			j := c.startBlocked(c.Dev, ActionRun)
			ctx, cancel := c.call()
			defer cancel()
			if _, err := c.Other.Read(ctx, nil); err != nil {
				c.Fatalf("signals/read blocked by a lease: %v", err)
			}
			if _, err := c.Other.Describe(ctx, mhp.DescribeRequest{Detail: mhp.DetailSummary}); err != nil {
				c.Fatalf("device/describe blocked by a lease: %v", err)
			}
			if _, err := c.Other.Ping(ctx); err != nil {
				c.Fatalf("ping blocked by a lease: %v", err)
			}
			if _, err := c.Other.Limits(ctx); err != nil {
				c.Fatalf("safety/limits blocked by a lease: %v", err)
			}
			if _, err := c.Other.Jobs(ctx, mhp.JobsRequest{}); err != nil {
				c.Fatalf("jobs/list blocked by a lease: %v", err)
			}
			if _, err := c.Other.Job(ctx, j.ID); err != nil {
				c.Fatalf("jobs/status blocked by a lease: %v", err)
			}
			if _, err := c.Other.Subscribe(ctx, []string{SignalTemperature}); err != nil {
				c.Fatalf("signals/subscribe blocked by a lease: %v", err)
			}
			if _, err := c.Other.CancelJob(ctx, j.ID); err != nil {
				c.Fatalf("jobs/cancel blocked by a lease: %v", err)
			}
			if got := c.waitTerminal(j.ID); got.State != mhp.JobCancelled {
				c.Fatalf("cancelled Block job ended %s", got.State)
			}
			r := c.estop(c.Other, "conformance: estop by a session without the lease")
			if r.State != mhp.StateEStop {
				c.Fatalf("estop by a non-holder answered state %q", r.State)
			}
			c.wantState(mhp.StateEStop, "estop is never blocked by a lease")
		}},
		{name: "leases/reset_only_holder_after_estop", run: func(c *C) {
			c.acquire(c.Dev, time.Minute)
			c.estop(c.Other, "conformance: estop by the other session")
			_, err := c.reset(c.Other)
			c.expect(err, mhp.CodeNotLeased)
			c.wantState(mhp.StateEStop, "a non-holder's reset was refused")
			r, err := c.reset(c.Dev)
			c.ok(err, "reset by the holder")
			if r.State != mhp.StateIdle || !r.Verified {
				c.Fatalf("reset answer %+v, want idle and verified", r)
			}
			c.wantState(mhp.StateIdle, "the holder reset")
		}},
	}
}

// advanceSteps moves the clock by total in steps, so that timers re-armed
// from a timer callback also fall due.
func (c *C) advanceSteps(total, step time.Duration, between func()) {
	for moved := time.Duration(0); moved < total; moved += step {
		c.advance(step)
		if between != nil {
			between()
		}
	}
}

func watchdogChecks() []check {
	wd := time.Duration(WatchdogS * float64(time.Second))
	opt := Options{WatchdogS: WatchdogS}
	return []check{
		{name: "watchdog/unleased_actuation_refused", opt: opt, run: func(c *C) {
			snap := c.snapshot()
			for _, a := range []attempt{wr(SettingSetpoint, 50.0), inv(ActionQuick, nil)} {
				e := c.expect(c.do(c.Dev, a), mhp.CodeNotLeased)
				if e.Data[mhp.DataReason] != mhp.ReasonLeaseRequired {
					c.Fatalf("%s: NotLeased data %v, want reason lease_required", a.label, e.Data)
				}
			}
			c.noCallsSince(snap, "the device requires a lease")
			ctx, cancel := c.call()
			defer cancel()
			if _, err := c.Dev.Read(ctx, nil); err != nil {
				c.Fatalf("read refused on a watchdog device without a lease: %v", err)
			}
			c.acquire(c.Dev, time.Minute)
			c.mustWrite(c.Dev, SettingSetpoint, 50.0)
		}},
		{name: "watchdog/silent_holder_estops_once", opt: opt, run: func(c *C) {
			rec := c.record(c.Other)
			c.acquire(c.Dev, time.Minute)
			// The first session says nothing more; the second only watches.
			c.advanceSteps(3*wd, wd/4, nil)
			c.eventually("the watchdog to estop the device", func() bool { return c.state() == mhp.StateEStop })
			c.eventually("the stop hook to run", func() bool { return c.B.StopCalls() >= 1 })
			rec.wait(c, mhp.MethodSafetyEStop, method(mhp.NotifySafetyEStop), nil)
			ctx, cancel := c.call()
			defer cancel()
			_, err := c.Dev.Renew(ctx)
			c.expect(err, mhp.CodeNotLeased) // the lease was dropped
			c.advanceSteps(3*wd, wd/4, nil)
			c.ping(c.Other) // let any further timer callbacks run before counting
			if n := c.B.StopCalls(); n != 1 {
				c.Fatalf("the stop hook ran %d times, want exactly once", n)
			}
			c.wantState(mhp.StateEStop, "the watchdog latched estop")
		}},
		{name: "watchdog/pinging_holder_stays_idle", opt: opt, run: func(c *C) {
			c.acquire(c.Dev, time.Minute)
			c.advanceSteps(4*wd, wd/4, func() { c.ping(c.Dev) })
			c.ping(c.Other)
			c.wantState(mhp.StateIdle, "the holder kept pinging")
			if n := c.B.StopCalls(); n != 0 {
				c.Fatalf("the stop hook ran %d times for a live holder", n)
			}
			c.mustWrite(c.Dev, SettingSetpoint, 60.0)
		}},
		{name: "watchdog/expired_lease_estops", opt: opt, run: func(c *C) {
			c.acquire(c.Dev, 2*wd)
			// The holder pings (the watchdog is fed) but never renews the lease.
			c.advanceSteps(4*wd, wd/4, func() { c.ping(c.Dev) })
			c.eventually("the expired lease to estop the device", func() bool { return c.state() == mhp.StateEStop })
			c.eventually("the stop hook to run", func() bool { return c.B.StopCalls() == 1 })
		}},
	}
}

func busyChecks() []check {
	return []check{
		{name: "busy/non_concurrent_refused", run: func(c *C) {
			c.startBlocked(c.Dev, ActionRun)
			c.wantState(mhp.StateBusy, "a job is running")
			c.refused(c.Dev, mhp.CodeDeviceBusy, inv(ActionQuick, nil), inv(ActionRun, runParams()), inv(ActionProfile, profileParams()))
		}},
		{name: "busy/concurrent_allowed", run: func(c *C) {
			run := c.startBlocked(c.Dev, ActionRun)
			j := c.start(c.Dev, ActionMonitor, nil)
			if got := c.waitTerminal(j.ID); got.State != mhp.JobDone {
				c.Fatalf("concurrent action ended %s beside a running job", got.State)
			}
			if got, _ := c.job(c.Other, run.ID); got == nil || got.State != mhp.JobRunning {
				c.Fatalf("the first job did not keep running: %+v", got)
			}
		}},
		{name: "busy/concurrent_job_counts", run: func(c *C) {
			c.startBlocked(c.Dev, ActionMonitor)
			c.wantState(mhp.StateBusy, "a concurrent job is active")
			c.refused(c.Dev, mhp.CodeDeviceBusy, inv(ActionQuick, nil), wr(SettingSetpoint, 50.0))
		}},
		{name: "busy/during_job_setting_allowed", run: func(c *C) {
			c.startBlocked(c.Dev, ActionRun)
			c.mustWrite(c.Dev, SettingFan, true)
			c.wantWritten(SettingFan, true, "during_job settings may be written while a job runs")
		}},
		{name: "busy/other_setting_refused", run: func(c *C) {
			c.startBlocked(c.Dev, ActionRun)
			c.refused(c.Dev, mhp.CodeDeviceBusy, wr(SettingSetpoint, 50.0), wr(SettingMode, "heat"))
			c.wantWritten(SettingSetpoint, 20.0, "a busy refusal writes nothing")
		}},
		{name: "busy/idle_after", run: func(c *C) {
			j := c.startBlocked(c.Dev, ActionRun)
			c.B.Release(ActionRun)
			if got := c.waitTerminal(j.ID); got.State != mhp.JobDone {
				c.Fatalf("released job ended %s", got.State)
			}
			c.waitState(mhp.StateIdle)
			c.mustWrite(c.Dev, SettingSetpoint, 50.0)
			q := c.start(c.Dev, ActionQuick, nil)
			c.waitTerminal(q.ID)
		}},
	}
}

func jobChecks() []check {
	return []check{
		{name: "jobs/lifecycle_queued_running_done", run: func(c *C) {
			rec := c.record(c.Dev)
			before := c.B.Calls(ActionRun)
			c.B.Script(ActionRun, Block)
			j := c.start(c.Dev, ActionRun, runParams())
			if j.State != mhp.JobQueued && j.State != mhp.JobRunning {
				c.Fatalf("invoke answered a job in state %q, want queued or running", j.State)
			}
			if j.Action != ActionRun || len(j.ID) < 5 {
				c.Fatalf("job %+v lacks id or action", j)
			}
			running := c.waitJob(j.ID, "running", func(j *mhp.Job) bool { return j.State == mhp.JobRunning })
			if running.Progress >= 1 {
				c.Fatalf("running job reports progress %v", running.Progress)
			}
			// Release only once the work is at the backend (over a network the
			// job may run before its command arrives).
			c.eventually("run to reach the backend", func() bool { return c.B.Calls(ActionRun) > before })
			c.B.Release(ActionRun)
			done := c.waitTerminal(j.ID)
			if done.State != mhp.JobDone || done.Progress != 1 {
				c.Fatalf("released job %+v, want done with progress 1", done)
			}
			if res := asMap(done.Result); res["ok"] != true {
				c.Fatalf("done job result %v, want the backend's {ok: true}", done.Result)
			}
			if done.Finished < done.Started {
				c.Fatalf("job finished %v before it started %v", done.Finished, done.Started)
			}
			n := rec.wait(c, "jobs/finished", jobNote(mhp.NotifyJobsFinished, j.ID, mhp.JobDone), nil)
			if res, _ := jobOf(n)["result"].(map[string]any); res["ok"] != true {
				c.Fatalf("jobs/finished carries no result: %v", n.Params)
			}
		}},
		{name: "jobs/progress_reported", run: func(c *C) {
			j := c.startBlocked(c.Dev, ActionRun)
			c.waitJob(j.ID, "progress 0.5", func(j *mhp.Job) bool { return j.Progress == 0.5 })
		}},
		{name: "jobs/list", run: func(c *C) {
			q := c.start(c.Dev, ActionQuick, nil)
			c.waitTerminal(q.ID)
			run := c.startBlocked(c.Dev, ActionRun)
			ctx, cancel := c.call()
			defer cancel()
			all, err := c.Other.Jobs(ctx, mhp.JobsRequest{})
			c.ok(err, mhp.MethodJobsList)
			ids := map[string]mhp.JobState{}
			for _, j := range all {
				ids[j.ID] = j.State
			}
			if len(all) != 2 || ids[q.ID] != mhp.JobDone || ids[run.ID] != mhp.JobRunning {
				c.Fatalf("jobs/list %+v, want the done quick job and the running run job", all)
			}
			active, err := c.Other.Jobs(ctx, mhp.JobsRequest{Active: true})
			c.ok(err, "jobs/list active")
			if len(active) != 1 || active[0].ID != run.ID {
				c.Fatalf("active jobs %+v, want only %s", active, run.ID)
			}
			one, err := c.Other.Jobs(ctx, mhp.JobsRequest{Limit: 1})
			c.ok(err, "jobs/list limit 1")
			if len(one) != 1 {
				c.Fatalf("limit 1 returned %d jobs", len(one))
			}
		}},
		{name: "jobs/not_found", run: func(c *C) {
			ctx, cancel := c.call()
			defer cancel()
			_, err := c.Dev.Job(ctx, "job_00000000")
			c.expect(err, mhp.CodeJobNotFound)
			_, err = c.Dev.CancelJob(ctx, "job_00000000")
			c.expect(err, mhp.CodeJobNotFound)
			_, err = c.Dev.PauseJob(ctx, "job_00000000")
			c.expect(err, mhp.CodeJobNotFound)
		}},
		{name: "jobs/cancel_honoured_ends_cancelled", run: func(c *C) {
			rec := c.record(c.Dev)
			j := c.startBlocked(c.Dev, ActionRun)
			ctx, cancel := c.call()
			defer cancel()
			_, err := c.Dev.CancelJob(ctx, j.ID)
			c.ok(err, mhp.MethodJobsCancel)
			got := c.waitTerminal(j.ID)
			if got.State != mhp.JobCancelled {
				c.Fatalf("a cancel the backend honoured ended %s", got.State)
			}
			rec.wait(c, "jobs/finished cancelled", jobNote(mhp.NotifyJobsFinished, j.ID, mhp.JobCancelled), nil)
			c.waitState(mhp.StateIdle)
		}},
		{name: "jobs/cancel_ignored_ends_done", run: func(c *C) {
			rec := c.record(c.Dev)
			j := c.startScripted(c.Dev, ActionRun, IgnoreCancel)
			ctx, cancel := c.call()
			defer cancel()
			_, err := c.Dev.CancelJob(ctx, j.ID)
			c.ok(err, mhp.MethodJobsCancel)
			// The backend acknowledged and ignored the cancel: the job runs on.
			c.ping(c.Other)
			if got, _ := c.job(c.Other, j.ID); got == nil || got.State.Terminal() {
				c.Fatalf("job ended %+v although the backend still runs it", got)
			}
			c.B.Release(ActionRun)
			got := c.waitTerminal(j.ID)
			if got.State != mhp.JobDone {
				c.Fatalf("a cancel the backend ignored ended %s, want done", got.State)
			}
			rec.wait(c, "jobs/finished", jobNote(mhp.NotifyJobsFinished, j.ID, ""), nil)
			if n, found := rec.find(jobNote(mhp.NotifyJobsFinished, j.ID, mhp.JobCancelled)); found {
				c.Fatalf("jobs/finished reported a cancel the backend did not honour: %v", n.Params)
			}
		}},
		{name: "jobs/cancel_not_cancellable", run: func(c *C) {
			j := c.startBlocked(c.Dev, ActionQuick)
			ctx, cancel := c.call()
			defer cancel()
			_, err := c.Dev.CancelJob(ctx, j.ID)
			c.expect(err, mhp.CodeNotSupported)
			if got, _ := c.job(c.Other, j.ID); got == nil || got.State != mhp.JobRunning {
				c.Fatalf("refused cancel changed the job: %+v", got)
			}
			c.B.Release(ActionQuick)
			if got := c.waitTerminal(j.ID); got.State != mhp.JobDone {
				c.Fatalf("job ended %s", got.State)
			}
		}},
		{name: "jobs/pause_not_pausable", run: func(c *C) {
			j := c.startBlocked(c.Dev, ActionRun)
			ctx, cancel := c.call()
			defer cancel()
			_, err := c.Dev.PauseJob(ctx, j.ID)
			c.expect(err, mhp.CodeNotSupported)
		}},
		{name: "jobs/fail_reported_no_fault", run: func(c *C) {
			c.B.Script(ActionRun, FailReported)
			j := c.start(c.Dev, ActionRun, runParams())
			got := c.waitTerminal(j.ID)
			if got.State != mhp.JobFailed || got.Outcome != mhp.OutcomeFailed || got.Error == nil {
				c.Fatalf("reported failure ended %+v, want failed with outcome failed and an error", got)
			}
			c.waitState(mhp.StateIdle)
			c.mustWrite(c.Dev, SettingSetpoint, 50.0)
		}},
		{name: "jobs/fail_unknown_faults", run: func(c *C) {
			rec := c.record(c.Dev)
			c.B.Script(ActionRun, FailUnknown)
			j := c.start(c.Dev, ActionRun, runParams())
			got := c.waitTerminal(j.ID)
			if got.State != mhp.JobFailed || got.Outcome != mhp.OutcomeUnknown {
				c.Fatalf("unknown outcome ended %+v, want failed with outcome unknown", got)
			}
			c.waitState(mhp.StateFault)
			rec.wait(c, "safety/fault", method(mhp.NotifySafetyFault), nil)
			c.refused(c.Dev, mhp.CodeDeviceFault, wr(SettingSetpoint, 50.0), inv(ActionQuick, nil))
		}},
		{name: "jobs/backend_refusal_not_started", run: func(c *C) {
			c.B.Script(ActionRun, Refuse)
			j := c.start(c.Dev, ActionRun, runParams())
			got := c.waitTerminal(j.ID)
			if got.State != mhp.JobFailed || got.Outcome == mhp.OutcomeUnknown {
				c.Fatalf("a start the backend refused ended %+v, want failed with a known outcome", got)
			}
			c.waitState(mhp.StateIdle)
		}},
	}
}

func backendWriteChecks() []check {
	knownRefusal := func(b Behaviour) func(c *C) {
		return func(c *C) {
			rec := c.record(c.Dev)
			c.B.Script(SettingSetpoint, b)
			_, err := c.write(c.Dev, SettingSetpoint, 50.0)
			if err == nil {
				c.Fatalf("a write the backend answered %s succeeded", b)
			}
			e, ok := mhp.AsError(err)
			if !ok {
				c.Fatalf("the refusal is not an MHP error: %v", err)
			}
			if e.Code == mhp.CodeDeviceFault || e.OutcomeUnknown() {
				c.Fatalf("a %s write (nothing changed) was reported as unknown outcome: %v", b, e)
			}
			c.wantState(mhp.StateIdle, "the backend said nothing changed")
			c.wantWritten(SettingSetpoint, 20.0, "the backend said nothing changed")
			if n, found := rec.find(method(mhp.NotifySafetyFault)); found {
				c.Fatalf("a known refusal faulted the device: %v", n.Params)
			}
			c.B.Script(SettingSetpoint, Normal)
			c.mustWrite(c.Dev, SettingSetpoint, 50.0)
		}
	}
	return []check{
		{name: "write/backend_refused_state_unchanged", run: knownRefusal(Refuse)},
		{name: "write/backend_reported_failure_state_unchanged", run: knownRefusal(FailReported)},
		{name: "write/unknown_outcome_faults", run: func(c *C) {
			rec := c.record(c.Dev)
			c.B.Script(SettingSetpoint, FailUnknown)
			_, err := c.write(c.Dev, SettingSetpoint, 50.0)
			e := c.expect(err, mhp.CodeDeviceFault)
			if e.Data[mhp.DataOutcome] != mhp.OutcomeUnknown {
				c.Fatalf("DeviceFault data %v, want outcome unknown", e.Data)
			}
			c.waitState(mhp.StateFault)
			rec.wait(c, "safety/fault", method(mhp.NotifySafetyFault), nil)
			c.B.Script(SettingSetpoint, Normal)
			c.refused(c.Dev, mhp.CodeDeviceFault, wr(SettingSetpoint, 60.0))
		}},
	}
}

func estopChecks() []check {
	return []check{
		{name: "estop/cancels_jobs", run: func(c *C) {
			run := c.startBlocked(c.Dev, ActionRun)
			mon := c.startBlocked(c.Dev, ActionMonitor)
			r := c.estop(c.Dev, "conformance: stop everything")
			if !r.Stopped || r.State != mhp.StateEStop {
				c.Fatalf("estop answer %+v, want stopped in estop", r)
			}
			for _, id := range []string{run.ID, mon.ID} {
				if !contains(r.Cancelling, id) {
					c.Fatalf("estop answer cancelled %v, missing %s", r.Cancelling, id)
				}
				if got := c.waitTerminal(id); got.State != mhp.JobCancelled {
					c.Fatalf("job %s ended %s after estop, want cancelled", id, got.State)
				}
			}
			// The stop, then once more after the last cut-off Run returned:
			// the stop is the last word the backend hears, and only once more.
			c.eventually("the stop to be re-asserted after the cancelled work returned", func() bool { return c.B.StopCalls() >= 2 })
			c.ping(c.Other)
			if n := c.B.StopCalls(); n != 2 {
				c.Fatalf("backend got %d stop commands, want 2 (the stop and one re-assertion after the jobs' Runs returned)", n)
			}
			c.wantState(mhp.StateEStop, "estop latches")
		}},
		{name: "estop/cancels_jobs_even_when_stop_fails", run: func(c *C) {
			// The backend's stop command fails, so only the driver's own
			// cancel of every job can end the (cancel-honouring) work.
			j := c.startBlocked(c.Dev, ActionRun)
			c.B.FailStop(true)
			r := c.estop(c.Dev, "conformance: stop command fails")
			if r.Stopped || r.State != mhp.StateEStop || !contains(r.Cancelling, j.ID) {
				c.Fatalf("estop answer %+v, want stopped:false, estop, job %s cancelled", r, j.ID)
			}
			if got := c.waitTerminal(j.ID); got.State != mhp.JobCancelled {
				c.Fatalf("job ended %s after estop, want cancelled", got.State)
			}
		}},
		{name: "estop/refuses_actuation_allows_reads", run: func(c *C) {
			c.estop(c.Dev, "conformance")
			c.refused(c.Dev, mhp.CodeEStopActive, wr(SettingSetpoint, 50.0), inv(ActionQuick, nil), wr(SettingFan, true))
			ctx, cancel := c.call()
			defer cancel()
			if _, err := c.Dev.Read(ctx, nil); err != nil {
				c.Fatalf("read refused in estop: %v", err)
			}
			r := c.estop(c.Other, "conformance: again")
			if r.State != mhp.StateEStop {
				c.Fatalf("second estop answered %q", r.State)
			}
		}},
		{name: "estop/stop_hook_failure_reports_not_stopped", run: func(c *C) {
			c.B.FailStop(true)
			r := c.estop(c.Dev, "conformance: stop fails")
			if r.Stopped || r.StopError == "" || r.State != mhp.StateEStop {
				c.Fatalf("estop with a failing stop answered %+v, want stopped:false with stop_error, state estop", r)
			}
			c.wantState(mhp.StateEStop, "a failed stop still latches estop")
			c.refused(c.Dev, mhp.CodeEStopActive, wr(SettingSetpoint, 50.0))
		}},
		{name: "estop/returns_while_write_blocked", run: func(c *C) {
			c.B.Script(SettingSetpoint, Block)
			writeDone := make(chan error, 1)
			go func() {
				_, err := c.Dev.Write(context.WithoutCancel(c.Ctx), mhp.WriteRequest{Name: SettingSetpoint, Value: 50.0})
				writeDone <- err
			}()
			c.eventually("the write to block in the backend", func() bool { return c.B.Calls(SettingSetpoint) == 1 })
			type answer struct {
				r   *mhp.EStopResult
				err error
			}
			done := make(chan answer, 1)
			deadline := time.NewTimer(EStopDeadline)
			defer deadline.Stop()
			go func() {
				r, err := c.Other.EStop(c.Ctx, "conformance: estop while a write hangs")
				done <- answer{r, err}
			}()
			select {
			case a := <-done:
				if a.err != nil || a.r.State != mhp.StateEStop {
					c.Fatalf("estop while a write hangs: %+v, %v", a.r, a.err)
				}
			case <-deadline.C:
				c.Fatalf("safety/estop did not return within %v while a write was blocked in its hook", EStopDeadline)
			}
			if st := c.state(); st != mhp.StateEStop {
				c.Fatalf("state %q after estop, want estop", st)
			}
			// Let the hung write go and make sure it ends, whatever it reports.
			c.B.Release(SettingSetpoint)
			select {
			case <-writeDone:
			case <-time.After(WaitTimeout):
				c.Fatalf("the blocked write never returned after release")
			}
		}},
		{name: "estop/notification", run: func(c *C) {
			rec := c.record(c.Other)
			c.estop(c.Dev, "conformance: notify")
			n := rec.wait(c, mhp.MethodSafetyEStop, method(mhp.NotifySafetyEStop), nil)
			if n.Params["stopped"] != true || n.Params["state"] != string(mhp.StateEStop) {
				c.Fatalf("safety/estop params %v, want stopped true and state estop", n.Params)
			}
			if n.Params["reason"] != "conformance: notify" {
				c.Fatalf("safety/estop reason %v", n.Params["reason"])
			}
		}},
	}
}

func resetChecks() []check {
	return []check{
		{name: "reset/refused_while_job_active", run: func(c *C) {
			j := c.startScripted(c.Dev, ActionRun, IgnoreCancel)
			c.B.FailStop(true) // the stop does not reach the work: it runs on
			c.estop(c.Dev, "conformance: job outlives estop")
			if got, _ := c.job(c.Other, j.ID); got == nil || got.State.Terminal() {
				c.Fatalf("job %+v ended although the backend still runs it", got)
			}
			_, err := c.reset(c.Dev)
			c.expect(err, mhp.CodeDeviceBusy)
			c.wantState(mhp.StateEStop, "reset was refused")
			c.B.Release(ActionRun)
			if got := c.waitTerminal(j.ID); got.State == mhp.JobCancelled {
				c.Fatalf("the backend finished the work, yet the job ended cancelled")
			}
			r, err := c.reset(c.Dev)
			c.ok(err, "reset after the job ended")
			if r.State != mhp.StateIdle {
				c.Fatalf("reset answered %q", r.State)
			}
		}},
		{name: "reset/verifies_recovery", run: func(c *C) {
			// An unreadable interlock signal blocks recovery (003 section 5.6).
			c.fault()
			c.B.SetUnavailable(SignalDoorClosed, true)
			_, err := c.reset(c.Dev)
			if err == nil {
				c.Fatalf("reset succeeded with the interlock signal %s unreadable", SignalDoorClosed)
			}
			c.wantState(mhp.StateFault, "recovery was not verified")
			c.B.SetUnavailable(SignalDoorClosed, false)
			r, err := c.reset(c.Dev)
			c.ok(err, "reset with every signal readable")
			if r.State != mhp.StateIdle || !r.Verified {
				c.Fatalf("reset answer %+v, want idle and verified", r)
			}
		}},
		{name: "reset/quiet_signal_does_not_block", run: func(c *C) {
			// A signal that is neither an interlock nor required for
			// recovery (a sensor reading NaN, a topic publishing only on
			// change) is named in the answer and does not block the reset.
			c.fault()
			c.B.SetUnavailable(SignalTemperature, true)
			defer c.B.SetUnavailable(SignalTemperature, false)
			r, err := c.reset(c.Dev)
			c.ok(err, "reset with only a non-interlock signal unavailable")
			if r.State != mhp.StateIdle || !r.Verified {
				c.Fatalf("reset answer %+v, want idle and verified", r)
			}
			if _, named := r.Unavailable[SignalTemperature]; !named {
				c.Fatalf("reset answer %+v does not name the unavailable signal %s", r, SignalTemperature)
			}
		}},
		{name: "reset/returns_idle", run: func(c *C) {
			c.estop(c.Dev, "conformance")
			r, err := c.reset(c.Dev)
			c.ok(err, "reset")
			if r.State != mhp.StateIdle {
				c.Fatalf("reset answered %q", r.State)
			}
			c.wantState(mhp.StateIdle, "after reset")
			c.mustWrite(c.Dev, SettingSetpoint, 50.0)
			q := c.start(c.Dev, ActionQuick, nil)
			if got := c.waitTerminal(q.ID); got.State != mhp.JobDone {
				c.Fatalf("action after reset ended %s", got.State)
			}
		}},
	}
}

func notifyChecks() []check {
	return []check{
		{name: "notify/jobs_started_finished_with_state", run: func(c *C) {
			rec := c.record(c.Other)
			j := c.start(c.Dev, ActionQuick, nil)
			started := rec.wait(c, "jobs/started", jobNote(mhp.NotifyJobsStarted, j.ID, ""), nil)
			if started.Params["state"] != string(mhp.StateBusy) {
				c.Fatalf("jobs/started carries device state %v, want busy", started.Params["state"])
			}
			fin := rec.wait(c, "jobs/finished", jobNote(mhp.NotifyJobsFinished, j.ID, mhp.JobDone), nil)
			if fin.Params["state"] != string(mhp.StateIdle) {
				c.Fatalf("jobs/finished carries device state %v, want idle (completion and state together)", fin.Params["state"])
			}
			if _, ok := num(fin.Params["ts"]); !ok {
				c.Fatalf("jobs/finished carries no ts: %v", fin.Params)
			}
		}},
		{name: "notify/jobs_finished_fault_state", run: func(c *C) {
			rec := c.record(c.Other)
			c.B.Script(ActionQuick, FailUnknown)
			j := c.start(c.Dev, ActionQuick, nil)
			fin := rec.wait(c, "jobs/finished", jobNote(mhp.NotifyJobsFinished, j.ID, mhp.JobFailed), nil)
			if fin.Params["state"] != string(mhp.StateFault) {
				c.Fatalf("jobs/finished of an unknown outcome carries state %v, want fault", fin.Params["state"])
			}
		}},
		{name: "notify/safety_fault", run: func(c *C) {
			rec := c.record(c.Other)
			c.fault()
			n := rec.wait(c, "safety/fault", method(mhp.NotifySafetyFault), nil)
			if r, _ := n.Params["reason"].(string); r == "" || n.Params["state"] != string(mhp.StateFault) {
				c.Fatalf("safety/fault params %v, want a reason and state fault", n.Params)
			}
		}},
		{name: "notify/safety_reset", run: func(c *C) {
			rec := c.record(c.Other)
			c.estop(c.Dev, "conformance")
			_, err := c.reset(c.Dev)
			c.ok(err, "reset")
			n := rec.wait(c, mhp.MethodSafetyReset, method(mhp.NotifySafetyReset), nil)
			if n.Params["state"] != string(mhp.StateIdle) {
				c.Fatalf("safety/reset carries state %v, want idle", n.Params["state"])
			}
		}},
		{name: "notify/settings_changed", run: func(c *C) {
			rec := c.record(c.Other)
			c.mustWrite(c.Dev, SettingSetpoint, 42.0)
			n := rec.wait(c, "settings/changed", method(mhp.NotifySettingsChanged), nil)
			if n.Params["name"] != SettingSetpoint || !sameValue(n.Params["value"], 42.0) {
				c.Fatalf("settings/changed params %v, want setpoint=42", n.Params)
			}
		}},
		{name: "notify/signals_update_after_subscribe", run: func(c *C) {
			rec := c.record(c.Dev)
			ctx, cancel := c.call()
			defer cancel()
			r, err := c.Dev.Subscribe(ctx, []string{SignalTemperature})
			c.ok(err, mhp.MethodSignalsSubscribe)
			if !contains(r.Subscribed, SignalTemperature) {
				c.Fatalf("subscribed %v, want temperature", r.Subscribed)
			}
			c.B.SetSignal(SignalTemperature, 42.5)
			tick := func() {
				if c.F.Advance != nil {
					c.F.Advance(100 * time.Millisecond)
				}
			}
			rec.wait(c, "signals/update temperature=42.5", func(n mhp.Notification) bool {
				return n.Method == mhp.NotifySignalsUpdate && n.Params["name"] == SignalTemperature && sameValue(n.Params["value"], 42.5)
			}, tick)
			if n, found := rec.find(func(n mhp.Notification) bool {
				return n.Method == mhp.NotifySignalsUpdate && n.Params["name"] == SignalDoorClosed
			}); found {
				c.Fatalf("an unsubscribed signal was pushed: %v", n.Params)
			}
		}},
		{name: "notify/unsubscribe_stops_updates", run: func(c *C) {
			rec := c.record(c.Dev)
			ctx, cancel := c.call()
			defer cancel()
			_, err := c.Dev.Subscribe(ctx, nil) // every signal
			c.ok(err, mhp.MethodSignalsSubscribe)
			c.ok(c.Dev.Unsubscribe(ctx, []string{SignalDoorClosed}), mhp.MethodSignalsUnsubscribe)
			// Change the unsubscribed signal first, then the subscribed one:
			// once the later change is pushed, the earlier one would have been.
			c.B.SetSignal(SignalDoorClosed, false)
			c.B.SetSignal(SignalTemperature, 55.5)
			tick := func() {
				if c.F.Advance != nil {
					c.F.Advance(100 * time.Millisecond)
				}
			}
			rec.wait(c, "signals/update temperature=55.5", func(n mhp.Notification) bool {
				return n.Method == mhp.NotifySignalsUpdate && n.Params["name"] == SignalTemperature && sameValue(n.Params["value"], 55.5)
			}, tick)
			if n, found := rec.find(func(n mhp.Notification) bool {
				return n.Method == mhp.NotifySignalsUpdate && n.Params["name"] == SignalDoorClosed && n.Params["value"] == false
			}); found {
				c.Fatalf("an unsubscribed signal was still pushed: %v", n.Params)
			}
		}},
		{name: "notify/subscribe_unknown_name", run: func(c *C) {
			ctx, cancel := c.call()
			defer cancel()
			_, err := c.Dev.Subscribe(ctx, []string{"no_such_signal"})
			c.expect(err, mhp.CodeUnknownName)
		}},
	}
}

func errorChecks() []check {
	return []check{
		{name: "errors/ts_within_call_window", run: func(c *C) {
			const slack = 1e-3
			calls := []func() error{
				func() error { _, err := c.write(c.Dev, SettingSetpoint, 500.0); return err },
				func() error { _, err := c.write(c.Dev, SettingConfirmed, 1.0); return err },
				func() error { _, err := c.invoke(c.Dev, mhp.InvokeRequest{Name: "no_such_action"}); return err },
				func() error { _, err := c.job(c.Dev, "job_00000000"); return err },
				func() error {
					ctx, cancel := c.call()
					defer cancel()
					_, err := c.Dev.Read(ctx, []string{"no_such_signal"})
					return err
				},
				func() error {
					_, err := c.describe(c.Dev, mhp.DescribeRequest{Select: &mhp.Selection{Actions: []string{"nope"}}})
					return err
				},
			}
			for i, call := range calls {
				before := c.ping(c.Other)
				err := call()
				after := c.ping(c.Other)
				e, ok := mhp.AsError(err)
				if !ok {
					c.Fatalf("call %d: want an MHP error, got %v", i, err)
				}
				if e.TS <= 0 || e.TS < before-slack || e.TS > after+slack {
					c.Fatalf("call %d (%s): ts %.6f outside the call window [%.6f, %.6f] of the device clock", i, e.Code, e.TS, before, after)
				}
			}
		}},
		{name: "errors/refusals_leave_state", run: func(c *C) {
			rec := c.record(c.Other)
			c.refused(c.Dev, mhp.CodeLimitViolation, wr(SettingSetpoint, 500.0))
			c.refused(c.Dev, mhp.CodeInvalidValue, wr(SettingSetpoint, "hot"))
			c.refused(c.Dev, mhp.CodeApprovalRequired, wr(SettingConfirmed, 1.0))
			c.refused(c.Dev, mhp.CodeForbidden, wr(SettingForbidden, 1.0))
			c.refused(c.Dev, mhp.CodeUnknownName, wr("nope", 1.0))
			c.B.SetSignal(SignalDoorClosed, false)
			c.refused(c.Dev, mhp.CodeInterlockOpen, inv(ActionRun, runParams()))
			d, err := c.describe(c.Dev, mhp.DescribeRequest{Detail: mhp.DetailSummary})
			c.ok(err, "describe")
			if d.State != mhp.StateIdle {
				c.Fatalf("describe state %q after refusals, want idle", d.State)
			}
			c.wantWritten(SettingSetpoint, 20.0, "every write was refused")
			c.ping(c.Other)
			for _, n := range rec.all() {
				if n.Method == mhp.NotifySafetyFault || n.Method == mhp.NotifySettingsChanged || n.Method == mhp.NotifyJobsStarted {
					c.Fatalf("a refusal published %s: %v", n.Method, n.Params)
				}
			}
		}},
	}
}
