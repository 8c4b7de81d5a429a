package binding

import (
	"context"
	"fmt"
	"time"

	"github.com/openmhp/mhp-go"
)

// ---- gates ----

type gateResult struct {
	notes *mhp.DryRunNotes
}

// unhonoured refuses request fields the driver itself cannot honour: a
// commandId (never act twice), a permitId (an operator's approval) and a saved
// method need the decorators that serve them (guard.Wrap, methods.Wrap).
// Ignoring them would act on a request its sender believes is protected.
func (d *Driver) unhonoured(method, commandID, permitID, savedMethod string) *mhp.Error {
	field := ""
	switch {
	case commandID != "":
		field = "commandId"
	case permitID != "":
		field = "permitId"
	case savedMethod != "":
		field = "method"
	default:
		return nil
	}
	return d.errorf(mhp.CodeNotSupported, "%s: %s is not served by this device (it needs the guard or methods decorator); nothing was done", method, field).
		With(mhp.DataField, field)
}

// stateGateLocked is gate 1.
func (d *Driver) stateGateLocked() *mhp.Error {
	if d.estop {
		return d.errorf(mhp.CodeEStopActive, "device is in estop; safety/reset is needed").With(mhp.DataGate, mhp.GateState)
	}
	if d.fault {
		return d.errorf(mhp.CodeDeviceFault, "device is in fault (%s); safety/reset is needed", d.faultReason).
			With(mhp.DataGate, mhp.GateState).With(mhp.DataReason, d.faultReason)
	}
	return d.linkGateLocked()
}

func (d *Driver) approvalGate(kind, name string, level mhp.Approval, approved, dry bool, notes *mhp.DryRunNotes) *mhp.Error {
	switch level {
	case mhp.ApprovalForbid:
		return d.errorf(mhp.CodeForbidden, "%s %q is forbidden through MHP", kind, name).With(mhp.DataApproval, "forbid").With(mhp.DataGate, mhp.GateApproval)
	case mhp.ApprovalConfirm:
		if !approved {
			if dry {
				notes.NeedsApproval = true
				return nil
			}
			return d.errorf(mhp.CodeApprovalRequired, "%s %q requires a person's confirmation", kind, name).
				With(mhp.DataApproval, "confirm").With(mhp.DataGate, mhp.GateApproval)
		}
	}
	return nil
}

// interlockGate is gate 3: every named signal read live must be exactly
// true, and the reads must all be done within InterlockTimeout of start
// (a value read too late is too old to act on).
func (d *Driver) interlockGate(ctx context.Context, locks []string, start time.Time) *mhp.Error {
	if len(locks) == 0 {
		return nil
	}
	for _, l := range locks {
		s := d.signals.at(l)
		v, err := d.readSignal(ctx, s)
		if err != nil {
			return d.errorf(mhp.CodeInterlockOpen, "interlock %s is open: unreadable (%v)", l, err).
				With(mhp.DataInterlock, l).With(mhp.DataGate, mhp.GateInterlocks)
		}
		if b, ok := v.Value.(bool); !ok || !b {
			return d.errorf(mhp.CodeInterlockOpen, "interlock %s is open (reads %v)", l, v.Value).
				With(mhp.DataInterlock, l).With(mhp.DataValue, v.Value).With(mhp.DataGate, mhp.GateInterlocks)
		}
	}
	if took := d.since(start); took > d.cfg.InterlockTimeout {
		return d.errorf(mhp.CodeInterlockOpen, "interlocks %v are open: reading them took %s, longer than %s",
			locks, took, d.cfg.InterlockTimeout).With(mhp.DataInterlock, locks[0]).With(mhp.DataGate, mhp.GateInterlocks)
	}
	return nil
}

// leaseAndBusyLocked are gates 5 and 6; in a dry run they become notes.
func (d *Driver) leaseAndBusyLocked(s string, now time.Time, busy bool, busyMsg func() string, dry bool, notes *mhp.DryRunNotes) *mhp.Error {
	if e := d.leaseGateLocked(s, now); e != nil {
		if !dry {
			return e
		}
		if h, ok := e.Data[mhp.DataHolder].(string); ok {
			notes.LeaseHeldBy = h
		} else {
			notes.NeedsLease = true
		}
	}
	if busy {
		if !dry {
			return d.errorf(mhp.CodeDeviceBusy, "%s", busyMsg()).With(mhp.DataGate, mhp.GateBusy)
		}
		notes.BusyNow = true
	}
	return nil
}

// ---- the six gates of each path, in order ----
//
// Gate 1 state (estop, fault, backend link), 2 approval, 3 interlocks (read
// live), 4 limits, 5 lease, 6 busy. A refusal names its gate in data.gate;
// nothing reaches the backend before every gate passed.

// stateGate is gate 1 in its own locked step.
func (d *Driver) stateGate() *mhp.Error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stateGateLocked()
}

