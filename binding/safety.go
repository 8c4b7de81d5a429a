package binding

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/openmhp/mhp-go"
)

// ---- fault ----

// Fault latches the device in fault on the backend's own word (a node that
// reports itself errored, a PLC alarm): writes and invokes are refused until
// a verified safety/reset, and the fault hook runs once.
func (d *Driver) Fault(reason string) { d.latchFault(reason) }

// latchFault puts the device in fault and runs the fault hook once.
func (d *Driver) latchFault(reason string) {
	d.mu.Lock()
	already := d.fault
	d.fault = true
	d.latches++
	if !already {
		d.faultReason = reason
	}
	d.mu.Unlock()
	if !already {
		d.faultLatched(reason)
	}
}

// faultLatched publishes safety/fault and runs the fault hook once, after
// the fault flag was set.
//
// In estop the hook does not run: the device was stopped, and a call the
// estop cut off gets the stop re-asserted when it returns (endCall), so a
// job abandoned after an estop costs no extra stop command.
func (d *Driver) faultLatched(reason string) {
	d.mu.Lock()
	inEStop := d.estop
	d.publishLocked(mhp.NotifySafetyFault, map[string]any{"reason": reason})
	d.cfg.Logger.Warn("device fault", "device", d.cfg.Device.ID, "reason", reason, "in_estop", inEStop)
	hook := d.cfg.OnFault
	if hook == nil && d.cfg.EStop != nil {
		hook = func(ctx context.Context, _ string) error { return d.cfg.EStop(ctx) }
	}
	if hook != nil && !inEStop {
		done := make(chan struct{})
		d.mu.Lock()
		d.faultHookDone = done
		d.mu.Unlock()
		go func() {
			defer close(done)
			ctx, cancel := context.WithTimeout(context.Background(), d.cfg.StopTimeout)
			defer cancel()
			if err := hook(ctx, reason); err != nil {
				d.cfg.Logger.Error("fault hook failed", "device", d.cfg.Device.ID, "err", err)
			}
		}()
	}
}

// ---- estop and reset ----

// EStop implements [mhp.Device]: safety/estop. It latches estop at once, never
// waits behind a vendor call, requests the cancel of every job, cuts off
// every backend call in flight and runs the stop hook. The answer comes
// within EStopAnswerTimeout whatever the hook does: a hook still running
// then gives stopped:false, stop_pending:true, and a later
// notifications/safety/estop carries the final "stopped".
//
// The session's touch and the latch are one hold of mu.
func (d *Driver) EStop(ctx context.Context, reason string) (*mhp.EStopResult, error) {
	by := mhp.SessionFrom(ctx)
	now := d.reqNow()
	var cancelling []string
	d.locked(func() {
		d.touchLocked(by, now)
		cancelling = d.estopLocked()
	})
	return d.estopFinish(ctx, by, reason, cancelling), nil
}

// estopLocked latches estop, requests the cancel of every active job, cancels
// every write in flight and marks every backend call in flight as cut off
// (each owes a re-assertion of the stop when it returns). It returns the ids
// of the jobs whose cancel was requested. mu is held.
func (d *Driver) estopLocked() []string {
	d.estop = true
	d.latches++
	var cancelling []string
	for id, r := range d.jobs {
		if !r.job.State.Terminal() {
			r.job.CancelRequested = true
			r.handle.requestCancel()
			r.cancel()
			cancelling = append(cancelling, id)
		}
	}
	sort.Strings(cancelling)
	for _, w := range d.inflight {
		w.cancel()
		if w.atBackend && !w.cutOff {
			w.cutOff = true
			d.stopOwed++
		}
	}
	for c := d.calls.head; c != nil; c = c.link.next {
		if !c.cutOff {
			c.cutOff = true
			d.stopOwed++
		}
	}
	return cancelling
}

// beginCallLocked registers a backend call about to be made (a job's Run
// or Pause; a write's hook is registered on its writeOp); the caller has
// just passed the state gate under the same hold of mu, so no estop can
// fall between the check and the registration. mu is held.
func (d *Driver) beginCallLocked() *backendCall {
	c := &backendCall{}
	d.calls.add(c)
	return c
}

