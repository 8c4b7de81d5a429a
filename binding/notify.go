package binding

import (
	"sort"

	"github.com/openmhp/mhp-go"
)

// ---- notifications ----

// Listen implements [mhp.Device].
func (d *Driver) Listen(fn func(mhp.Notification)) func() {
	d.mu.Lock()
	id := d.nextListener
	d.nextListener++
	d.listeners[id] = fn
	d.rebuildListenersLocked()
	d.mu.Unlock()
	return func() {
		d.mu.Lock()
		delete(d.listeners, id)
		d.rebuildListenersLocked()
		d.mu.Unlock()
	}
}

// rebuildListenersLocked refreshes the ordered listener list that
// publishing reads; the list is replaced, never modified, so a publish in
// flight keeps its own.
func (d *Driver) rebuildListenersLocked() {
	ids := make([]int, 0, len(d.listeners))
	for id := range d.listeners {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	fns := make([]func(mhp.Notification), len(ids))
	for i, id := range ids {
		fns[i] = d.listeners[id]
	}
	d.listenerList = fns
}

// pending is a notification queued for delivery to the listeners of its time.
type pending struct {
	n   mhp.Notification
	fns []func(mhp.Notification)
}

// publishLocked must be called with mu held; it releases mu. Notifications
// are queued under mu, so in the order the events happened, and delivered
// in that order by one goroutine at a time: the caller delivers unless
// another goroutine is delivering already, which then delivers this one
// too. Nobody waits for a listener while holding mu, so a listener may call
// the driver (State, Job, even a call that publishes) without deadlock.
func (d *Driver) publishLocked(method string, params map[string]any) {
	d.enqueueLocked(method, params)
	if d.draining {
		d.mu.Unlock()
		return
	}
	d.draining = true
	d.drainLocked()
}

// enqueueLocked queues a notification with mu held, stamped with the state
// and time of the event it reports, for the listeners of that moment. A
// locked section run by [Driver.locked] delivers what it queued once it has
// released mu.
func (d *Driver) enqueueLocked(method string, params map[string]any) {
	params["state"] = d.stateLocked()
	params["ts"] = mhp.UnixSeconds(d.now())
	d.pubQueue = append(d.pubQueue, pending{mhp.Notification{Method: method, Params: params}, d.listenerList})
}

// deliver delivers the queued notifications, unless another goroutine is
// delivering already (it then delivers these too). It is called without mu.
func (d *Driver) deliver() {
	d.mu.Lock()
	if d.draining || len(d.pubQueue) == 0 {
		d.mu.Unlock()
		return
	}
	d.draining = true
	d.drainLocked()
}

// drainLocked delivers the queue until it is empty; mu is held on entry and
// released on return, also when a listener panics.
func (d *Driver) drainLocked() {
	locked := true
	defer func() {
		if !locked {
			d.mu.Lock()
		}
		d.draining = false
		d.mu.Unlock()
	}()
	for len(d.pubQueue) > 0 {
		batch := d.pubQueue
		d.pubQueue = nil
		d.mu.Unlock()
		locked = false
		for _, p := range batch {
			for _, fn := range p.fns {
				fn(p.n)
			}
		}
		d.mu.Lock()
		locked = true
	}
}
