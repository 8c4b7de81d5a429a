package conformance

import (
	"context"
	"fmt"
	"time"

	"github.com/openmhp/mhp-go"
)

// Checks that pin behaviours a plausible driver bug would otherwise slip
// past: each names the bug it catches.

// serves reports whether the device serves the named setting or action.
func (c *C) serves(kind, name string) bool {
	c.Helper()
	d, err := c.describe(c.Other, mhp.DescribeRequest{Detail: mhp.DetailFull})
	c.ok(err, "describe")
	if kind == "setting" {
		_, ok := d.Setting(name)
		return ok
	}
	_, ok := d.Action(name)
	return ok
}

// needs skips the check unless the device serves the named settings and
// actions (a harness built before the fixture grew them).
func (c *C) needs(settings []string, actions []string) {
	c.Helper()
	for _, s := range settings {
		if !c.serves("setting", s) {
			c.Skipf("the device does not serve fixture setting %q (its harness predates it)", s)
		}
	}
	for _, a := range actions {
		if !c.serves("action", a) {
			c.Skipf("the device does not serve fixture action %q (its harness predates it)", a)
		}
	}
}

// writeGateOrderChecks: gate 2 (approval) before gate 3 (interlocks) on the
// write path, with a setting that has both. Catches the two swapped in the
// write path only (the action path has its own check).
func writeGateOrderChecks() []check {
	return []check{
		{name: "gates/order/approval_before_interlocks_on_write", run: func(c *C) {
			c.needs([]string{SettingGuarded}, nil)
			c.B.SetSignal(SignalDoorClosed, false)
			c.refused(c.Dev, mhp.CodeApprovalRequired, wr(SettingGuarded, 5.0), wr(SettingGuarded, 50.0))
			// Approved, the interlock is what refuses it: it does apply.
			c.refused(c.Dev, mhp.CodeInterlockOpen, wrApproved(SettingGuarded, 5.0))
			c.B.SetSignal(SignalDoorClosed, true)
			r, err := c.writeReq(c.Dev, mhp.WriteRequest{Name: SettingGuarded, Value: 5.0, Approved: true})
			c.ok(err, "approved write with the interlock closed")
			if !r.OK {
				c.Fatalf("approved write answered %+v", r)
			}
			c.wantWritten(SettingGuarded, 5.0, "the approved write with the interlock closed")
		}},
	}
}

