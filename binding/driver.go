package binding

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"sync"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/clock"
)

// Driver is the BoundDriver: a complete mhp.Device made from bindings. It is
// safe for concurrent use. Build it with New, call Start, and Close it when done.
type Driver struct {
	cfg      Config
	clk      clock.Clock
	desc     mhp.Descriptor
	signals  map[string]*Signal
	settings map[string]*Setting
	actions  map[string]*Action
	watchdog time.Duration

	// writeSem is the request lock: one setting write talks to the backend at a time.
	writeSem chan struct{}

	mu           sync.Mutex
	estop        bool
	fault        bool
	faultReason  string
	latches      uint64 // counts estops and faults latched, so a reset sees one that came during its verify
	jobs         map[string]*jobRec
	finished     []string // finished job ids, oldest first
	jobSeq       uint64
	active       int
	activeExcl   int // active non-concurrent jobs
	lease        *leaseRec
	sessions     map[string]*sessionRec
	lastSweep    time.Time
	inflight     map[uint64]inflightWrite // writes in progress, cancelled by estop or their deadline
	inflightSeq  uint64
	sweeper      clock.Timer // armed while writes are in progress
	sweepAt      time.Time   // when sweeper fires
	listeners    map[int]func(mhp.Notification)
	listenerList []func(mhp.Notification) // listeners in registration order
	pubQueue     []pending                // notifications not yet delivered, in the order they happened
	draining     bool                     // a goroutine is delivering pubQueue
	nextListener int
	lastValues   map[string]any
	poller       clock.Timer
	pollCancel   context.CancelFunc // ends the poll in progress
	pollDone     chan struct{}      // closed when the poll in progress returns
	closed       bool
}

type jobRec struct {
	job     mhp.Job
	seq     uint64 // invoke order, for jobs/list
	handle  *Job
	ctx     context.Context // the Run context: ended by cancel, estop, timeout
	cancel  context.CancelFunc
	exclude bool // non-concurrent
	done    chan struct{}
}

type leaseRec struct {
	holder   string
	ttl      time.Duration
	expires  time.Time
	lastSeen time.Time
	expiry   clock.Timer
	wd       clock.Timer
}

// inflightWrite is a write talking to the backend.
type inflightWrite struct {
	cancel   context.CancelFunc
	deadline time.Time
}

// sweepWrites cancels writes past their HookTimeout. One timer serves every
// write: it is armed when a write starts and none is pending, and re-armed
// for the earliest deadline left, so a quick write costs no timer of its own.
func (d *Driver) sweepWrites() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sweeper = nil
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
		d.sweeper, d.sweepAt = d.clk.AfterFunc(next.Sub(now), d.sweepWrites), next
	}
}

type sessionRec struct {
	lastSeen time.Time
	subs     map[string]bool
}

// New validates cfg and builds the driver.
func New(cfg Config) (*Driver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	d := &Driver{
		cfg:        cfg,
		clk:        cfg.Clock,
		signals:    map[string]*Signal{},
		settings:   map[string]*Setting{},
		actions:    map[string]*Action{},
		writeSem:   make(chan struct{}, 1),
		jobs:       map[string]*jobRec{},
		sessions:   map[string]*sessionRec{},
		inflight:   map[uint64]inflightWrite{},
		listeners:  map[int]func(mhp.Notification){},
		lastValues: map[string]any{},
		watchdog:   time.Duration(cfg.Safety.WatchdogS * float64(time.Second)),
	}
	d.desc = mhp.Descriptor{
		MHP: mhp.ProtocolVersion, DeviceInfo: cfg.Device, Notes: cfg.Notes, Instructions: cfg.Instructions,
		Physical: cfg.Physical, Safety: cfg.Safety,
	}
	for i := range cfg.Signals {
		s := &cfg.Signals[i]
		d.signals[s.Spec.Name] = s
		d.desc.Signals = append(d.desc.Signals, s.Spec)
	}
	for i := range cfg.Settings {
		s := &cfg.Settings[i]
		s.shape = s.Spec.Shape()
		d.settings[s.Spec.Name] = s
		d.desc.Settings = append(d.desc.Settings, cloneSetting(s.Spec))
	}
	for i := range cfg.Actions {
		a := &cfg.Actions[i]
		d.actions[a.Spec.Name] = a
		d.desc.Actions = append(d.desc.Actions, cloneAction(a.Spec))
	}
	return d, nil
}

// Start runs the Setup hook (connect, read types, home), bounded by ctx.
func (d *Driver) Start(ctx context.Context) error {
	if d.cfg.Setup == nil {
		return nil
	}
	if err := d.cfg.Setup(ctx); err != nil {
		return fmt.Errorf("%s: setup: %w", d.cfg.Device.ID, err)
	}
	return nil
}

// Close cancels running jobs and writes in progress, stops polling, waits
// up to JobGrace for them to return (so a Run can still send its backend the
// cancel), then runs the Close hook.
func (d *Driver) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	var running []chan struct{}
	for _, r := range d.jobs {
		if !r.job.State.Terminal() {
			r.job.CancelRequested = true
			r.handle.requestCancel()
			r.cancel()
			running = append(running, r.done)
		}
	}
	if d.poller != nil {
		d.poller.Stop()
	}
	pollDone := d.pollDone
	if d.pollCancel != nil {
		d.pollCancel()
	}
	if d.sweeper != nil {
		d.sweeper.Stop()
	}
	for _, w := range d.inflight {
		w.cancel()
	}
	d.stopLeaseTimers()
	d.mu.Unlock()
	// Let the poll, the jobs and a write in progress return before the
	// backend closes, so a Run can still send the backend its cancel; all of
	// it bounded by JobGrace.
	t := time.NewTimer(d.cfg.JobGrace)
	defer t.Stop()
	if pollDone != nil {
		running = append(running, pollDone)
	}
	expired := false
	for _, ch := range running {
		if expired {
			break
		}
		select {
		case <-ch:
		case <-t.C:
			expired = true
		}
	}
	if !expired {
		select {
		case d.writeSem <- struct{}{}: // no write is talking to the backend
			<-d.writeSem
		case <-t.C:
			expired = true
		}
	}
	if expired {
		d.cfg.Logger.Warn("closing with work still running", "device", d.cfg.Device.ID, "waited", d.cfg.JobGrace)
	}
	if d.cfg.Close != nil {
		return d.cfg.Close()
	}
	return nil
}

// Descriptor returns a copy of the descriptor generated from the bindings;
// changing it changes neither the driver's descriptor nor its gates.
func (d *Driver) Descriptor() mhp.Descriptor {
	c := d.desc
	c.Signals = append([]mhp.Signal(nil), d.desc.Signals...)
	c.Settings = make([]mhp.Setting, len(d.desc.Settings))
	for i, s := range d.desc.Settings {
		c.Settings[i] = cloneSetting(s)
	}
	c.Actions = make([]mhp.Action, len(d.desc.Actions))
	for i, a := range d.desc.Actions {
		c.Actions[i] = cloneAction(a)
	}
	c.Safety.Interlocks = append([]string(nil), d.desc.Safety.Interlocks...)
	c.DeviceInfo.Tags = append([]string(nil), d.desc.Tags...)
	return c
}

