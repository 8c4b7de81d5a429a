package binding

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/openmhp/mhp-go"
)

// ---- actions and jobs ----

// Invoke implements [mhp.Device]: actions/invoke through the six gates; the
// job is returned queued and runs in its own goroutine.
func (d *Driver) Invoke(ctx context.Context, req mhp.InvokeRequest) (*mhp.InvokeResult, error) {
	s, now := d.touchAt(ctx)
	if e := d.unhonoured(mhp.MethodActionsInvoke, req.CommandID, req.PermitID, req.Method); e != nil {
		return nil, e
	}
	act, ok := d.actions.get(req.Name)
	if !ok {
		return nil, d.errorf(mhp.CodeUnknownName, "no action %q", req.Name).With(mhp.DataKind, "action").With(mhp.DataName, req.Name)
	}
	notes := &mhp.DryRunNotes{}
	var snapshot mhp.Job
	var r *jobRec
	params, e := d.invokeGates(ctx, s, now, act, req, notes, func(params map[string]any) *mhp.Error {
		var e *mhp.Error
		r, e = d.admitJobLocked(s, act, req.Name, params)
		if r != nil {
			snapshot = r.job
		}
		return e
	})
	if e != nil {
		return nil, e
	}
	if req.DryRun {
		res := &mhp.InvokeResult{DryRun: true, WouldRun: params, Action: req.Name}
		if !notes.Empty() {
			res.Notes = notes
		}
		return res, nil
	}
	go d.runJob(r.ctx, r, act)
	return &mhp.InvokeResult{Job: &snapshot}, nil
}

// admitJobLocked registers a job that passed the gates: the state is checked
// again in the same locked section (an estop may have come while the gates
// read interlocks), then the job is queued with its own deadline. mu is held.
func (d *Driver) admitJobLocked(s string, act *boundAction, name string, params map[string]any) (*jobRec, *mhp.Error) {
	if e := d.stateGateLocked(); e != nil {
		return nil, e
	}
	if d.closed {
		return nil, d.errorf(mhp.CodeDeviceFault, "driver is closed")
	}
	timeout := act.Timeout
	if timeout <= 0 {
		timeout = d.cfg.JobTimeout
	}
	// The deadline is on the system clock: bindings read it with ctx.Deadline.
	jctx, cancel := context.WithTimeout(context.Background(), timeout)
	id := d.newJobIDLocked()
	h := &Job{id: id, action: name, params: copyValue(params).(map[string]any), d: d}
	r := &jobRec{
		job: mhp.Job{ID: id, Action: name, Params: params, Owner: s, State: mhp.JobQueued,
			Started: mhp.UnixSeconds(d.now())},
		handle: h, ctx: jctx, cancel: cancel, done: make(chan struct{}),
	}
	d.jobSeq++
	r.seq = d.jobSeq
	if d.jobs == nil {
		d.jobs = map[string]*jobRec{}
	}
	d.jobs[id] = r
	d.active++
	return r, nil
}

func (d *Driver) newJobIDLocked() string {
	var b [4]byte
	for {
		_, _ = rand.Read(b[:])
		id := "job_" + hex.EncodeToString(b[:])
		if _, taken := d.jobs[id]; !taken {
			return id
		}
	}
}

type runResult struct {
	result any
	err    error
}