// cutOffChecks: an estop cuts off a write in flight. Catches in-flight writes
// not cancelled by estop, a cut-off write answered ok, and the stop not
// re-asserted after the write returned.
func cutOffChecks() []check {
	return []check{
		{name: "estop/cuts_off_write_in_flight", run: func(c *C) {
			c.B.Script(SettingSetpoint, Block) // the write blocks until Release or its context ends
			type answer struct {
				r   *mhp.WriteResult
				err error
			}
			done := make(chan answer, 1)
			go func() {
				r, err := c.Dev.Write(context.WithoutCancel(c.Ctx), mhp.WriteRequest{Name: SettingSetpoint, Value: 70.0})
				done <- answer{r, err}
			}()
			c.eventually("the write to block in the backend", func() bool { return c.B.Calls(SettingSetpoint) == 1 })
			r := c.estop(c.Other, "conformance: estop cuts off a write")
			if r.State != mhp.StateEStop {
				c.Fatalf("estop answered %+v", r)
			}
			// Never released: only the estop cancelling the write's context
			// ends it.
			var a answer
			select {
			case a = <-done:
			case <-time.After(WaitTimeout):
				c.Fatalf("the write blocked in its hook did not return within %v of the estop: its context was not cancelled", WaitTimeout)
			}
			if a.err == nil {
				c.Fatalf("a write cut off by the estop was answered ok: %+v", a.r)
			}
			e := c.expect(a.err, mhp.CodeEStopActive)
			switch e.Data[mhp.DataOutcome] {
			case mhp.OutcomeUnknown, mhp.OutcomeNotStarted:
			default:
				c.Fatalf("cut-off write refused with data %v: want outcome unknown or not_started", e.Data)
			}
			// The stop, then once more after the write returned.
			c.eventually("the stop to be re-asserted after the write returned", func() bool { return c.B.StopCalls() >= 2 })
			c.ping(c.Other)
			if n := c.B.StopCalls(); n != 2 {
				c.Fatalf("the backend got %d stop commands, want 2 (the stop and one re-assertion)", n)
			}
			c.wantState(mhp.StateEStop, "the estop stands")
		}},
		{name: "estop/overlaps_own_write_in_flight", run: func(c *C) {
			// The write is held in the backend until the estop, so the two
			// overlap for certain: the estop from the same session must not
			// wait behind it, and the write must not be answered ok.
			c.B.Script(SettingSetpoint, Block)
			done := make(chan error, 1)
			go func() {
				_, err := c.Dev.Write(context.WithoutCancel(c.Ctx), mhp.WriteRequest{Name: SettingSetpoint, Value: 71.0})
				done <- err
			}()
			c.eventually("the write to block in the backend", func() bool { return c.B.Calls(SettingSetpoint) == 1 })
			select {
			case err := <-done:
				c.Fatalf("the write held in the backend returned before the estop (%v): the check did not overlap", err)
			default:
			}
			if r := c.estop(c.Dev, "conformance: estop overlaps a write in flight"); r.State != mhp.StateEStop {
				c.Fatalf("estop answered %+v while its session's write was in flight", r)
			}
			select {
			case err := <-done:
				c.expect(err, mhp.CodeEStopActive)
			case <-time.After(WaitTimeout):
				c.Fatalf("the write in flight did not end within %v of the estop", WaitTimeout)
			}
			c.wantState(mhp.StateEStop, "the estop stands")
		}},
		{name: "estop/reasserted_after_job_that_ran_on", run: func(c *C) {
			// The stop fails at the backend, so work that ignores cancels
			// runs on after the estop; when its Run finally returns, the
			// stop is sent once more, after it and not before.
			j := c.startScripted(c.Dev, ActionRun, IgnoreCancel)
			c.B.FailStop(true)
			c.estop(c.Other, "conformance: work runs on")
			c.ping(c.Other)
			if n := c.B.StopCalls(); n != 1 {
				c.Fatalf("the backend got %d stop commands while the work still runs, want 1", n)
			}
			if got, _ := c.job(c.Other, j.ID); got == nil || got.State.Terminal() {
				c.Fatalf("job %+v ended although the backend still runs it", got)
			}
			c.B.Release(ActionRun)
			if got := c.waitTerminal(j.ID); got.State != mhp.JobDone {
				c.Fatalf("the backend finished the work, yet the job ended %s", got.State)
			}
			c.eventually("the stop to be re-asserted after the Run returned", func() bool { return c.B.StopCalls() >= 2 })
			c.ping(c.Other)
			if n := c.B.StopCalls(); n != 2 {
				c.Fatalf("the backend got %d stop commands, want 2 (the stop and one re-assertion)", n)
			}
		}},
	}
}

// estopBoundChecks: the estop answer does not wait for a stop command that
// hangs. Catches an answer that waits for the hook (it would come only when
// the hook is released, which the check never does before the answer).
func estopBoundChecks() []check {
	return []check{
		{name: "estop/answers_while_stop_hangs", run: func(c *C) {
			h, ok := c.B.(StopHanger)
			if !ok {
				c.Skip("the backend cannot make its stop command hang (conformance.StopHanger)")
			}
			rec := c.record(c.Other)
			h.HangStop(true)
			defer h.HangStop(false)
			type answer struct {
				r   *mhp.EStopResult
				err error
			}
			done := make(chan answer, 1)
			go func() {
				r, err := c.Dev.EStop(context.WithoutCancel(c.Ctx), "conformance: the controller froze")
				done <- answer{r, err}
			}()
			var a answer
			select {
			case a = <-done:
			case <-time.After(WaitTimeout):
				c.Fatalf("safety/estop did not answer within %v while the stop command hung", WaitTimeout)
			}
			c.ok(a.err, "estop while the stop command hangs")
			if a.r.State != mhp.StateEStop || a.r.Stopped || !a.r.StopPending {
				c.Fatalf("estop answer %+v, want state estop, stopped:false, stop_pending:true", a.r)
			}
			c.wantState(mhp.StateEStop, "the estop latched although its stop command hangs")
			h.HangStop(false)
			rec.wait(c, "the final safety/estop with stopped true", func(n mhp.Notification) bool {
				return n.Method == mhp.NotifySafetyEStop && n.Params["stopped"] == true && n.Params["stop_pending"] == nil
			}, nil)
		}},
	}
}

