package binding

import (
	"context"
	"fmt"
	"time"

	"github.com/openmhp/mhp-go"
)

// ---- sessions, leases, watchdog ----

// touch records a request from the session: it feeds the watchdog and keeps
// the session alive.
func (d *Driver) touch(ctx context.Context) string {
	s, _ := d.touchAt(ctx)
	return s
}

// touchAt is touch that also returns the time it read, for callers that
// need the time of the request (on the driver's time line: reqNow).
func (d *Driver) touchAt(ctx context.Context) (string, time.Time) {
	s := mhp.SessionFrom(ctx)
	now := d.reqNow()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.touchLocked(s, now)
	return s, now
}

// touchLocked is touch for session s at time now; mu is held.
func (d *Driver) touchLocked(s string, now time.Time) {
	if s != "" {
		rec := d.sessions[s]
		if rec == nil {
			if d.sessions == nil {
				d.sessions = map[string]*sessionRec{}
			}
			rec = &sessionRec{}
			d.sessions[s] = rec
		}
		rec.lastSeen = now
		if d.lease != nil && d.lease.holder == s {
			d.lease.lastSeen = now
		}
	}
	if at := d.since0(now); at-d.lastSweep > d.cfg.SessionIdle/4 {
		d.lastSweep = at
		for id, rec := range d.sessions {
			// A session with subscriptions is kept until it unsubscribes or
			// ends (EndSession): it may only be listening, on an event stream
			// the transport keeps open, with no request for a long while.
			if now.Sub(rec.lastSeen) > d.cfg.SessionIdle && len(rec.subs) == 0 && (d.lease == nil || d.lease.holder != id) {
				delete(d.sessions, id)
			}
		}
	}
}

// leaseHolderLocked returns the current unexpired holder, dropping an expired lease.
func (d *Driver) leaseHolderLocked() string {
	if d.lease == nil {
		return ""
	}
	return d.leaseHolderAtLocked(d.now())
}

// leaseHolderAtLocked is leaseHolderLocked at a time the caller already read.
func (d *Driver) leaseHolderAtLocked(now time.Time) string {
	if d.lease == nil {
		return ""
	}
	if !now.Before(d.lease.expires) {
		l := d.lease
		d.dropLeaseLocked()
		if d.watchdog > 0 && !d.closed {
			// The request saw the expiry before the expiry timer fired: the
			// lease expired unreleased all the same, so the watchdog trips.
			d.tripLocked(fmt.Sprintf("lease of %s expired without release", l.holder))
		}
		return ""
	}
	return d.lease.holder
}

func (d *Driver) stopLeaseTimers() {
	if d.lease == nil {
		return
	}
	if d.lease.expiry != nil {
		d.lease.expiry.Stop()
	}
	if d.lease.wd != nil {
		d.lease.wd.Stop()
	}
}

// leaseGateLocked is gate 5 for session s at time now; it returns nil or NotLeased.
func (d *Driver) leaseGateLocked(s string, now time.Time) *mhp.Error {
	holder := d.leaseHolderAtLocked(now)
	if holder != "" && holder != s {
		return d.errorf(mhp.CodeNotLeased, "another session holds the lease").With(mhp.DataHolder, holder).With(mhp.DataGate, mhp.GateLease)
	}
	if d.watchdog > 0 && holder == "" {
		return d.errorf(mhp.CodeNotLeased, "this device has a %gs watchdog: acquire a lease (session/acquire) before operating it",
			d.desc.Safety.WatchdogS).With(mhp.DataReason, mhp.ReasonLeaseRequired).With(mhp.DataGate, mhp.GateLease)
	}
	return nil
}