// State returns the device state: estop, fault, busy or idle.
func (d *Driver) State() mhp.DeviceState {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stateLocked()
}

func (d *Driver) stateLocked() mhp.DeviceState {
	switch {
	case d.estop:
		return mhp.StateEStop
	case d.fault:
		return mhp.StateFault
	case d.active > 0:
		return mhp.StateBusy
	}
	return mhp.StateIdle
}

func (d *Driver) now() time.Time { return d.clk.Now() }

// errorf makes an *mhp.Error stamped with the driver's clock.
func (d *Driver) errorf(code mhp.Code, format string, args ...any) *mhp.Error {
	return mhp.Errorf(code, format, args...).At(d.now())
}

// stamp re-stamps an error the driver just made elsewhere (a shape check,
// mhp.Describe) with the driver's clock.
func (d *Driver) stamp(e *mhp.Error) *mhp.Error {
	e.TS = mhp.UnixSeconds(d.now())
	return e
}

// adopt returns a copy of an error a binding returned, stamped with the
// driver's clock: bindings may return one *mhp.Error value for every
// refusal, so it is never modified.
func (d *Driver) adopt(e *mhp.Error) *mhp.Error {
	c := *e
	if e.Data != nil {
		c.Data = make(map[string]any, len(e.Data)+1)
		for k, v := range e.Data {
			c.Data[k] = v
		}
	}
	c.TS = mhp.UnixSeconds(d.now())
	return &c
}

// ---- notifications ----

// Listen implements mhp.Device.
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
	params["state"] = d.stateLocked()
	params["ts"] = mhp.UnixSeconds(d.now())
	d.pubQueue = append(d.pubQueue, pending{mhp.Notification{Method: method, Params: params}, d.listenerList})
	if d.draining {
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

// ---- sessions, leases, watchdog ----

// touch records a request from the session: it feeds the watchdog and keeps
// the session alive.
func (d *Driver) touch(ctx context.Context) string {
	s, _ := d.touchAt(ctx)
	return s
}

// touchAt is touch that also returns the time it read, for callers that
// need the time of the request.
func (d *Driver) touchAt(ctx context.Context) (string, time.Time) {
	s := mhp.SessionFrom(ctx)
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	if s != "" {
		rec := d.sessions[s]
		if rec == nil {
			rec = &sessionRec{}
			d.sessions[s] = rec
		}
		rec.lastSeen = now
		if d.lease != nil && d.lease.holder == s {
			d.lease.lastSeen = now
		}
	}
	if now.Sub(d.lastSweep) > d.cfg.SessionIdle/4 {
		d.lastSweep = now
		for id, rec := range d.sessions {
			// A session with subscriptions is kept until it unsubscribes or
			// ends (EndSession): it may only be listening, on an event stream
			// the transport keeps open, with no request for a long while.
			if now.Sub(rec.lastSeen) > d.cfg.SessionIdle && len(rec.subs) == 0 && (d.lease == nil || d.lease.holder != id) {
				delete(d.sessions, id)
			}
		}
	}
	return s, now
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
		return d.errorf(mhp.CodeNotLeased, "another session holds the lease").With("holder", holder).With("gate", "lease")
	}
	if d.watchdog > 0 && holder == "" {
		return d.errorf(mhp.CodeNotLeased, "this device has a %gs watchdog: acquire a lease (session/acquire) before operating it",
			d.cfg.Safety.WatchdogS).With("reason", "lease_required").With("gate", "lease")
	}
	return nil
}

