package binding

import (
	"context"
	"fmt"

	"github.com/openmhp/mhp-go"
)

// ---- settings/write ----

// Write implements mhp.Device: settings/write through the six gates.
func (d *Driver) Write(ctx context.Context, req mhp.WriteRequest) (*mhp.WriteResult, error) {
	s, now := d.touchAt(ctx)
	set, ok := d.settings[req.Name]
	if !ok {
		return nil, d.errorf(mhp.CodeUnknownName, "no setting %q", req.Name).With("kind", "setting").With("name", req.Name)
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
	d.mu.Lock()
	if e := d.stateGateLocked(); e != nil {
		d.mu.Unlock()
		return nil, e
	}
	if d.closed {
		d.mu.Unlock()
		return nil, d.errorf(mhp.CodeDeviceFault, "settings/write %s: driver is closed", req.Name)
	}
	d.inflightSeq++
	key := d.inflightSeq
	hookDeadline := now.Add(d.cfg.HookTimeout)
	first := hookDeadline
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
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		delete(d.inflight, key)
		if len(d.inflight) == 0 && d.sweeper != nil {
			// Nothing left to bound: no timer outlives the writes (a manual
			// clock in a test sees only the timers its device waits on).
			d.sweeper.Stop()
			d.sweeper = nil
		}
		d.mu.Unlock()
	}()
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
	d.mu.Lock()
	if e := d.stateGateLocked(); e != nil { // estop may have come while the gates read interlocks
		d.mu.Unlock()
		return nil, e
	}
	if hctx.Err() != nil { // a deadline passed or Close came as the gates ended: nothing was sent
		d.mu.Unlock()
		if len(set.Spec.Interlocks) > 0 {
			return nil, d.errorf(mhp.CodeInterlockOpen, "interlocks %v are open: reading them took longer than %s",
				set.Spec.Interlocks, d.cfg.InterlockTimeout).With("interlock", set.Spec.Interlocks[0]).With("gate", "interlocks")
		}
		return nil, d.errorf(mhp.CodeServerError, "settings/write %s was cancelled before it was sent (driver closing or deadline passed)",
			req.Name).With("outcome", mhp.OutcomeNotStarted)
	}
	if len(set.Spec.Interlocks) > 0 {
		d.inflight[key] = inflightWrite{cancel: cancel, deadline: hookDeadline}
	}
	d.mu.Unlock()
	status, err := set.Write(hctx, value)
	if err != nil {
		if me, ok := mhp.AsError(err); ok && !me.OutcomeUnknown() {
			return nil, d.adopt(me)
		}
		reason := fmt.Sprintf("write %s=%v: outcome unknown: %v", req.Name, value, err)
		d.latchFault(reason)
		return nil, d.errorf(mhp.CodeDeviceFault, "%s", reason).With("outcome", mhp.OutcomeUnknown).With("name", req.Name)
	}
	res := &mhp.WriteResult{OK: true, Name: req.Name, Value: value, Applied: status == Applied, Status: mhp.WriteApplied}
	if status == Sent {
		res.Status = mhp.WriteSent
	}
	d.mu.Lock()
	if len(d.listeners) == 0 {
		d.mu.Unlock()
		return res, nil
	}
	d.publishLocked(mhp.NotifySettingsChanged, map[string]any{"name": req.Name, "value": value, "by": s, "applied": res.Applied})
	return res, nil
}
