package binding

import (
	"slices"

	"github.com/openmhp/mhp-go"
)

// ---- notifications ----

// listener is one function registered with Listen.
type listener struct {
	id int
	fn func(mhp.Notification)
}

// Listen implements [mhp.Device].
func (d *Driver) Listen(fn func(mhp.Notification)) func() {
	d.mu.Lock()
	id := d.nextListener
	d.nextListener++
	// The list is replaced, never modified, so a publish in flight keeps
	// its own; ids grow, so appending keeps registration order.
	d.listeners = append(slices.Clip(d.listeners), listener{id, fn})
	d.mu.Unlock()
	return func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if i := slices.IndexFunc(d.listeners, func(l listener) bool { return l.id == id }); i >= 0 {
			d.listeners = slices.Delete(slices.Clone(d.listeners), i, i+1)
		}
	}
}

// pending is a notification queued for delivery to the listeners of its time.
type pending struct {
	n   mhp.Notification
	fns []listener
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
	d.pubQueue = append(d.pubQueue, pending{mhp.Notification{Method: method, Params: params}, d.listeners})
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
			for _, l := range p.fns {
				l.fn(p.n)
			}
		}
		d.mu.Lock()
		locked = true
	}
}
