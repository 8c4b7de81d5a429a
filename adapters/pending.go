package adapters

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
)

// NeverReachedError is the error of a self-describing adapter (its items
// come from the backend) whose backend could not be reached at its first
// start, with no descriptor cache to serve: nothing says what the device
// has. [Registry.OpenDevice] serves such a config anyway ([Pending]).
type NeverReachedError struct{ Err error }

func (e *NeverReachedError) Error() string { return e.Err.Error() }

// Unwrap returns the cause.
func (e *NeverReachedError) Unwrap() error { return e.Err }

// NeverReached wraps the error of a start that had neither the backend nor
// a descriptor cache.
func NeverReached(err error) error { return &NeverReachedError{Err: err} }

// OpenDevice is Open for serving: a config whose backend was never reached
// and has no descriptor cache (a [NeverReachedError]) still serves, as a
// [Pending] device, and adopts the backend's description when it first
// answers. Any other error is Open's. The device is started; close it
// with the returned func.
func (r *Registry) OpenDevice(ctx context.Context, path string, log *slog.Logger) (mhp.Device, func() error, error) {
	return r.OpenDeviceRefined(ctx, path, Refinement{}, log)
}

// Refinement is how a caller (a device package) edits the bindings of an
// adapter config it serves.
type Refinement struct {
	// Bindings edits the adapter's generated bindings before the driver is
	// built, as [Registry.OpenRefined]'s refine; nil keeps them.
	Bindings func(*binding.Config) error
	// Identity edits the identity-only bindings of a [Pending] device
	// (device, notes, instructions, physical: there are no items to refine
	// yet); nil keeps the config's own.
	Identity func(*binding.Config) error
}

// OpenDeviceRefined is OpenDevice with ref applied: the adapter's driver,
// now or when the backend is first reached, is built with ref.Bindings,
// and the identity-only device served meanwhile with ref.Identity.
func (r *Registry) OpenDeviceRefined(ctx context.Context, path string, ref Refinement, log *slog.Logger) (mhp.Device, func() error, error) {
	src, err := ReadSource(path)
	if err != nil {
		return nil, nil, err
	}
	src.Refine = ref.Bindings
	drv, err := r.Build(ctx, src)
	var never *NeverReachedError
	if errors.As(err, &never) {
		p, err := newPending(src, never, func(ctx context.Context) (*binding.Driver, error) { return r.Build(ctx, src) }, ref.Identity, log)
		if err != nil {
			return nil, nil, err
		}
		return p, p.Close, nil
	}
	if err != nil {
		return nil, nil, err
	}
	if err := drv.Start(ctx); err != nil {
		drv.Close()
		return nil, nil, err
	}
	return drv, drv.Close, nil
}

// Pending is the device of a self-describing backend that was never
// reached: until the backend first answers it serves the config's
// identity (device, notes, safety) and the link (describe and ping say
// the backend was never reached), and refuses every write, invoke and
// lease with outcome not_started. It retries the adapter's build with the
// link's bounded, jittered backoff; the first build that reaches the
// backend is started and adopted: from then on every call goes to it (an
// estop latched before carries over). A later change of the backend's
// description keeps that driver's link down, as the adapters do.
type Pending struct {
	build func(context.Context) (*binding.Driver, error)
	log   *slog.Logger
	name  string

	mu        sync.Mutex
	cur       *binding.Driver
	adopted   bool
	estop     string // reason of an estop latched while pending
	listeners map[int]func(mhp.Notification)
	next      int
	stops     []func()
	ctx       context.Context
	cancel    context.CancelFunc
	done      chan struct{}
}

// NewPending starts the identity-only device of src (never is why the
// backend could not be described) and the retries of build.
func NewPending(src Source, never error, build func(context.Context) (*binding.Driver, error), log *slog.Logger) (*Pending, error) {
	return newPending(src, never, build, nil, log)
}

func newPending(src Source, never error, build func(context.Context) (*binding.Driver, error), identity func(*binding.Config) error, log *slog.Logger) (*Pending, error) {
	if log == nil {
		log = slog.Default()
	}
	var head struct {
		Common `yaml:",inline"`
		Link   LinkConfig `yaml:"link"`
	}
	if err := yaml.Unmarshal(src.Data, &head); err != nil {
		return nil, fmt.Errorf("%s: %w", src.Path, err)
	}
	var bc binding.Config
	head.Common.Apply(&bc)
	if identity != nil {
		if err := identity(&bc); err != nil {
			return nil, fmt.Errorf("%s: %w", src.Path, err)
		}
	}
	bc.Safety.Interlocks = nil // they name the backend's signals, not known yet
	bc.Safety.EStop = false
	bc.Logger = log
	why := "The backend was never reached, so this device has no items yet: they come from the backend's own description, adopted when it first connects."
	if bc.Notes != "" {
		bc.Notes = why + " " + bc.Notes
	} else {
		bc.Notes = why
	}
	d, err := binding.New(bc)
	if err != nil {
		return nil, err
	}
	d.SetLink(false, fmt.Errorf("never reached: %w", never))
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pending{build: build, log: log, name: head.Adapter + " " + src.Path, cur: d, listeners: map[int]func(mhp.Notification){},
		ctx: ctx, cancel: cancel, done: make(chan struct{})}
	p.stops = append(p.stops, d.Listen(p.publish))
	log.Warn("backend never reached and no descriptor cache: serving the identity only until it connects", "config", src.Path, "err", never)
	go p.retry(head.Link.Defaults())
	return p, nil
}

