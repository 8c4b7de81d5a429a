package adapters

import (
	"context"
	"fmt"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/clock"
)

// PollRetry is the one policy the polling adapters (madsci, pylabrobot)
// follow when a poll of a running job fails, configured in each adapter's
// config file as
//
//	poll_retry: {backoff: 250ms, max_backoff: 5s, window: 2m}
//
// A failed poll is retried after Backoff, each further failure in a row
// doubling the wait up to MaxBackoff; the first poll that answers resets it.
// Polls may keep failing for Window, counted from the first failure in a
// row; the poll at the window's edge is the last, and when it fails too the
// job's outcome is given up as unknown (the job ends failed, outcome
// unknown, and the device latches fault: nobody knows what the backend
// did). A backend that answered an HTTP error status is reported as having
// answered it, never as unreachable; only a request that got no answer
// (refused, reset, timed out) is. What a poll's answer means (a 404 for a
// task a restarted backend forgot, a terminal status) stays the adapter's
// business, and cancel and estop keep their own deadlines.
//
// Zero fields take their defaults ([PollRetry.Defaults]); the zero value is
// the default policy.
type PollRetry struct {
	// Backoff is the wait before the first retry of a failed poll; each
	// further failure in a row doubles it. Default 250ms.
	Backoff time.Duration `yaml:"backoff,omitempty"`
	// MaxBackoff caps the wait between retries; default 5s.
	MaxBackoff time.Duration `yaml:"max_backoff,omitempty"`
	// Window is how long polls may keep failing, from the first failure in
	// a row, before the job's outcome is given up as unknown: long enough
	// for a backend process to restart or a proxy to recover. Default 2m.
	Window time.Duration `yaml:"window,omitempty"`
	// MaxFailures, when positive, also gives up after that many failed
	// polls in a row, whatever the window: what the deprecated
	// poll_failures key still means. Zero: only the window bounds retries.
	MaxFailures int `yaml:"-"`
	// Clock times the waits and the window; default the system clock. A
	// test passes a manual or stepping clock ([clock.Step]).
	Clock clock.Clock `yaml:"-"`
}

// DefaultPollRetry is the default policy: 250ms doubling to 5s, for 2m.
func DefaultPollRetry() PollRetry {
	return PollRetry{Backoff: 250 * time.Millisecond, MaxBackoff: 5 * time.Second, Window: 2 * time.Minute, Clock: clock.Real{}}
}

// Defaults returns p with every zero field at [DefaultPollRetry]'s value,
// and MaxBackoff raised to Backoff when it is below it.
func (p PollRetry) Defaults() PollRetry {
	d := DefaultPollRetry()
	if p.Backoff == 0 {
		p.Backoff = d.Backoff
	}
	if p.MaxBackoff == 0 {
		p.MaxBackoff = d.MaxBackoff
		if p.MaxBackoff < p.Backoff {
			p.MaxBackoff = p.Backoff
		}
	}
	if p.Window == 0 {
		p.Window = d.Window
	}
	if p.Clock == nil {
		p.Clock = d.Clock
	}
	return p
}

// Validate reports the first problem of p (after [PollRetry.Defaults]),
// naming the poll_retry key and why.
func (p PollRetry) Validate() error {
	p = p.Defaults()
	switch {
	case p.Backoff < 0:
		return fmt.Errorf("poll_retry.backoff must be positive, got %v", p.Backoff)
	case p.MaxBackoff < p.Backoff:
		return fmt.Errorf("poll_retry.max_backoff %v is below poll_retry.backoff %v", p.MaxBackoff, p.Backoff)
	case p.Window < 0:
		return fmt.Errorf("poll_retry.window must be positive, got %v", p.Window)
	case p.Window < p.Backoff:
		return fmt.Errorf("poll_retry.window %v is shorter than poll_retry.backoff %v: no poll would ever be retried", p.Window, p.Backoff)
	case p.MaxFailures < 0:
		return fmt.Errorf("poll_failures must be >= 1 when set, got %d", p.MaxFailures)
	}
	return nil
}

// DeprecatedPollFailures is the warning an adapter logs when its config
// still sets poll_failures (n polls in a row), which [PollRetry.MaxFailures]
// keeps honouring.
func DeprecatedPollFailures(n int) string {
	return fmt.Sprintf("poll_failures is deprecated: it counts polls, which with back-off says little about time; "+
		"set poll_retry.window (how long polls may keep failing, default 2m) instead. Still honoured: giving up after %d failed polls in a row", n)
}