func (d *Driver) runJob(ctx context.Context, r *jobRec, act *boundAction) {
	defer r.cancel()
	deadline, _ := ctx.Deadline()
	d.mu.Lock()
	if ctx.Err() != nil && (d.estop || d.closed) { // estopped or closed before it started
		d.mu.Unlock()
		d.finishJob(r, act, d.notStarted(ctx, r, act))
		return
	}
	r.job.State = mhp.JobRunning
	snap := r.job
	d.publishLocked(mhp.NotifyJobsStarted, map[string]any{"job": snap})
	// Whether Run is called and its registration as a backend call are one
	// locked step, so an estop either keeps Run from being called or cuts it off.
	var call *backendCall
	d.locked(func() {
		if ctx.Err() == nil || !(d.estop || d.closed) {
			call = d.beginCallLocked()
		}
	})
	if call == nil { // an estop came while jobs/started was published: Run is not called
		d.finishJob(r, act, d.notStarted(ctx, r, act))
		return
	}

	ch := make(chan runResult, 1)
	go func() {
		var out runResult
		func() {
			defer func() {
				if p := recover(); p != nil {
					out = runResult{err: fmt.Errorf("panic in action %s: %v", act.Spec.Name, p)}
				}
			}()
			res, err := act.Run(ctx, r.handle)
			out = runResult{res, err}
		}()
		// However Run ended (even after the job was abandoned), its return
		// is noted before the job can finish on it: a Run cut off by an
		// estop gets the stop re-asserted after it, and a reset that sees
		// the job ended sees no call still owed.
		d.endCall(call)
		ch <- out
	}()
	var out runResult
	select {
	case out = <-ch:
	case <-ctx.Done():
		// Cancelled, estopped or timed out: the backend gets its say. After a
		// plain cancel the work may legitimately run to completion, so the
		// wait lasts until the job's own deadline; after a timeout or an estop
		// the binding has JobGrace to report the end state.
		wait := d.cfg.JobGrace
		if r.handle.CancelRequested() && !d.isEStop() && errors.Is(context.Cause(ctx), context.Canceled) {
			// The context's deadline is on the system clock (bindings read it
			// with ctx.Deadline), so its remaining time is measured there,
			// whatever the driver's clock says.
			if left := time.Until(deadline); left > 0 {
				wait += left
			}
		}
		grace := make(chan struct{})
		t := d.clk.AfterFunc(wait, func() { close(grace) })
		select {
		case out = <-ch:
			t.Stop()
		case <-grace:
			out = runResult{err: fmt.Errorf("action %s did not return within %s after its context ended (%v): abandoned",
				act.Spec.Name, wait, context.Cause(ctx))}
		}
	}
	d.finishJob(r, act, out)
}

// notStarted is the end of a job stopped by estop or Close before Run was
// called: nothing reached the backend, so the cancel is honoured as is. (A
// plain jobs/cancel before the start still calls Run, whose binding decides.)
func (d *Driver) notStarted(ctx context.Context, r *jobRec, act *boundAction) runResult {
	if r.handle.CancelRequested() {
		return runResult{err: ErrCancelled}
	}
	return runResult{err: mhp.Errorf(mhp.CodeServerError, "action %s did not start: %v", act.Spec.Name, context.Cause(ctx))}
}

func (d *Driver) isEStop() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.estop
}

// finishJob records the terminal state the binding reported and publishes it
// together with the device state.
func (d *Driver) finishJob(r *jobRec, act *boundAction, out runResult) {
	var faultReason string
	d.mu.Lock()
	j := &r.job
	j.Finished = mhp.UnixSeconds(d.now())
	j.Paused = false
	var failed *FailedError
	switch {
	case out.err == nil:
		j.State, j.Result, j.Progress = mhp.JobDone, out.result, 1
	case errors.Is(out.err, ErrCancelled):
		j.State = mhp.JobCancelled
		j.Result = out.result
	case errors.As(out.err, &failed):
		j.State, j.Outcome = mhp.JobFailed, mhp.OutcomeFailed
		j.Error = d.errorf(mhp.CodeServerError, "%s failed: %v", j.Action, failed.Err)
		for k, v := range failed.Data {
			j.Error = j.Error.With(k, v)
		}
		j.Error = j.Error.With(mhp.DataOutcome, mhp.OutcomeFailed)
		if act.FaultOnFailure {
			faultReason = fmt.Sprintf("job %s (%s) failed: %v", j.ID, j.Action, failed.Err)
		}
	default:
		if me, ok := mhp.AsError(out.err); ok && !me.OutcomeUnknown() {
			j.State, j.Outcome, j.Error = mhp.JobFailed, mhp.OutcomeNotStarted, d.adopt(me)
			j.Error = j.Error.With(mhp.DataOutcome, mhp.OutcomeNotStarted)
			break
		}
		j.State, j.Outcome = mhp.JobFailed, mhp.OutcomeUnknown
		j.Error = d.errorf(mhp.CodeDeviceFault, "%s: outcome unknown: %v", j.Action, out.err).With(mhp.DataOutcome, mhp.OutcomeUnknown)
		faultReason = fmt.Sprintf("job %s (%s): outcome unknown: %v", j.ID, j.Action, out.err)
	}
	d.active--
	d.finished = append(d.finished, j.ID)
	for len(d.finished) > d.cfg.KeepJobs {
		delete(d.jobs, d.finished[0])
		d.finished = d.finished[1:]
	}
	if faultReason != "" && !d.fault {
		// Latch before publishing so jobs/finished carries state "fault".
		d.fault = true
		d.latches++
		d.faultReason = faultReason
	} else {
		faultReason = ""
	}
	snap := r.job
	close(r.done)
	d.publishLocked(mhp.NotifyJobsFinished, map[string]any{"job": snap})
	if faultReason != "" {
		d.faultLatched(faultReason)
	}
}