// Acquire implements mhp.Device: session/acquire {ttl}.
func (d *Driver) Acquire(ctx context.Context, ttl time.Duration) (*mhp.Lease, error) {
	s := d.touch(ctx)
	if s == "" {
		return nil, d.errorf(mhp.CodeInvalidParams, "session/acquire needs a session: the caller has none")
	}
	if ttl == 0 {
		ttl = 60 * time.Second
	}
	if ttl < 0 || ttl > time.Hour {
		return nil, d.errorf(mhp.CodeInvalidParams, "ttl %gs is outside 0 < ttl <= 3600", ttl.Seconds()).With("field", "ttl")
	}
	d.mu.Lock()
	holder := d.leaseHolderLocked()
	d.mu.Unlock()
	if holder != "" && holder != s {
		return nil, d.errorf(mhp.CodeNotLeased, "another session holds the lease").With("holder", holder)
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
			return nil, d.errorf(mhp.CodeNotLeased, "the backend refused the lock: %v", err).With("reason", "backend_lock")
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
		return nil, d.errorf(mhp.CodeNotLeased, "another session holds the lease").With("holder", holder)
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
	d.mu.Lock()
	if d.lease != l || d.closed {
		d.mu.Unlock()
		return
	}
	now := d.now()
	if now.Before(l.expires) {
		l.expiry = d.clk.AfterFunc(l.expires.Sub(now), func() { d.checkLease(l) })
		d.mu.Unlock()
		return
	}
	d.dropLeaseLocked()
	if d.watchdog == 0 {
		d.mu.Unlock()
		return
	}
	cancelled := d.estopLocked()
	d.mu.Unlock()
	d.estopFinish(context.Background(), "watchdog", fmt.Sprintf("lease of %s expired without release", l.holder), cancelled)
}

// checkWatchdog runs when the lease holder may have gone silent.
func (d *Driver) checkWatchdog(l *leaseRec) {
	d.mu.Lock()
	if d.lease != l || d.closed {
		d.mu.Unlock()
		return
	}
	now := d.now()
	silent := now.Sub(l.lastSeen)
	if silent < d.watchdog {
		l.wd = d.clk.AfterFunc(d.watchdog-silent, func() { d.checkWatchdog(l) })
		d.mu.Unlock()
		return
	}
	d.dropLeaseLocked()
	cancelled := d.estopLocked()
	d.mu.Unlock()
	d.estopFinish(context.Background(), "watchdog",
		fmt.Sprintf("lease holder %s silent for %gs (watchdog %gs)", l.holder, silent.Seconds(), d.watchdog.Seconds()), cancelled)
}

// tripLocked is the watchdog's estop from a request that found the lease
// expired: the device latches in estop before mu is released, and the stop
// hook and notification follow on their own goroutine.
func (d *Driver) tripLocked(reason string) {
	cancelled := d.estopLocked()
	go d.estopFinish(context.Background(), "watchdog", reason, cancelled)
}

// Renew implements mhp.Device: session/renew, holder only.
func (d *Driver) Renew(ctx context.Context) (*mhp.Lease, error) {
	s := d.touch(ctx)
	d.mu.Lock()
	defer d.mu.Unlock()
	holder := d.leaseHolderLocked()
	if holder == "" || holder != s {
		e := d.errorf(mhp.CodeNotLeased, "this session holds no lease to renew").With("reason", "lease_lost")
		if holder != "" {
			e.With("holder", holder)
		}
		return nil, e
	}
	d.lease.expires = d.now().Add(d.lease.ttl)
	return d.leaseInfoLocked(), nil
}

// Release implements mhp.Device: session/release.
func (d *Driver) Release(ctx context.Context) error {
	s := d.touch(ctx)
	d.mu.Lock()
	defer d.mu.Unlock()
	holder := d.leaseHolderLocked()
	if holder == "" {
		return nil
	}
	if holder != s {
		return d.errorf(mhp.CodeNotLeased, "another session holds the lease; only the holder may release it").With("holder", holder)
	}
	d.dropLeaseLocked()
	return nil
}

// EndSession implements mhp.Device: the session's lease is released and its
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

// Ping implements mhp.Device; it feeds the watchdog.
func (d *Driver) Ping(ctx context.Context) (*mhp.PingResult, error) {
	d.touch(ctx)
	d.mu.Lock()
	defer d.mu.Unlock()
	return &mhp.PingResult{State: d.stateLocked(), TS: mhp.UnixSeconds(d.now())}, nil
}

// ---- describe, read, subscribe ----

// Describe implements mhp.Device.
func (d *Driver) Describe(ctx context.Context, req mhp.DescribeRequest) (*mhp.Description, error) {
	d.touch(ctx)
	out, err := mhp.Describe(&d.desc, d.State(), req)
	if e, ok := mhp.AsError(err); ok {
		return nil, d.stamp(e)
	}
	return out, err
}

// Limits implements mhp.Device: safety/limits.
func (d *Driver) Limits(ctx context.Context) (*mhp.LimitsReport, error) {
	d.touch(ctx)
	r := &mhp.LimitsReport{Settings: map[string]mhp.SettingEnvelope{}, Actions: map[string]mhp.ActionEnvelope{},
		Interlocks: d.desc.Safety.Interlocks, WatchdogS: d.desc.Safety.WatchdogS, EStop: d.desc.Safety.EStop}
	for _, s := range d.desc.Settings {
		r.Settings[s.Name] = mhp.SettingEnvelope{Limits: s.Limits, Unit: s.Unit, Approval: s.Approval,
			Interlocks: s.Interlocks, DuringJob: s.DuringJob}
	}
	for _, a := range d.desc.Actions {
		env := mhp.ActionEnvelope{Approval: a.Approval, Interlocks: a.Interlocks}
		for _, p := range a.Params {
			if p.Shape != nil && !p.Shape.Limits.Empty() {
				if env.Limits == nil {
					env.Limits = map[string]*mhp.Limits{}
				}
				env.Limits[p.Name] = p.Shape.Limits
			}
		}
		r.Actions[a.Name] = env
	}
	return r, nil
}

// readSignal reads one signal under ctx, which carries the caller's
// deadline (Signal.Read must honour it). The value is checked finite so it
// can go on the wire.
func (d *Driver) readSignal(ctx context.Context, s *Signal) (Sample, error) {
	v, err := s.Read(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return Sample{}, Unavailable("no answer within the deadline: %v", err)
		}
		return Sample{}, err
	}
	if v.Value == nil {
		return Sample{}, Unavailable("no value")
	}
	if !finite(v.Value) {
		return Sample{}, Unavailable("non-finite value %v", v.Value)
	}
	return v, nil
}

// finite reports whether a signal value can go on the wire: not a NaN or
// ±Inf number.
func finite(v any) bool {
	switch x := v.(type) {
	case float64:
		return !math.IsNaN(x) && !math.IsInf(x, 0)
	case float32:
		return !math.IsNaN(float64(x)) && !math.IsInf(float64(x), 0)
	}
	return true
}

// Read implements mhp.Device: signals/read. Unreadable signals read null with a reason.
func (d *Driver) Read(ctx context.Context, names []string) (*mhp.ReadResult, error) {
	d.touch(ctx)
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if closed {
		return nil, d.errorf(mhp.CodeDeviceFault, "signals/read: the driver is closed (its backend is released)")
	}
	var list []*Signal
	if len(names) == 0 {
		for i := range d.cfg.Signals {
			list = append(list, &d.cfg.Signals[i])
		}
	} else {
		for _, n := range names {
			s, ok := d.signals[n]
			if !ok {
				return nil, d.errorf(mhp.CodeUnknownName, "no signal %q", n).With("kind", "signal").With("name", n)
			}
			list = append(list, s)
		}
	}
	out := &mhp.ReadResult{Values: make(map[string]any, len(list))}
	rctx, cancel := context.WithTimeout(ctx, d.cfg.InterlockTimeout)
	defer cancel()
	for _, s := range list {
		v, err := d.readSignal(rctx, s)
		if err != nil {
			out.Values[s.Spec.Name] = nil
			if out.Unavailable == nil {
				out.Unavailable = map[string]string{}
			}
			out.Unavailable[s.Spec.Name] = err.Error()
			continue
		}
		out.Values[s.Spec.Name] = v.Value
		if !v.Time.IsZero() {
			if out.Times == nil {
				out.Times = map[string]float64{}
			}
			out.Times[s.Spec.Name] = mhp.UnixSeconds(v.Time)
		}
	}
	out.TS = mhp.UnixSeconds(d.now())
	return out, nil
}

// Subscribe implements mhp.Device: signals/subscribe for this session.
func (d *Driver) Subscribe(ctx context.Context, names []string) (*mhp.SubscribeResult, error) {
	s := d.touch(ctx)
	if len(names) == 0 {
		for _, sig := range d.desc.Signals {
			names = append(names, sig.Name)
		}
	}
	for _, n := range names {
		if _, ok := d.signals[n]; !ok {
			return nil, d.errorf(mhp.CodeUnknownName, "no signal %q", n).With("kind", "signal").With("name", n)
		}
	}
	d.mu.Lock()
	rec := d.sessions[s]
	if rec == nil {
		rec = &sessionRec{lastSeen: d.now()}
		d.sessions[s] = rec
	}
	if rec.subs == nil {
		rec.subs = map[string]bool{}
	}
	for _, n := range names {
		rec.subs[n] = true
		delete(d.lastValues, n) // the next poll publishes the current value
	}
	if d.poller == nil && !d.closed {
		d.poller = d.clk.AfterFunc(0, d.poll)
	}
	d.mu.Unlock()
	return &mhp.SubscribeResult{Subscribed: names}, nil
}

// Unsubscribe implements mhp.Device.
func (d *Driver) Unsubscribe(ctx context.Context, names []string) error {
	s := d.touch(ctx)
	d.mu.Lock()
	defer d.mu.Unlock()
	rec := d.sessions[s]
	if rec == nil {
		return nil
	}
	if len(names) == 0 {
		rec.subs = nil
		return nil
	}
	for _, n := range names {
		delete(rec.subs, n)
	}
	return nil
}