// resetIdleChecks: a reset refused because a job is active does not touch
// the backend. Catches the busy check before verification removed (the one
// after gives the same answer, but verify's reads run during the job).
func resetIdleChecks() []check {
	return []check{
		{name: "reset/no_backend_reads_while_job_active", run: func(c *C) {
			rc, ok := c.B.(ReadCounter)
			if !ok {
				c.Skip("the backend does not count signal reads (conformance.ReadCounter)")
			}
			j := c.startScripted(c.Dev, ActionRun, IgnoreCancel)
			c.B.FailStop(true) // the stop does not reach the work: it runs on
			c.estop(c.Dev, "conformance: job outlives estop")
			snap, reads := c.snapshot(), rc.Reads()
			for range 3 {
				_, err := c.reset(c.Dev)
				c.expect(err, mhp.CodeDeviceBusy)
			}
			if n := rc.Reads(); n != reads {
				c.Fatalf("a reset refused while job %s is active read the backend %d times", j.ID, n-reads)
			}
			c.noCallsSince(snap, "every reset was refused busy")
			c.wantState(mhp.StateEStop, "reset was refused")
		}},
	}
}

// watchdogEdgeChecks pin the watchdog to its window on a manual clock: a
// silent holder trips exactly at watchdog_s and not before; a holder that
// pings, writes or invokes never trips. Catches watchdog_s read in the wrong
// unit and a holder's requests not feeding the watchdog.
func watchdogEdgeChecks() []check {
	wd := time.Duration(WatchdogS * float64(time.Second))
	const tick = time.Millisecond
	opt := Options{WatchdogS: WatchdogS}
	// The clock must move exactly: these checks need the harness's Advance.
	manual := func(c *C) {
		if c.F.Advance == nil {
			c.Skip("the harness has no manual clock (Fixture.Advance): the watchdog's edges cannot be placed exactly")
		}
	}
	return []check{
		{name: "watchdog/silent_holder_trips_at_watchdog_s", opt: opt, run: func(c *C) {
			manual(c)
			c.acquire(c.Dev, time.Minute)
			c.F.Advance(wd - tick)
			c.wantState(mhp.StateIdle, fmt.Sprintf("the holder has been silent %v, under watchdog_s %v", wd-tick, wd))
			if n := c.B.StopCalls(); n != 0 {
				c.Fatalf("the stop ran %d times before the watchdog window ended", n)
			}
			c.F.Advance(tick)
			c.wantState(mhp.StateEStop, fmt.Sprintf("the holder has been silent watchdog_s (%v)", wd))
			c.eventually("the stop hook to run", func() bool { return c.B.StopCalls() == 1 })
		}},
		{name: "watchdog/active_holder_never_trips", opt: opt, run: func(c *C) {
			manual(c)
			c.acquire(c.Dev, time.Minute)
			feeds := []struct {
				what string
				do   func()
			}{
				{mhp.MethodPing, func() { c.ping(c.Dev) }},
				{"write", func() { c.mustWrite(c.Dev, SettingSetpoint, 42.0) }},
				{"invoke", func() { c.waitTerminal(c.start(c.Dev, ActionQuick, nil).ID) }},
			}
			for round := range 2 {
				for _, f := range feeds {
					c.F.Advance(wd - tick)
					f.do()
					if st := c.state(); st != mhp.StateIdle {
						c.Fatalf("round %d: device %s although the holder's %s came %v into the %v window", round, st, f.what, wd-tick, wd)
					}
				}
			}
			if n := c.B.StopCalls(); n != 0 {
				c.Fatalf("the stop ran %d times for a holder that kept talking", n)
			}
			// Still armed: after the last request, silence trips it at the edge.
			c.F.Advance(wd - tick)
			c.wantState(mhp.StateIdle, "silent for less than watchdog_s since the last request")
			c.F.Advance(tick)
			c.wantState(mhp.StateEStop, "silent for watchdog_s since the last request")
		}},
		{name: "watchdog/unleased_reset_by_anyone", opt: opt, run: func(c *C) {
			// 003 section 5.6: "Only the lease holder, or anyone when the
			// device is unleased, may reset." The watchdog dropped the silent
			// holder's lease, so a session that never held one may reset.
			manual(c)
			c.acquire(c.Dev, time.Minute)
			c.F.Advance(wd)
			c.wantState(mhp.StateEStop, "the silent holder tripped the watchdog")
			r, err := c.reset(c.Other)
			c.ok(err, "reset by a session that never held the lease, on an unleased watchdog device")
			if r.State != mhp.StateIdle || !r.Verified {
				c.Fatalf("reset answered %+v, want idle and verified", r)
			}
		}},
	}
}

