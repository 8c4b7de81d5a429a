package binding

import (
	"context"
	"sync"
)

// Job is the running job as its action's Run sees it: the checked params, a
// way to report progress, and the cooperative pause/cancel checkpoint.
type Job struct {
	id     string
	action string
	params map[string]any
	d      *Driver

	mu              sync.Mutex
	cancelRequested bool
	paused          bool
	resumed         chan struct{} // closed on resume; replaced on pause
}

// ID is the job id ("job_" + 8 hex).
func (j *Job) ID() string { return j.id }

// Action is the action's name.
func (j *Job) Action() string { return j.action }

// Params are the checked, normalised parameters.
func (j *Job) Params() map[string]any { return j.params }

// Progress reports progress (0..1, clamped) and optional extras (eta_s,
// message, intermediate responses) and publishes notifications/jobs/progress.
func (j *Job) Progress(fraction float64, extra map[string]any) {
	j.d.jobProgress(j.id, fraction, extra)
}

// CancelRequested reports whether jobs/cancel or estop asked this job to stop.
func (j *Job) CancelRequested() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.cancelRequested
}

// Checkpoint blocks while the job is paused. It returns [ErrCancelled] if the
// job's context ended because of a cancel or estop, the context's cause for
// another end (a timeout: errors.Is(err, [context.DeadlineExceeded])), nil to
// go on. Simulated devices call it between steps.
func (j *Job) Checkpoint(ctx context.Context) error {
	for {
		if ctx.Err() != nil {
			if j.CancelRequested() {
				return ErrCancelled
			}
			return context.Cause(ctx)
		}
		j.mu.Lock()
		paused, ch := j.paused, j.resumed
		j.mu.Unlock()
		if !paused {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
		}
	}
}

func (j *Job) setPaused(p bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if p == j.paused {
		return
	}
	j.paused = p
	if p {
		j.resumed = make(chan struct{})
	} else if j.resumed != nil {
		close(j.resumed)
	}
}

func (j *Job) requestCancel() {
	j.mu.Lock()
	j.cancelRequested = true
	j.mu.Unlock()
}