func (d *Driver) jobProgress(id string, fraction float64, extra map[string]any) {
	if math.IsNaN(fraction) {
		fraction = 0
	}
	fraction = math.Max(0, math.Min(1, fraction))
	d.locked(func() {
		r, ok := d.jobs[id]
		if !ok || r.job.State.Terminal() {
			return
		}
		r.job.Progress = fraction
		if extra != nil {
			r.job.Extra = extra
		}
		d.enqueueLocked(mhp.NotifyJobsProgress, map[string]any{"job": r.job})
	})
}

func (d *Driver) jobLocked(id string) (*jobRec, *mhp.Error) {
	r, ok := d.jobs[id]
	if !ok {
		return nil, d.errorf(mhp.CodeJobNotFound, "no job %q (finished jobs are kept up to %d)", id, d.cfg.KeepJobs).With("id", id)
	}
	return r, nil
}

// Job implements [mhp.Device]: jobs/status.
func (d *Driver) Job(ctx context.Context, id string) (*mhp.Job, error) {
	d.touch(ctx)
	d.mu.Lock()
	defer d.mu.Unlock()
	r, e := d.jobLocked(id)
	if e != nil {
		return nil, e
	}
	snap := r.job
	return &snap, nil
}

// Jobs implements [mhp.Device]: jobs/list, newest first.
func (d *Driver) Jobs(ctx context.Context, req mhp.JobsRequest) ([]mhp.Job, error) {
	d.touch(ctx)
	d.mu.Lock()
	defer d.mu.Unlock()
	recs := make([]*jobRec, 0, len(d.jobs))
	for _, r := range d.jobs {
		if req.Active && r.job.State.Terminal() {
			continue
		}
		recs = append(recs, r)
	}
	// Newest first by invoke order: start times can be equal on a coarse clock.
	sort.Slice(recs, func(i, j int) bool { return recs[i].seq > recs[j].seq })
	if req.Limit > 0 && len(recs) > req.Limit {
		recs = recs[:req.Limit]
	}
	out := make([]mhp.Job, len(recs))
	for i, r := range recs {
		out[i] = r.job
	}
	return out, nil
}

// CancelJob implements [mhp.Device]: jobs/cancel. The binding's context is
// cancelled; the job ends as the backend reports (done if it ran on).
func (d *Driver) CancelJob(ctx context.Context, id string) (*mhp.Job, error) {
	s := d.touch(ctx)
	var snap mhp.Job
	var e *mhp.Error
	d.locked(func() {
		var r *jobRec
		if r, e = d.jobLocked(id); e != nil {
			return
		}
		if !d.actions.at(r.job.Action).Spec.Cancellable {
			e = d.errorf(mhp.CodeNotSupported, "action %q is not cancellable", r.job.Action).With("id", id)
			return
		}
		if !r.job.State.Terminal() {
			r.job.CancelRequested = true
			r.handle.requestCancel()
			r.cancel()
			d.enqueueLocked(mhp.NotifyJobsCancelling, map[string]any{"job": r.job, "by": s})
		}
		snap = r.job
	})
	if e != nil {
		return nil, e
	}
	return &snap, nil
}