// subscribedLocked lists the signals any session subscribed.
func (d *Driver) subscribedLocked() map[string]bool {
	out := map[string]bool{}
	for _, rec := range d.sessions {
		for n := range rec.subs {
			out[n] = true
		}
	}
	return out
}

// poll reads subscribed, non-pushed signals and publishes changes; it
// reschedules itself while anything is subscribed.
func (d *Driver) poll() {
	d.mu.Lock()
	names := make([]string, 0, 8)
	for n := range d.subscribedLocked() {
		if !d.signals[n].Pushed {
			names = append(names, n)
		}
	}
	if len(names) == 0 || d.closed {
		// Nothing to poll (pushed signals publish themselves): the next
		// Subscribe starts the poller again.
		d.poller = nil
		d.mu.Unlock()
		return
	}
	// Close cancels pctx and waits for done, so no poll reads the backend
	// once the Close hook runs.
	pctx, cancel := context.WithTimeout(context.Background(), d.cfg.InterlockTimeout)
	done := make(chan struct{})
	d.pollCancel, d.pollDone = cancel, done
	d.mu.Unlock()
	sort.Strings(names)
	for _, n := range names {
		if errors.Is(pctx.Err(), context.Canceled) { // closed
			break
		}
		v, err := d.readSignal(pctx, d.signals[n])
		var val any
		if err == nil {
			val = v.Value
		}
		d.offer(n, val, v.Time)
	}
	cancel()
	d.mu.Lock()
	d.pollCancel, d.pollDone = nil, nil
	if !d.closed {
		d.poller = d.clk.AfterFunc(d.cfg.PollInterval, d.poll)
	}
	d.mu.Unlock()
	close(done)
}

// offer publishes a signal value if it changed and someone subscribed.
func (d *Driver) offer(name string, value any, at time.Time) {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return
	}
	prev, seen := d.lastValues[name]
	if seen && reflect.DeepEqual(prev, value) {
		d.mu.Unlock()
		return
	}
	d.lastValues[name] = value
	if !d.subscribedLocked()[name] {
		d.mu.Unlock()
		return
	}
	p := map[string]any{"name": name, "value": value}
	if !at.IsZero() {
		p["time"] = mhp.UnixSeconds(at)
	}
	d.publishLocked(mhp.NotifySignalsUpdate, p)
}

// PublishSignal is how an adapter with a push source (an OPC UA subscription,
// a topic) reports a new sample; subscribers get notifications/signals/update.
func (d *Driver) PublishSignal(name string, s Sample) {
	if _, ok := d.signals[name]; !ok {
		return
	}
	if !finite(s.Value) { // as a read does: a NaN or ±Inf is no value (JSON cannot carry it)
		s.Value = nil
	}
	d.offer(name, s.Value, s.Time)
}

// ---- gates ----

type gateResult struct {
	notes *mhp.DryRunNotes
}

// stateGateLocked is gate 1.
func (d *Driver) stateGateLocked() *mhp.Error {
	if d.estop {
		return d.errorf(mhp.CodeEStopActive, "device is in estop; safety/reset is needed").With("gate", "state")
	}
	if d.fault {
		return d.errorf(mhp.CodeDeviceFault, "device is in fault (%s); safety/reset is needed", d.faultReason).
			With("gate", "state").With("reason", d.faultReason)
	}
	return nil
}

func (d *Driver) approvalGate(kind, name string, level mhp.Approval, approved, dry bool, notes *mhp.DryRunNotes) *mhp.Error {
	switch level {
	case mhp.ApprovalForbid:
		return d.errorf(mhp.CodeForbidden, "%s %q is forbidden through MHP", kind, name).With("approval", "forbid").With("gate", "approval")
	case mhp.ApprovalConfirm:
		if !approved {
			if dry {
				notes.NeedsApproval = true
				return nil
			}
			return d.errorf(mhp.CodeApprovalRequired, "%s %q requires a person's confirmation", kind, name).
				With("approval", "confirm").With("gate", "approval")
		}
	}
	return nil
}

// interlockGate is gate 3: every named signal read live must be exactly
// true, and the reads must all be done within InterlockTimeout of start
// (a value read too late is too old to act on).
func (d *Driver) interlockGate(ctx context.Context, locks []string, start time.Time) *mhp.Error {
	if len(locks) == 0 {
		return nil
	}
	for _, l := range locks {
		s := d.signals[l]
		v, err := d.readSignal(ctx, s)
		if err != nil {
			return d.errorf(mhp.CodeInterlockOpen, "interlock %s is open: unreadable (%v)", l, err).
				With("interlock", l).With("gate", "interlocks")
		}
		if b, ok := v.Value.(bool); !ok || !b {
			return d.errorf(mhp.CodeInterlockOpen, "interlock %s is open (reads %v)", l, v.Value).
				With("interlock", l).With("value", v.Value).With("gate", "interlocks")
		}
	}
	if took := d.now().Sub(start); took > d.cfg.InterlockTimeout {
		return d.errorf(mhp.CodeInterlockOpen, "interlocks %v are open: reading them took %s, longer than %s",
			locks, took, d.cfg.InterlockTimeout).With("interlock", locks[0]).With("gate", "interlocks")
	}
	return nil
}

// leaseAndBusyLocked are gates 5 and 6; in a dry run they become notes.
func (d *Driver) leaseAndBusyLocked(s string, now time.Time, busy bool, busyMsg func() string, dry bool, notes *mhp.DryRunNotes) *mhp.Error {
	if e := d.leaseGateLocked(s, now); e != nil {
		if !dry {
			return e
		}
		if h, ok := e.Data["holder"].(string); ok {
			notes.LeaseHeldBy = h
		} else {
			notes.NeedsLease = true
		}
	}
	if busy {
		if !dry {
			return d.errorf(mhp.CodeDeviceBusy, "%s", busyMsg()).With("gate", "busy")
		}
		notes.BusyNow = true
	}
	return nil
}

// ---- settings/write ----

