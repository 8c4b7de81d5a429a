package binding

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/openmhp/mhp-go"
)

// writeOp is one settings/write in progress: its context, its entry in the
// in-flight set and, once its hook is called, its backend call. It shares
// one allocation with the write's answer (writeCall).
//
// As a [context.Context] it carries the caller's values (the session, the
// identity) but never the caller's cancellation (a caller going away does
// not cut a write half way); it is cancelled by estop, by Close and by the
// write sweeper at the write's deadline. Err is one atomic load; the Done
// channel and the AfterFunc list are made only when asked for, and a
// context derived from it registers through AfterFunc (no goroutine per
// derived context).
type writeOp struct {
	parent context.Context

	// Guarded by Driver.mu.
	link      link[writeOp] // in Driver.writes
	deadline  time.Duration // on the driver's time line (Driver.since0)
	atBackend bool          // its hook was called and has not returned: a backend call
	cutOff    bool          // an estop latched while at the backend: the stop is re-asserted after it returns

	ended     bool        // guarded by mu (with wait); set after cancelled
	cancelled atomic.Bool // Err's answer
	mu        sync.Mutex
	wait      *opWaiters
}

// opWaiters are the writeOp's Done channel and AfterFunc functions, made
// when a hook first asks for either.
type opWaiters struct {
	done   chan struct{}
	afters []*afterFunc
}

// writeCall is a write's op and its answer in one allocation: the answer
// handed to the caller keeps the op alive, and nothing else of the op is
// reachable through it.
type writeCall struct {
	op  writeOp
	res mhp.WriteResult
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
	w := o.waitersLocked()
	if w.done == nil {
		w.done = make(chan struct{})
		if o.ended {
			close(w.done)
		}
	}
	return w.done
}

func (o *writeOp) waitersLocked() *opWaiters {
	if o.wait == nil {
		o.wait = &opWaiters{}
	}
	return o.wait
}

// Err implements [context.Context].
func (o *writeOp) Err() error {
	if o.cancelled.Load() {
		return context.Canceled
	}
	return nil
}

// Value implements [context.Context] with the caller's values.
func (o *writeOp) Value(key any) any { return o.parent.Value(key) }

// AfterFunc arranges for f to run once the write is cancelled (at once if
// it already is); stop unregisters it. The context package uses it for
// contexts derived from this one.
func (o *writeOp) AfterFunc(f func()) (stop func() bool) {
	a := &afterFunc{f: f}
	o.mu.Lock()
	if o.ended {
		o.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	w := o.waitersLocked()
	w.afters = append(w.afters, a)
	o.mu.Unlock()
	return func() bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		return unregisterAfter(&w.afters, a)
	}
}

// unregisterAfter removes a from the list of functions registered with
// an AfterFunc (under the lock guarding the list) and reports whether it
// was still there, that is, had not run.
func unregisterAfter(list *[]*afterFunc, a *afterFunc) bool {
	for i, x := range *list {
		if x == a {
			*list = append((*list)[:i], (*list)[i+1:]...)
			return true
		}
	}
	return false
}

// cancel ends the write's context; later calls do nothing. It may be
// called with Driver.mu held: the functions registered with AfterFunc run
// on their own goroutines.
func (o *writeOp) cancel() {
	if o.cancelled.Swap(true) {
		return
	}
	o.mu.Lock()
	o.ended = true
	var afters []*afterFunc
	if w := o.wait; w != nil {
		if w.done != nil {
			close(w.done)
		}
		afters, w.afters = w.afters, nil
	}
	o.mu.Unlock()
	for _, a := range afters {
		go a.f()
	}
}

func (o *writeOp) String() string { return "binding.writeContext" }

// linked is a list of the things in flight (writes, backend calls), linked
// through them (no map insert and delete per request). Guarded by
// Driver.mu.
type linked[T any, P interface {
	*T
	links() *link[T]
}] struct{ head *T }

// link is an item's place in a linked list.
type link[T any] struct{ prev, next *T }

func (l *linked[T, P]) add(o *T) {
	ln := P(o).links()
	ln.prev, ln.next = nil, l.head
	if l.head != nil {
		P(l.head).links().prev = o
	}
	l.head = o
}