// exclusiveChecks: exclusiveMin and exclusiveMax are exclusive. Catches them
// treated as inclusive (at the bound accepted) or as off by a step (just
// inside refused).
func exclusiveChecks() []check {
	const eps = 1e-6
	return []check{
		{name: "values/exclusive_bounds_setting", run: func(c *C) {
			c.needs([]string{SettingFlow}, nil)
			c.refused(c.Dev, mhp.CodeLimitViolation, wr(SettingFlow, 0.0), wr(SettingFlow, FlowExclusiveMax),
				wr(SettingFlow, -eps), wr(SettingFlow, FlowExclusiveMax+eps))
			for _, v := range []float64{eps, FlowExclusiveMax - eps} {
				c.mustWrite(c.Dev, SettingFlow, v)
				c.wantWritten(SettingFlow, v, "a value just inside the exclusive bounds")
			}
		}},
		{name: "values/exclusive_bounds_param", run: func(c *C) {
			c.needs(nil, []string{ActionDose})
			vol := func(v float64) map[string]any { return map[string]any{"volume_ul": v} }
			c.refused(c.Dev, mhp.CodeLimitViolation, inv(ActionDose, vol(0)), inv(ActionDose, vol(DoseExclusiveMax)),
				inv(ActionDose, vol(-eps)), inv(ActionDose, vol(DoseExclusiveMax+eps)))
			for _, v := range []float64{eps, DoseExclusiveMax - eps} {
				if j := c.waitTerminal(c.start(c.Dev, ActionDose, vol(v)).ID); j.State != mhp.JobDone {
					c.Fatalf("dose %v just inside the exclusive bounds ended %s", v, j.State)
				}
			}
		}},
	}
}

// quietRefusalChecks: no settings/changed after a refused write, whichever
// gate or the backend refused it. Catches publishing before the outcome is
// known. Each batch of refusals is followed by a write that succeeds, whose
// settings/changed (delivered in order) proves the earlier ones would have
// arrived.
func quietRefusalChecks() []check {
	return []check{
		{name: "notify/no_settings_changed_after_refusal", run: func(c *C) {
			rec := c.record(c.Other)
			barrier := func(v float64) {
				c.mustWrite(c.Dev, SettingSetpoint, v)
				rec.wait(c, fmt.Sprintf("settings/changed for the barrier write %v", v), func(n mhp.Notification) bool {
					return n.Method == mhp.NotifySettingsChanged && sameValue(n.Params["value"], v)
				}, nil)
				for _, n := range rec.all() {
					if n.Method == mhp.NotifySettingsChanged && !isBarrier(n.Params["value"]) {
						c.Fatalf("settings/changed %v was published for a refused write", n.Params)
					}
				}
			}
			// Gates: unknown name, approval, forbid, limits, interlocks.
			for _, a := range []attempt{wr("no_such_setting", 1.0), wr(SettingConfirmed, 5.0), wr(SettingForbidden, 1.0),
				wr(SettingSetpoint, 500.0), wr(SettingMode, "warm")} {
				if err := c.do(c.Dev, a); err == nil {
					c.Fatalf("%s succeeded", a.label)
				}
			}
			if c.serves("setting", SettingGuarded) {
				c.B.SetSignal(SignalDoorClosed, false)
				c.expect(c.do(c.Dev, wrApproved(SettingGuarded, 5.0)), mhp.CodeInterlockOpen)
				c.B.SetSignal(SignalDoorClosed, true)
			}
			// The backend's own refusals, with a known outcome.
			for _, b := range []Behaviour{Refuse, FailReported} {
				c.B.Script(SettingSetpoint, b)
				if _, err := c.write(c.Dev, SettingSetpoint, 33.0); err == nil {
					c.Fatalf("a write the backend answered %s succeeded", b)
				}
			}
			c.B.Script(SettingSetpoint, Normal)
			barrier(91)
			// Lease and busy.
			c.acquire(c.Other, time.Minute)
			c.expect(c.do(c.Dev, wr(SettingSetpoint, 34.0)), mhp.CodeNotLeased)
			ctx, cancel := c.call()
			c.ok(c.Other.Release(ctx), "release")
			cancel()
			c.startBlocked(c.Dev, ActionRun)
			c.expect(c.do(c.Dev, wr(SettingSetpoint, 35.0)), mhp.CodeDeviceBusy)
			c.B.Release(ActionRun)
			c.eventually("the job to end", func() bool { return c.state() == mhp.StateIdle })
			barrier(92)
			// State: estop, then a verified reset.
			c.estop(c.Other, "conformance: refusal in estop")
			c.expect(c.do(c.Dev, wr(SettingSetpoint, 36.0)), mhp.CodeEStopActive)
			_, err := c.reset(c.Dev)
			c.ok(err, "reset")
			barrier(93)
		}},
	}
}

func isBarrier(v any) bool {
	for _, b := range []float64{91, 92, 93} {
		if sameValue(v, b) {
			return true
		}
	}
	return false
}
