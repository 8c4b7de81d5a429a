package serial

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
)

// stopWait bounds how long a cancelled job waits for the instrument to
// confirm the work stopped.
const stopWait = 5 * time.Second

type actionPlan struct {
	cfg                     ActionConfig
	commands, cancel        []stepPlan
	reply                   *regexp.Regexp
	done, failed, cancelled *regexp.Regexp
}

func (a *adapter) action(ac ActionConfig) binding.Action {
	p := &actionPlan{cfg: ac}
	for _, s := range ac.Commands {
		p.commands = append(p.commands, compileStep(s))
	}
	for _, s := range ac.Cancel {
		p.cancel = append(p.cancel, compileStep(s))
	}
	if cp := ac.Completion; cp != nil {
		p.reply = regexp.MustCompile(cp.Reply)
		p.done = regexp.MustCompile(cp.Done)
		if cp.Failed != "" {
			p.failed = regexp.MustCompile(cp.Failed)
		}
		if cp.Cancelled != "" {
			p.cancelled = regexp.MustCompile(cp.Cancelled)
		}
	}
	spec := ac.Action
	spec.Cancellable = len(ac.Cancel) > 0
	if spec.Duration == "" {
		spec.Duration = mhp.DurationShort
		if ac.Completion != nil {
			spec.Duration = mhp.DurationLong
		}
	}
	return binding.Action{Spec: spec, Timeout: seconds(ac.TimeoutS),
		Run: func(ctx context.Context, job *binding.Job) (any, error) { return a.run(ctx, job, p) },
		Validate: func(params map[string]any) error {
			_, err := a.values(p, "", params)
			return err
		}}
}

// values are the placeholder texts of one job.
func (a *adapter) values(p *actionPlan, job string, params map[string]any) (map[string]string, error) {
	vals := map[string]string{"job": job}
	for _, prm := range p.cfg.Params {
		v, ok := params[prm.Name]
		if !ok || v == nil {
			continue
		}
		s, err := formatValue(v, nil, "", "")
		if err != nil {
			return nil, mhp.Errorf(mhp.CodeInvalidValue, "%s: %s: %v", p.cfg.Name, prm.Name, err).With("field", prm.Name)
		}
		vals[prm.Name] = s
	}
	return vals, nil
}

// sequence runs steps with the line held for the whole sequence (nothing
// else is interleaved). An error at the first step keeps its kind; a
// refusal later is a reported failure (the earlier steps took effect).
func (a *adapter) sequence(ctx context.Context, steps []stepPlan, vals map[string]string, what string) ([]string, error) {
	if err := a.line.acquire(ctx); err != nil {
		return nil, mhp.Errorf(mhp.CodeDeviceBusy, "%s: not sent: the serial line stayed busy: %v", what, err)
	}
	defer a.line.release()
	var replies []string
	for i, st := range steps {
		st.send = expand(st.send, vals)
		reply, err := a.step(ctx, st, what)
		if err != nil {
			if me, ok := mhp.AsError(err); ok && i > 0 {
				if me.Data["reason"] == "device_refused" {
					return replies, binding.Failed(err, map[string]any{"step": i, "command": st.send})
				}
				return replies, fmt.Errorf("%s: step %d %q not sent after %d sent: %v: outcome unknown", what, i, st.send, i, err)
			}
			return replies, err
		}
		replies = append(replies, reply)
	}
	return replies, nil
}

func (a *adapter) run(ctx context.Context, job *binding.Job, p *actionPlan) (any, error) {
	vals, err := a.values(p, job.ID(), job.Params())
	if err != nil {
		return nil, err
	}
	what := "actions/invoke " + p.cfg.Name
	replies, err := a.sequence(ctx, p.commands, vals, what)
	if err != nil {
		return nil, err
	}
	if p.cfg.Completion == nil {
		return map[string]any{"sent": len(replies), "replies": replies}, nil
	}
	status, err := a.poll(ctx, job, p, vals)
	if ctx.Err() == nil || !job.CancelRequested() {
		return status, err
	}
	// Cancelled or estopped: send the cancel (an estop sent its stop) and
	// learn from the instrument how the work ended.
	bctx, cancel := context.WithTimeout(context.Background(), stopWait)
	defer cancel()
	if len(p.cancel) > 0 {
		if err := a.cancelWork(bctx, p, vals, what); err != nil {
			return nil, err
		}
	}
	return a.poll(bctx, job, p, vals)
}

