package binding

import (
	"github.com/openmhp/mhp-go"
)

// ---- backend link ----

// linkState is what the adapter last reported of its backend link (made
// by the first SetLink: an adapter that never calls it tracks no link).
type linkState struct {
	up    bool
	since float64
	err   string
}

// SetLink reports the state of the adapter's link to its backend. Adapters
// that reconnect call it when the link goes down (with the error) and when it
// comes back. Once called, ping and device/describe carry a "backend" object;
// while the link is down, signals read unavailable without calling their hooks
// and writes and invokes are refused at the state gate with
// data.outcome "not_started": nothing is sent to a backend that is not there.
// A link change never latches a fault by itself: a command that was in flight
// when the link dropped ends with its own outcome. A link that comes back
// while the device is in estop and its last stop command failed gets the
// stop sent again (bounded by StopTimeout; a reset waits for it), and a
// notifications/safety/estop with stopped:true once the backend took it.
func (d *Driver) SetLink(connected bool, err error) {
	d.mu.Lock()
	msg := ""
	if err != nil && !connected {
		msg = mhp.Truncate(err.Error(), 512)
	}
	if d.link != nil && d.link.up == connected && d.link.err == msg {
		d.mu.Unlock()
		return
	}
	changed := d.link == nil || d.link.up != connected
	if d.link == nil {
		d.link = &linkState{}
	}
	d.link.up = connected
	d.link.err = msg
	if changed {
		d.link.since = mhp.UnixSeconds(d.now())
	}
	var resend bool
	var done chan struct{}
	if changed && connected {
		resend, done = d.reassertOnLinkLocked()
	}
	if changed && len(d.listeners) > 0 {
		d.publishLocked(mhp.NotifyBackendLink, map[string]any{"backend": d.linkLocked()}) // releases mu
	} else {
		d.mu.Unlock()
	}
	if resend {
		go d.reassertStop(done)
	}
}

// Link returns the backend link as last reported by the adapter, or nil when
// the adapter does not track one.
func (d *Driver) Link() *mhp.BackendLink {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.linkLocked()
}

func (d *Driver) linkLocked() *mhp.BackendLink {
	if d.link == nil {
		return nil
	}
	return &mhp.BackendLink{Connected: d.link.up, Since: d.link.since, Error: d.link.err}
}

// linkDownLocked reports whether the adapter said its backend link is down.
func (d *Driver) linkDownLocked() bool { return d.link != nil && !d.link.up }

// linkErrLocked is the error the adapter reported with the link down.
func (d *Driver) linkErrLocked() string {
	if d.link == nil {
		return ""
	}
	return d.link.err
}

// linkGateLocked refuses actuation while the backend link is down; it runs
// with the state gate (gate 1), after estop and fault.
func (d *Driver) linkGateLocked() *mhp.Error {
	if !d.linkDownLocked() {
		return nil
	}
	why := d.link.err
	if why == "" {
		why = "link down"
	}
	return d.errorf(mhp.CodeServerError, "backend unavailable (%s): nothing was sent; retry when it is back", why).
		With(mhp.DataGate, mhp.GateState).With(mhp.DataReason, mhp.ReasonBackendUnavailable).With(mhp.DataOutcome, mhp.OutcomeNotStarted).
		With("backend", d.linkLocked())
}