// Acquire implements [mhp.Device]: session/acquire {ttl}.
func (d *Driver) Acquire(ctx context.Context, ttl time.Duration) (*mhp.Lease, error) {
	s := d.touch(ctx)
	if s == "" {
		return nil, d.errorf(mhp.CodeInvalidParams, "session/acquire needs a session: the caller has none")
	}
	if ttl == 0 {
		ttl = 60 * time.Second
	}
	if ttl < 0 || ttl > time.Hour {
		return nil, d.errorf(mhp.CodeInvalidParams, "ttl %gs is outside 0 < ttl <= 3600", ttl.Seconds()).With(mhp.DataField, "ttl")
	}
	d.mu.Lock()
	holder := d.leaseHolderLocked()
	d.mu.Unlock()
	if holder != "" && holder != s {
		return nil, d.errorf(mhp.CodeNotLeased, "another session holds the lease").With(mhp.DataHolder, holder)
	}
	if hook := d.cfg.Lease; hook != nil && holder != s {
		// The backend takes its own lock first (SiLA LockController, ...);
		// its refusal is the answer, and no lease is granted.
		hctx, cancel := context.WithTimeout(ctx, d.cfg.HookTimeout)
		err := hook(hctx, s, true)
		cancel()
		if err != nil {
			if me, ok := mhp.AsError(err); ok {
				return nil, d.adopt(me)
			}
			return nil, d.errorf(mhp.CodeNotLeased, "the backend refused the lock: %v", err).With(mhp.DataReason, mhp.ReasonBackendLock)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if holder := d.leaseHolderLocked(); holder != "" && holder != s {
		// Another session won the race while the backend locked for us.
		if hook := d.cfg.Lease; hook != nil {
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), d.cfg.HookTimeout)
				defer cancel()
				_ = hook(ctx, s, false)
			}()
		}
		return nil, d.errorf(mhp.CodeNotLeased, "another session holds the lease").With(mhp.DataHolder, holder)
	}
	now := d.now()
	d.stopLeaseTimers()
	d.lease = &leaseRec{holder: s, ttl: ttl, expires: now.Add(ttl), lastSeen: now}
	d.armLeaseLocked(d.lease)
	return d.leaseInfoLocked(), nil
}

// dropLeaseLocked ends the current lease and tells the backend's Lease
// hook (on its own goroutine, bounded by HookTimeout) that it is released.
func (d *Driver) dropLeaseLocked() {
	if d.lease == nil {
		return
	}
	holder := d.lease.holder
	d.stopLeaseTimers()
	d.lease = nil
	if hook := d.cfg.Lease; hook != nil {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), d.cfg.HookTimeout)
			defer cancel()
			if err := hook(ctx, holder, false); err != nil {
				d.cfg.Logger.Warn("lease hook: release failed", "device", d.cfg.Device.ID, "holder", holder, "err", err)
			}
		}()
	}
}

func (d *Driver) armLeaseLocked(l *leaseRec) {
	l.expiry = d.clk.AfterFunc(l.expires.Sub(d.now()), func() { d.checkLease(l) })
	if d.watchdog > 0 {
		l.wd = d.clk.AfterFunc(d.watchdog, func() { d.checkWatchdog(l) })
	}
}

func (d *Driver) leaseInfoLocked() *mhp.Lease {
	return &mhp.Lease{Holder: d.lease.holder, TTL: d.lease.ttl.Seconds(), Expires: mhp.UnixSeconds(d.lease.expires)}
}

// checkLease runs when a lease may have expired.
func (d *Driver) checkLease(l *leaseRec) {
	var trip bool
	var cancelled []string
	d.locked(func() {
		if d.lease != l || d.closed {
			return
		}
		if now := d.now(); now.Before(l.expires) {
			l.expiry = d.clk.AfterFunc(l.expires.Sub(now), func() { d.checkLease(l) })
			return
		}
		d.dropLeaseLocked()
		if trip = d.watchdog > 0; trip {
			cancelled = d.estopLocked()
		}
	})
	if trip {
		d.estopFinish(context.Background(), "watchdog", fmt.Sprintf("lease of %s expired without release", l.holder), cancelled)
	}
}

