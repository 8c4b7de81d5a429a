package sila2

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
)

// action maps a command onto an action: an unobservable command runs to its
// answer, an observable one is followed through its execution, whose
// terminal state, not ours, ends the job.
func (a *adapter) action(f *Compiled, c *Command, e *CommandEntry) (binding.Action, error) {
	name := SnakeCase(c.Identifier)
	if e != nil && e.Action != "" {
		name = e.Action
	}
	spec := mhp.Action{Name: name, Duration: mhp.DurationShort, Approval: a.approval(e),
		Notes: describeText(strings.TrimSpace(c.DisplayName), c.Description)}
	if c.IsObservable() {
		spec.Duration = mhp.DurationLong
		spec.Cancellable = a.cancellable
		spec.Pausable = a.pausable
	}
	var timeout time.Duration
	if e != nil {
		if e.Duration != "" {
			spec.Duration = e.Duration
		}
		spec.Interlocks = e.Interlocks
		spec.Concurrent = e.Concurrent
		if e.Notes != "" {
			spec.Notes = e.Notes
		}
		timeout = seconds(e.TimeoutS, 0)
	}
	declared := map[string]bool{}
	for _, p := range c.Parameters {
		pname := SnakeCase(p.Identifier)
		declared[pname] = true
		shape := f.Shape(&p.DataType)
		if e != nil {
			if pe, ok := e.Params[pname]; ok {
				lim, err := narrow("sila2: action "+name+" param "+pname, shape.Limits, pe.Limits)
				if err != nil {
					return binding.Action{}, err
				}
				shape.Limits = lim
				if pe.Unit != "" {
					shape.Unit = pe.Unit
				}
				if pe.Notes != "" {
					shape.Notes = pe.Notes
				}
			}
		}
		spec.Params = append(spec.Params, mhp.Param{Name: pname, Shape: shape})
		a.params[strings.ToLower(f.FQID("Command", c.Identifier, "Parameter", p.Identifier))] = paramInfo{name: pname, limited: !shape.Limits.Empty()}
	}
	if e != nil {
		for k := range e.Params {
			if !declared[k] {
				return binding.Action{}, fmt.Errorf("sila2: commands %s: params names %q, which the command does not have", c.Identifier, k)
			}
		}
	}
	if len(c.Responses) > 0 {
		ret := &mhp.Shape{Type: mhp.TypeObject, Properties: map[string]*mhp.Shape{}}
		for _, r := range c.Responses {
			ret.Properties[SnakeCase(r.Identifier)] = f.Shape(&r.DataType)
			ret.Required = append(ret.Required, SnakeCase(r.Identifier))
		}
		spec.Returns = ret
	}
	if len(c.Intermediate) > 0 {
		spec.Notes = strings.TrimSpace(spec.Notes + " " + intermediateNote(f, c))
	}
	fid, cid := f.Feature.FullyQualifiedID(), c.Identifier
	act := binding.Action{Spec: spec, Timeout: timeout}
	// Timestamp, Date, Time and Binary values are checked at the gate (a
	// dry run says so), not first by the encoder at the invoke.
	cmdParams := c.Parameters
	act.Validate = func(params map[string]any) error {
		for i := range cmdParams {
			p := &cmdParams[i]
			if err := f.CheckValue(&p.DataType, params[SnakeCase(p.Identifier)], SnakeCase(p.Identifier)); err != nil {
				return err
			}
		}
		return nil
	}
	if !c.IsObservable() {
		act.Run = func(ctx context.Context, job *binding.Job) (any, error) {
			// Once sent, the command runs at the server: a cancel or estop does
			// not cut the call (that would make the outcome unknown); the reply
			// is awaited until the job's deadline.
			cctx, cancel := keepDeadline(ctx)
			defer cancel()
			res, err := a.b.Call(cctx, fid, cid, job.Params())
			if err != nil {
				if ctx.Err() != nil && a.isCancelledError(err) {
					return nil, binding.ErrCancelled
				}
				return nil, a.commandError(name, err)
			}
			return res, nil
		}
		return act, nil
	}
	hasIntermediate := len(c.Intermediate) > 0
	act.Run = func(ctx context.Context, job *binding.Job) (any, error) {
		return a.runObservable(ctx, job, name, fid, cid, hasIntermediate)
	}
	if a.pausable {
		act.Pause = func(ctx context.Context, job *binding.Job) error { return a.pauseControl(ctx, job, name, "Pause") }
		act.Resume = func(ctx context.Context, job *binding.Job) error { return a.pauseControl(ctx, job, name, "Resume") }
	}
	return act, nil
}