// Write implements mhp.Device: settings/write through the six gates.
func (d *Driver) Write(ctx context.Context, req mhp.WriteRequest) (*mhp.WriteResult, error) {
	s, now := d.touchAt(ctx)
	set, ok := d.settings[req.Name]
	if !ok {
		return nil, d.errorf(mhp.CodeUnknownName, "no setting %q", req.Name).With("kind", "setting").With("name", req.Name)
	}
	if !req.DryRun {
		// The request lock: one write at a time reaches the backend.
		select {
		case d.writeSem <- struct{}{}:
		default:
			select {
			case d.writeSem <- struct{}{}:
			case <-ctx.Done():
				return nil, d.errorf(mhp.CodeDeviceBusy, "settings/write %s: gave up waiting for an earlier write: %v", req.Name, ctx.Err())
			}
			// It waited behind another write: the interlock window, the lease
			// check and the hook's deadline start now, not on arrival.
			now = d.now()
		}
		defer func() { <-d.writeSem }()
	}
	// One context, cancelled by the write sweeper at its deadline and by
	// estop, covers the live interlock reads (deadline InterlockTimeout) and
	// then the hook (HookTimeout). The caller going away does not cut a
	// write half way.
	hctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	d.mu.Lock()
	if e := d.stateGateLocked(); e != nil {
		d.mu.Unlock()
		return nil, e
	}
	if d.closed {
		d.mu.Unlock()
		return nil, d.errorf(mhp.CodeDeviceFault, "settings/write %s: driver is closed", req.Name)
	}
	d.inflightSeq++
	key := d.inflightSeq
	hookDeadline := now.Add(d.cfg.HookTimeout)
	first := hookDeadline
	if len(set.Spec.Interlocks) > 0 {
		first = now.Add(d.cfg.InterlockTimeout)
	}
	d.inflight[key] = inflightWrite{cancel: cancel, deadline: first}
	if d.sweeper == nil || first.Before(d.sweepAt) {
		if d.sweeper != nil {
			d.sweeper.Stop()
		}
		d.sweeper, d.sweepAt = d.clk.AfterFunc(first.Sub(now), d.sweepWrites), first
	}
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		delete(d.inflight, key)
		if len(d.inflight) == 0 && d.sweeper != nil {
			// Nothing left to bound: no timer outlives the writes (a manual
			// clock in a test sees only the timers its device waits on).
			d.sweeper.Stop()
			d.sweeper = nil
		}
		d.mu.Unlock()
	}()
	var notes mhp.DryRunNotes
	value, e := d.writeGates(hctx, s, now, set, req, &notes)
	if e != nil {
		return nil, e
	}
	if req.DryRun {
		res := &mhp.WriteResult{OK: true, Name: req.Name, Value: value, DryRun: true, WouldWrite: value}
		if !notes.Empty() {
			res.Notes = &notes
		}
		return res, nil
	}
	d.mu.Lock()
	if e := d.stateGateLocked(); e != nil { // estop may have come while the gates read interlocks
		d.mu.Unlock()
		return nil, e
	}
	if hctx.Err() != nil { // a deadline passed or Close came as the gates ended: nothing was sent
		d.mu.Unlock()
		if len(set.Spec.Interlocks) > 0 {
			return nil, d.errorf(mhp.CodeInterlockOpen, "interlocks %v are open: reading them took longer than %s",
				set.Spec.Interlocks, d.cfg.InterlockTimeout).With("interlock", set.Spec.Interlocks[0]).With("gate", "interlocks")
		}
		return nil, d.errorf(mhp.CodeServerError, "settings/write %s was cancelled before it was sent (driver closing or deadline passed)",
			req.Name).With("outcome", mhp.OutcomeNotStarted)
	}
	if len(set.Spec.Interlocks) > 0 {
		d.inflight[key] = inflightWrite{cancel: cancel, deadline: hookDeadline}
	}
	d.mu.Unlock()
	status, err := set.Write(hctx, value)
	if err != nil {
		if me, ok := mhp.AsError(err); ok && !me.OutcomeUnknown() {
			return nil, d.adopt(me)
		}
		reason := fmt.Sprintf("write %s=%v: outcome unknown: %v", req.Name, value, err)
		d.latchFault(reason)
		return nil, d.errorf(mhp.CodeDeviceFault, "%s", reason).With("outcome", mhp.OutcomeUnknown).With("name", req.Name)
	}
	res := &mhp.WriteResult{OK: true, Name: req.Name, Value: value, Applied: status == Applied, Status: mhp.WriteApplied}
	if status == Sent {
		res.Status = mhp.WriteSent
	}
	d.mu.Lock()
	if len(d.listeners) == 0 {
		d.mu.Unlock()
		return res, nil
	}
	d.publishLocked(mhp.NotifySettingsChanged, map[string]any{"name": req.Name, "value": value, "by": s, "applied": res.Applied})
	return res, nil
}

func (d *Driver) writeGates(ctx context.Context, s string, now time.Time, set *Setting, req mhp.WriteRequest, notes *mhp.DryRunNotes) (any, *mhp.Error) {
	d.mu.Lock()
	e := d.stateGateLocked()
	d.mu.Unlock()
	if e != nil {
		return nil, e
	}
	if e := d.approvalGate("setting", req.Name, set.Spec.Approval, req.Approved, req.DryRun, notes); e != nil {
		return nil, e
	}
	if e := d.interlockGate(ctx, set.Spec.Interlocks, now); e != nil {
		return nil, e
	}
	value, ce := set.shape.Check(req.Name, req.Value)
	if ce != nil {
		return nil, d.stamp(ce.With("gate", "limits"))
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	busy := d.active > 0 && !set.Spec.DuringJob
	if e := d.leaseAndBusyLocked(s, now, busy, func() string {
		return fmt.Sprintf("setting %q cannot be written while a job runs (during_job is false)", req.Name)
	}, req.DryRun, notes); e != nil {
		return nil, e
	}
	return value, nil
}

// ---- fault ----

// Fault latches the device in fault on the backend's own word (a node that
// reports itself errored, a PLC alarm): writes and invokes are refused until
// a verified safety/reset, and the fault hook runs once.
func (d *Driver) Fault(reason string) { d.latchFault(reason) }

// latchFault puts the device in fault and runs the fault hook once.
func (d *Driver) latchFault(reason string) {
	d.mu.Lock()
	already := d.fault
	d.fault = true
	d.latches++
	if !already {
		d.faultReason = reason
	}
	d.mu.Unlock()
	if !already {
		d.faultLatched(reason)
	}
}

// faultLatched publishes safety/fault and runs the fault hook once, after
// the fault flag was set.
func (d *Driver) faultLatched(reason string) {
	d.mu.Lock()
	d.publishLocked(mhp.NotifySafetyFault, map[string]any{"reason": reason})
	d.cfg.Logger.Warn("device fault", "device", d.cfg.Device.ID, "reason", reason)
	hook := d.cfg.OnFault
	if hook == nil && d.cfg.EStop != nil {
		hook = func(ctx context.Context, _ string) error { return d.cfg.EStop(ctx) }
	}
	if hook != nil {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), d.cfg.StopTimeout)
			defer cancel()
			if err := hook(ctx, reason); err != nil {
				d.cfg.Logger.Error("fault hook failed", "device", d.cfg.Device.ID, "err", err)
			}
		}()
	}
}

// ---- estop and reset ----

// EStop implements mhp.Device: safety/estop. It never waits behind a vendor
// call, cancels every job and runs the stop hook; if the hook fails the
// device stays in estop and the answer says stopped:false.
func (d *Driver) EStop(ctx context.Context, reason string) (*mhp.EStopResult, error) {
	s := d.touch(ctx)
	return d.estopAs(ctx, s, reason)
}

