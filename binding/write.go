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
func (d *Driver) Write(ctx context.Context, req mhp.WriteRequest) (*mhp.WriteResult, error) {
	s, now := d.touchAt(ctx)
	if e := d.unhonoured(mhp.MethodSettingsWrite, req.CommandID, req.PermitID, ""); e != nil {
		return nil, e
	}
	set, ok := d.settingsNow().get(req.Name) // one load: the write keeps these specs (refine.go)
	if !ok {
		return nil, d.errorf(mhp.CodeUnknownName, "no setting %q", req.Name).With(mhp.DataKind, "setting").With(mhp.DataName, req.Name)
	}
	if !req.DryRun {
		// The request lock: one write at a time reaches the backend.
		select {
		case d.writeSem <- struct{}{}:
		default:
			select {
			case d.writeSem <- struct{}{}:
			case <-ctx.Done():
				return nil, d.errorf(mhp.CodeDeviceBusy, "settings/write %s: gave up waiting for an earlier write: %v", req.Name, ctx.Err())
			}
			// It waited behind another write: the interlock window, the lease
			// check and the hook's deadline start now, not on arrival.
			now = d.now()
		}
		defer func() { <-d.writeSem }()
	}
	// One context (the writeOp), cancelled by the write sweeper at its
	// deadline and by estop, covers the live interlock reads (deadline
	// InterlockTimeout) and then the hook (HookTimeout). The caller going
	// away does not cut a write half way.
	op := &writeOp{parent: ctx}
	if e := d.registerWrite(op, req.Name, set, now); e != nil {
		return nil, e
	}
	registered := true // until the last locked step below leaves the in-flight set
	defer func() {
		if registered {
			d.unregisterWrite(op)
		}
	}()
	var notes mhp.DryRunNotes
	value, e := d.writeGates(op, s, now, set, req, &notes)
	if e != nil {
		return nil, e
	}
	if req.DryRun {
		res := &mhp.WriteResult{OK: true, Name: req.Name, Value: value, DryRun: true, WouldWrite: value}
		if !notes.Empty() {
			n := notes
			res.Notes = &n
		}
		return res, nil
	}
	if e := d.sendWrite(op, set, req.Name, now); e != nil {
		return nil, e
	}
	call := &op.call
	hctx := context.Context(op)
	var inEStop bool
	status, err := func() (WriteStatus, error) {
		defer func() { inEStop = d.endCall(call) }() // also if the hook panics
		return set.Write(hctx, value)
	}()
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
	res := &mhp.WriteResult{OK: true, Name: req.Name, Value: value, Applied: status == Applied, Status: mhp.WriteApplied}
	if status == Sent {
		res.Status = mhp.WriteSent
	}
	// The last locked step: leave the in-flight set and tell the listeners.
	registered = false
	d.locked(func() {
		d.unregisterLocked(op)
		if len(d.listeners) > 0 {
			d.enqueueLocked(mhp.NotifySettingsChanged, map[string]any{"name": req.Name, "value": value, "by": s, "applied": res.Applied})
		}
	})
	return res, nil
}

// registerWrite is the write's first locked step: the state gate, then the
// write joins the in-flight set (estop and its deadline cancel it) and the
// sweeper is armed for its first deadline (the interlock reads', else the
// hook's) unless it is due earlier already.
func (d *Driver) registerWrite(op *writeOp, name string, set *Setting, now time.Time) *mhp.Error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if e := d.stateGateLocked(); e != nil {
		return e
	}
	if d.closed {
		return d.errorf(mhp.CodeDeviceFault, "settings/write %s: driver is closed", name)
	}
	op.deadline = now.Add(d.cfg.HookTimeout)
	if len(set.Spec.Interlocks) > 0 {
		op.deadline = now.Add(d.cfg.InterlockTimeout)
	}
	d.writes.add(op)
	if !d.sweepArmed || op.deadline.Before(d.sweepAt) {
		d.armSweeperLocked(op.deadline, now)
	}
	return nil
}

// unregisterWrite is the write's last locked step: it leaves the in-flight
// set; on a clock other than the real one the sweeper stops when no write
// is left to bound (see armSweeperLocked).
func (d *Driver) unregisterWrite(op *writeOp) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.unregisterLocked(op)
}

// unregisterLocked is unregisterWrite with mu held.
func (d *Driver) unregisterLocked(op *writeOp) {
	d.writes.remove(op)
	if d.writes.n == 0 && d.sweepArmed && !d.realClock {
		d.sweeper.Stop()
		d.sweeper, d.sweepArmed = nil, false
	}
}

// sendWrite is the locked step right before the hook: the state gate again
// (an estop may have come while the gates read interlocks), the deadline
// check, and the hook's registration as a backend call (op.call), all in one
// hold of mu, so an estop either refuses the write here or cuts the call off.
func (d *Driver) sendWrite(op *writeOp, set *Setting, name string, now time.Time) *mhp.Error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if e := d.stateGateLocked(); e != nil {
		return e
	}
	if op.Err() != nil { // a deadline passed or Close came as the gates ended: nothing was sent
		if locks := set.Spec.Interlocks; len(locks) > 0 {
			return d.errorf(mhp.CodeInterlockOpen, "interlocks %v are open: reading them took longer than %s",
				locks, d.cfg.InterlockTimeout).With(mhp.DataInterlock, locks[0]).With(mhp.DataGate, mhp.GateInterlocks)
		}
		return d.errorf(mhp.CodeServerError, "settings/write %s was cancelled before it was sent (driver closing or deadline passed)",
			name).With(mhp.DataOutcome, mhp.OutcomeNotStarted)
	}
	if len(set.Spec.Interlocks) > 0 {
		op.deadline = now.Add(d.cfg.HookTimeout)
	}
	d.calls[&op.call] = struct{}{}
	return nil
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
