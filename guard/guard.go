// Package guard wraps any [mhp.Device] with the guarantees an agent host relies
// on beyond the six gates:
//
//   - command ids: settings/write and actions/invoke may carry a commandId;
//     the same id with the same request replays the first answer and never
//     acts twice (also when the two arrive concurrently); the same id with
//     another request is refused (InvalidParams, data.reason
//     "command_id_reused"). Ids are scoped to the caller's session label and
//     kept in a window bounded by count and age (ReplayEntries, ReplayAge).
//   - operator permits: a confirm-level request carrying a permitId issued
//     through the operator path ([Permits.Issue], never reachable by an agent)
//     for exactly that device, method, name and params, unexpired and unused,
//     passes the approval gate. With RequirePermits a boolean approved is
//     ignored: only permits approve.
//   - evidence: every write, invoke, job end, estop, reset, lease change and
//     every refusal of those is a receipt in an [evidence.Log] (a device's
//     own chain, or its handle on a host's shared log: [Evidence]). A write,
//     invoke or reset is answered only once its receipt is written (durable
//     with [evidence.SyncAlways]); while the log is stopped (a full disk, a
//     failed fsync) they are refused before they reach the device, and one
//     whose receipt fails after the device acted is answered DeviceFault
//     (data.reason "receipt_lost", data.outcome and data.result saying what
//     the device did) and the device is latched in fault ([Faulter]).
//
// The wrapped device keeps the gate order: a permit only stands in for
// approved:true, so the state gate still answers first; nothing here sends
// anything to the backend itself.
package guard

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/clock"
	"github.com/openmhp/mhp-go/evidence"
)

// Defaults of Config.
const (
	DefaultReplayEntries = 4096
	DefaultReplayAge     = 15 * time.Minute
	// MaxCommandID bounds a command id's length.
	MaxCommandID = 128
)

// Evidence is where the guard records: a device's own chain
// (*[evidence.Log]) or the device's handle on a host's shared log
// (*[evidence.DeviceLog], from [evidence.Log.For]).
type Evidence interface {
	// Append records r, durably under SyncAlways, before the answer goes out.
	Append(r evidence.Receipt) (evidence.Entry, error)
	// Err is why the log cannot take a receipt (nil while it can).
	Err() error
	// Head is the log's newest entry, signed with a key.
	Head() evidence.Head
	// List is one page of this device's entries.
	List(q evidence.Query) (evidence.Page, error)
}

// Config configures Wrap.
type Config struct {
	// Evidence, when set, receives a receipt for every actuation and refusal.
	Evidence Evidence
	// Permits, when set, lets requests carry an operator's permitId.
	Permits *Permits
	// RequirePermits ignores a boolean approved: only a permit approves a
	// confirm-level item. Needs Permits.
	RequirePermits bool
	// ReplayEntries and ReplayAge bound the command id window.
	ReplayEntries int
	ReplayAge     time.Duration
	// Clock ages the window (the real clock by default).
	Clock clock.Clock
	// Log receives evidence write failures ([slog.Default] by default).
	Log *slog.Logger
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.RequirePermits && c.Permits == nil {
		return errors.New("guard: RequirePermits needs Permits")
	}
	if c.ReplayEntries < 0 || c.ReplayAge < 0 {
		return errors.New("guard: ReplayEntries and ReplayAge must not be negative")
	}
	return nil
}

// Device is a guarded [mhp.Device]. Use Wrap.
type Device struct {
	dev mhp.Device
	cfg Config

	mu     sync.Mutex
	window map[string]*command // session label + "\x00" + command id
	order  []*command          // oldest first, for eviction
	stop   func()              // stops listening to the device

	// Receipts of notifications are appended aside, in order (listeners must not block).
	qmu      sync.Mutex
	queue    []evidence.Receipt
	draining bool
	dropped  int
}

// maxQueued bounds the receipts of notifications waiting for the disk.
const maxQueued = 10000