func (d *Driver) estopAs(ctx context.Context, by, reason string) (*mhp.EStopResult, error) {
	d.mu.Lock()
	cancelled := d.estopLocked()
	d.mu.Unlock()
	return d.estopFinish(ctx, by, reason, cancelled), nil
}

// estopLocked latches estop and cancels every active job and write in
// flight; it returns the cancelled job ids. mu is held.
func (d *Driver) estopLocked() []string {
	d.estop = true
	d.latches++
	var cancelled []string
	for id, r := range d.jobs {
		if !r.job.State.Terminal() {
			r.job.CancelRequested = true
			r.handle.requestCancel()
			r.cancel()
			cancelled = append(cancelled, id)
		}
	}
	sort.Strings(cancelled)
	for _, w := range d.inflight {
		w.cancel()
	}
	return cancelled
}

// estopFinish runs the stop hook after estopLocked and publishes safety/estop.
func (d *Driver) estopFinish(ctx context.Context, by, reason string, cancelled []string) *mhp.EStopResult {
	res := &mhp.EStopResult{State: mhp.StateEStop, Stopped: true, Cancelled: cancelled}
	if d.cfg.EStop == nil {
		res.Stopped = false
		res.StopError = "the device has no stop command: jobs were cancelled and the device latched in estop"
	} else {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.StopTimeout)
		err := d.cfg.EStop(sctx)
		cancel()
		if err != nil {
			res.Stopped = false
			res.StopError = err.Error()
			d.cfg.Logger.Error("estop hook failed", "device", d.cfg.Device.ID, "err", err)
		}
	}
	d.mu.Lock()
	p := map[string]any{"by": by, "reason": reason, "stopped": res.Stopped}
	if res.StopError != "" {
		p["stop_error"] = res.StopError
	}
	d.publishLocked(mhp.NotifySafetyEStop, p)
	return res
}

// Reset implements mhp.Device: safety/reset. It refuses while a job is
// active, is lease-gated, and verifies recovery before returning to idle.
func (d *Driver) Reset(ctx context.Context) (*mhp.ResetResult, error) {
	s := d.touch(ctx)
	d.mu.Lock()
	if holder := d.leaseHolderLocked(); holder != "" && holder != s {
		d.mu.Unlock()
		return nil, d.errorf(mhp.CodeNotLeased, "only the lease holder may reset").With("holder", holder)
	}
	if d.active > 0 {
		d.mu.Unlock()
		return nil, d.errorf(mhp.CodeDeviceBusy, "cannot reset while %d job(s) are still active", d.active)
	}
	latches := d.latches
	d.mu.Unlock()
	if err := d.verify(ctx); err != nil {
		return nil, d.errorf(mhp.CodeDeviceFault, "reset refused: recovery not verified: %v", err).With("verified", false)
	}
	d.mu.Lock()
	if d.active > 0 {
		d.mu.Unlock()
		return nil, d.errorf(mhp.CodeDeviceBusy, "cannot reset while %d job(s) are still active", d.active)
	}
	if d.latches != latches { // an estop or fault came while verifying: it stands
		if e := d.stateGateLocked(); e != nil {
			d.mu.Unlock()
			return nil, e.With("reason", "latched while the reset verified recovery")
		}
	}
	was := d.estop || d.fault
	d.estop, d.fault, d.faultReason = false, false, ""
	if !was {
		st := d.stateLocked()
		d.mu.Unlock()
		return &mhp.ResetResult{State: st, Verified: true}, nil
	}
	d.publishLocked(mhp.NotifySafetyReset, map[string]any{"by": s, "verified": true})
	return &mhp.ResetResult{State: d.State(), Verified: true}, nil
}

func (d *Driver) verify(ctx context.Context) error {
	if d.cfg.Verify != nil {
		vctx, cancel := context.WithTimeout(ctx, d.cfg.VerifyTimeout)
		defer cancel()
		return d.cfg.Verify(vctx)
	}
	vctx, cancel := context.WithTimeout(ctx, d.cfg.InterlockTimeout)
	defer cancel()
	for i := range d.cfg.Signals {
		s := &d.cfg.Signals[i]
		if _, err := d.readSignal(vctx, s); err != nil {
			return fmt.Errorf("signal %s unreadable: %w", s.Spec.Name, err)
		}
	}
	return nil
}

// ---- actions and jobs ----

// Invoke implements mhp.Device: actions/invoke through the six gates; the
// job is returned queued and runs in its own goroutine.
func (d *Driver) Invoke(ctx context.Context, req mhp.InvokeRequest) (*mhp.InvokeResult, error) {
	s, now := d.touchAt(ctx)
	act, ok := d.actions[req.Name]
	if !ok {
		return nil, d.errorf(mhp.CodeUnknownName, "no action %q", req.Name).With("kind", "action").With("name", req.Name)
	}
	notes := &mhp.DryRunNotes{}
	d.mu.Lock()
	e := d.stateGateLocked()
	d.mu.Unlock()
	if e != nil {
		return nil, e
	}
	if e := d.approvalGate("action", req.Name, act.Spec.Approval, req.Approved, req.DryRun, notes); e != nil {
		return nil, e
	}
	if len(act.Spec.Interlocks) > 0 {
		ictx, cancel := context.WithTimeout(ctx, d.cfg.InterlockTimeout)
		e := d.interlockGate(ictx, act.Spec.Interlocks, now)
		cancel()
		if e != nil {
			return nil, e
		}
	}
	params, ce := act.Spec.Params.Check(req.Name, req.Params)
	if ce != nil {
		return nil, d.stamp(ce.With("gate", "limits"))
	}
	if act.Validate != nil {
		if err := act.Validate(params); err != nil {
			if me, ok := mhp.AsError(err); ok {
				return nil, d.adopt(me)
			}
			return nil, d.errorf(mhp.CodeInvalidValue, "%s: %v", req.Name, err).With("gate", "limits")
		}
	}
	d.mu.Lock()
	busy := d.active > 0 && !act.Spec.Concurrent
	if e := d.leaseAndBusyLocked(s, now, busy, func() string {
		return fmt.Sprintf("action %q is not concurrent and %d job(s) are active", req.Name, d.active)
	}, req.DryRun, notes); e != nil {
		d.mu.Unlock()
		return nil, e
	}
	if req.DryRun {
		d.mu.Unlock()
		res := &mhp.InvokeResult{DryRun: true, WouldRun: params}
		if !notes.Empty() {
			res.Notes = notes
		}
		return res, nil
	}
	// Re-check state atomically with registering the job.
	if e := d.stateGateLocked(); e != nil {
		d.mu.Unlock()
		return nil, e
	}
	if d.closed {
		d.mu.Unlock()
		return nil, d.errorf(mhp.CodeDeviceFault, "driver is closed")
	}
	timeout := act.Timeout
	if timeout <= 0 {
		timeout = d.cfg.JobTimeout
	}
	// The deadline is on the system clock: bindings read it with ctx.Deadline.
	jctx, cancel := context.WithTimeout(context.Background(), timeout)
	id := d.newJobIDLocked()
	h := &Job{id: id, action: req.Name, params: copyValue(params).(map[string]any), d: d}
	r := &jobRec{
		job: mhp.Job{ID: id, Action: req.Name, Params: params, Owner: s, State: mhp.JobQueued,
			Started: mhp.UnixSeconds(d.now())},
		handle: h, ctx: jctx, cancel: cancel, exclude: !act.Spec.Concurrent, done: make(chan struct{}),
	}
	d.jobSeq++
	r.seq = d.jobSeq
	d.jobs[id] = r
	d.active++
	snapshot := r.job
	d.mu.Unlock()
	go d.runJob(jctx, r, act)
	return &mhp.InvokeResult{Job: &snapshot}, nil
}

