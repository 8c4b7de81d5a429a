package binding

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/clock"
)

// Driver is the BoundDriver: a complete [mhp.Device] made from bindings. It is
// safe for concurrent use. Build it with New, call Start, and Close it when done.
type Driver struct {
	// Fixed at New: what the driver keeps of its configuration, and what is
	// made from it. tmpl holds what the drivers of one spec share (the
	// specs, the descriptor's lists, the options: template.go).
	cfg      driverCfg
	tmpl     *frozenSpec
	clk      clock.Clock
	desc     mhp.Descriptor
	signals  byName[boundSignal] // by name: the index is shared by drivers of one spec (frozen.go)
	required map[string]bool     // signals a reset must read: Config.RecoverySignals (shared)
	settings byName[Setting]
	actions  byName[boundAction]
	watchdog time.Duration
	epoch    time.Time // the driver's time line starts here (since0), read once at New
	// refined replaces desc and settings once the backend filled in what
	// they left open (refine.go); read through descNow and settingsNow.
	refined atomic.Pointer[refinedView]

	// mu guards every field below.
	mu sync.Mutex

	// The flags, side by side in one word: described with their groups
	// below (realClock is fixed at New).
	estop, fault               bool
	reasserting, reassertAgain bool
	sweepArmed, realClock      bool
	draining, closed           bool
	// stopUnconfirmed: in estop, the last stop command failed (or never
	// finished): the stop is sent again when the backend link comes back.
	stopUnconfirmed bool

	// The safety latches: estop and fault (above), and why. latches counts
	// estops and faults latched, so a reset sees one that came during its
	// verification.
	faultReason string
	latches     uint64

	// Backend calls in flight (a setting's Write hook, a job's Run): an
	// estop marks each as cut off, and when the last cut-off call returns the
	// stop hook runs once more (stopOwed counts the cut-off calls still out),
	// so the stop is the last command the backend hears.
	calls    callList // a write's hook is on its writeOp (atBackend) instead
	stopOwed int
	// reasserting: the re-assertion runs (a reset waits for it, so no stale
	// stop reaches the backend after a reset); reassertAgain: a call cut off
	// meanwhile returned, so the stop runs once more after this one.
	reassertDone  chan struct{} // closed when the running re-assertion ends
	faultHookDone chan struct{} // closed when the last fault hook started returned

	// Jobs: the records (finished ones trimmed to KeepJobs, oldest first in
	// finished) and how many are not yet terminal. The map is made by the
	// first invoke.
	jobs     map[string]*jobRec
	finished []string
	jobSeq   uint64
	active   int

	// Sessions (the map made by the first) and the lease.
	lease     *leaseRec
	sessions  map[string]*sessionRec
	lastSweep time.Duration // the last sweep of idle sessions, on the driver's time line

	// Writes in progress, cancelled by estop or at their deadline by one
	// sweeper timer (writeop.go): armed (sweepArmed) for sweepAt while any
	// is pending; realClock: the clock is the real one (the timer is kept
	// between writes); sweepFn is sweepWrites, made once; turn is the
	// request lock (one write talks to the backend at a time).
	writes  writeList // range over d.inflight to visit them
	turn    writeTurn
	sweeper clock.Timer
	sweepAt time.Duration // on the driver's time line (since0)
	sweepFn func()

	// Notifications: the listeners, and the queue delivered in order by one
	// goroutine at a time.
	listeners    []listener // in registration order; replaced, never modified
	nextListener int
	pubQueue     []pending // notifications not yet delivered, in the order they happened (draining: a goroutine is delivering it)

	// Signal polling for subscriptions (lastValues made by the first offer).
	lastValues map[string]any
	poller     clock.Timer
	pollCancel context.CancelFunc // ends the poll in progress
	pollDone   chan struct{}      // closed when the poll in progress returns

	link *linkState // the backend link as the adapter last reported it (SetLink); nil until it does
}

// backendCall is one call that may command the backend, a job's Run or
// Pause, from the moment it is called until it returns (a setting's Write
// hook is one too, kept on its writeOp).
type backendCall struct {
	link   link[backendCall] // in Driver.calls
	cutOff bool              // an estop latched while it was out: the stop is re-asserted after it returns
}