// pauseControl asks the server's PauseController to pause or resume the
// job's command execution. The server's refusals (OperationNotSupported,
// InvalidCommandState, ...) refuse the request and change nothing.
func (a *adapter) pauseControl(ctx context.Context, job *binding.Job, action, verb string) error {
	a.mu.Lock()
	id, ok := a.running[job.ID()]
	a.mu.Unlock()
	if !ok {
		return mhp.Errorf(mhp.CodeDeviceBusy, "%s: job %s has no command running at the server yet", action, job.ID())
	}
	_, err := a.b.Call(ctx, PauseControllerID, verb, map[string]any{"CommandExecutionUUID": id})
	if err == nil {
		return nil
	}
	if me := a.refusal(action, err); me != nil {
		return me
	}
	if se, ok := AsSiLAError(err); ok && (se.Kind == KindDefined || se.Kind == KindUndefined) {
		code := mhp.CodeDeviceBusy
		if strings.EqualFold(se.ShortIdentifier(), "OperationNotSupported") {
			code = mhp.CodeNotSupported
		}
		return mhp.Errorf(code, "%s: the server refused to %s: %s", action, strings.ToLower(verb), se.Message).
			With("sila_error", silaErrorData(se))
	}
	return fmt.Errorf("%s: %s: %w", action, strings.ToLower(verb), err)
}

// commandError maps the error of a command call: refusals stay *mhp.Error,
// execution errors the server reported are binding.Failed with the SiLA
// error, anything else (connection errors) is a plain error: outcome unknown.
func (a *adapter) commandError(action string, err error) error {
	if me := a.refusal(action, err); me != nil {
		return me
	}
	if se, ok := AsSiLAError(err); ok && (se.Kind == KindDefined || se.Kind == KindUndefined) {
		data := map[string]any{"sila_error": silaErrorData(se)}
		if se.Identifier != "" {
			data["error_identifier"] = se.Identifier
		}
		return binding.Failed(fmt.Errorf("%s: %s", action, se.Error()), data)
	}
	return fmt.Errorf("%s: outcome unknown: %w", action, err)
}

// runObservable follows an observable command to its real end state.
func (a *adapter) runObservable(ctx context.Context, job *binding.Job, action, fid, cid string, intermediate bool) (any, error) {
	// The initiating call is not cut by a cancel either: once the server
	// confirms, the cancel goes through CancelController.
	x, err := a.b.Start(context.WithoutCancel(ctx), fid, cid, job.Params())
	if err != nil {
		return nil, a.commandError(action, err)
	}
	a.mu.Lock()
	a.running[job.ID()] = x.UUID()
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		delete(a.running, job.ID())
		a.mu.Unlock()
	}()
	// The command runs at the server now: keep talking to it after ctx ends
	// (cancel, estop, timeout) until it says how the command ended.
	follow, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	var cancelOK atomic.Bool
	// cancelSent is closed once the cancel request was answered (or not
	// sent: the job's context did not end, or the server cannot cancel).
	cancelSent := make(chan struct{})
	go func() {
		select {
		case <-follow.Done():
			close(cancelSent)
			return
		case <-ctx.Done():
		}
		if follow.Err() != nil {
			// Run already returned (the job's context ends after it): no cancel.
			close(cancelSent)
			return
		}
		if a.cancellable {
			cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), a.cancelWait)
			err := x.Cancel(cctx)
			ccancel()
			if err == nil {
				cancelOK.Store(true)
			} else {
				a.log.Warn("sila2: cancel refused", "action", action, "uuid", x.UUID(), "error", err)
			}
		}
		close(cancelSent)
		t := time.NewTimer(a.cancelWait)
		defer t.Stop()
		select {
		case <-t.C:
			stop()
		case <-follow.Done():
		}
	}()
	var progressMu sync.Mutex
	lastProgress := 0.0
	extra := map[string]any{}
	report := func(p float64, more map[string]any) {
		progressMu.Lock()
		defer progressMu.Unlock()
		if p >= 0 {
			lastProgress = p
		}
		for k, v := range more {
			extra[k] = v
		}
		cp := make(map[string]any, len(extra)+1)
		for k, v := range extra {
			cp[k] = v
		}
		cp["command_execution_uuid"] = x.UUID()
		job.Progress(lastProgress, cp)
	}
	if intermediate {
		go func() {
			_ = x.Intermediate(follow, func(v map[string]any) { report(-1, map[string]any{"intermediate": v}) })
		}()
	}
	final, err := a.follow(follow, x, func(i ExecInfo) {
		more := map[string]any{}
		if i.Remaining >= 0 {
			more["eta_s"] = i.Remaining.Seconds()
		}
		if i.Status == StatusWaiting {
			more["message"] = "waiting"
		}
		report(i.Progress, more)
	})
	if err != nil {
		if ctx.Err() != nil && follow.Err() != nil {
			return nil, fmt.Errorf("%s: no end state within %v after the job was stopped (uuid %s): outcome unknown", action, a.cancelWait, x.UUID())
		}
		return nil, fmt.Errorf("%s: lost the command (uuid %s): outcome unknown: %w", action, x.UUID(), err)
	}
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), a.cancelWait)
	defer rcancel()
	res, rerr := x.Result(rctx)
	if final.Status == StatusFinishedSuccessfully {
		if rerr != nil {
			return nil, fmt.Errorf("%s: finished successfully but _Result failed: outcome unknown: %w", action, rerr)
		}
		return res, nil
	}
	// finishedWithError: cancelled only when our CancelCommand succeeded.
	// The job keeps the server's word on it (the error's id and message,
	// e.g. ProtocolCancelled or ControlInterrupted) as its result.
	if ctx.Err() != nil {
		<-cancelSent
		if cancelOK.Load() || a.isCancelledError(rerr) {
			return serverWord(rerr), binding.ErrCancelled
		}
	}
	if rerr == nil {
		return nil, binding.Failed(fmt.Errorf("%s: finished with error, but _Result returned responses", action), nil)
	}
	if se, ok := AsSiLAError(rerr); ok && (se.Kind == KindDefined || se.Kind == KindUndefined) {
		return nil, a.commandError(action, rerr)
	}
	return nil, binding.Failed(fmt.Errorf("%s: finished with error: %w", action, rerr), nil)
}

