package script

import (
	"context"
	"time"

	"github.com/openmhp/mhp-go"
)

// Runner runs scripts for a host that takes them from elsewhere (the MCP
// bridge's mhp_run): at most Options.MaxRuns at once, each with the
// memory budget, and with a caller's timeout bounded by Options.MaxTimeout.
// A run ends with its context: cancel the request, and the script stops at
// its next step and in any wait.
type Runner struct {
	opts  Options
	slots chan struct{}
}

// NewRunner returns a runner with opts (zero fields take their defaults).
func NewRunner(opts Options) *Runner {
	opts = opts.withDefaults()
	return &Runner{opts: opts, slots: make(chan struct{}, opts.MaxRuns)}
}

// MaxTimeout is the longest time budget a run may have.
func (r *Runner) MaxTimeout() time.Duration { return r.opts.MaxTimeout }

// Active is how many runs are in progress.
func (r *Runner) Active() int { return len(r.slots) }

// Timeout converts a caller's timeout in seconds to the run's time budget:
// 0 means Options.Timeout; otherwise it must be finite, above 0 and at most
// Options.MaxTimeout, and is refused (InvalidParams, naming the bound and
// the field) when it is not.
func (r *Runner) Timeout(secs float64, field string) (time.Duration, error) {
	if secs == 0 {
		return min(r.opts.Timeout, r.opts.MaxTimeout), nil
	}
	d, err := seconds(field, secs, r.opts.MaxTimeout)
	if err != nil {
		return 0, mhp.Errorf(mhp.CodeInvalidParams, "%v (this host's maximum run time is %s)", err, r.opts.MaxTimeout).
			With(mhp.DataField, field).With(mhp.DataMax, r.opts.MaxTimeout.Seconds())
	}
	return d, nil
}

// Run runs src against lab with the given time budget (0: Options.Timeout),
// or refuses at once when MaxRuns runs are already in progress.
func (r *Runner) Run(ctx context.Context, src string, lab Lab, timeout time.Duration) (*Result, error) {
	select {
	case r.slots <- struct{}{}:
	default:
		return nil, mhp.Errorf(mhp.CodeServerError, "%d script runs are already in progress, this host's maximum (script.Options.MaxRuns): "+
			"wait for one to end", r.opts.MaxRuns).With(mhp.DataMax, r.opts.MaxRuns)
	}
	defer func() { <-r.slots }()
	opts := r.opts
	if timeout > 0 {
		opts.Timeout = min(timeout, opts.MaxTimeout)
	}
	return Run(ctx, src, lab, opts)
}