func (l *linked[T, P]) remove(o *T) {
	ln := P(o).links()
	if ln.prev != nil {
		P(ln.prev).links().next = ln.next
	} else {
		l.head = ln.next
	}
	if ln.next != nil {
		P(ln.next).links().prev = ln.prev
	}
	ln.prev, ln.next = nil, nil
}

// writeList is the set of writes in flight.
type writeList = linked[writeOp, *writeOp]

func (o *writeOp) links() *link[writeOp] { return &o.link }

// inflight visits the writes in flight (range over d.inflight); mu is held.
// The visit may cancel them, not add or remove any.
func (d *Driver) inflight(yield func(int, *writeOp) bool) {
	i := 0
	for o := d.writes.head; o != nil; o = o.link.next {
		if !yield(i, o) {
			return
		}
		i++
	}
}

// ---- the request lock ----

// writeTurn is the request lock: one setting write talks to the backend at
// a time. It is taken and handed on inside the write's own locked steps
// (no channel operation of its own), and waiters get it in arrival order.
// Guarded by Driver.mu; the queue holds only callers waiting, each bounded
// by its context (Close by JobGrace).
type writeTurn struct {
	held  bool
	queue []*turnWaiter
}

// turnWaiter is one caller waiting for the turn: ready is closed when the
// turn is handed to it.
type turnWaiter struct{ ready chan struct{} }

// waitLocked queues a waiter for the held turn.
func (t *writeTurn) waitLocked() *turnWaiter {
	w := &turnWaiter{ready: make(chan struct{})}
	t.queue = append(t.queue, w)
	return w
}

// releaseLocked hands the turn to the first waiter, or frees it.
func (t *writeTurn) releaseLocked() {
	if len(t.queue) == 0 {
		t.held = false
		return
	}
	w := t.queue[0]
	t.queue[0] = nil
	t.queue = t.queue[1:]
	if len(t.queue) == 0 {
		t.queue = nil
	}
	close(w.ready) // held stays true: the turn is w's
}

// abandonLocked takes w out of the queue (its caller gave up); if the turn
// was handed to it meanwhile, it is handed on.
func (t *writeTurn) abandonLocked(w *turnWaiter) {
	for i, x := range t.queue {
		if x == w {
			t.queue = append(t.queue[:i], t.queue[i+1:]...)
			return
		}
	}
	t.releaseLocked()
}

// awaitTurn waits, bounded by stop, until no write holds the turn; it
// reports false when stop came first.
func (d *Driver) awaitTurn(stop <-chan time.Time) bool {
	d.mu.Lock()
	if !d.turn.held {
		d.mu.Unlock()
		return true
	}
	w := d.turn.waitLocked()
	d.mu.Unlock()
	select {
	case <-w.ready:
		d.locked(d.turn.releaseLocked)
		return true
	case <-stop:
		d.locked(func() { d.turn.abandonLocked(w) })
		return false
	}
}

// ---- the driver's time line ----

// reqNow is the time of a request, for intervals (the session's last
// request, the lease's expiry, the interlock window, the write's
// deadlines). On the real clock it is read from the monotonic clock alone,
// about half the cost of a time.Now: the driver's start plus the time
// since, so its wall reading may drift from the system's by a clock step,
// and nothing reports it as a wall time.
func (d *Driver) reqNow() time.Time {
	if d.realClock {
		return d.epoch.Add(time.Since(d.epoch))
	}
	return d.clk.Now()
}

// since0 is t on the driver's time line: the time since New.
func (d *Driver) since0(t time.Time) time.Duration { return t.Sub(d.epoch) }

// since is the time passed since start: on the real clock from the
// monotonic reading alone.
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

// armSweeperLocked arms the sweeper for at (both on the driver's time
// line). mu is held.
func (d *Driver) armSweeperLocked(at, now time.Duration) {
	if t, ok := d.sweeper.(*time.Timer); ok && d.realClock {
		t.Reset(at - now)
	} else {
		if d.sweeper != nil {
			d.sweeper.Stop()
		}
		d.sweeper = d.clk.AfterFunc(at-now, d.sweepFn)
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
	now := d.since0(d.now())
	next, found := time.Duration(0), false
	for _, w := range d.inflight {
		if now >= w.deadline {
			w.cancel()
			continue
		}
		if !found || w.deadline < next {
			next, found = w.deadline, true
		}
	}
	if found {
		d.armSweeperLocked(next, now)
	}
}
