package mcpbridge

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/client"
)

// defaultJobWait is mhp_job op=wait's wait without wait_s, in seconds.
const defaultJobWait = 30

// followUp bounds the calls made after a wait ends or a call is cancelled
// (the job's status, the forwarded cancel).
const followUp = 5 * time.Second

// wait waits up to secs for the job to end. When the wait ends first it
// answers the job's status and says it is still running. While it waits it
// answers the call's _meta.progressToken with notifications/progress from
// the job's progress. When the MCP client cancels the call
// (notifications/cancelled) and owns is set (this call started the job),
// the cancel is forwarded to the device as jobs/cancel.
func (b *Bridge) wait(ctx context.Context, req *mcp.CallToolRequest, d *client.Device, id string, secs float64, owns bool) (any, error) {
	if stop := progress(ctx, req, d, id); stop != nil {
		defer stop()
	}
	wctx, cancel := context.WithTimeout(ctx, time.Duration(secs*float64(time.Second)))
	defer cancel()
	lctx, dropped := context.WithCancelCause(wctx)
	defer dropped(nil)
	go watchLink(lctx, d, dropped)
	j, err := d.Wait(lctx, id)
	if err == nil {
		return map[string]any{"job": j}, nil
	}
	if cause := context.Cause(lctx); errors.Is(cause, errLinkDropped) && wctx.Err() == nil {
		return nil, mhp.Errorf(mhp.CodeServerError, "the link to the device dropped while waiting for job %s (%v): the job's state is unknown; "+
			"it may still be running on the device", id, cause).With(mhp.DataReason, ReasonLinkDropped).With("job", id).With(mhp.DataOutcome, mhp.OutcomeUnknown)
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		if owns {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), followUp)
			defer cancel()
			if cj, cerr := d.CancelJob(cctx, id); cerr == nil {
				return map[string]any{"job": cj, "note": "the call was cancelled; the job was asked to cancel"}, nil
			}
		}
		return nil, mhp.Errorf(mhp.CodeServerError, "the call was cancelled while waiting for job %s", id).With(mhp.DataReason, "cancelled").With("job", id)
	}
	if wctx.Err() == nil {
		return nil, err
	}
	// Still running: say so rather than fail.
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), followUp)
	defer scancel()
	cur, serr := d.Job(sctx, id)
	if serr != nil {
		return nil, serr
	}
	return map[string]any{"job": cur, "note": fmt.Sprintf("still %s after %gs; call mhp_job op=wait again", cur.State, secs)}, nil
}

// progress forwards the job's progress to the call's progress token, when
// the call has one; stop ends it.
func progress(ctx context.Context, req *mcp.CallToolRequest, d *client.Device, id string) (stop func()) {
	if req == nil || req.Session == nil || req.Params == nil {
		return nil
	}
	token := req.Params.GetProgressToken()
	if token == nil {
		return nil
	}
	latest := make(chan *mhp.Job, 1)
	unlisten := d.Listen(func(n mhp.Notification) {
		j := n.Job()
		if j == nil || j.ID != id {
			return
		}
		select { // keep only the newest
		case <-latest:
		default:
		}
		latest <- j
	})
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		last := -1.0
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case j := <-latest:
				p := j.Progress
				if p <= last { // progress must increase (MCP)
					continue
				}
				last = p
				msg := string(j.State)
				if m, ok := j.Extra["message"].(string); ok && m != "" {
					msg += ": " + mhp.Truncate(m, 200)
				}
				nctx, cancel := context.WithTimeout(ctx, followUp)
				_ = req.Session.NotifyProgress(nctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: p, Total: 1, Message: msg})
				cancel()
			}
		}
	}()
	return func() {
		unlisten()
		close(done)
		wg.Wait()
	}
}