// endCall unregisters a backend call that returned. If an estop cut it off
// and it is the last such call out, the stop is re-asserted (once, on its own
// goroutine, bounded by StopTimeout): whatever the call sent the backend, the
// stop comes after it. It reports whether the device is in estop, read in the
// same hold of mu (so an answer decided on it cannot be an ok given after an
// estop answer).
func (d *Driver) endCall(c *backendCall) (inEStop bool) {
	d.mu.Lock()
	d.calls.remove(c)
	reassert, done := d.callReturnedLocked(c.cutOff)
	inEStop = d.estop
	d.mu.Unlock()
	if reassert {
		go d.reassertStop(done)
	}
	return inEStop
}

// callReturnedLocked notes that a backend call returned; cutOff: an estop
// cut it off. When it is the last cut-off call out, the stop re-assertion
// is due: it reports true and the channel to close when it ends, and the
// caller starts reassertStop once mu is released (or, if a re-assertion
// runs already, it runs once more after it). mu is held.
func (d *Driver) callReturnedLocked(cutOff bool) (reassert bool, done chan struct{}) {
	if !cutOff {
		return false, nil
	}
	d.stopOwed--
	if d.stopOwed > 0 {
		return false, nil
	}
	if d.reasserting {
		d.reassertAgain = true
		return false, nil
	}
	d.reasserting = true
	d.reassertDone = make(chan struct{})
	return true, d.reassertDone
}

// reassertOnLinkLocked starts sending the stop again when the backend link
// came back while the device is in estop and its last stop command failed
// (sent into a link that was down, or cut with it): the stop is then the
// first word the backend hears on the new link. It reports whether the
// caller starts reassertStop with done once mu is released. mu is held.
func (d *Driver) reassertOnLinkLocked() (start bool, done chan struct{}) {
	if !d.estop || !d.stopUnconfirmed || d.cfg.EStop == nil || d.closed {
		return false, nil
	}
	if d.reasserting {
		d.reassertAgain = true
		return false, nil
	}
	d.reasserting = true
	d.reassertDone = make(chan struct{})
	return true, d.reassertDone
}

// reassertStop runs the stop hook again after the last backend call cut off
// by an estop returned, or when the backend link came back while a failed
// stop stands (reassertOnLinkLocked).
// A reset waits until it is done; a cut-off call that returns while it runs
// gets one more run after it.
func (d *Driver) reassertStop(done chan struct{}) {
	defer close(done)
	for {
		var err error
		if d.cfg.EStop != nil {
			ctx, cancel := context.WithTimeout(context.Background(), d.cfg.StopTimeout)
			if err = d.cfg.EStop(ctx); err != nil {
				d.cfg.Logger.Error("estop hook failed re-asserting the stop",
					"device", d.cfg.Device.ID, "err", err)
			}
			cancel()
		}
		again := false
		d.locked(func() {
			again, d.reassertAgain = d.reassertAgain, false
			d.reasserting = again
			if d.cfg.EStop == nil || !d.estop {
				return
			}
			if err != nil {
				d.stopUnconfirmed = true
				return
			}
			if d.stopUnconfirmed { // a stop that had failed is now confirmed: say so
				d.stopUnconfirmed = false
				d.enqueueLocked(mhp.NotifySafetyEStop, map[string]any{"by": "driver", "stopped": true,
					"reason": "the stop command was sent again and the backend took it"})
			}
		})
		if !again {
			return
		}
	}
}

// estopFinish runs the stop hook after estopLocked, answers within
// EStopAnswerTimeout and publishes safety/estop: once with the final result
// when the hook finished in time, else once with stop_pending and again when
// the hook finishes (or StopTimeout ends it).
func (d *Driver) estopFinish(ctx context.Context, by, reason string, cancelling []string) *mhp.EStopResult {
	res := &mhp.EStopResult{State: mhp.StateEStop, Cancelling: cancelling}
	if d.cfg.EStop == nil {
		res.StopError = "the device has no stop command: jobs were asked to cancel and the device latched in estop"
		d.publishEStop(by, reason, res)
		return res
	}
	final := make(chan error, 1)
	go func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.StopTimeout)
		defer cancel()
		final <- d.cfg.EStop(sctx)
	}()
	t := time.NewTimer(d.cfg.EStopAnswerTimeout) // real time: the bound is the caller's
	defer t.Stop()
	select {
	case err := <-final:
		d.stopResult(res, err)
		d.publishEStop(by, reason, res)
		return res
	case <-t.C:
	}
	res.StopPending = true
	d.publishEStop(by, reason, res)
	go func() {
		err := <-final
		later := &mhp.EStopResult{State: mhp.StateEStop, Cancelling: cancelling}
		d.stopResult(later, err)
		d.publishEStop(by, reason, later)
	}()
	return res
}

