package binding

import (
	"context"
	"fmt"
	"sort"

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
func (d *Driver) faultLatched(reason string) {
	d.mu.Lock()
	d.publishLocked(mhp.NotifySafetyFault, map[string]any{"reason": reason})
	d.cfg.Logger.Warn("device fault", "device", d.cfg.Device.ID, "reason", reason)
	hook := d.cfg.OnFault
	if hook == nil && d.cfg.EStop != nil {
		hook = func(ctx context.Context, _ string) error { return d.cfg.EStop(ctx) }
	}
	if hook != nil {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), d.cfg.StopTimeout)
			defer cancel()
			if err := hook(ctx, reason); err != nil {
				d.cfg.Logger.Error("fault hook failed", "device", d.cfg.Device.ID, "err", err)
			}
		}()
	}
}

// ---- estop and reset ----

// EStop implements mhp.Device: safety/estop. It never waits behind a vendor
// call, cancels every job and runs the stop hook; if the hook fails the
// device stays in estop and the answer says stopped:false.
func (d *Driver) EStop(ctx context.Context, reason string) (*mhp.EStopResult, error) {
	s := d.touch(ctx)
	return d.estopAs(ctx, s, reason)
}

func (d *Driver) estopAs(ctx context.Context, by, reason string) (*mhp.EStopResult, error) {
	d.mu.Lock()
	cancelled := d.estopLocked()
	d.mu.Unlock()
	return d.estopFinish(ctx, by, reason, cancelled), nil
}

// estopLocked latches estop and cancels every active job and write in
// flight; it returns the cancelled job ids. mu is held.
func (d *Driver) estopLocked() []string {
	d.estop = true
	d.latches++
	var cancelled []string
	for id, r := range d.jobs {
		if !r.job.State.Terminal() {
			r.job.CancelRequested = true
			r.handle.requestCancel()
			r.cancel()
			cancelled = append(cancelled, id)
		}
	}
	sort.Strings(cancelled)
	for _, w := range d.inflight {
		w.cancel()
	}
	return cancelled
}

// estopFinish runs the stop hook after estopLocked and publishes safety/estop.
func (d *Driver) estopFinish(ctx context.Context, by, reason string, cancelled []string) *mhp.EStopResult {
	res := &mhp.EStopResult{State: mhp.StateEStop, Stopped: true, Cancelled: cancelled}
	if d.cfg.EStop == nil {
		res.Stopped = false
		res.StopError = "the device has no stop command: jobs were cancelled and the device latched in estop"
	} else {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.StopTimeout)
		err := d.cfg.EStop(sctx)
		cancel()
		if err != nil {
			res.Stopped = false
			res.StopError = err.Error()
			d.cfg.Logger.Error("estop hook failed", "device", d.cfg.Device.ID, "err", err)
		}
	}
	d.mu.Lock()
	p := map[string]any{"by": by, "reason": reason, "stopped": res.Stopped}
	if res.StopError != "" {
		p["stop_error"] = res.StopError
	}
	d.publishLocked(mhp.NotifySafetyEStop, p)
	return res
}

// Reset implements mhp.Device: safety/reset. It refuses while a job is
// active, is lease-gated, and verifies recovery before returning to idle.
func (d *Driver) Reset(ctx context.Context) (*mhp.ResetResult, error) {
	s := d.touch(ctx)
	d.mu.Lock()
	if holder := d.leaseHolderLocked(); holder != "" && holder != s {
		d.mu.Unlock()
		return nil, d.errorf(mhp.CodeNotLeased, "only the lease holder may reset").With("holder", holder)
	}
	if d.active > 0 {
		d.mu.Unlock()
		return nil, d.errorf(mhp.CodeDeviceBusy, "cannot reset while %d job(s) are still active", d.active)
	}
	latches := d.latches
	d.mu.Unlock()
	if err := d.verify(ctx); err != nil {
		return nil, d.errorf(mhp.CodeDeviceFault, "reset refused: recovery not verified: %v", err).With("verified", false)
	}
	d.mu.Lock()
	if d.active > 0 {
		d.mu.Unlock()
		return nil, d.errorf(mhp.CodeDeviceBusy, "cannot reset while %d job(s) are still active", d.active)
	}
	if d.latches != latches { // an estop or fault came while verifying: it stands
		if e := d.stateGateLocked(); e != nil {
			d.mu.Unlock()
			return nil, e.With("reason", "latched while the reset verified recovery")
		}
	}
	was := d.estop || d.fault
	d.estop, d.fault, d.faultReason = false, false, ""
	if !was {
		st := d.stateLocked()
		d.mu.Unlock()
		return &mhp.ResetResult{State: st, Verified: true}, nil
	}
	d.publishLocked(mhp.NotifySafetyReset, map[string]any{"by": s, "verified": true})
	return &mhp.ResetResult{State: d.State(), Verified: true}, nil
}

func (d *Driver) verify(ctx context.Context) error {
	d.mu.Lock()
	down, why := d.linkDownLocked(), d.link.err
	d.mu.Unlock()
	if down {
		return fmt.Errorf("backend unavailable: %s", why)
	}
	if d.cfg.Verify != nil {
		vctx, cancel := context.WithTimeout(ctx, d.cfg.VerifyTimeout)
		defer cancel()
		return d.cfg.Verify(vctx)
	}
	vctx, cancel := context.WithTimeout(ctx, d.cfg.InterlockTimeout)
	defer cancel()
	for i := range d.cfg.Signals {
		s := &d.cfg.Signals[i]
		if _, err := d.readSignal(vctx, s); err != nil {
			return fmt.Errorf("signal %s unreadable: %w", s.Spec.Name, err)
		}
	}
	return nil
}