func (b *Bridge) job(ctx context.Context, s *session, req *mcp.CallToolRequest, args map[string]any) (any, error) {
	d, err := s.gated(ctx, argString(args, "device"))
	if err != nil {
		return nil, err
	}
	id := argString(args, "id")
	op := argString(args, "op")
	if op == "" {
		op = "status"
	}
	if op != "list" && id == "" {
		return nil, mhp.Errorf(mhp.CodeInvalidParams, "mhp_job op=%s needs the job id", op).With(mhp.DataField, "id")
	}
	var j *mhp.Job
	switch op {
	case "status":
		j, err = d.Job(ctx, id)
	case "wait":
		// Waiting is not owning: cancelling a wait does not cancel the job.
		return b.wait(ctx, req, d, id, argFloat(args, "wait_s", defaultJobWait), false)
	case "cancel":
		j, err = d.CancelJob(ctx, id)
	case "pause":
		j, err = d.PauseJob(ctx, id)
	case "resume":
		j, err = d.ResumeJob(ctx, id)
	case "list":
		jobs, err := d.Jobs(ctx, mhp.JobsRequest{Limit: 20})
		if err != nil {
			return nil, err
		}
		return map[string]any{"jobs": jobs}, nil
	default:
		return nil, mhp.Errorf(mhp.CodeInvalidParams, "op %q is not one of status, wait, cancel, pause, resume, list", op).With(mhp.DataField, "op")
	}
	if err != nil {
		return nil, err
	}
	return map[string]any{"job": j}, nil
}

// estopOutcome is one device's answer to an estop-all, as the model reads it.
type estopOutcome struct {
	Status string           `json:"status"`
	OK     bool             `json:"ok"`
	Result *mhp.EStopResult `json:"result,omitempty"`
	Error  string           `json:"error,omitempty"`
	TookMS float64          `json:"took_ms"`
}

// estop is always served (no lease, no approval, no hardware gate), on a
// context the call's cancellation cannot cut short. Without a device it stops
// every device any MCP session of this bridge has connected.
func (b *Bridge) estop(ctx context.Context, s *session, _ *mcp.CallToolRequest, args map[string]any) (any, error) {
	reason := argString(args, "reason")
	ctx = context.WithoutCancel(ctx)
	if id := argString(args, "device"); id != "" {
		ectx, cancel := context.WithTimeout(ctx, b.estopTimeout())
		defer cancel()
		d, err := s.device(ectx, id)
		if err != nil {
			return nil, err
		}
		return d.EStop(ectx, reason)
	}
	lab := client.NewLab(nil, b.cfg.Client)
	seen := map[string]bool{}
	for _, ss := range b.allSessions() {
		for id, d := range ss.connected() {
			if !seen[id] {
				seen[id] = true
				_ = lab.Add(id, d)
			}
		}
	}
	ectx, cancel := context.WithTimeout(ctx, b.estopTimeout())
	defer cancel()
	outs := lab.EStopAll(ectx, reason)
	devs := make(map[string]estopOutcome, len(outs))
	names := make([]string, 0, len(outs))
	for id, o := range outs {
		e := estopOutcome{Status: o.Status, OK: o.OK, Result: o.Result, TookMS: float64(o.Took.Microseconds()) / 1000}
		if o.Err != nil {
			e.Error = mhp.Truncate(o.Err.Error(), 300)
		}
		devs[id] = e
		names = append(names, id)
	}
	sort.Strings(names)
	return map[string]any{"devices": devs, "stopped": len(names)}, nil
}

func (b *Bridge) estopTimeout() time.Duration {
	if t := b.cfg.Client.EStopTimeout; t > 0 {
		return t
	}
	return 5 * time.Second
}