// PauseJob implements [mhp.Device]: jobs/pause (not lease-gated). Pausing a
// paused job answers its status again.
func (d *Driver) PauseJob(ctx context.Context, id string) (*mhp.Job, error) {
	s := d.touch(ctx)
	r, act, e := d.pausable(id)
	if e != nil {
		return nil, e
	}
	var snap mhp.Job
	var paused bool
	var call *backendCall
	d.locked(func() {
		snap, paused = r.job, r.job.Paused
		if paused || act.Pause == nil {
			return
		}
		// A pause is a command to the backend: after an estop the stop is
		// the last word it hears, so none is sent; one in flight when an
		// estop lands is cut off like a write (the stop is re-asserted
		// after it returns).
		if d.estop {
			e = d.errorf(mhp.CodeEStopActive, "device is in estop: job %s is not paused (no command follows the stop); safety/reset is needed", id).
				With(mhp.DataGate, mhp.GateState).With("id", id)
			return
		}
		call = d.beginCallLocked()
	})
	if e != nil {
		return nil, e
	}
	if paused {
		return &snap, nil
	}
	if act.Pause != nil {
		pctx, cancel := context.WithTimeout(ctx, d.cfg.HookTimeout)
		err := act.Pause(pctx, r.handle)
		cancel()
		if d.endCall(call) {
			return nil, d.errorf(mhp.CodeEStopActive, "an estop landed while job %s was pausing: the stop was sent after the pause; safety/reset is needed", id).
				With(mhp.DataGate, mhp.GateState).With("id", id)
		}
		if err != nil {
			return nil, d.hookRefusal("pause", r.job.ID, err)
		}
	}
	d.locked(func() {
		if r.job.State.Terminal() { // the job ended while the backend paused
			e = d.errorf(mhp.CodeDeviceBusy, "job %s ended %s before it paused", id, r.job.State).With("id", id)
			return
		}
		r.handle.setPaused(true)
		r.job.Paused = true
		snap = r.job
		d.enqueueLocked(mhp.NotifyJobsPaused, map[string]any{"job": snap, "by": s})
	})
	if e != nil {
		return nil, e
	}
	return &snap, nil
}

// ResumeJob implements [mhp.Device]: jobs/resume, refused in estop or fault and
// lease-gated like an invoke (on a watchdog device it needs the lease).
func (d *Driver) ResumeJob(ctx context.Context, id string) (*mhp.Job, error) {
	s, now := d.touchAt(ctx)
	var e *mhp.Error
	d.locked(func() {
		if e = d.stateGateLocked(); e == nil {
			e = d.leaseGateLocked(s, now)
		}
	})
	if e != nil {
		return nil, e
	}
	r, act, e := d.pausable(id)
	if e != nil {
		return nil, e
	}
	var paused bool
	d.locked(func() { paused = r.job.Paused })
	if !paused {
		return nil, d.errorf(mhp.CodeDeviceBusy, "job %s is not paused", id).With("id", id)
	}
	if act.Resume != nil {
		// The hook runs under the job's context too, so an estop or cancel
		// arriving meanwhile cuts it short.
		rctx, cancel := context.WithTimeout(r.ctx, d.cfg.HookTimeout)
		stop := context.AfterFunc(ctx, cancel)
		err := act.Resume(rctx, r.handle)
		stop()
		cancel()
		if err != nil {
			return nil, d.hookRefusal("resume", r.job.ID, err)
		}
	}
	var snap mhp.Job
	d.locked(func() {
		if e = d.stateGateLocked(); e != nil { // estop or fault came while the backend resumed
			return
		}
		if r.job.State.Terminal() {
			e = d.errorf(mhp.CodeDeviceBusy, "job %s ended %s before it resumed", id, r.job.State).With("id", id)
			return
		}
		r.handle.setPaused(false)
		r.job.Paused = false
		snap = r.job
		d.enqueueLocked(mhp.NotifyJobsResumed, map[string]any{"job": snap, "by": s})
	})
	if e != nil {
		return nil, e
	}
	return &snap, nil
}

func (d *Driver) pausable(id string) (*jobRec, *boundAction, *mhp.Error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	r, e := d.jobLocked(id)
	if e != nil {
		return nil, nil, e
	}
	act := d.actions.at(r.job.Action)
	if !act.Spec.Pausable {
		return nil, nil, d.errorf(mhp.CodeNotSupported, "action %q is not pausable", r.job.Action).With("id", id)
	}
	if r.job.State.Terminal() {
		return nil, nil, d.errorf(mhp.CodeDeviceBusy, "job %s already ended %s", id, r.job.State).With("id", id)
	}
	return r, act, nil
}
