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
	set, ok := d.settings[req.Name]
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
	// One context, cancelled by the write sweeper at its deadline and by
	// estop, covers the live interlock reads (deadline InterlockTimeout) and
	// then the hook (HookTimeout). The caller going away does not cut a
	// write half way.
	hctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	key, e := d.registerWrite(req.Name, set, now, cancel)
	if e != nil {
		return nil, e
	}
	defer d.unregisterWrite(key)
	var notes mhp.DryRunNotes
	value, e := d.writeGates(hctx, s, now, set, req, &notes)
	if e != nil {
		return nil, e
	}
	if req.DryRun {
		res := &mhp.WriteResult{OK: true, Name: req.Name, Value: value, DryRun: true, WouldWrite: value}
		if !notes.Empty() {
			res.Notes = &notes
		}
		return res, nil
	}
	call, e := d.sendWrite(hctx, key, set, req.Name, now, cancel)
	if e != nil {
		return nil, e
	}
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
	d.locked(func() {
		if len(d.listeners) > 0 {
			d.enqueueLocked(mhp.NotifySettingsChanged, map[string]any{"name": req.Name, "value": value, "by": s, "applied": res.Applied})
		}
	})
	return res, nil
}

// registerWrite is the write's first locked step: the state gate, then the
// write joins the in-flight set (estop and its deadline cancel it) and the
// sweeper is armed for its first deadline (the interlock reads', else the hook's).
func (d *Driver) registerWrite(name string, set *Setting, now time.Time, cancel context.CancelFunc) (key uint64, e *mhp.Error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if e := d.stateGateLocked(); e != nil {
		return 0, e
	}
	if d.closed {
		return 0, d.errorf(mhp.CodeDeviceFault, "settings/write %s: driver is closed", name)
	}
	d.inflightSeq++
	key = d.inflightSeq
	first := now.Add(d.cfg.HookTimeout)
	if len(set.Spec.Interlocks) > 0 {
		first = now.Add(d.cfg.InterlockTimeout)
	}
	d.inflight[key] = inflightWrite{cancel: cancel, deadline: first}
	if d.sweeper == nil || first.Before(d.sweepAt) {
		if d.sweeper != nil {
			d.sweeper.Stop()
		}
		d.sweeper, d.sweepAt = d.clk.AfterFunc(first.Sub(now), d.sweepWrites), first
	}
	return key, nil
}

// unregisterWrite is the write's last locked step: it leaves the in-flight
// set, and the sweeper stops when no write is left to bound (a manual clock
// in a test then sees only the timers its device waits on).
func (d *Driver) unregisterWrite(key uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.inflight, key)
	if len(d.inflight) == 0 && d.sweeper != nil {
		d.sweeper.Stop()
		d.sweeper = nil
	}
}

// sendWrite is the locked step right before the hook: the state gate again
// (an estop may have come while the gates read interlocks), the deadline
// check, and the hook's registration as a backend call, all in one hold of
// mu, so an estop either refuses the write here or cuts the call off.
func (d *Driver) sendWrite(hctx context.Context, key uint64, set *Setting, name string, now time.Time, cancel context.CancelFunc) (*backendCall, *mhp.Error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if e := d.stateGateLocked(); e != nil {
		return nil, e
	}
	if hctx.Err() != nil { // a deadline passed or Close came as the gates ended: nothing was sent
		if locks := set.Spec.Interlocks; len(locks) > 0 {
			return nil, d.errorf(mhp.CodeInterlockOpen, "interlocks %v are open: reading them took longer than %s",
				locks, d.cfg.InterlockTimeout).With(mhp.DataInterlock, locks[0]).With(mhp.DataGate, mhp.GateInterlocks)
		}
		return nil, d.errorf(mhp.CodeServerError, "settings/write %s was cancelled before it was sent (driver closing or deadline passed)",
			name).With(mhp.DataOutcome, mhp.OutcomeNotStarted)
	}
	if len(set.Spec.Interlocks) > 0 {
		d.inflight[key] = inflightWrite{cancel: cancel, deadline: now.Add(d.cfg.HookTimeout)}
	}
	return d.beginCallLocked(), nil
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