// run runs a script on this session's lab (its devices behind the policy's
// hardware gate). The call's context reaches the script: a cancelled call
// (notifications/cancelled) stops it. A script that stops on an error
// (syntax, fail(), a budget, a refused call) is an isError result carrying
// what it printed.
func (b *Bridge) run(ctx context.Context, s *session, _ *mcp.CallToolRequest, args map[string]any) (any, error) {
	// The runner bounds the timeout (refused above its maximum, naming it),
	// the runs at once and each run's memory.
	timeout, err := b.runner.Timeout(argFloat(args, "timeout_s", 0), "timeout_s")
	if err != nil {
		return nil, err
	}
	src := argString(args, "script")
	if src == "" {
		return nil, mhp.Errorf(mhp.CodeInvalidParams, "mhp_run needs a script").With(mhp.DataField, "script")
	}
	res, err := b.runner.Run(ctx, src, s, timeout)
	if err != nil {
		return nil, err
	}
	if res.MHP != nil {
		return nil, res.MHP.With("output", res.Output).With("script_error", res.Error)
	}
	if res.Error != "" {
		return nil, mhp.Errorf(mhp.CodeServerError, "script stopped: %s", mhp.Truncate(res.Error, 1024)).
			With(mhp.DataReason, "script_error").With("output", res.Output).With("steps", res.Steps)
	}
	return res, nil
}

func (b *Bridge) lab(ctx context.Context, s *session, req *mcp.CallToolRequest, args map[string]any) (any, error) {
	op := argString(args, "op")
	if out, ok, err := b.fleetOp(ctx, req, op, args); ok {
		return out, err
	}
	if out, ok, err := b.onboardOp(ctx, req, op, args); ok {
		return out, err
	}
	switch op {
	case "list":
		conns := s.connected()
		names := make([]string, 0, len(conns))
		for n := range conns {
			names = append(names, n)
		}
		sort.Strings(names)
		out := make([]map[string]any, 0, len(names))
		for _, n := range names {
			d := conns[n]
			// simulated is the host's word (what the hardware gate reads), not the device's tags.
			entry := map[string]any{"device": n, "leased": d.HoldsLease(), "simulated": b.simulated(n)}
			pctx, cancel := context.WithTimeout(ctx, followUp)
			if p, err := d.Ping(pctx); err == nil {
				entry["state"] = p.State
			} else {
				entry["state"], entry["error"] = mhp.StateUnreachable, mhp.Truncate(err.Error(), 200)
			}
			cancel()
			out = append(out, entry)
		}
		res := map[string]any{"devices": out, "policy": b.policy}
		if b.cfg.Fleet != nil {
			fl, err := b.fleetList()
			if err != nil {
				return nil, err
			}
			res["fleet"] = fl
			if note := fleetNote(len(fl.([]map[string]any))); note != "" {
				res["note"] = note
			}
		}
		return res, nil
	case "updates":
		ups, more, dropped := s.takeUpdates(ResultBudget - 256 - fenceOverhead - len(DeviceTextNote))
		out := map[string]any{"updates": ups, "dropped": dropped, "more": more}
		if more > 0 {
			out["note"] = fmt.Sprintf("%d more buffered: call op=updates again", more)
		}
		return out, nil
	case "release": // giving a lease back is never refused by the policy
		d, err := s.device(ctx, argString(args, "device"))
		if err != nil {
			return nil, err
		}
		return map[string]bool{"released": true}, d.Release(ctx)
	case "reset":
		if !b.policy.OperatorTools {
			return nil, forbidden("operator_tools", "reset (a person's decision)")
		}
		d, err := s.device(ctx, argString(args, "device"))
		if err != nil {
			return nil, err
		}
		return d.Reset(ctx)
	}
	d, err := s.gated(ctx, argString(args, "device"))
	if err != nil {
		return nil, err
	}
	switch op {
	case "limits":
		return d.Limits(ctx)
	case "acquire":
		return d.Acquire(ctx, time.Duration(argFloat(args, "ttl_s", 60)*float64(time.Second)))
	}
	return nil, mhp.Errorf(mhp.CodeInvalidParams, "op %q is not one of list, updates, limits, acquire, release, reset", op).With(mhp.DataField, "op")
}