func (d *Driver) stopResult(res *mhp.EStopResult, err error) {
	d.locked(func() {
		if d.estop {
			d.stopUnconfirmed = err != nil
		}
	})
	res.Stopped = err == nil
	if err != nil {
		res.StopError = err.Error()
		d.cfg.Logger.Error("estop hook failed", "device", d.cfg.Device.ID, "err", err)
	}
}

func (d *Driver) publishEStop(by, reason string, res *mhp.EStopResult) {
	p := map[string]any{"by": by, "reason": reason, "stopped": res.Stopped}
	if res.StopPending {
		p["stop_pending"] = true
	}
	if res.StopError != "" {
		p["stop_error"] = res.StopError
	}
	d.mu.Lock()
	d.publishLocked(mhp.NotifySafetyEStop, p)
}

// Reset implements [mhp.Device]: safety/reset. It is lease-gated (only the
// holder, or anyone when no lease is held: 003 section 5.6), refuses while a
// job is active or a backend call cut off by an estop has not returned, and
// verifies recovery before returning to idle. Nothing touches the backend
// before those refusals.
func (d *Driver) Reset(ctx context.Context) (*mhp.ResetResult, error) {
	s := d.touch(ctx)
	d.awaitReassert(ctx)
	var latches uint64
	var e *mhp.Error
	d.locked(func() {
		if holder := d.leaseHolderLocked(); holder != "" && holder != s {
			e = d.errorf(mhp.CodeNotLeased, "only the lease holder may reset").With(mhp.DataHolder, holder)
			return
		}
		if e = d.resetBusyLocked(); e != nil {
			return
		}
		latches = d.latches
	})
	if e != nil {
		return nil, e
	}
	unavailable, err := d.verify(ctx)
	if err != nil {
		return nil, d.errorf(mhp.CodeDeviceFault, "reset refused: recovery not verified: %v", err).With("verified", false)
	}
	var was bool
	d.locked(func() {
		if e = d.resetBusyLocked(); e != nil {
			return
		}
		if d.latches != latches { // an estop or fault came while verifying: it stands
			if e = d.stateGateLocked(); e != nil {
				e = e.With(mhp.DataReason, "latched while the reset verified recovery")
				return
			}
		}
		was = d.estop || d.fault
		d.estop, d.fault, d.faultReason = false, false, ""
		d.stopUnconfirmed = false
	})
	if e != nil {
		return nil, e
	}
	if was {
		d.locked(func() { d.enqueueLocked(mhp.NotifySafetyReset, map[string]any{"by": s, "verified": true}) })
	}
	if len(unavailable) > 0 {
		d.cfg.Logger.Info("reset verified with signals unavailable (none is an interlock or required for recovery)",
			"device", d.cfg.Device.ID, "unavailable", unavailable)
	}
	return &mhp.ResetResult{State: d.State(), Verified: true, Unavailable: unavailable}, nil
}

