package mqtt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
)

// pendingJob collects the replies of one running job. The message handler
// never blocks: it keeps the latest progress and the first terminal reply
// and pokes notify; Run drains progress before it looks at the terminal, so
// progress is always reported before the job ends.
type pendingJob struct {
	action   string
	mu       sync.Mutex
	progress *jobReply // latest, not yet reported
	terminal *jobReply // first terminal reply; later ones are duplicates
	notify   chan struct{}
}

type jobReply struct {
	kind     string // "", "done", "failed", "cancelled", "rejected"
	status   string
	progress *float64
	message  string
	errMsg   string
	doc      map[string]any
}

func (p *pendingJob) poke() {
	select {
	case p.notify <- struct{}{}:
	default:
	}
}

// take returns the pending progress (once) and the terminal reply.
func (p *pendingJob) take() (progress, terminal *jobReply) {
	p.mu.Lock()
	defer p.mu.Unlock()
	progress, p.progress = p.progress, nil
	return progress, p.terminal
}

// classify names the status of a reply for the action.
func classify(ac *ActionConfig, status string) string {
	st := ac.Statuses
	switch {
	case status == "":
		return ""
	case slices.Contains(st.Done, status):
		return "done"
	case slices.Contains(st.Failed, status):
		return "failed"
	case slices.Contains(st.Cancelled, status):
		return "cancelled"
	case slices.Contains(st.Rejected, status):
		return "rejected"
	}
	return "" // running, queued, anything else: progress only
}

func (a *adapter) onJobReply(ac *ActionConfig, m Message) {
	doc, err := decodeJSON(m.Payload)
	if err != nil {
		return
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return
	}
	id, _ := obj[ac.JobField].(string)
	a.mu.Lock()
	p, ok := a.jobs[id]
	a.mu.Unlock()
	if !ok || id == "" || p.action != ac.Name {
		return // not ours (another action shares the topic), or a late duplicate of a finished job
	}
	obj = plain(obj).(map[string]any)
	r := &jobReply{doc: obj}
	if st, ok := obj[ac.StatusField]; ok && st != nil {
		r.status = fmt.Sprint(st)
	}
	r.kind = classify(ac, r.status)
	if f, err := toFloat(obj[ac.ProgressField]); err == nil {
		f = max(0, min(1, f))
		r.progress = &f
	}
	if s, ok := obj[ac.MessageField].(string); ok {
		r.message = s
	}
	if e, ok := obj[ac.ErrorField]; ok && e != nil && e != "" {
		r.errMsg = fmt.Sprint(e)
	}
	p.mu.Lock()
	if r.kind != "" {
		if p.terminal == nil {
			p.terminal = r
		}
	} else if p.terminal == nil {
		if r.progress == nil && p.progress != nil {
			r.progress = p.progress.progress // coalesced: keep the fraction not yet reported
		}
		p.progress = r
	}
	p.mu.Unlock()
	p.poke()
}

// errLost is the unknown outcome of a job whose broker connection dropped.
var errLost = errors.New("broker connection lost mid-job: replies may have been missed, outcome unknown")