// Sleep waits d on the policy's clock, or until ctx ends (its error).
func (p PollRetry) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil || d <= 0 {
		return err
	}
	clk := p.Clock
	if clk == nil {
		clk = clock.Real{}
	}
	fired := make(chan struct{})
	t := clk.AfterFunc(d, func() { close(fired) })
	select {
	case <-fired:
		return nil
	case <-ctx.Done():
		t.Stop()
		return ctx.Err()
	}
}

// Backoffs are the waits between the polls of a run of failures that
// lasts the whole window (at most 4,096 of them): what a job whose polls
// never recover waits before its outcome is given up as unknown.
func (p PollRetry) Backoffs() []time.Duration {
	p = p.Defaults()
	p.MaxFailures = 0
	p.Clock = clock.NewStep(time.Unix(0, 0))
	f := p.Follow("", "")
	var out []time.Duration
	for len(out) < 4096 {
		wait, err := f.Failed(0, nil)
		if err != nil {
			break
		}
		out = append(out, wait)
		_ = p.Sleep(context.Background(), wait)
	}
	return out
}

// Follow starts the failure record of one job's polls. what names the job
// in messages ("bridge task 3f2a (run)") and backend names who is polled
// ("the bridge").
func (p PollRetry) Follow(what, backend string) *PollFailures {
	return &PollFailures{p: p.Defaults(), what: what, backend: backend}
}

// PollFailures is the record of one job's failed polls under a
// [PollRetry]: how many failed in a row, since when, and how. It is not
// safe for concurrent use (one job's poll loop owns it).
type PollFailures struct {
	p             PollRetry
	what, backend string
	first         time.Time
	n             int
	answered      int // failures the backend answered with an HTTP error
	lastStatus    int
	lastErr       error
}

// OK records a poll the backend answered: the next failure starts a new
// window.
func (f *PollFailures) OK() { f.n, f.answered, f.lastStatus, f.lastErr = 0, 0, 0, nil }

// Failing is how many polls in a row have failed.
func (f *PollFailures) Failing() int { return f.n }

// Failed records a failed poll: status is the HTTP status the backend
// answered (0: no answer, the request was refused, reset or timed out) and
// err what the poll returned. It returns the wait before the next poll (the
// back-off, trimmed so that the last retry falls on the window's edge), or,
// once the window (or MaxFailures) is spent, the error that ends the job:
// an [*mhp.Error] DeviceFault with outcome unknown whose message says
// whether the backend answered an HTTP error (and which) or could not be
// reached, and for how long.
func (f *PollFailures) Failed(status int, err error) (time.Duration, error) {
	now := f.p.Clock.Now()
	if f.n == 0 {
		f.first = now
	}
	f.n++
	if status != 0 {
		f.answered++
		f.lastStatus = status
	}
	f.lastErr = err
	spent := now.Sub(f.first)
	if spent >= f.p.Window || (f.p.MaxFailures > 0 && f.n >= f.p.MaxFailures) {
		return 0, f.giveUp(spent)
	}
	wait := f.p.Backoff
	for i := 1; i < f.n && wait < f.p.MaxBackoff; i++ {
		wait *= 2
	}
	if wait > f.p.MaxBackoff {
		wait = f.p.MaxBackoff
	}
	if left := f.p.Window - spent; wait > left {
		wait = left
	}
	return wait, nil
}

func (f *PollFailures) giveUp(spent time.Duration) error {
	bound := fmt.Sprintf("for %v (poll_retry.window %v)", spent.Round(time.Millisecond), f.p.Window)
	if f.p.MaxFailures > 0 && f.n >= f.p.MaxFailures && spent < f.p.Window {
		bound = fmt.Sprintf("over %v (poll_failures %d)", spent.Round(time.Millisecond), f.p.MaxFailures)
	}
	var msg string
	switch {
	case f.answered == f.n:
		msg = fmt.Sprintf("%s: %s answered HTTP %d to %d polls in a row %s; giving up: %v",
			f.what, f.backend, f.lastStatus, f.n, bound, f.lastErr)
	case f.answered == 0:
		msg = fmt.Sprintf("%s: %s is unreachable: %d polls in a row got no answer %s; giving up: %v",
			f.what, f.backend, f.n, bound, f.lastErr)
	default:
		msg = fmt.Sprintf("%s: %d polls in a row failed %s: %s answered HTTP %d to %d of them and %d got no answer; giving up: %v",
			f.what, f.n, bound, f.backend, f.lastStatus, f.answered, f.n-f.answered, f.lastErr)
	}
	e := mhp.Errorf(mhp.CodeDeviceFault, "%s", msg).With(mhp.DataOutcome, mhp.OutcomeUnknown).
		With("poll_failures", f.n).With("poll_window", f.p.Window.String())
	if f.answered > 0 {
		e = e.With("http_status", f.lastStatus)
	}
	return e
}