// callList is the set of backend calls in flight.
type callList = linked[backendCall, *backendCall]

func (c *backendCall) links() *link[backendCall] { return &c.link }

type jobRec struct {
	job    mhp.Job
	seq    uint64 // invoke order, for jobs/list
	handle *Job
	ctx    context.Context // the Run context: ended by cancel, estop, timeout
	cancel context.CancelFunc
	done   chan struct{}
}

type leaseRec struct {
	holder   string
	ttl      time.Duration
	expires  time.Time
	lastSeen time.Time
	expiry   clock.Timer
	wd       clock.Timer
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
		clk:      cfg.Clock,
		watchdog: time.Duration(cfg.Safety.WatchdogS * float64(time.Second)),
	}
	d.sweepFn = d.sweepWrites
	_, d.realClock = cfg.Clock.(clock.Real)
	d.epoch = cfg.Clock.Now()
	d.desc = mhp.Descriptor{
		MHP: mhp.ProtocolVersion, DeviceInfo: cfg.Device, Notes: cfg.Notes, Instructions: cfg.Instructions,
		Physical: cfg.Physical, Safety: cfg.Safety,
	}
	var lists descLists
	for i := range cfg.Signals {
		s := &cfg.Signals[i]
		lists.signals = append(lists.signals, s.Spec)
	}
	for i := range cfg.Settings {
		s := &cfg.Settings[i]
		// s.shape: the frozen spec's (own)
		lists.settings = append(lists.settings, s.Spec)
	}
	for i := range cfg.Actions {
		a := &cfg.Actions[i]
		lists.actions = append(lists.actions, a.Spec)
	}
	// The descriptor's lists are frozen too: shared by the drivers of one
	// spec, never changed (Descriptor hands out copies). So is the rest of
	// what the drivers of one spec have in common (the template).
	f := freezeLists(lists)
	d.tmpl = freezeTemplate(&cfg, f)
	t := d.tmpl.template
	d.cfg = driverCfg{options: &t.opts, Device: &d.desc.DeviceInfo, hooks: hooks{EStop: cfg.EStop, OnFault: cfg.OnFault,
		Setup: cfg.Setup, Verify: cfg.Verify, Close: cfg.Close, Lease: cfg.Lease}}
	d.required = t.required
	d.desc.Signals, d.desc.Settings, d.desc.Actions = f.lists.signals, f.lists.settings, f.lists.actions
	d.signals = bindSignals(cfg.Signals, &f.lists)
	d.settings = byName[Setting]{idx: f.lists.settingIdx, items: cfg.Settings}
	d.actions = bindActions(cfg.Actions, &f.lists)
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
	if !expired && !d.awaitTurn(t.C) { // until no write is talking to the backend
		expired = true
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
	desc := d.descNow() // the refined one once Refine ran
	c := *desc
	c.Signals = append([]mhp.Signal(nil), desc.Signals...)
	c.Settings = make([]mhp.Setting, len(desc.Settings))
	for i, s := range desc.Settings {
		c.Settings[i] = cloneSetting(s)
	}
	c.Actions = make([]mhp.Action, len(desc.Actions))
	for i, a := range desc.Actions {
		c.Actions[i] = cloneAction(a)
	}
	c.Safety.Interlocks = append([]string(nil), desc.Safety.Interlocks...)
	c.DeviceInfo.Tags = append([]string(nil), desc.Tags...)
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

// locked runs f holding mu: each locked step of a request is one section
// with one deferred unlock, whatever path it returns by.
//
// Notifications that f queues ([Driver.enqueueLocked]) are delivered after
// mu is released, in the order they were queued.
func (d *Driver) locked(f func()) {
	if d.lockedQueued(f) {
		d.deliver()
	}
}

// lockedQueued runs f under mu with a deferred unlock and reports whether f
// queued a notification that nobody is delivering yet.
func (d *Driver) lockedQueued(f func()) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	before := len(d.pubQueue)
	f()
	return len(d.pubQueue) > before && !d.draining
}

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