// writeGates runs gates 2 to 4 of settings/write and returns the checked
// value; they take no lock. Gate 1 (state) is admitWriteLocked's, in the
// locked step that registers the write right before; gates 5 and 6 are
// writeLastGatesLocked's, in the locked step that sends it. (A setting
// without interlocks has all but these in one locked step: sendQuick.)
func (d *Driver) writeGates(ctx context.Context, now time.Time, set *Setting, req mhp.WriteRequest, notes *mhp.DryRunNotes) (any, *mhp.Error) {
	// 1. state: checked by admitWriteLocked
	// 2. approval
	if e := d.approvalGate("setting", req.Name, set.Spec.Approval, req.Approved, req.DryRun, notes); e != nil {
		return nil, e
	}
	// 3. interlocks (the write's context bounds the reads by InterlockTimeout)
	if e := d.interlockGate(ctx, set.Spec.Interlocks, now); e != nil {
		return nil, e
	}
	// 4. limits
	value, err := set.shape.Check(req.Name, req.Value)
	if err != nil {
		ce, _ := mhp.AsError(err) // Check's errors are *mhp.Error
		return nil, d.stamp(ce.With(mhp.DataGate, mhp.GateLimits))
	}
	return value, nil
}

// writeLastGatesLocked are the gates of settings/write checked in the
// locked step that sends it (sendWrite): for a real write 1 (state) again,
// as an estop may have come while the gates read interlocks, and 3 again,
// as the write's deadline may have passed meanwhile; then 5 (lease) and 6
// (busy), which a dry run turns into notes. Writes are serialised by the
// request lock, so these need no step shared with what follows. mu is held.
func (d *Driver) writeLastGatesLocked(op *writeOp, s string, now time.Time, set *Setting, req mhp.WriteRequest, notes *mhp.DryRunNotes) *mhp.Error {
	if !req.DryRun {
		// 1. state, again
		if e := d.stateGateLocked(); e != nil {
			return e
		}
		// 3. the deadline: it passed, or Close came, as the gates ended: nothing was sent
		if op.cancelled.Load() {
			if locks := set.Spec.Interlocks; len(locks) > 0 {
				return d.errorf(mhp.CodeInterlockOpen, "interlocks %v are open: reading them took longer than %s",
					locks, d.cfg.InterlockTimeout).With(mhp.DataInterlock, locks[0]).With(mhp.DataGate, mhp.GateInterlocks)
			}
			return d.errorf(mhp.CodeServerError, "settings/write %s was cancelled before it was sent (driver closing or deadline passed)",
				req.Name).With(mhp.DataOutcome, mhp.OutcomeNotStarted)
		}
	}
	// 5. lease and 6. busy
	return d.writeLeaseAndBusyLocked(s, now, set, req, notes)
}

// writeLeaseAndBusyLocked are gates 5 and 6 of settings/write; a dry run
// turns them into notes. mu is held.
func (d *Driver) writeLeaseAndBusyLocked(s string, now time.Time, set *Setting, req mhp.WriteRequest, notes *mhp.DryRunNotes) *mhp.Error {
	busy := d.active > 0 && !set.Spec.DuringJob
	return d.leaseAndBusyLocked(s, now, busy, func() string {
		return fmt.Sprintf("setting %q cannot be written while a job runs (during_job is false)", req.Name)
	}, req.DryRun, notes)
}

// invokeGates runs the six gates of actions/invoke and returns the checked
// params. Gates 5 and 6 and admit (which registers the job) run in one
// locked section, so no other invoke slips between the busy check and the
// registration; admit is not called for a dry run.
func (d *Driver) invokeGates(ctx context.Context, s string, now time.Time, act *boundAction, req mhp.InvokeRequest, notes *mhp.DryRunNotes,
	admit func(params map[string]any) *mhp.Error) (map[string]any, *mhp.Error) {
	// 1. state
	if e := d.stateGate(); e != nil {
		return nil, e
	}
	// 2. approval
	if e := d.approvalGate("action", req.Name, act.Spec.Approval, req.Approved, req.DryRun, notes); e != nil {
		return nil, e
	}
	// 3. interlocks, each read bounded by InterlockTimeout
	if len(act.Spec.Interlocks) > 0 {
		ictx, cancel := context.WithTimeout(ctx, d.cfg.InterlockTimeout)
		e := d.interlockGate(ictx, act.Spec.Interlocks, now)
		cancel()
		if e != nil {
			return nil, e
		}
	}
	// 4. limits: the param shapes, then the binding's whole-request check
	params, err := act.Spec.Params.Check(req.Name, req.Params)
	if err != nil {
		ce, _ := mhp.AsError(err)
		return nil, d.stamp(ce.With(mhp.DataGate, mhp.GateLimits))
	}
	if act.Validate != nil {
		if err := act.Validate(params); err != nil {
			if me, ok := mhp.AsError(err); ok {
				return nil, d.adopt(me)
			}
			return nil, d.errorf(mhp.CodeInvalidValue, "%s: %v", req.Name, err).With(mhp.DataGate, mhp.GateLimits)
		}
	}
	// 5. lease and 6. busy, then the admission, in one locked section
	d.mu.Lock()
	defer d.mu.Unlock()
	busy := d.active > 0 && !act.Spec.Concurrent
	if e := d.leaseAndBusyLocked(s, now, busy, func() string {
		return fmt.Sprintf("action %q is not concurrent and %d job(s) are active", req.Name, d.active)
	}, req.DryRun, notes); e != nil {
		return nil, e
	}
	if !req.DryRun {
		if e := admit(params); e != nil {
			return nil, e
		}
	}
	return params, nil
}