// checkWatchdog runs when the lease holder may have gone silent.
func (d *Driver) checkWatchdog(l *leaseRec) {
	var trip bool
	var silent time.Duration
	var cancelled []string
	d.locked(func() {
		if d.lease != l || d.closed {
			return
		}
		if silent = d.now().Sub(l.lastSeen); silent < d.watchdog {
			l.wd = d.clk.AfterFunc(d.watchdog-silent, func() { d.checkWatchdog(l) })
			return
		}
		d.dropLeaseLocked()
		cancelled, trip = d.estopLocked(), true
	})
	if trip {
		d.estopFinish(context.Background(), "watchdog",
			fmt.Sprintf("lease holder %s silent for %gs (watchdog %gs)", l.holder, silent.Seconds(), d.watchdog.Seconds()), cancelled)
	}
}

// tripLocked is the watchdog's estop from a request that found the lease
// expired: the device latches in estop before mu is released, and the stop
// hook and notification follow on their own goroutine.
func (d *Driver) tripLocked(reason string) {
	cancelled := d.estopLocked()
	go d.estopFinish(context.Background(), "watchdog", reason, cancelled)
}

// Renew implements [mhp.Device]: session/renew, holder only. A ttl in ctx
// ([mhp.WithRenewTTL], at most an hour) replaces the lease's ttl.
func (d *Driver) Renew(ctx context.Context) (*mhp.Lease, error) {
	ttl, withTTL := mhp.RenewTTLFrom(ctx)
	if withTTL && ttl > time.Hour {
		return nil, d.errorf(mhp.CodeInvalidParams, "ttl %gs is outside 0 < ttl <= 3600", ttl.Seconds()).With(mhp.DataField, "ttl")
	}
	s := d.touch(ctx)
	d.mu.Lock()
	defer d.mu.Unlock()
	holder := d.leaseHolderLocked()
	if holder == "" || holder != s {
		e := d.errorf(mhp.CodeNotLeased, "this session holds no lease to renew").With(mhp.DataReason, "lease_lost")
		if holder != "" {
			e = e.With(mhp.DataHolder, holder)
		}
		return nil, e
	}
	if withTTL {
		d.lease.ttl = ttl
	}
	d.lease.expires = d.now().Add(d.lease.ttl)
	return d.leaseInfoLocked(), nil
}

// Release implements [mhp.Device]: session/release.
func (d *Driver) Release(ctx context.Context) error {
	s := d.touch(ctx)
	d.mu.Lock()
	defer d.mu.Unlock()
	holder := d.leaseHolderLocked()
	if holder == "" {
		return nil
	}
	if holder != s {
		return d.errorf(mhp.CodeNotLeased, "another session holds the lease; only the holder may release it").With(mhp.DataHolder, holder)
	}
	d.dropLeaseLocked()
	return nil
}

// EndSession implements [mhp.Device]: the session's lease is released and its
// subscriptions dropped.
func (d *Driver) EndSession(ctx context.Context) {
	s := mhp.SessionFrom(ctx)
	if s == "" {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.lease != nil && d.lease.holder == s && d.watchdog == 0 {
		d.dropLeaseLocked()
	}
	// On a watchdog device the vanished holder keeps the lease: it is silent
	// from now on, so the watchdog fails safe when its window runs out (an
	// agent dying mid-protocol is what the watchdog is for). A client that
	// means to hand control back releases first.
	delete(d.sessions, s)
}

// Ping implements [mhp.Device]; it feeds the watchdog.
//
// The session's touch and the answer are one hold of mu.
func (d *Driver) Ping(ctx context.Context) (*mhp.PingResult, error) {
	sid := mhp.SessionFrom(ctx)
	now := d.reqNow()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.touchLocked(sid, now)
	return &mhp.PingResult{State: d.stateLocked(), TS: mhp.UnixSeconds(d.now()), Backend: d.linkLocked()}, nil
}