// serverWord is a cancelled job's record of the SiLA error the server
// ended the command with ({"sila_error": {kind, identifier, message}}), or
// nil when it gave none.
func serverWord(err error) map[string]any {
	se, ok := AsSiLAError(err)
	if !ok {
		return nil
	}
	e := map[string]any{"kind": se.Kind.String(), "message": se.Message}
	if se.Identifier != "" {
		e["identifier"] = se.Identifier
	}
	if se.Kind == KindFramework {
		e["framework_type"] = FrameworkErrorName(se.FrameworkType)
	}
	return map[string]any{"sila_error": e}
}

// isCancelledError reports whether err is a defined execution error the
// config lists as "the command was cancelled".
func (a *adapter) isCancelledError(err error) bool {
	se, ok := AsSiLAError(err)
	return ok && se.Kind == KindDefined && a.cancelledErrors[strings.ToLower(se.Identifier)]
}

// keepDeadline returns a context that ctx's cancellation does not end but
// its deadline does.
func keepDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	base := context.WithoutCancel(ctx)
	if d, ok := ctx.Deadline(); ok {
		return context.WithDeadline(base, d)
	}
	return context.WithCancel(base)
}

// follow reads _Info until a finished status, resubscribing after a broken
// stream within the resubscribe window (and the lifetime of execution).
func (a *adapter) follow(ctx context.Context, x Execution, fn func(ExecInfo)) (ExecInfo, error) {
	var lastErr error
	var deadline time.Time
	backoff := 50 * time.Millisecond
	for {
		info, err := x.Follow(ctx, fn)
		if err == nil {
			return info, nil
		}
		if ctx.Err() != nil {
			return info, ctx.Err()
		}
		if _, ok := AsSiLAError(err); ok {
			// The server answered: INVALID_COMMAND_EXECUTION_UUID (it forgot
			// the command) or another SiLA error. No point retrying.
			return info, err
		}
		lastErr = err
		if deadline.IsZero() {
			window := a.resubscribe
			if l := x.Lifetime(); l > 0 && l < window {
				window = l
			}
			deadline = time.Now().Add(window)
		}
		if time.Now().After(deadline) {
			return info, fmt.Errorf("no _Info stream within %v: %w", a.resubscribe, lastErr)
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return info, ctx.Err()
		}
		if backoff < time.Second {
			backoff *= 2
		}
	}
}
