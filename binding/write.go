package binding

import (
	"context"
	"fmt"
	"time"

	"github.com/openmhp/mhp-go"
)

// ---- settings/write ----

// Write implements [mhp.Device]: settings/write through the six gates
// (gates.go). A write whose hook was at the backend when an estop latched is
// never answered ok: it is refused EStopActive with data.outcome "unknown"
// (the value may have been applied; the stop comes after it) or
// "not_started" (the backend refused it), and the stop is re-asserted once
// the last such call returns.
//
// A write of a setting with interlocks is three locked steps: beginWrite
// (the session's touch, the request lock, gate 1 and the write's
// registration), sendWrite (gates 1, 5 and 6 again or for the first time,
// and the hook's registration as a backend call) and endWrite (the call's
// return, the write leaving the in-flight set, the request lock handed on
// and the listeners told); the gates between them (approval, interlocks
// read live, limits) take no lock. A setting without interlocks has nothing
// to read between the first two, which are then one (sendQuick), and a dry
// run of it is that one step alone.
func (d *Driver) Write(ctx context.Context, req mhp.WriteRequest) (*mhp.WriteResult, error) {
	if e := d.unhonoured(mhp.MethodSettingsWrite, req.CommandID, req.PermitID, ""); e != nil {
		d.touch(ctx)
		return nil, e
	}
	set, ok := d.settingsNow().get(req.Name) // one load: the write keeps these specs throughout (refine.go)
	if !ok {
		d.touch(ctx)
		return nil, d.errorf(mhp.CodeUnknownName, "no setting %q", req.Name).With(mhp.DataKind, "setting").With(mhp.DataName, req.Name)
	}
	// One context (the writeOp), cancelled by the write sweeper at its
	// deadline and by estop, covers the live interlock reads (deadline
	// InterlockTimeout) and then the hook (HookTimeout). The caller going
	// away does not cut a write half way.
	wc := &writeCall{op: writeOp{parent: ctx}}
	op := &wc.op
	var notes mhp.DryRunNotes
	s, value, done, e := d.sendQuick(ctx, op, set, req, &notes)
	if !done && e == nil {
		s, value, e = d.prepareWrite(ctx, op, set, req, &notes)
	}
	if e != nil {
		return nil, e
	}
	// A dry run has ended; a real write's hook is registered as a backend
	// call, and callWrite ends it.
	res := &wc.res
	if req.DryRun {
		*res = mhp.WriteResult{OK: true, Name: req.Name, Value: value, DryRun: true, WouldWrite: value}
		if !notes.Empty() {
			n := notes
			res.Notes = &n
		}
		return res, nil
	}
	status, inEStop, err := d.callWrite(op, set, req.Name, value, s)
	if inEStop {
		return nil, d.writeCutOff(req.Name, value, err)
	}
	if err != nil {
		if me, ok := mhp.AsError(err); ok && !me.OutcomeUnknown() {
			return nil, d.adopt(me)
		}
		reason := fmt.Sprintf("write %s=%v: outcome unknown: %v", req.Name, value, err)
		d.latchFault(reason)
		return nil, d.errorf(mhp.CodeDeviceFault, "%s", reason).With(mhp.DataOutcome, mhp.OutcomeUnknown).With(mhp.DataName, req.Name)
	}
	*res = mhp.WriteResult{OK: true, Name: req.Name, Value: value, Applied: status == Applied, Status: mhp.WriteApplied}
	if status == Sent {
		res.Status = mhp.WriteSent
	}
	return res, nil
}

// prepareWrite takes a write through its first two locked steps and the
// gates between them, up to its hook: on success a dry run has ended and a
// real write is registered as a backend call.
func (d *Driver) prepareWrite(ctx context.Context, op *writeOp, set *Setting, req mhp.WriteRequest, notes *mhp.DryRunNotes) (string, any, *mhp.Error) {
	s, now, e := d.beginWrite(ctx, op, set, req.Name, req.DryRun)
	if e != nil {
		return s, nil, e
	}
	inFlight := true // until a locked step ended the write; a refusal or a panic on the way ends it here
	defer func() {
		if inFlight {
			d.abortWrite(op, !req.DryRun)
		}
	}()
	value, e := d.writeGates(op, now, set, req, notes)
	if e != nil {
		return s, nil, e
	}
	if e := d.sendWrite(op, s, now, set, req, notes); e != nil {
		return s, nil, e
	}
	inFlight = false
	return s, value, nil
}