func (g *Device) appendAsync(r evidence.Receipt) {
	g.qmu.Lock()
	if len(g.queue) >= maxQueued {
		g.dropped++
		n := g.dropped
		g.qmu.Unlock()
		g.cfg.Log.Error("evidence: notification receipt dropped: the disk is not keeping up", "method", r.Method, "dropped", n)
		return
	}
	g.queue = append(g.queue, r)
	if g.draining {
		g.qmu.Unlock()
		return
	}
	g.draining = true
	g.qmu.Unlock()
	go g.drain()
}

func (g *Device) drain() {
	for {
		g.qmu.Lock()
		if len(g.queue) == 0 {
			g.draining = false
			g.qmu.Unlock()
			return
		}
		batch := g.queue
		g.queue = nil
		g.qmu.Unlock()
		for _, r := range batch {
			g.append(r)
		}
	}
}

// Flush waits until every queued notification receipt is written (or ctx ends).
func (g *Device) Flush(ctx context.Context) error {
	for {
		g.qmu.Lock()
		idle := !g.draining && len(g.queue) == 0
		g.qmu.Unlock()
		if idle {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

// command is one command id's first request and, once known, its answer.
type command struct {
	key    string
	digest string
	at     time.Time
	done   chan struct{} // closed when the answer is known
	result any
	err    error
}

// Wrap returns dev guarded by cfg (New, as an [mhp.Device]).
func Wrap(dev mhp.Device, cfg Config) (mhp.Device, error) { return New(dev, cfg) }

// New returns the guarded device. Interfaces of dev beyond [mhp.Device]
// ([mhp.ResourceProvider], extensions) are found through Unwrap ([mhp.Find]).
func New(dev mhp.Device, cfg Config) (*Device, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.ReplayEntries == 0 {
		cfg.ReplayEntries = DefaultReplayEntries
	}
	if cfg.ReplayAge == 0 {
		cfg.ReplayAge = DefaultReplayAge
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if isNil(cfg.Evidence) {
		cfg.Evidence = nil // a nil *evidence.Log is no evidence, not a log to call
	}
	g := &Device{dev: dev, cfg: cfg, window: map[string]*command{}}
	if cfg.Evidence != nil {
		g.stop = dev.Listen(g.onNotification)
	}
	return g, nil
}

// isNil reports whether ev is nil or holds a nil pointer.
func isNil(ev Evidence) bool {
	switch v := ev.(type) {
	case nil:
		return true
	case *evidence.Log:
		return v == nil
	case *evidence.DeviceLog:
		return v == nil
	}
	return false
}

// HonoursCommandIDs implements [mhp.CommandIDer].
func (g *Device) HonoursCommandIDs() bool { return true }

// Unwrap returns the guarded device.
func (g *Device) Unwrap() mhp.Device { return g.dev }

// Close stops recording the device's notifications (it does not close the device).
func (g *Device) Close() {
	if g.stop != nil {
		g.stop()
	}
}

// ---- command ids ----

// checkCommandID refuses ids that are too long or not printable.
func checkCommandID(id string) error {
	if len(id) > MaxCommandID {
		return mhp.Errorf(mhp.CodeInvalidParams, "commandId is %d bytes, over the limit of %d", len(id), MaxCommandID).
			With(mhp.DataField, "commandId").With("max_length", MaxCommandID)
	}
	for _, r := range id {
		if r < 0x20 || r == 0x7f {
			return mhp.Errorf(mhp.CodeInvalidParams, "commandId contains control characters").With(mhp.DataField, "commandId")
		}
	}
	return nil
}

// claim returns the command recorded for key, or records c as the first. The
// window is pruned by age and count; commands still in progress stay.
func (g *Device) claim(key, digest string) (prior *command, c *command) {
	now := g.cfg.Clock.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pruneLocked(now)
	if p, ok := g.window[key]; ok {
		return p, nil
	}
	c = &command{key: key, digest: digest, at: now, done: make(chan struct{})}
	g.window[key] = c
	g.order = append(g.order, c)
	return nil, c
}

func (g *Device) pruneLocked(now time.Time) {
	drop := 0
	for _, c := range g.order {
		old := now.Sub(c.at) > g.cfg.ReplayAge
		over := len(g.order)-drop > g.cfg.ReplayEntries
		if !old && !over {
			break
		}
		select {
		case <-c.done:
		default:
			// In progress: keep it (and everything after it) for now.
			goto out
		}
		delete(g.window, c.key)
		drop++
	}
out:
	if drop > 0 {
		g.order = append(g.order[:0:0], g.order[drop:]...)
	}
}

// finish records a command's answer and wakes those waiting on it. A request
// refused before anything reached the backend is dropped from the window: it
// did not act, so running it again cannot act twice (a client that acquires
// the lease after NotLeased retries with the same id).
func (g *Device) finish(c *command, result any, err error) {
	c.result, c.err = result, err
	close(c.done)
	if err != nil && refusedBeforeActing(err) {
		g.mu.Lock()
		if g.window[c.key] == c {
			delete(g.window, c.key)
			for i, o := range g.order {
				if o == c {
					g.order = append(g.order[:i:i], g.order[i+1:]...)
					break
				}
			}
		}
		g.mu.Unlock()
	}
}

// replay waits for a prior command's answer (bounded by ctx).
func replay(ctx context.Context, p *command, digest string) (any, error, bool) {
	if p.digest != digest {
		return nil, mhp.Errorf(mhp.CodeInvalidParams, "commandId was already used for a different request; use a new id for a new intent").
			With(mhp.DataField, "commandId").With(mhp.DataReason, "command_id_reused"), true
	}
	select {
	case <-p.done:
		return p.result, p.err, true
	case <-ctx.Done():
		return nil, mhp.Errorf(mhp.CodeServerError, "the first request with this commandId is still running; ask again").
			With(mhp.DataField, "commandId").With(mhp.DataReason, "command_in_progress"), true
	}
}

func commandKey(ctx context.Context, id string) string { return mhp.SessionFrom(ctx) + "\x00" + id }

// requestDigest identifies a request for command ids and permits.
func requestDigest(method, name string, params any, approved bool, permit string) string {
	return evidence.Digest(map[string]any{"method": method, "name": name, "params": params, "approved": approved, "permit": permit})
}

// ---- the actuating methods ----

// Write implements [mhp.Device]: settings/write with command ids, permits and receipts.
func (g *Device) Write(ctx context.Context, req mhp.WriteRequest) (*mhp.WriteResult, error) {
	res, err := g.actuate(ctx, mhp.MethodSettingsWrite, req.Name, req.Value, req.CommandID, req.PermitID, req.Approved, req.DryRun,
		func(ctx context.Context, approved bool) (any, error) {
			r := req
			r.Approved, r.CommandID, r.PermitID = approved, "", "" // honoured here
			return g.dev.Write(ctx, r)
		})
	if err != nil {
		return nil, err
	}
	return res.(*mhp.WriteResult), nil
}

// Invoke implements [mhp.Device]: actions/invoke with command ids, permits and receipts.
func (g *Device) Invoke(ctx context.Context, req mhp.InvokeRequest) (*mhp.InvokeResult, error) {
	res, err := g.actuate(ctx, mhp.MethodActionsInvoke, req.Name, req.Params, req.CommandID, req.PermitID, req.Approved, req.DryRun,
		func(ctx context.Context, approved bool) (any, error) {
			r := req
			r.Approved, r.CommandID, r.PermitID = approved, "", "" // honoured here
			return g.dev.Invoke(ctx, r)
		})
	if err != nil {
		return nil, err
	}
	return res.(*mhp.InvokeResult), nil
}

// actuate runs one write or invoke through command ids, permits and evidence.
func (g *Device) actuate(ctx context.Context, method, name string, params any, commandID, permitID string, approved, dry bool,
	call func(ctx context.Context, approved bool) (any, error)) (any, error) {
	if commandID != "" {
		if err := checkCommandID(commandID); err != nil {
			return nil, err
		}
	}
	if permitID != "" && g.cfg.Permits == nil {
		return nil, mhp.Errorf(mhp.CodeInvalidParams, "this server issues no permits (permitId given)").With(mhp.DataField, "permitId")
	}
	if dry {
		// A dry run acts on nothing: no command id window, no permit use, no receipt.
		ok, err := g.permitApproves(ctx, method, name, params, permitID, approved, false)
		if err != nil {
			return nil, err
		}
		return call(ctx, ok)
	}
	var cmd *command
	if commandID != "" {
		digest := requestDigest(method, name, params, approved, permitID)
		prior, c := g.claim(commandKey(ctx, commandID), digest)
		if prior != nil {
			res, err, _ := replay(ctx, prior, digest)
			g.record(ctx, method, name, params, commandID, res, err, evidence.OutcomeReplayed)
			return res, err
		}
		cmd = c
	}
	res, err := g.actuateOnce(ctx, method, name, params, permitID, approved, call)
	res, err = g.recordActed(ctx, method, name, params, commandID, res, err)
	if cmd != nil {
		g.finish(cmd, res, err)
	}
	return res, err
}

// Faulter is implemented by devices the guard can latch in fault (the
// binding driver) when an actuation's receipt could not be written.
type Faulter interface {
	Fault(reason string)
}

// reasonReceiptLost is data.reason of an answer whose receipt was not written.
const reasonReceiptLost = "receipt_lost"

// recordActed writes the receipt of an actuation and returns the answer to
// give: the device's, once its receipt is written; when the receipt fails
// after the device may have acted, DeviceFault saying what it did, with the
// device latched in fault. A refusal before acting stays the answer.
func (g *Device) recordActed(ctx context.Context, method, name string, params any, commandID string, res any, err error) (any, error) {
	werr := g.record(ctx, method, name, params, commandID, res, err, "")
	if werr == nil || (err != nil && refusedBeforeActing(err)) {
		return res, err
	}
	outcome := outcomeOf(err)
	why := "settings/write " + name
	if method != mhp.MethodSettingsWrite {
		why = method + " " + name
	}
	reason := "evidence receipt of " + why + " could not be written: " + werr.Error()
	if f, ok := mhp.Find[Faulter](g.dev); ok {
		f.Fault(mhp.Truncate(reason, 512))
	}
	fe := mhp.Errorf(mhp.CodeDeviceFault, "%s reached the device (outcome %s) but its evidence receipt could not be written (%v): the device is latched in fault; fix the evidence disk and reset",
		why, outcome, mhp.Truncate(werr.Error(), 256)).With(mhp.DataReason, reasonReceiptLost).With(mhp.DataOutcome, outcome)
	if err != nil {
		if e, ok := mhp.AsError(err); ok {
			fe = fe.With("error", e)
		}
	} else if res != nil {
		fe = fe.With("result", res)
	}
	return nil, fe
}

func (g *Device) actuateOnce(ctx context.Context, method, name string, params any, permitID string, approved bool,
	call func(ctx context.Context, approved bool) (any, error)) (any, error) {
	if err := g.evidenceUsable(); err != nil {
		return nil, err
	}
	ok, err := g.permitApproves(ctx, method, name, params, permitID, approved, true)
	if err != nil {
		return nil, err
	}
	res, err := call(ctx, ok)
	if permitID != "" && ok {
		if refusedBeforeActing(err) {
			g.cfg.Permits.restore(permitID) // nothing acted: the permit stays usable until it expires
		} else {
			g.cfg.Permits.settle(permitID)
		}
	}
	return res, err
}

// evidenceUsable refuses an actuation before it reaches the device while the
// evidence log cannot take its receipt.
func (g *Device) evidenceUsable() error {
	if g.cfg.Evidence == nil {
		return nil
	}
	if err := g.cfg.Evidence.Err(); err != nil {
		return mhp.Errorf(mhp.CodeServerError, "evidence log unavailable, actuation refused before it reached the device: %v", err).
			With(mhp.DataReason, "evidence_unavailable").With(mhp.DataOutcome, mhp.OutcomeNotStarted)
	}
	return nil
}

// permitApproves decides the approved flag the device sees. With a permit
// that matches, it is true (and the permit is used when take is set); a
// permit that does not match is refused after the state gate's answer, so the
// gate order holds.
func (g *Device) permitApproves(ctx context.Context, method, name string, params any, permitID string, approved, take bool) (bool, error) {
	if g.cfg.RequirePermits {
		approved = false
	}
	if permitID == "" {
		return approved, nil
	}
	why := g.cfg.Permits.check(permitID, method, name, paramsDigest(params), take)
	if why == "" {
		return true, nil
	}
	// Gate 1 answers before gate 2: a device in estop or fault says so first.
	if p, err := g.dev.Ping(ctx); err == nil {
		switch p.State {
		case mhp.StateEStop:
			return false, mhp.Errorf(mhp.CodeEStopActive, "device is in estop; safety/reset is needed").With(mhp.DataGate, mhp.GateState)
		case mhp.StateFault:
			return false, mhp.Errorf(mhp.CodeDeviceFault, "device is in fault; safety/reset is needed").With(mhp.DataGate, mhp.GateState)
		}
	}
	return false, mhp.Errorf(mhp.CodeApprovalRequired, "permit %s does not approve this request: %s", mhp.Truncate(permitID, 64), why).
		With(mhp.DataGate, mhp.GateApproval).With(mhp.DataReason, "permit_mismatch").With(mhp.DataField, "permitId").With("mismatch", why)
}

// refusedBeforeActing reports whether err says nothing reached the backend.
func refusedBeforeActing(err error) bool {
	e, ok := mhp.AsError(err)
	if !ok {
		return false
	}
	if o, _ := e.Data[mhp.DataOutcome].(string); o == mhp.OutcomeUnknown {
		return false
	}
	if r, _ := e.Data[mhp.DataReason].(string); r == reasonReceiptLost {
		return false // the device acted; only the receipt is missing
	}
	switch e.Code {
	case mhp.CodeEStopActive, mhp.CodeDeviceFault, mhp.CodeApprovalRequired, mhp.CodeForbidden, mhp.CodeInterlockOpen,
		mhp.CodeLimitViolation, mhp.CodeInvalidValue, mhp.CodeInvalidParams, mhp.CodeNotLeased, mhp.CodeDeviceBusy,
		mhp.CodeUnknownName, mhp.CodeMethodRequired:
		return true
	}
	return e.Data[mhp.DataOutcome] == mhp.OutcomeNotStarted
}

// ---- receipts ----

// outcomeOf classifies an answer for a receipt.
func outcomeOf(err error) string {
	if err == nil {
		return evidence.OutcomeOK
	}
	e, ok := mhp.AsError(err)
	if !ok {
		return evidence.OutcomeUnknown
	}
	if o, _ := e.Data[mhp.DataOutcome].(string); o != "" {
		return o
	}
	return evidence.OutcomeRefused
}

// record writes a receipt; the error is the log's when it was not written.
func (g *Device) record(ctx context.Context, method, name string, params any, commandID string, res any, err error, outcome string) error {
	if g.cfg.Evidence == nil {
		return nil
	}
	if outcome == "" {
		outcome = outcomeOf(err)
	}
	r := evidence.Receipt{CommandID: commandID, Session: mhp.SessionFrom(ctx), Method: method, Name: name,
		ParamsDigest: evidence.Digest(params), Outcome: outcome}
	if err != nil {
		e, ok := mhp.AsError(err)
		if !ok {
			e = mhp.Errorf(mhp.CodeInternal, "%s", mhp.Truncate(err.Error(), 1024))
		}
		r.Error = e
	} else if res != nil {
		r.Value = res // canonicalised by Append in one pass (nothing kept if it does not marshal)
		if ir, ok := res.(*mhp.InvokeResult); ok && ir.Job != nil {
			r.Job = ir.Job.ID
		}
	}
	return g.append(r)
}

func (g *Device) append(r evidence.Receipt) error {
	_, err := g.cfg.Evidence.Append(r)
	if err != nil {
		g.cfg.Log.Error("evidence: receipt not written", "method", r.Method, "name", r.Name, "err", err)
	}
	return err
}

// onNotification records what the device does by itself or later: job ends
// and safety events (watchdog trips, faults, estops and resets as the device
// reports them).
func (g *Device) onNotification(n mhp.Notification) {
	switch n.Method {
	case mhp.NotifyJobsFinished, mhp.NotifySafetyEStop, mhp.NotifySafetyFault, mhp.NotifySafetyReset,
		mhp.NotifyOperatorAnswer: // a person's answer to an operator-run device, with "by"
	default:
		return
	}
	r := evidence.Receipt{Method: n.Method, Outcome: evidence.OutcomeOK}
	if by, _ := n.Params["by"].(string); by != "" {
		r.Session = by
	}
	if j := n.Job(); j != nil {
		r.Job, r.Name, r.Outcome, r.Session = j.ID, j.Action, string(j.State), j.Owner
		if j.Outcome != "" {
			r.Outcome = string(j.State) + "/" + j.Outcome
		}
	}
	r.Value = n.Params // a nil map is kept as null, as json.Marshal gave it
	// Listeners must not block: the append (and its fsync) runs aside, in order.
	g.appendAsync(r)
}

// ---- the other methods: passed through, safety and leases recorded ----

// EStop implements [mhp.Device]; it is never refused here and its receipt is
// written after the answer is known.
func (g *Device) EStop(ctx context.Context, reason string) (*mhp.EStopResult, error) {
	res, err := g.dev.EStop(ctx, reason)
	g.record(ctx, mhp.MethodSafetyEStop, "", map[string]any{"reason": mhp.Truncate(reason, 1024)}, "", res, err, "")
	return res, err
}

// Reset implements [mhp.Device]: like a write, refused while the evidence
// log is stopped and answered once its receipt is written.
func (g *Device) Reset(ctx context.Context) (*mhp.ResetResult, error) {
	if err := g.evidenceUsable(); err != nil {
		return nil, err
	}
	res, err := g.dev.Reset(ctx)
	out, err := g.recordActed(ctx, mhp.MethodSafetyReset, "", nil, "", res, err)
	if err != nil {
		return nil, err
	}
	return out.(*mhp.ResetResult), nil
}

// Acquire implements [mhp.Device].
func (g *Device) Acquire(ctx context.Context, ttl time.Duration) (*mhp.Lease, error) {
	res, err := g.dev.Acquire(ctx, ttl)
	g.record(ctx, mhp.MethodSessionAcquire, "", map[string]any{"ttl": ttl.Seconds()}, "", res, err, "")
	return res, err
}

// Release implements [mhp.Device].
func (g *Device) Release(ctx context.Context) error {
	err := g.dev.Release(ctx)
	g.record(ctx, mhp.MethodSessionRelease, "", nil, "", nil, err, "")
	return err
}

// Renew implements [mhp.Device] (a heartbeat: no receipt unless refused).
func (g *Device) Renew(ctx context.Context) (*mhp.Lease, error) {
	res, err := g.dev.Renew(ctx)
	if err != nil {
		g.record(ctx, mhp.MethodSessionRenew, "", nil, "", nil, err, "")
	}
	return res, err
}

// Describe implements [mhp.Device].
func (g *Device) Describe(ctx context.Context, req mhp.DescribeRequest) (*mhp.Description, error) {
	return g.dev.Describe(ctx, req)
}

// Read implements [mhp.Device].
func (g *Device) Read(ctx context.Context, names []string) (*mhp.ReadResult, error) {
	return g.dev.Read(ctx, names)
}

// Subscribe implements [mhp.Device].
func (g *Device) Subscribe(ctx context.Context, names []string) (*mhp.SubscribeResult, error) {
	return g.dev.Subscribe(ctx, names)
}

// Unsubscribe implements [mhp.Device].
func (g *Device) Unsubscribe(ctx context.Context, names []string) error {
	return g.dev.Unsubscribe(ctx, names)
}

// Job implements [mhp.Device].
func (g *Device) Job(ctx context.Context, id string) (*mhp.Job, error) { return g.dev.Job(ctx, id) }

// Jobs implements [mhp.Device].
func (g *Device) Jobs(ctx context.Context, req mhp.JobsRequest) ([]mhp.Job, error) {
	return g.dev.Jobs(ctx, req)
}

// CancelJob implements [mhp.Device].
func (g *Device) CancelJob(ctx context.Context, id string) (*mhp.Job, error) {
	res, err := g.dev.CancelJob(ctx, id)
	g.record(ctx, mhp.MethodJobsCancel, id, nil, "", res, err, "")
	return res, err
}

// PauseJob implements [mhp.Device].
func (g *Device) PauseJob(ctx context.Context, id string) (*mhp.Job, error) {
	res, err := g.dev.PauseJob(ctx, id)
	g.record(ctx, mhp.MethodJobsPause, id, nil, "", res, err, "")
	return res, err
}

// ResumeJob implements [mhp.Device].
func (g *Device) ResumeJob(ctx context.Context, id string) (*mhp.Job, error) {
	res, err := g.dev.ResumeJob(ctx, id)
	g.record(ctx, mhp.MethodJobsResume, id, nil, "", res, err, "")
	return res, err
}

// Limits implements [mhp.Device].
func (g *Device) Limits(ctx context.Context) (*mhp.LimitsReport, error) { return g.dev.Limits(ctx) }

// Ping implements [mhp.Device].
func (g *Device) Ping(ctx context.Context) (*mhp.PingResult, error) { return g.dev.Ping(ctx) }

// Listen implements [mhp.Device].
func (g *Device) Listen(fn func(mhp.Notification)) func() { return g.dev.Listen(fn) }

// EndSession implements [mhp.Device].
func (g *Device) EndSession(ctx context.Context) { g.dev.EndSession(ctx) }

// ---- evidence on the wire ----

// EvidenceHead answers evidence/head.
func (g *Device) EvidenceHead(ctx context.Context) (*evidence.Head, error) {
	if g.cfg.Evidence == nil {
		return nil, mhp.Errorf(mhp.CodeNotSupported, "this server keeps no evidence (serve with --evidence DIR)")
	}
	h := g.cfg.Evidence.Head()
	return &h, nil
}

// EvidenceList answers evidence/list: one bounded page.
func (g *Device) EvidenceList(ctx context.Context, q evidence.Query) (*evidence.Page, error) {
	if g.cfg.Evidence == nil {
		return nil, mhp.Errorf(mhp.CodeNotSupported, "this server keeps no evidence (serve with --evidence DIR)")
	}
	if len(q.CommandID) > MaxCommandID || len(q.Session) > 256 {
		return nil, mhp.Errorf(mhp.CodeInvalidParams, "evidence/list filter is too long").With(mhp.DataField, "command_id")
	}
	p, err := g.cfg.Evidence.List(q)
	if err != nil {
		return nil, mhp.Errorf(mhp.CodeInternal, "evidence/list: %v", err)
	}
	return &p, nil
}

// IssuePermit issues an operator permit. Only the operator path may call it
// (the transport checks the operator token); an agent never reaches it.
func (g *Device) IssuePermit(ctx context.Context, req PermitRequest) (*Permit, error) {
	if g.cfg.Permits == nil {
		return nil, mhp.Errorf(mhp.CodeNotSupported, "this server issues no permits (serve with --operator-token-file)")
	}
	p, err := g.cfg.Permits.Issue(req)
	if err != nil {
		return nil, err
	}
	r := evidence.Receipt{Session: mhp.SessionFrom(ctx), Method: mhp.MethodPermitsIssue, Name: req.Name, Outcome: evidence.OutcomeOK,
		ParamsDigest: p.ParamsDigest}
	if b, jerr := json.Marshal(p); jerr == nil {
		r.Result = b
	}
	if g.cfg.Evidence != nil {
		g.append(r)
	}
	return p, nil
}

// WireMethods implements [mhp.Extension]: evidence/head and evidence/list.
func (g *Device) WireMethods() map[string]mhp.WireMethod {
	return map[string]mhp.WireMethod{
		mhp.MethodEvidenceHead: mhp.Handle(mhp.MethodEvidenceHead, func(ctx context.Context, _ struct{}) (*evidence.Head, error) {
			return g.EvidenceHead(ctx)
		}),
		mhp.MethodEvidenceList: mhp.Handle(mhp.MethodEvidenceList, g.EvidenceList),
	}
}

// OperatorWireMethods implements [mhp.OperatorExtension]: permits/issue.
func (g *Device) OperatorWireMethods() map[string]mhp.WireMethod {
	return map[string]mhp.WireMethod{mhp.MethodPermitsIssue: mhp.Handle(mhp.MethodPermitsIssue, g.IssuePermit)}
}

var (
	_ mhp.Device            = (*Device)(nil)
	_ mhp.Extension         = (*Device)(nil)
	_ mhp.OperatorExtension = (*Device)(nil)
	_ mhp.Unwrapper         = (*Device)(nil)
)
