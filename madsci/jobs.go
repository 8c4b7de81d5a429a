package madsci

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
)

func (a *adapter) track(jobID, actionID string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if actionID == "" {
		delete(a.running, jobID)
		return
	}
	a.running[jobID] = actionID
}

func (a *adapter) actionOf(jobID string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.running[jobID]
}

// run submits the action and follows it to the node's terminal state.
func (a *adapter) run(ctx context.Context, job *binding.Job, plan *actionPlan) (any, error) {
	args := map[string]any{}
	for k, v := range job.Params() {
		if !plan.files[k] && v != nil {
			args[k] = v
		}
	}
	files, err := a.localFiles(plan, job.Params())
	if err != nil {
		return nil, err
	}
	res, err := a.acts.Submit(ctx, Submission{Action: plan.name, Args: args, Files: files, ListFiles: plan.listFiles})
	if err != nil {
		if e, ok := mhp.AsError(err); ok && e.Data["outcome"] == mhp.OutcomeNotStarted && !refusedByNode(err) {
			// Nothing started and the node did not answer: read its status
			// now, so a node that is gone marks the link down at once.
			sctx, stop := context.WithTimeout(context.WithoutCancel(ctx), a.cfg.RequestTimeout)
			_, _ = a.readStatus(sctx)
			stop()
		}
		return nil, err
	}
	a.track(job.ID(), res.ActionID)
	defer a.track(job.ID(), "")
	return a.follow(ctx, job, plan, res)
}

// follow polls until the node reports a terminal state. When ctx ends by a
// cancel (or estop) the node's cancel is sent if it is safe, and polling goes
// on under its own deadline; when ctx ends by timeout, the outcome is unknown.
func (a *adapter) follow(ctx context.Context, job *binding.Job, plan *actionPlan, res *ActionResult) (any, error) {
	id := res.ActionID
	pollCtx := ctx
	var stops []context.CancelFunc
	defer func() {
		for _, f := range stops {
			f()
		}
	}()
	cancelling, cancelSent := false, false
	unknowns := 0
	fails := a.poll.Follow(fmt.Sprintf("madsci action %s (%s)", plan.name, id), "the node")
	delay := a.cfg.PollInterval
	lastStatus := ""
	for {
		st := res.Status
		if st != lastStatus {
			lastStatus = st
			job.Progress(0, map[string]any{"node_status": st, "action_id": id})
		}
		if st != StatusUnknown {
			unknowns = 0
		}
		switch st {
		case StatusSucceeded:
			if a.cfg.Result == ResultJSON {
				return res.JSONResult, nil
			}
			out := resultOf(res)
			// The action succeeded whatever happens to its files: a failed
			// download is reported in the result, never as the job's outcome.
			dctx, stop := context.WithTimeout(context.WithoutCancel(ctx), 4*a.cfg.RequestTimeout)
			local, err := a.fetchFiles(dctx, plan.name, res)
			stop()
			if err != nil {
				out["files_error"] = err.Error()
			} else if local != nil {
				out["local_files"] = local
			}
			return out, nil
		case StatusFailed:
			// A failed action may leave the node errored: read its status
			// now so the device state says so when the job ends.
			sctx, stop := context.WithTimeout(context.WithoutCancel(ctx), a.cfg.RequestTimeout)
			_, _ = a.readStatus(sctx)
			stop()
			return nil, binding.Failed(fmt.Errorf("madsci action %s (%s) failed: %s", plan.name, id, messages(res.Errors)),
				map[string]any{"node_errors": errorData(res.Errors), "action_id": id, "node_status": st})
		case StatusCancelled:
			return nil, binding.ErrCancelled
		case StatusNotReady:
			return nil, mhp.Errorf(mhp.CodeDeviceBusy, "madsci node was not ready; action %s (%s) never ran: %s", plan.name, id, messages(res.Errors)).
				With("outcome", mhp.OutcomeNotStarted).With("node_errors", errorData(res.Errors)).With("action_id", id)
		case StatusPaused:
			ns, err := a.readStatus(pollCtx)
			if err == nil && !ns.Running(id) {
				// The node ended the action paused: it will not continue.
				if cancelling {
					return nil, binding.ErrCancelled
				}
				why := "MADSci does not continue it"
				if ns.Paused {
					why += "; the node stays paused and refuses every later action (node.ready reads false) until safety/reset " +
						"sends the node's reset (its resume only clears the flag)"
				}
				return nil, binding.Failed(fmt.Errorf("madsci action %s (%s) ended paused and is no longer running; %s", plan.name, id, why),
					map[string]any{"node_status": st, "action_id": id, "node_errors": errorData(res.Errors), "node_paused": ns.Paused})
			}
		case StatusUnknown:
			unknowns++
			if unknowns >= a.cfg.UnknownPolls {
				return nil, fmt.Errorf("madsci action %s (%s): the node reported status unknown %d times: %s", plan.name, id, unknowns, messages(res.Errors))
			}
		case StatusRunning, StatusNotStarted:
		default:
			return nil, fmt.Errorf("madsci action %s (%s): the node reported status %q, which is not an action status", plan.name, id, st)
		}

		if ctx.Err() != nil && !cancelling {
			if !job.CancelRequested() {
				return nil, fmt.Errorf("madsci action %s (%s): no terminal state before the deadline (last status %s)", plan.name, id, st)
			}
			cancelling = true
			base := context.WithoutCancel(ctx)
			var deadline time.Time
			cancelSent = a.sendCancel(base, id)
			if cancelSent {
				deadline = time.Now().Add(a.cfg.CancelWait)
			} else if d, ok := ctx.Deadline(); ok {
				deadline = d
			} else {
				deadline = time.Now().Add(a.cfg.ActionTimeout)
			}
			var stop context.CancelFunc
			pollCtx, stop = context.WithDeadline(base, deadline)
			stops = append(stops, stop)
			job.Progress(0, map[string]any{"node_status": st, "action_id": id, "cancel_sent": cancelSent})
			delay = a.cfg.PollInterval
		}
		if err := a.poll.Sleep(pollCtx, delay); err != nil {
			if !cancelling {
				continue // ctx ended: handle the cancel or timeout at the top
			}
			return nil, a.lostTrack(plan, id, cancelling, cancelSent, st)
		}
		if ctx.Err() != nil && !cancelling {
			continue // handle the cancel or timeout before polling again
		}
		next, err := a.pollAction(pollCtx, plan.name, id)
		if err != nil {
			if pollCtx.Err() != nil {
				if !cancelling {
					continue
				}
				return nil, a.lostTrack(plan, id, cancelling, cancelSent, st)
			}
			// A 5xx is the node answering (a route raising, a proxy
			// failing), never "unreachable"; either way the poll policy
			// retries with back-off within its window.
			status := answeredStatus(err)
			wait, gerr := fails.Failed(status, err)
			if gerr != nil {
				if status == 0 {
					sctx, stop := context.WithTimeout(context.WithoutCancel(ctx), a.cfg.RequestTimeout)
					_, _ = a.readStatus(sctx) // a node that is gone marks the link down
					stop()
				}
				return nil, gerr
			}
			delay = wait
			continue
		}
		fails.OK()
		if delay = delay * 3 / 2; delay > a.cfg.PollMax || delay < a.cfg.PollInterval {
			delay = min(max(delay, a.cfg.PollInterval), a.cfg.PollMax)
		}
		res = next
	}
}

