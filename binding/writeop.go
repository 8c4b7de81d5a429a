package binding

import (
	"context"
	"sync"
	"time"
)

// writeOp is one settings/write in progress, in one allocation: its
// context, its entry in the in-flight set and its backend call.
//
// As a [context.Context] it carries the caller's values (the session, the
// identity) but never the caller's cancellation (a caller going away does
// not cut a write half way); it is cancelled by estop, by Close and by the
// write sweeper at the write's deadline. Its Done channel is made only when
// asked for, and a context derived from it registers through AfterFunc
// (no goroutine per derived context).
type writeOp struct {
	parent context.Context

	// Guarded by Driver.mu.
	prev, next *writeOp // in Driver.writes
	deadline   time.Time
	call       backendCall

	mu     sync.Mutex
	err    error
	done   chan struct{}
	afters []*afterFunc
}

// afterFunc is a function registered with writeOp.AfterFunc.
type afterFunc struct{ f func() }

// Deadline implements [context.Context]: the write's deadline is enforced
// by the sweeper (it cancels), not carried.
func (o *writeOp) Deadline() (time.Time, bool) { return time.Time{}, false }

// Done implements [context.Context].
func (o *writeOp) Done() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.done == nil {
		o.done = make(chan struct{})
		if o.err != nil {
			close(o.done)
		}
	}
	return o.done
}

// Err implements [context.Context].
func (o *writeOp) Err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

// Value implements [context.Context] with the caller's values.
func (o *writeOp) Value(key any) any { return o.parent.Value(key) }

// AfterFunc arranges for f to run once the write is cancelled (at once if
// it already is); stop unregisters it. The context package uses it for
// contexts derived from this one.
func (o *writeOp) AfterFunc(f func()) (stop func() bool) {
	a := &afterFunc{f: f}
	o.mu.Lock()
	if o.err != nil {
		o.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	o.afters = append(o.afters, a)
	o.mu.Unlock()
	return func() bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		for i, x := range o.afters {
			if x == a {
				o.afters = append(o.afters[:i], o.afters[i+1:]...)
				return true
			}
		}
		return false
	}
}

// cancel ends the write's context; later calls do nothing. It may be
// called with Driver.mu held: the functions registered with AfterFunc run
// on their own goroutines.
func (o *writeOp) cancel() {
	o.mu.Lock()
	if o.err != nil {
		o.mu.Unlock()
		return
	}
	o.err = context.Canceled
	if o.done != nil {
		close(o.done)
	}
	afters := o.afters
	o.afters = nil
	o.mu.Unlock()
	for _, a := range afters {
		go a.f()
	}
}

func (o *writeOp) String() string { return "binding.writeContext" }

// writeList is the set of writes in flight: a doubly linked list through
// the writeOps (no map insert and delete per write). Guarded by Driver.mu.
type writeList struct {
	head *writeOp
	n    int
}

func (l *writeList) add(o *writeOp) {
	o.prev, o.next = nil, l.head
	if l.head != nil {
		l.head.prev = o
	}
	l.head = o
	l.n++
}

func (l *writeList) remove(o *writeOp) {
	if o.prev != nil {
		o.prev.next = o.next
	} else {
		l.head = o.next
	}
	if o.next != nil {
		o.next.prev = o.prev
	}
	o.prev, o.next = nil, nil
	l.n--
}

// inflight visits the writes in flight (range over d.inflight); mu is held.
// The visit may cancel them, not add or remove any.
func (d *Driver) inflight(yield func(int, *writeOp) bool) {
	i := 0
	for o := d.writes.head; o != nil; o = o.next {
		if !yield(i, o) {
			return
		}
		i++
	}
}

// since is the time passed since start: on the real clock from the
// monotonic reading alone (half the cost of a Now).
func (d *Driver) since(start time.Time) time.Duration {
	if d.realClock {
		return time.Since(start)
	}
	return d.now().Sub(start)
}

// ---- the write sweeper ----
//
// One timer bounds every write in flight: it is armed for the earliest
// deadline and, when it fires, cancels the writes past theirs and re-arms
// for the next. On the real clock the timer is kept between writes (re-armed
// with Reset, and only when no earlier firing is due), so a quick write
// costs no timer of its own; on any other clock (a manual one in a test) it
// is stopped when no write is left, so the clock sees only the timers its
// device waits on.

// armSweeperLocked arms the sweeper for at. mu is held.
func (d *Driver) armSweeperLocked(at, now time.Time) {
	if t, ok := d.sweeper.(*time.Timer); ok && d.realClock {
		t.Reset(at.Sub(now))
	} else {
		if d.sweeper != nil {
			d.sweeper.Stop()
		}
		d.sweeper = d.clk.AfterFunc(at.Sub(now), d.sweepFn)
	}
	d.sweepArmed, d.sweepAt = true, at
}

// sweepWrites cancels the writes past their deadline and re-arms the
// sweeper for the earliest deadline left.
func (d *Driver) sweepWrites() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sweepArmed = false
	if !d.realClock {
		d.sweeper = nil
	}
	if d.closed {
		return
	}
	now := d.now()
	var next time.Time
	for _, w := range d.inflight {
		if !now.Before(w.deadline) {
			w.cancel()
			continue
		}
		if next.IsZero() || w.deadline.Before(next) {
			next = w.deadline
		}
	}
	if !next.IsZero() {
		d.armSweeperLocked(next, now)
	}
}
