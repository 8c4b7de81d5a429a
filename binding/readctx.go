package binding

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/openmhp/mhp-go"
)

// readCtx is the context a signals/read gives its Read hooks: the caller's
// values and cancellation, and the read's deadline (InterlockTimeout from
// the start, on the real clock, as context.WithTimeout would give it).
//
// It costs no timer and no registration with the caller's context unless
// a hook asks to wait: Err compares the clock (and asks the caller's
// context), and only the first Done or AfterFunc (a hook that selects on
// it, or derives a context from it) arms a timer for the deadline and
// registers with the caller's context. A hook that reads a value in memory
// never waits, so it costs nothing of the kind. Once ended (deadline,
// caller's cancellation, or the read's end) it stays ended with the same
// error, and Done is closed before Err reports the end to anyone.
type readCtx struct {
	parent   context.Context
	deadline time.Time

	ended atomic.Bool // set once err is
	mu    sync.Mutex
	err   error         // guarded by mu
	done  chan struct{} // guarded by mu; made by the first Done or AfterFunc
	timer *time.Timer   // guarded by mu; armed with done
	stop  func() bool   // guarded by mu; unregisters from parent
	after []*afterFunc  // guarded by mu; run on their own goroutines at the end
}

// readCall is a read's context and its answer in one allocation.
type readCall struct {
	ctx readCtx
	res mhp.ReadResult
}

// readContext returns the context for the Read hooks of one read, bounded
// by timeout: ctx itself when its own deadline comes first (nothing to
// add, and nothing to end), else c started on ctx (end it when the read is
// done).
func readContext(ctx context.Context, c *readCtx, timeout time.Duration) (context.Context, bool) {
	deadline := time.Now().Add(timeout)
	if dl, ok := ctx.Deadline(); ok && !dl.After(deadline) {
		return ctx, false
	}
	c.parent, c.deadline = ctx, deadline
	return c, true
}

// Deadline implements [context.Context].
func (c *readCtx) Deadline() (time.Time, bool) { return c.deadline, true }

// Value implements [context.Context] with the caller's values.
func (c *readCtx) Value(key any) any { return c.parent.Value(key) }

// Err implements [context.Context]: the end's error once ended; else it
// ends the context when the caller's did or the deadline passed.
func (c *readCtx) Err() error {
	if c.ended.Load() {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.err
	}
	if err := c.parent.Err(); err != nil {
		c.end(err)
		return c.Err()
	}
	if !time.Now().Before(c.deadline) {
		c.end(context.DeadlineExceeded)
		return c.Err()
	}
	return nil
}

// Done implements [context.Context]. The first call arms the deadline's
// timer and registers with the caller's context.
func (c *readCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.watchLocked()
	return c.done
}

// AfterFunc arranges for f to run on its own goroutine once the context
// ends (at once if it has); stop unregisters it. The context package uses
// it for contexts derived from this one (no goroutine per derived context).
func (c *readCtx) AfterFunc(f func()) (stop func() bool) {
	a := &afterFunc{f: f}
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	c.watchLocked()
	c.after = append(c.after, a)
	c.mu.Unlock()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return unregisterAfter(&c.after, a)
	}
}

// watchLocked makes the Done channel and, unless the context has ended,
// arms the deadline's timer and registers with the caller's context. mu
// is held.
func (c *readCtx) watchLocked() {
	if c.done != nil {
		return
	}
	c.done = make(chan struct{})
	if c.err != nil {
		close(c.done)
		return
	}
	c.timer = time.AfterFunc(time.Until(c.deadline), func() { c.end(context.DeadlineExceeded) })
	c.stop = context.AfterFunc(c.parent, func() { c.end(c.parent.Err()) })
}

// end ends the context with err (the first end wins): Done closes, the
// timer and the registration with the caller's context are released, and
// the AfterFunc functions run.
func (c *readCtx) end(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	if c.done != nil {
		close(c.done)
		c.timer.Stop()
		c.stop()
	}
	after := c.after
	c.after = nil
	c.ended.Store(true)
	c.mu.Unlock()
	for _, a := range after {
		go a.f()
	}
}

func (c *readCtx) String() string { return "binding.readContext" }