func (a *adapter) run(ctx context.Context, ac *ActionConfig, job *binding.Job) (any, error) {
	id := job.ID()
	what := fmt.Sprintf("action %s (job %s)", ac.Name, id)
	cmd := map[string]any{}
	for k, v := range job.Params() {
		cmd[k] = v
	}
	cmd[ac.JobField] = id
	payload, err := json.Marshal(cmd)
	if err != nil {
		return nil, mhp.Errorf(mhp.CodeInvalidValue, "%s: cannot encode params: %v", what, err)
	}
	p := &pendingJob{action: ac.Name, notify: make(chan struct{}, 1)}
	a.mu.Lock()
	a.jobs[id] = p
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		delete(a.jobs, id)
		a.mu.Unlock()
	}()

	st := a.c.State()
	changed := st.Changed
	if !st.Up {
		return nil, a.notSent(what, ErrNotConnected)
	}
	// The start command is published to its acknowledgement (bounded by the
	// connect timeout) even if a cancel or estop comes meanwhile: a publish
	// cut half way would leave the outcome unknown, while a delivered one is
	// cancelled below through the cancel topic, and the device says how it ended.
	if err := a.publish(context.WithoutCancel(ctx), ac.CommandTopic, a.cfg.QoS, payload); err != nil {
		if errors.Is(err, ErrNotConnected) {
			return nil, a.notSent(what, err)
		}
		return nil, fmt.Errorf("%s: %w (the broker may have it: outcome unknown)", what, err)
	}

	started := false // a reply arrived: the device took the job
	fraction := 0.0
	wait := ctx.Done()
	var cancelTimer *time.Timer
	var cancelDeadline <-chan time.Time
	defer func() {
		if cancelTimer != nil {
			cancelTimer.Stop()
		}
	}()
	for {
		progress, terminal := p.take()
		if progress != nil {
			started = true
			extra := map[string]any{}
			if progress.message != "" {
				extra["message"] = progress.message
			}
			if progress.status != "" {
				extra["status"] = progress.status
			}
			if progress.progress != nil {
				fraction = *progress.progress
			}
			if progress.progress != nil || len(extra) > 0 {
				job.Progress(fraction, extra) // a message without a fraction keeps the last one
			}
		}
		if terminal != nil {
			return a.finish(ac, what, terminal, started)
		}
		select {
		case <-p.notify:
		case <-changed:
			return nil, fmt.Errorf("%s: %w", what, errLost)
		case <-cancelDeadline:
			return nil, fmt.Errorf("%s: no terminal message on %s within %s of the cancel: outcome unknown", what, ac.ReplyTopic, ac.CancelTimeout)
		case <-wait:
			if !job.CancelRequested() {
				return nil, fmt.Errorf("%s: no terminal message on %s before the deadline (%v): outcome unknown", what, ac.ReplyTopic, ctx.Err())
			}
			// Cancel or estop: ask the device where it can be asked, then
			// keep listening; the job ends as the device reports.
			wait = nil
			cancelTimer = time.NewTimer(ac.CancelTimeout)
			cancelDeadline = cancelTimer.C
			if ac.CancelTopic != "" {
				body, _ := json.Marshal(map[string]any{ac.JobField: id})
				if err := a.publish(context.WithoutCancel(ctx), ac.CancelTopic, a.cfg.QoS, body); err != nil {
					a.log.Warn("mqtt: cancel not delivered", "action", ac.Name, "job", id, "err", err)
				}
			}
		}
	}
}

// finish maps a terminal reply onto the job's end.
func (a *adapter) finish(ac *ActionConfig, what string, r *jobReply, started bool) (any, error) {
	switch r.kind {
	case "done":
		if ac.ResultField != "" {
			v, _ := lookup(r.doc, ac.ResultField)
			return v, nil
		}
		res := map[string]any{}
		for k, v := range r.doc {
			if k != ac.JobField && k != ac.StatusField && k != ac.ProgressField {
				res[k] = v
			}
		}
		if len(res) == 0 {
			return nil, nil
		}
		return res, nil
	case "cancelled":
		return nil, binding.ErrCancelled
	case "rejected":
		if !started {
			return nil, mhp.Errorf(mhp.CodeServerError, "%s refused by the device: %s", what, orText(r)).
				With("status", r.status).With("reason", "device_refused")
		}
	}
	data := map[string]any{"status": r.status}
	if r.errMsg != "" {
		data["device_error"] = r.errMsg
	}
	return nil, binding.Failed(fmt.Errorf("%s: device reported %s", what, orText(r)), data)
}

func orText(r *jobReply) string {
	if r.errMsg != "" {
		return fmt.Sprintf("%q (status %s)", r.errMsg, r.status)
	}
	return "status " + r.status
}