// sendQuick is a write of a setting without interlocks in one locked step:
// the session's touch and the six gates in order (approval and limits,
// which take no lock, checked before it and reported in their place), then
// a real write takes the request lock and is registered as a backend call
// in the same hold of mu (so an estop either refuses it here or cuts the
// call off). done is false, with nothing done but the touch, when the
// setting has interlocks or another write holds the request lock: the write
// then takes the three steps (prepareWrite), and waits its turn there.
func (d *Driver) sendQuick(ctx context.Context, op *writeOp, set *Setting, req mhp.WriteRequest, notes *mhp.DryRunNotes) (s string, value any, done bool, e *mhp.Error) {
	if len(set.Spec.Interlocks) > 0 {
		return "", nil, false, nil
	}
	value, gateErr := d.writeGates(op, time.Time{}, set, req, notes) // 2. approval, (3. no interlocks), 4. limits
	s = mhp.SessionFrom(ctx)
	now := d.reqNow()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.touchLocked(s, now)
	// 1. state
	if e := d.stateGateLocked(); e != nil {
		return s, nil, true, e
	}
	if d.closed {
		return s, nil, true, d.errorf(mhp.CodeDeviceFault, "settings/write %s: driver is closed", req.Name)
	}
	if gateErr != nil {
		return s, nil, true, gateErr
	}
	if !req.DryRun && d.turn.held {
		return s, nil, false, nil
	}
	// 5. lease and 6. busy
	if e := d.writeLeaseAndBusyLocked(s, now, set, req, notes); e != nil {
		return s, nil, true, e
	}
	if req.DryRun {
		return s, value, true, nil
	}
	d.turn.held = true
	at := d.since0(now)
	op.deadline = at + d.cfg.HookTimeout
	d.writes.add(op)
	if !d.sweepArmed || op.deadline < d.sweepAt {
		d.armSweeperLocked(op.deadline, at)
	}
	op.atBackend = true
	return s, value, true, nil
}

// beginWrite is the write's first locked step: the session's touch, then
// admitWriteLocked. A write that finds another holding the request lock
// waits for its turn (bounded by ctx) and is admitted again then: the
// interlock window, the lease check and the hook's deadline start when its
// turn comes, not on arrival. It returns the session and the time of the
// request.
func (d *Driver) beginWrite(ctx context.Context, op *writeOp, set *Setting, name string, dry bool) (string, time.Time, *mhp.Error) {
	s := mhp.SessionFrom(ctx)
	now := d.reqNow()
	d.mu.Lock()
	d.touchLocked(s, now)
	w, e := d.admitWriteLocked(op, set, name, now, !dry)
	d.mu.Unlock()
	if e != nil || w == nil {
		return s, now, e
	}
	select {
	case <-w.ready:
	case <-ctx.Done():
		d.locked(func() { d.turn.abandonLocked(w) })
		return s, now, d.errorf(mhp.CodeDeviceBusy, "settings/write %s: gave up waiting for an earlier write: %v", name, ctx.Err())
	}
	now = d.reqNow()
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, e = d.admitWriteLocked(op, set, name, now, false); e != nil {
		d.turn.releaseLocked()
	}
	return s, now, e
}

// admitWriteLocked is gate 1 and the write's registration: it joins the
// in-flight set (estop and its deadline cancel it) and the sweeper is armed
// for its first deadline (the interlock reads', else the hook's) unless it
// is due earlier already. With takeTurn, a real write takes the request
// lock first, or, when another write holds it, is queued for it and
// returned its waiter (not registered yet). mu is held.
func (d *Driver) admitWriteLocked(op *writeOp, set *Setting, name string, now time.Time, takeTurn bool) (*turnWaiter, *mhp.Error) {
	if e := d.stateGateLocked(); e != nil {
		return nil, e
	}
	if d.closed {
		return nil, d.errorf(mhp.CodeDeviceFault, "settings/write %s: driver is closed", name)
	}
	if takeTurn {
		if d.turn.held {
			return d.turn.waitLocked(), nil
		}
		d.turn.held = true
	}
	at := d.since0(now)
	op.deadline = at + d.cfg.HookTimeout
	if len(set.Spec.Interlocks) > 0 {
		op.deadline = at + d.cfg.InterlockTimeout
	}
	d.writes.add(op)
	if !d.sweepArmed || op.deadline < d.sweepAt {
		d.armSweeperLocked(op.deadline, at)
	}
	return nil, nil
}