func (a *adapter) lostTrack(plan *actionPlan, id string, cancelling, cancelSent bool, st string) error {
	switch {
	case cancelSent:
		return fmt.Errorf("madsci action %s (%s): the node reported no end state within %v of the cancel (last status %s)", plan.name, id, a.cfg.CancelWait, st)
	case cancelling:
		return fmt.Errorf("madsci action %s (%s): cancel not sent (the node's cancel is node-wide or not implemented) and no terminal state before the deadline (last status %s)", plan.name, id, st)
	}
	return fmt.Errorf("madsci action %s (%s): no terminal state before the deadline (last status %s)", plan.name, id, st)
}

// pollAction reads the status, and the result once the status settles.
func (a *adapter) pollAction(ctx context.Context, action, id string) (*ActionResult, error) {
	st, err := a.acts.ActionStatus(ctx, action, id)
	if err != nil {
		return nil, err
	}
	if Terminal(st) || st == StatusPaused || st == StatusUnknown {
		return a.acts.ActionResult(ctx, action, id)
	}
	return &ActionResult{ActionID: id, Status: st}, nil
}

// sendCancel posts the node's cancel only when it is implemented and our
// action is the node's only running action (the command is node-wide).
func (a *adapter) sendCancel(ctx context.Context, id string) bool {
	if !a.info.Capabilities.Has(AdminCancel) {
		return false
	}
	cctx, cancel := context.WithTimeout(ctx, a.cfg.RequestTimeout)
	defer cancel()
	st, err := a.readStatus(cctx)
	if err != nil || !st.OnlyRunning(id) {
		return false
	}
	r, err := a.node.Admin(cctx, AdminCancel)
	return err == nil && r.Success
}

// nodeWide sends pause or resume for a job's action when it is the node's
// only running action.
func (a *adapter) nodeWide(ctx context.Context, job *binding.Job, cmd string) error {
	id := a.actionOf(job.ID())
	if id == "" {
		return mhp.Errorf(mhp.CodeDeviceBusy, "madsci: job %s has no running node action to %s", job.ID(), cmd)
	}
	st, err := a.readStatus(ctx)
	if err != nil {
		return mhp.Errorf(mhp.CodeServerError, "madsci: %s not sent: node /status: %v", cmd, err)
	}
	if cmd == AdminPause && !st.OnlyRunning(id) {
		return mhp.Errorf(mhp.CodeNotSupported, "madsci: %s not sent: the node's %s is node-wide and the node runs %d actions (%v)",
			cmd, cmd, len(st.RunningActions), st.RunningActions)
	}
	r, err := a.node.Admin(ctx, cmd)
	if err != nil {
		return fmt.Errorf("madsci: admin %s: %w", cmd, err)
	}
	if !r.Success {
		return mhp.Errorf(mhp.CodeServerError, "madsci node refused %s: %s", cmd, messages(r.Errors)).With("node_errors", errorData(r.Errors))
	}
	return nil
}

// sleepReal waits d in real time (the node runs in real time), or until ctx ends.
func sleepReal(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// answeredStatus is the HTTP status the node answered a failed request
// with (a rate limit still refused after its retries included); 0 when it
// gave no answer.
func answeredStatus(err error) int {
	var he *HTTPError
	if errors.As(err, &he) {
		return he.Status
	}
	var rl *RateLimitedError
	if errors.As(err, &rl) {
		return rl.Status
	}
	return 0
}