func (d *Driver) newJobIDLocked() string {
	var b [4]byte
	for {
		_, _ = rand.Read(b[:])
		id := "job_" + hex.EncodeToString(b[:])
		if _, taken := d.jobs[id]; !taken {
			return id
		}
	}
}

type runResult struct {
	result any
	err    error
}

func (d *Driver) runJob(ctx context.Context, r *jobRec, act *Action) {
	defer r.cancel()
	deadline, _ := ctx.Deadline()
	d.mu.Lock()
	if ctx.Err() != nil && (d.estop || d.closed) { // estopped or closed before it started
		d.mu.Unlock()
		d.finishJob(r, act, d.notStarted(ctx, r, act))
		return
	}
	r.job.State = mhp.JobRunning
	snap := r.job
	d.publishLocked(mhp.NotifyJobsStarted, map[string]any{"job": snap})
	d.mu.Lock()
	halted := ctx.Err() != nil && (d.estop || d.closed)
	d.mu.Unlock()
	if halted { // an estop came while jobs/started was published: Run is not called
		d.finishJob(r, act, d.notStarted(ctx, r, act))
		return
	}

	ch := make(chan runResult, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				ch <- runResult{err: fmt.Errorf("panic in action %s: %v", act.Spec.Name, p)}
			}
		}()
		res, err := act.Run(ctx, r.handle)
		ch <- runResult{res, err}
	}()
	var out runResult
	select {
	case out = <-ch:
	case <-ctx.Done():
		// Cancelled, estopped or timed out: the backend gets its say. After a
		// plain cancel the work may legitimately run to completion, so the
		// wait lasts until the job's own deadline; after a timeout or an estop
		// the binding has JobGrace to report the end state.
		wait := d.cfg.JobGrace
		if r.handle.CancelRequested() && !d.isEStop() && errors.Is(context.Cause(ctx), context.Canceled) {
			// The context's deadline is on the system clock (bindings read it
			// with ctx.Deadline), so its remaining time is measured there,
			// whatever the driver's clock says.
			if left := time.Until(deadline); left > 0 {
				wait += left
			}
		}
		grace := make(chan struct{})
		t := d.clk.AfterFunc(wait, func() { close(grace) })
		select {
		case out = <-ch:
			t.Stop()
		case <-grace:
			out = runResult{err: fmt.Errorf("action %s did not return within %s after its context ended (%v): abandoned",
				act.Spec.Name, wait, context.Cause(ctx))}
		}
	}
	d.finishJob(r, act, out)
}

// notStarted is the end of a job stopped by estop or Close before Run was
// called: nothing reached the backend, so the cancel is honoured as is. (A
// plain jobs/cancel before the start still calls Run, whose binding decides.)
func (d *Driver) notStarted(ctx context.Context, r *jobRec, act *Action) runResult {
	if r.handle.CancelRequested() {
		return runResult{err: ErrCancelled}
	}
	return runResult{err: mhp.Errorf(mhp.CodeServerError, "action %s did not start: %v", act.Spec.Name, context.Cause(ctx))}
}

func (d *Driver) isEStop() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.estop
}

// finishJob records the terminal state the binding reported and publishes it
// together with the device state.
func (d *Driver) finishJob(r *jobRec, act *Action, out runResult) {
	var faultReason string
	d.mu.Lock()
	j := &r.job
	j.Finished = mhp.UnixSeconds(d.now())
	j.Paused = false
	var failed *FailedError
	switch {
	case out.err == nil:
		j.State, j.Result, j.Progress = mhp.JobDone, out.result, 1
	case errors.Is(out.err, ErrCancelled):
		j.State = mhp.JobCancelled
		j.Result = out.result
	case errors.As(out.err, &failed):
		j.State, j.Outcome = mhp.JobFailed, mhp.OutcomeFailed
		j.Error = d.errorf(mhp.CodeServerError, "%s failed: %v", j.Action, failed.Err)
		for k, v := range failed.Data {
			j.Error.With(k, v)
		}
		j.Error.With("outcome", mhp.OutcomeFailed)
		if act.FaultOnFailure {
			faultReason = fmt.Sprintf("job %s (%s) failed: %v", j.ID, j.Action, failed.Err)
		}
	default:
		if me, ok := mhp.AsError(out.err); ok && !me.OutcomeUnknown() {
			j.State, j.Outcome, j.Error = mhp.JobFailed, mhp.OutcomeNotStarted, d.adopt(me)
			j.Error.With("outcome", mhp.OutcomeNotStarted)
			break
		}
		j.State, j.Outcome = mhp.JobFailed, mhp.OutcomeUnknown
		j.Error = d.errorf(mhp.CodeDeviceFault, "%s: outcome unknown: %v", j.Action, out.err).With("outcome", mhp.OutcomeUnknown)
		faultReason = fmt.Sprintf("job %s (%s): outcome unknown: %v", j.ID, j.Action, out.err)
	}
	d.active--
	d.finished = append(d.finished, j.ID)
	for len(d.finished) > d.cfg.KeepJobs {
		delete(d.jobs, d.finished[0])
		d.finished = d.finished[1:]
	}
	if faultReason != "" && !d.fault {
		// Latch before publishing so jobs/finished carries state "fault".
		d.fault = true
		d.latches++
		d.faultReason = faultReason
	} else {
		faultReason = ""
	}
	snap := r.job
	close(r.done)
	d.publishLocked(mhp.NotifyJobsFinished, map[string]any{"job": snap})
	if faultReason != "" {
		d.faultLatched(faultReason)
	}
}

func (d *Driver) jobProgress(id string, fraction float64, extra map[string]any) {
	if math.IsNaN(fraction) {
		fraction = 0
	}
	fraction = math.Max(0, math.Min(1, fraction))
	d.mu.Lock()
	r, ok := d.jobs[id]
	if !ok || r.job.State.Terminal() {
		d.mu.Unlock()
		return
	}
	r.job.Progress = fraction
	if extra != nil {
		r.job.Extra = extra
	}
	snap := r.job
	d.publishLocked(mhp.NotifyJobsProgress, map[string]any{"job": snap})
}