// cancelWork sends the cancel sequence; an estop that takes the line
// meanwhile only delays it (cancel commands are stops: sending one again
// is harmless).
func (a *adapter) cancelWork(ctx context.Context, p *actionPlan, vals map[string]string, what string) error {
	for {
		_, err := a.sequence(ctx, p.cancel, vals, what+" cancel")
		if err == nil {
			return nil
		}
		if !errors.Is(err, errInterrupted) && !isCode(err, mhp.CodeEStopActive) {
			return fmt.Errorf("%s: cancel: %w", what, err)
		}
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%s: cancel not sent: %v", what, err)
		}
	}
}

// poll asks the completion query until the work ended or ctx does.
func (a *adapter) poll(ctx context.Context, job *binding.Job, p *actionPlan, vals map[string]string) (any, error) {
	cp := p.cfg.Completion
	every := seconds(cp.IntervalS)
	if every <= 0 {
		every = time.Second
	}
	max := cp.MaxMisses
	if max <= 0 {
		max = 3
	}
	query := expand(cp.Query, vals)
	what := "actions/invoke " + p.cfg.Name
	misses := 0
	for {
		value, progress, result, err := a.completion(ctx, p, query)
		switch {
		case err == nil:
			misses = 0
			if progress >= 0 {
				job.Progress(progress, map[string]any{"status": value})
			}
			switch {
			case p.done.MatchString(value):
				if result != nil {
					return result, nil
				}
				return map[string]any{"status": value}, nil
			case p.failed != nil && p.failed.MatchString(value):
				return nil, binding.Failed(fmt.Errorf("the instrument reports %q", value), map[string]any{"status": value})
			case p.cancelled != nil && p.cancelled.MatchString(value):
				if job.CancelRequested() {
					return nil, binding.ErrCancelled
				}
				return nil, binding.Failed(fmt.Errorf("the instrument reports %q without a cancel from MHP", value), map[string]any{"status": value})
			}
		case ctx.Err() != nil:
			return nil, fmt.Errorf("%s: %v", what, context.Cause(ctx))
		case errors.Is(err, errInterrupted) || isCode(err, mhp.CodeEStopActive):
			// The estop has the line; ask again after it.
		default:
			misses++
			if misses >= max {
				return nil, fmt.Errorf("%s: completion %q unanswered %d times (%v): outcome unknown", what, query, misses, err)
			}
		}
		t := time.NewTimer(every)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%s: %v", what, context.Cause(ctx))
		}
	}
}

func isCode(err error, c mhp.Code) bool {
	me, ok := mhp.AsError(err)
	return ok && me.Code == c
}

// completion asks the query once: the captured value, the progress (-1
// when the reply has none) and the result (the `result` group, JSON or
// text; nil when the pattern has none).
func (a *adapter) completion(ctx context.Context, p *actionPlan, query string) (string, float64, any, error) {
	if err := a.line.acquire(ctx); err != nil {
		return "", -1, nil, err
	}
	defer a.line.release()
	reply, err := a.line.exchange(ctx, query, anyOf(p.reply), seconds(a.cfg.Timeouts.ReplyS))
	if err != nil {
		return "", -1, nil, err
	}
	m := p.reply.FindStringSubmatch(reply)
	value := m[p.reply.SubexpIndex("value")]
	progress := -1.0
	if i := p.reply.SubexpIndex("progress"); i >= 0 && m[i] != "" {
		if f, err := strconv.ParseFloat(m[i], 64); err == nil {
			if f > 1 {
				f /= 100
			}
			progress = f
		}
	}
	var result any
	if i := p.reply.SubexpIndex("result"); i >= 0 && m[i] != "" {
		if json.Unmarshal([]byte(m[i]), &result) != nil {
			result = m[i]
		}
	}
	return value, progress, result, nil
}