// awaitReassert lets a reset that comes while the stop is being re-asserted
// wait for it (bounded by StopTimeout and ctx) instead of being refused: the
// re-assertion is the estop's last word, and a reset after it is safe.
//
// It waits the same way for a fault hook still stopping the device: a reset
// that verified recovery while the hook held the backend (a serial line the
// stop commands hold) would read the signals unreadable, or clear the fault
// under a stop still being sent.
func (d *Driver) awaitReassert(ctx context.Context) {
	var done, fault chan struct{}
	d.locked(func() {
		if d.reasserting {
			done = d.reassertDone
		}
		fault = d.faultHookDone
	})
	if done == nil && fault == nil { // nothing to wait for (the usual reset): no timer
		return
	}
	t := time.NewTimer(d.cfg.StopTimeout)
	defer t.Stop()
	for _, ch := range []chan struct{}{done, fault} {
		if ch == nil {
			continue
		}
		select {
		case <-ch:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// resetBusyLocked refuses a reset while a job is active or a backend call
// cut off by an estop is still out (its stop re-assertion is owed). mu is held.
func (d *Driver) resetBusyLocked() *mhp.Error {
	if d.active > 0 {
		return d.errorf(mhp.CodeDeviceBusy, "cannot reset while %d job(s) are still active", d.active).With("active", d.active)
	}
	if d.stopOwed > 0 {
		return d.errorf(mhp.CodeDeviceBusy,
			"cannot reset while %d backend call(s) cut off by the estop have not returned; the stop is re-asserted when they do",
			d.stopOwed).With("cut_off", d.stopOwed)
	}
	if d.reasserting {
		return d.errorf(mhp.CodeDeviceBusy, "cannot reset while the stop is being re-asserted after a call cut off by the estop").
			With(mhp.DataReason, "stop_reasserting")
	}
	return nil
}

// verify is the reset's recovery check (003 section 5.6): the backend link,
// the adapter's own check (Config.Verify), then one read of every signal.
// An unreadable interlock signal, or one marked RequiredForRecovery, refuses
// the reset; any other unavailable signal (a sensor reading NaN, a topic that
// publishes only on change) is returned by name with its reason and does not
// block it.
func (d *Driver) verify(ctx context.Context) (map[string]string, error) {
	d.mu.Lock()
	down, why := d.linkDownLocked(), d.linkErrLocked()
	d.mu.Unlock()
	if down && d.cfg.Verify == nil {
		// With the link down no signal can be read. An adapter's own
		// Verify may wait (bounded) for the link.
		return nil, fmt.Errorf("backend unavailable: %s", why)
	}
	if d.cfg.Verify != nil {
		vctx, cancel := context.WithTimeout(ctx, d.cfg.VerifyTimeout)
		err := d.cfg.Verify(vctx)
		cancel()
		if err != nil {
			return nil, err
		}
	}
	vctx, cancel := context.WithTimeout(ctx, d.cfg.InterlockTimeout)
	defer cancel()
	var unavailable map[string]string
	for i := range d.signals.items {
		s := &d.signals.items[i]
		_, err := d.readSignal(vctx, s)
		if err == nil {
			continue
		}
		if d.required[s.Spec.Name] {
			return nil, fmt.Errorf("signal %s unreadable (%s): %w", s.Spec.Name, d.requiredWhy(s), err)
		}
		if unavailable == nil {
			unavailable = map[string]string{}
		}
		unavailable[s.Spec.Name] = err.Error()
	}
	return unavailable, nil
}

// RecoverySignals names the signals a reset refuses to pass while they are
// unreadable (see [Config.RecoverySignals]), as the driver was built
// (a package's interlocks included). The map is the caller's.
func (d *Driver) RecoverySignals() map[string]bool {
	out := make(map[string]bool, len(d.required))
	for k, v := range d.required {
		out[k] = v
	}
	return out
}

// requiredWhy says why a signal must read for a reset.
func (d *Driver) requiredWhy(s *boundSignal) string {
	if s.Spec.RequiredForRecovery {
		return "required for recovery"
	}
	return "an interlock"
}

// RecoverySignals names the signals a reset refuses to pass while they are
// unreadable: every interlock (of the safety block, a setting or an action)
// and every signal marked RequiredForRecovery. An adapter whose Verify waits
// for values to arrive after a reconnection waits for these.
func (c *Config) RecoverySignals() map[string]bool {
	req := map[string]bool{}
	for _, n := range c.Safety.Interlocks {
		req[n] = true
	}
	for _, s := range c.Settings {
		for _, n := range s.Spec.Interlocks {
			req[n] = true
		}
	}
	for _, a := range c.Actions {
		for _, n := range a.Spec.Interlocks {
			req[n] = true
		}
	}
	for _, s := range c.Signals {
		if s.Spec.RequiredForRecovery {
			req[s.Spec.Name] = true
		}
	}
	return req
}