// sendWrite is the locked step right before the hook: the last gates
// (writeLastGatesLocked: the state again, as an estop may have come while
// the gates read interlocks, the deadline, the lease and busy) and the
// hook's registration as a backend call, all in one hold of mu, so an estop
// either refuses the write here or cuts the call off. A dry run ends here.
func (d *Driver) sendWrite(op *writeOp, s string, now time.Time, set *Setting, req mhp.WriteRequest, notes *mhp.DryRunNotes) *mhp.Error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if e := d.writeLastGatesLocked(op, s, now, set, req, notes); e != nil {
		return e
	}
	if req.DryRun {
		d.removeWriteLocked(op)
		return nil
	}
	if len(set.Spec.Interlocks) > 0 {
		op.deadline = d.since0(now) + d.cfg.HookTimeout
	}
	op.atBackend = true
	return nil
}

// callWrite calls the setting's hook and ends the write (endWrite), also
// if the hook panics. It reports the hook's answer and whether the device
// was in estop when the call returned.
func (d *Driver) callWrite(op *writeOp, set *Setting, name string, value any, by string) (status WriteStatus, inEStop bool, err error) {
	returned := false
	defer func() { inEStop = d.endWrite(op, name, value, by, returned && err == nil, status == Applied) }()
	status, err = set.Write(op, value)
	returned = true
	return status, false, err
}

// endWrite is the write's last locked step: its backend call returned (the
// stop is re-asserted after the last call an estop cut off), it leaves the
// in-flight set, the request lock goes to the next write, and when it is
// answered ok (ok, and no estop) the listeners are told. It reports whether
// the device is in estop, read in the same hold of mu (so an answer decided
// on it cannot be an ok given after an estop answer).
func (d *Driver) endWrite(op *writeOp, name string, value any, by string, ok, applied bool) (inEStop bool) {
	d.mu.Lock()
	reassert, done := d.callReturnedLocked(op.cutOff)
	op.atBackend = false
	inEStop = d.estop
	d.removeWriteLocked(op)
	d.turn.releaseLocked()
	deliver := false
	if ok && !inEStop && len(d.listeners) > 0 {
		d.enqueueLocked(mhp.NotifySettingsChanged, map[string]any{"name": name, "value": value, "by": by, "applied": applied})
		deliver = !d.draining
	}
	d.mu.Unlock()
	if reassert {
		go d.reassertStop(done)
	}
	if deliver {
		d.deliver()
	}
	return inEStop
}

// abortWrite ends a write refused (or panicking) between its first locked
// step and its hook: it leaves the in-flight set and, with turn, hands the
// request lock on.
func (d *Driver) abortWrite(op *writeOp, turn bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.removeWriteLocked(op)
	if turn {
		d.turn.releaseLocked()
	}
}

// removeWriteLocked takes a write out of the in-flight set; on a clock
// other than the real one the sweeper stops when no write is left to bound
// (see armSweeperLocked). mu is held.
func (d *Driver) removeWriteLocked(op *writeOp) {
	d.writes.remove(op)
	if d.writes.head == nil && d.sweepArmed && !d.realClock {
		d.sweeper.Stop()
		d.sweeper, d.sweepArmed = nil, false
	}
}

// writeCutOff is the answer of a write whose hook returned with the device
// in estop: never ok. The outcome says whether the value may have been
// applied; either way the stop reached the backend after it.
func (d *Driver) writeCutOff(name string, value any, err error) *mhp.Error {
	outcome, what := mhp.OutcomeUnknown, "the value may have been applied"
	if me, ok := mhp.AsError(err); ok && !me.OutcomeUnknown() {
		outcome, what = mhp.OutcomeNotStarted, "the backend refused it"
	}
	e := d.errorf(mhp.CodeEStopActive, "settings/write %s=%v was at the backend when an estop latched: %s; the stop comes after it",
		name, value, what).With(mhp.DataGate, mhp.GateState).With(mhp.DataOutcome, outcome).With(mhp.DataName, name)
	if err != nil {
		e = e.With(mhp.DataBackendError, mhp.Truncate(err.Error(), 1024))
	}
	return e
}