func (p *Pending) retry(l LinkConfig) {
	defer close(p.done)
	b := NewBackoff(l.RetryMin, l.RetryMax, nil)
	for {
		t := time.NewTimer(b.Next())
		select {
		case <-p.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if p.try() {
			return
		}
	}
}

// try builds and starts the adapter's driver; it adopts one that reached
// the backend.
func (p *Pending) try() bool {
	ctx, cancel := context.WithTimeout(p.ctx, time.Minute)
	defer cancel()
	d, err := p.build(ctx)
	if err != nil {
		var never *NeverReachedError
		if !errors.As(err, &never) {
			// The backend answered, but its description does not build
			// (e.g. a device package refines an item it does not have):
			// say why in the link rather than "never reached".
			p.log.Warn("backend reached, but its description does not build; retrying", "config", p.name, "err", err)
			if cur, adopted := p.device(); !adopted {
				cur.SetLink(false, fmt.Errorf("backend reached, but its description does not build: %w", err))
			}
		}
		return false
	}
	if l := d.Link(); l != nil && !l.Connected {
		d.Close() // served from a cache written meanwhile: wait for the backend itself
		return false
	}
	if err := d.Start(ctx); err != nil {
		d.Close()
		p.log.Warn("backend reached, but its driver did not start; retrying", "config", p.name, "err", err)
		return false
	}
	p.mu.Lock()
	if p.ctx.Err() != nil {
		p.mu.Unlock()
		d.Close()
		return true
	}
	reason := p.estop
	old := p.cur
	p.cur, p.adopted = d, true
	for _, s := range p.stops {
		s()
	}
	p.stops = []func(){d.Listen(p.publish)}
	p.mu.Unlock()
	if reason != "" {
		_, _ = d.EStop(ctx, reason+" (latched before the backend was first reached)")
	}
	old.Close()
	p.log.Info("backend reached: its description is adopted", "config", p.name, "items", len(d.Descriptor().Signals)+len(d.Descriptor().Settings)+len(d.Descriptor().Actions))
	if l := d.Link(); l != nil {
		p.publish(mhp.Notification{Method: mhp.NotifyBackendLink, Params: map[string]any{"backend": l}})
	}
	return true
}

func (p *Pending) publish(n mhp.Notification) {
	p.mu.Lock()
	fns := make([]func(mhp.Notification), 0, len(p.listeners))
	for _, fn := range p.listeners {
		fns = append(fns, fn)
	}
	p.mu.Unlock()
	for _, fn := range fns {
		fn(n)
	}
}

// device returns the current driver and whether it was adopted.
func (p *Pending) device() (*binding.Driver, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cur, p.adopted
}

// Adopted reports whether the backend's description was adopted.
func (p *Pending) Adopted() bool { _, ok := p.device(); return ok }

// Driver is the driver calls go to: the identity-only one until adoption.
func (p *Pending) Driver() *binding.Driver { d, _ := p.device(); return d }

func (p *Pending) notStarted(what string) *mhp.Error {
	d, _ := p.device()
	why := "backend never reached"
	if l := d.Link(); l != nil && l.Error != "" {
		why = l.Error
	}
	return NotSent(what, errors.New(why))
}

// Close stops the retries and closes the current driver.
func (p *Pending) Close() error {
	p.cancel()
	<-p.done
	d, _ := p.device()
	return d.Close()
}

// Describe implements mhp.Device.
func (p *Pending) Describe(ctx context.Context, req mhp.DescribeRequest) (*mhp.Description, error) {
	d, _ := p.device()
	return d.Describe(ctx, req)
}

// Read implements mhp.Device.
func (p *Pending) Read(ctx context.Context, names []string) (*mhp.ReadResult, error) {
	d, _ := p.device()
	return d.Read(ctx, names)
}

// Subscribe implements mhp.Device.
func (p *Pending) Subscribe(ctx context.Context, names []string) (*mhp.SubscribeResult, error) {
	d, _ := p.device()
	return d.Subscribe(ctx, names)
}

// Unsubscribe implements mhp.Device.
func (p *Pending) Unsubscribe(ctx context.Context, names []string) error {
	d, _ := p.device()
	return d.Unsubscribe(ctx, names)
}

// Write implements mhp.Device: refused not_started until adoption.
func (p *Pending) Write(ctx context.Context, req mhp.WriteRequest) (*mhp.WriteResult, error) {
	d, ok := p.device()
	if !ok {
		return nil, p.notStarted("write " + req.Name)
	}
	return d.Write(ctx, req)
}

// Invoke implements mhp.Device: refused not_started until adoption.
func (p *Pending) Invoke(ctx context.Context, req mhp.InvokeRequest) (*mhp.InvokeResult, error) {
	d, ok := p.device()
	if !ok {
		return nil, p.notStarted("invoke " + req.Name)
	}
	return d.Invoke(ctx, req)
}

// Job implements mhp.Device.
func (p *Pending) Job(ctx context.Context, id string) (*mhp.Job, error) {
	d, _ := p.device()
	return d.Job(ctx, id)
}

// Jobs implements mhp.Device.
func (p *Pending) Jobs(ctx context.Context, req mhp.JobsRequest) ([]mhp.Job, error) {
	d, _ := p.device()
	return d.Jobs(ctx, req)
}

// CancelJob implements mhp.Device.
func (p *Pending) CancelJob(ctx context.Context, id string) (*mhp.Job, error) {
	d, _ := p.device()
	return d.CancelJob(ctx, id)
}

// PauseJob implements mhp.Device.
func (p *Pending) PauseJob(ctx context.Context, id string) (*mhp.Job, error) {
	d, _ := p.device()
	return d.PauseJob(ctx, id)
}

// ResumeJob implements mhp.Device.
func (p *Pending) ResumeJob(ctx context.Context, id string) (*mhp.Job, error) {
	d, _ := p.device()
	return d.ResumeJob(ctx, id)
}

// Acquire implements mhp.Device: refused until adoption (a lease of the
// identity-only device would not carry over).
func (p *Pending) Acquire(ctx context.Context, ttl time.Duration) (*mhp.Lease, error) {
	d, ok := p.device()
	if !ok {
		return nil, p.notStarted("lease")
	}
	return d.Acquire(ctx, ttl)
}

// Renew implements mhp.Device.
func (p *Pending) Renew(ctx context.Context) (*mhp.Lease, error) {
	d, _ := p.device()
	return d.Renew(ctx)
}

// Release implements mhp.Device.
func (p *Pending) Release(ctx context.Context) error {
	d, _ := p.device()
	return d.Release(ctx)
}

// Limits implements mhp.Device.
func (p *Pending) Limits(ctx context.Context) (*mhp.LimitsReport, error) {
	d, _ := p.device()
	return d.Limits(ctx)
}

// EStop implements mhp.Device; an estop latched before adoption is
// latched on the adopted driver too.
func (p *Pending) EStop(ctx context.Context, reason string) (*mhp.EStopResult, error) {
	p.mu.Lock()
	d, adopted := p.cur, p.adopted
	if !adopted {
		p.estop = reason
		if p.estop == "" {
			p.estop = "estop"
		}
	}
	p.mu.Unlock()
	return d.EStop(ctx, reason)
}

// Reset implements mhp.Device.
func (p *Pending) Reset(ctx context.Context) (*mhp.ResetResult, error) {
	p.mu.Lock()
	d, adopted := p.cur, p.adopted
	p.mu.Unlock()
	res, err := d.Reset(ctx)
	if err == nil && !adopted {
		p.mu.Lock()
		if !p.adopted {
			p.estop = ""
		}
		p.mu.Unlock()
	}
	return res, err
}

// Ping implements mhp.Device.
func (p *Pending) Ping(ctx context.Context) (*mhp.PingResult, error) {
	d, _ := p.device()
	return d.Ping(ctx)
}

// Listen implements mhp.Device: notifications of whichever driver is current.
func (p *Pending) Listen(fn func(mhp.Notification)) func() {
	p.mu.Lock()
	defer p.mu.Unlock()
	id := p.next
	p.next++
	p.listeners[id] = fn
	return func() {
		p.mu.Lock()
		delete(p.listeners, id)
		p.mu.Unlock()
	}
}

// EndSession implements mhp.Device.
func (p *Pending) EndSession(ctx context.Context) {
	d, _ := p.device()
	d.EndSession(ctx)
}

// Start implements the start of a served device: a Pending device is
// started when made (its retries run from then on), so Start does nothing.
func (p *Pending) Start(ctx context.Context) error { return nil }