func (d *Driver) jobLocked(id string) (*jobRec, *mhp.Error) {
	r, ok := d.jobs[id]
	if !ok {
		return nil, d.errorf(mhp.CodeJobNotFound, "no job %q (finished jobs are kept up to %d)", id, d.cfg.KeepJobs).With("id", id)
	}
	return r, nil
}

// Job implements mhp.Device: jobs/status.
func (d *Driver) Job(ctx context.Context, id string) (*mhp.Job, error) {
	d.touch(ctx)
	d.mu.Lock()
	defer d.mu.Unlock()
	r, e := d.jobLocked(id)
	if e != nil {
		return nil, e
	}
	snap := r.job
	return &snap, nil
}

// Jobs implements mhp.Device: jobs/list, newest first.
func (d *Driver) Jobs(ctx context.Context, req mhp.JobsRequest) ([]mhp.Job, error) {
	d.touch(ctx)
	d.mu.Lock()
	defer d.mu.Unlock()
	recs := make([]*jobRec, 0, len(d.jobs))
	for _, r := range d.jobs {
		if req.Active && r.job.State.Terminal() {
			continue
		}
		recs = append(recs, r)
	}
	// Newest first by invoke order: start times can be equal on a coarse clock.
	sort.Slice(recs, func(i, j int) bool { return recs[i].seq > recs[j].seq })
	if req.Limit > 0 && len(recs) > req.Limit {
		recs = recs[:req.Limit]
	}
	out := make([]mhp.Job, len(recs))
	for i, r := range recs {
		out[i] = r.job
	}
	return out, nil
}

// CancelJob implements mhp.Device: jobs/cancel. The binding's context is
// cancelled; the job ends as the backend reports (done if it ran on).
func (d *Driver) CancelJob(ctx context.Context, id string) (*mhp.Job, error) {
	s := d.touch(ctx)
	d.mu.Lock()
	r, e := d.jobLocked(id)
	if e != nil {
		d.mu.Unlock()
		return nil, e
	}
	act := d.actions[r.job.Action]
	if !act.Spec.Cancellable {
		d.mu.Unlock()
		return nil, d.errorf(mhp.CodeNotSupported, "action %q is not cancellable", r.job.Action).With("id", id)
	}
	if r.job.State.Terminal() {
		snap := r.job
		d.mu.Unlock()
		return &snap, nil
	}
	r.job.CancelRequested = true
	r.handle.requestCancel()
	r.cancel()
	snap := r.job
	d.publishLocked(mhp.NotifyJobsCancelling, map[string]any{"job": snap, "by": s})
	return &snap, nil
}

// PauseJob implements mhp.Device: jobs/pause (not lease-gated). Pausing a
// paused job answers its status again.
func (d *Driver) PauseJob(ctx context.Context, id string) (*mhp.Job, error) {
	s := d.touch(ctx)
	r, act, e := d.pausable(id)
	if e != nil {
		return nil, e
	}
	d.mu.Lock()
	if r.job.Paused {
		snap := r.job
		d.mu.Unlock()
		return &snap, nil
	}
	d.mu.Unlock()
	if act.Pause != nil {
		pctx, cancel := context.WithTimeout(ctx, d.cfg.HookTimeout)
		err := act.Pause(pctx, r.handle)
		cancel()
		if err != nil {
			return nil, d.hookRefusal("pause", r.job.ID, err)
		}
	}
	d.mu.Lock()
	if r.job.State.Terminal() { // the job ended while the backend paused
		e := d.errorf(mhp.CodeDeviceBusy, "job %s ended %s before it paused", id, r.job.State).With("id", id)
		d.mu.Unlock()
		return nil, e
	}
	r.handle.setPaused(true)
	r.job.Paused = true
	snap := r.job
	d.publishLocked(mhp.NotifyJobsPaused, map[string]any{"job": snap, "by": s})
	return &snap, nil
}

// ResumeJob implements mhp.Device: jobs/resume, refused in estop or fault and
// lease-gated like an invoke (on a watchdog device it needs the lease).
func (d *Driver) ResumeJob(ctx context.Context, id string) (*mhp.Job, error) {
	s, now := d.touchAt(ctx)
	d.mu.Lock()
	if e := d.stateGateLocked(); e != nil {
		d.mu.Unlock()
		return nil, e
	}
	if e := d.leaseGateLocked(s, now); e != nil {
		d.mu.Unlock()
		return nil, e
	}
	d.mu.Unlock()
	r, act, e := d.pausable(id)
	if e != nil {
		return nil, e
	}
	d.mu.Lock()
	paused := r.job.Paused
	d.mu.Unlock()
	if !paused {
		return nil, d.errorf(mhp.CodeDeviceBusy, "job %s is not paused", id).With("id", id)
	}
	if act.Resume != nil {
		// The hook runs under the job's context too, so an estop or cancel
		// arriving meanwhile cuts it short.
		rctx, cancel := context.WithTimeout(r.ctx, d.cfg.HookTimeout)
		stop := context.AfterFunc(ctx, cancel)
		err := act.Resume(rctx, r.handle)
		stop()
		cancel()
		if err != nil {
			return nil, d.hookRefusal("resume", r.job.ID, err)
		}
	}
	d.mu.Lock()
	if e := d.stateGateLocked(); e != nil { // estop or fault came while the backend resumed
		d.mu.Unlock()
		return nil, e
	}
	if r.job.State.Terminal() {
		e := d.errorf(mhp.CodeDeviceBusy, "job %s ended %s before it resumed", id, r.job.State).With("id", id)
		d.mu.Unlock()
		return nil, e
	}
	r.handle.setPaused(false)
	r.job.Paused = false
	snap := r.job
	d.publishLocked(mhp.NotifyJobsResumed, map[string]any{"job": snap, "by": s})
	return &snap, nil
}

func (d *Driver) pausable(id string) (*jobRec, *Action, *mhp.Error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	r, e := d.jobLocked(id)
	if e != nil {
		return nil, nil, e
	}
	act := d.actions[r.job.Action]
	if !act.Spec.Pausable {
		return nil, nil, d.errorf(mhp.CodeNotSupported, "action %q is not pausable", r.job.Action).With("id", id)
	}
	if r.job.State.Terminal() {
		return nil, nil, d.errorf(mhp.CodeDeviceBusy, "job %s already ended %s", id, r.job.State).With("id", id)
	}
	return r, act, nil
}

func (d *Driver) hookRefusal(what, id string, err error) error {
	if me, ok := mhp.AsError(err); ok {
		return d.adopt(me)
	}
	return d.errorf(mhp.CodeServerError, "%s of job %s failed at the backend: %v", what, id, err).With("id", id)
}

var _ mhp.Device = (*Driver)(nil)

// copyValue deep-copies a checked value (maps, lists, scalars), so Run and
// the job record do not share mutable parameters.
func copyValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, item := range x {
			m[k] = copyValue(item)
		}
		return m
	case []any:
		l := make([]any, len(x))
		for i, item := range x {
			l[i] = copyValue(item)
		}
		return l
	}
	return v
}
