package host

import (
	"context"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/directory"
)

// Instance names one run of a hosted device: the value Running returns
// for it stays the same while that device runs, and differs once it was
// removed or rebuilt (Reload, a failed device tried again). It is
// comparable; the zero Instance is "not running".
type Instance struct{ h *hosted }

// Running returns the in-process device of a target when it runs (built,
// started and guarded: the very instance Hosted and Dial hand the agent)
// and its Instance; nil and the zero Instance when it does not run. It
// never builds or starts a device (while one is being built it waits, at
// most the start timeout), so a caller that holds a device (a console) can
// tell whether it is still the fleet's.
func (f *Fleet) Running(target string) (Device, Instance) {
	f.mu.Lock()
	h := f.hosted[NormalizeTarget(target)]
	f.mu.Unlock()
	if h == nil {
		return nil, Instance{}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.dev == nil {
		return nil, Instance{}
	}
	return h.dev, Instance{h}
}

// DirectoryCard is the entry's card as the fleet's finder indexes it (its
// id, the location the person recorded, its target), for a caller that
// lists the fleet under targets of its own (a console's page URLs).
func (e Entry) DirectoryCard() directory.Card { return e.card() }

// Ping is the state of a fleet target as the fleet's finder pings it: a
// hosted device is started on first use, a remote one is dialed.
func (f *Fleet) Ping(ctx context.Context, target string) (mhp.DeviceState, error) {
	return f.ping(ctx, target)
}
