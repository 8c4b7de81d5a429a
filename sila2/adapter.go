package sila2

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/binding"
)

// Backend is the seam between the MHP mapping and the SiLA 2 wire
// ([Options.Backend]): [*Client] implements it over gRPC; silatest.Backend
// is a fake, a struct of funcs.
type Backend interface {
	// Property reads a property's current value.
	Property(ctx context.Context, feature, property string) (any, error)
	// Subscribe follows an observable property until ctx ends or the stream breaks.
	Subscribe(ctx context.Context, feature, property string, fn func(any) error) error
	// Call runs an unobservable command.
	Call(ctx context.Context, feature, command string, params map[string]any) (map[string]any, error)
	// Start initiates an observable command.
	Start(ctx context.Context, feature, command string, params map[string]any) (Execution, error)
}

var _ Backend = (*Client)(nil)

// Options are what a program, not the config file, gives [New]: the
// options every adapter shares ([adapters.Options]: clock, link clock,
// logger, Refine) and the SiLA 2 backend seam.
type Options struct {
	adapters.Options

	// Backend, when set, is the SiLA 2 wire the driver uses instead of the
	// gRPC connection New dials from [Config.Endpoint] and [Config.TLS]: a
	// different transport, a recording proxy, a test fake (package silatest
	// has one). New neither follows nor re-makes it (no backend link), sends
	// it no metadata (they are the Backend's business) and the driver's
	// Close does not close it. The LockController lock (lease or lifetime
	// mode) needs a [*Client] backend: with another one the default lock
	// mode is none and an explicit one is an error.
	Backend Backend
	// Features are the Feature Definitions (FDL XML) of the Backend's
	// server, which the driver is built from: a Backend cannot list them.
	// Cancellable and pausable actions follow from CancelController and
	// PauseController being among them. Required with Backend, refused
	// without it.
	Features []string
}

// New builds the driver of a SiLA 2 server, unstarted: it validates cfg,
// connects to [Config.Endpoint] (or takes [Options.Backend]), reads the
// server's features and maps them onto bindings. Start runs Setup, which
// subscribes to observable properties and takes the lock; Close closes
// the connection New made.
//
// With the server down at start, New builds the device from the
// descriptor cache of [Config.Link] and reports the link down (see
// [adapters.LinkConfig]).
func New(ctx context.Context, cfg Config, opt Options) (*binding.Driver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opt.Backend != nil {
		return newOn(&cfg, opt)
	}
	if len(opt.Features) > 0 {
		return nil, fmt.Errorf("sila2: Options.Features describe an Options.Backend; without one the features are read from the server %s", cfg.Endpoint)
	}
	client, err := Dial(ctx, ClientConfig{Endpoint: cfg.Endpoint, TLS: cfg.TLS.client(), CallTimeout: seconds(cfg.CallTimeoutS, 10*time.Second)})
	if err != nil {
		return nil, err
	}
	d, err := open(ctx, &cfg, opt, client)
	if err != nil {
		_ = client.Close()
		return nil, err
	}
	return d, nil
}

// open builds the driver over the connection New made: it reads the
// server's definitions (or the descriptor cache), follows the link and
// sends the config's metadata.
func open(ctx context.Context, cfg *Config, opt Options, client *Client) (*binding.Driver, error) {
	logger := opt.Log()
	// The server may be down at start: serve the cached definitions, report
	// the link down and reconnect (see adapters.LinkConfig).
	texts, downErr := client.FeatureDefinitions(ctx)
	if downErr != nil {
		if !serverDown(downErr) {
			return nil, fmt.Errorf("sila2: %s: %w", cfg.Endpoint, downErr)
		}
		var err error
		if texts, err = cachedFeatures(cfg, downErr); err != nil {
			return nil, err
		}
	} else if cfg.Link.DescriptorCache != "" {
		if err := adapters.SaveDescriptor(cfg.Link.DescriptorCache, Kind, cfg.Endpoint, serverDescription{Features: texts}); err != nil {
			logger.Warn("sila2: descriptor cache not written", "err", err)
		}
	}
	feats, err := client.CompileFeatures(texts)
	if err != nil {
		logger.Warn("sila2: some features could not be read", "endpoint", cfg.Endpoint, "error", err)
	}
	d, a, err := bind(cfg, feats, client, client, &owned{fdls: texts, downErr: downErr}, opt)
	if err != nil {
		return nil, err
	}
	if downErr == nil {
		if err := a.applyMetadata(ctx); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// newOn builds the driver over [Options.Backend] from [Options.Features].
func newOn(cfg *Config, opt Options) (*binding.Driver, error) {
	if len(opt.Features) == 0 {
		return nil, fmt.Errorf("sila2: Options.Backend needs Options.Features: the Feature Definitions of its server")
	}
	fw, err := NewFramework()
	if err != nil {
		return nil, err
	}
	feats := make([]*Compiled, 0, len(opt.Features))
	for i, text := range opt.Features {
		f, err := ParseFDL([]byte(text))
		if err != nil {
			return nil, fmt.Errorf("sila2: Options.Features[%d]: %w", i, err)
		}
		c, err := Compile(fw, f)
		if err != nil {
			return nil, fmt.Errorf("sila2: Options.Features[%d] %s: %w", i, f.Identifier, err)
		}
		feats = append(feats, c)
	}
	c, _ := opt.Backend.(*Client)
	d, _, err := bind(cfg, feats, opt.Backend, c, nil, opt)
	return d, err
}

// owned is what bind needs of a connection New made itself: the driver
// closes it, follows it (the backend link) and checks that a server coming
// back serves fdls, the definitions the device was built from; downErr is
// why the server was not there at start.
type owned struct {
	fdls    []string
	downErr error
}

// bind builds the driver; with own, the driver follows and closes client.
func bind(cfg *Config, feats []*Compiled, b Backend, client *Client, own *owned, opt Options) (*binding.Driver, *adapter, error) {
	logger := opt.Log()
	has := func(id string) bool {
		for _, f := range feats {
			if strings.EqualFold(f.Feature.FullyQualifiedID(), id) {
				return true
			}
		}
		return false
	}
	a := newAdapter(cfg, b, has(CancelControllerID), logger)
	a.client, a.ownsClient = client, own != nil
	a.pausable = has(PauseControllerID)
	mode, timeout, err := resolveLockMode(cfg, has(LockControllerID), client)
	if err != nil {
		return nil, nil, err
	}
	a.lockMode, a.lockTimeout = mode, timeout
	if client != nil && own != nil {
		// Only a connection the adapter made is followed and re-made.
		a.fdls = own.fdls
		a.link = adapters.NewLink(adapters.LinkOptions{Name: "SiLA 2 server " + cfg.Endpoint, Config: cfg.Link,
			Probe: a.probe, ProbeTimeout: 3 * seconds(cfg.CallTimeoutS, 10*time.Second), Clock: opt.LinkClock, Logger: logger})
		if own.downErr != nil {
			a.link.Down(own.downErr)
		} else {
			a.link.Up()
		}
	}
	bc, err := a.build(feats)
	if err != nil {
		return nil, nil, err
	}
	if mode == LockLease {
		bc.Lease = a.leaseHook
	}
	bc.Logger = logger
	d, err := opt.Options.NewDriver(bc)
	if err != nil {
		return nil, nil, err
	}
	a.setDriver(d)
	if a.link != nil {
		a.link.Attach(func(up bool, err error) {
			d.SetLink(up, err)
			if up {
				a.publishCached(d)
			}
		})
	}
	return d, a, nil
}

// publishCached publishes the subscribed values cached while the link was
// down, right after the link-up.
func (a *adapter) publishCached(d *binding.Driver) {
	type pending struct {
		name string
		c    cached
	}
	var out []pending
	a.mu.Lock()
	for _, s := range a.subs {
		if c := a.cache[s.signal]; c != nil && c.ok {
			out = append(out, pending{s.signal, *c})
		}
	}
	a.mu.Unlock()
	for _, p := range out {
		d.PublishSignal(p.name, binding.Sample{Value: p.c.value, Time: p.c.at})
	}
}

// adapter is one driver's mapping state.
type adapter struct {
	cfg         *Config
	b           Backend
	client      *Client // nil when the backend is not a Client
	ownsClient  bool
	cancellable bool
	pausable    bool
	log         *slog.Logger
	cancelWait  time.Duration
	resubscribe time.Duration

	mu      sync.Mutex
	driver  *binding.Driver
	cache   map[string]*cached // observable properties, by signal name
	subs    []subscription
	stopSub context.CancelFunc
	wg      sync.WaitGroup
	lockID  string            // the identifier of the lock held now; "" when unlocked
	running map[string]string // job id -> command execution UUID of observable commands

	// cancelledErrors are lower-case fully qualified defined error ids meaning "cancelled".
	cancelledErrors map[string]bool

	// params maps fully qualified parameter ids (lower case) to MHP names, for ValidationErrors.
	params map[string]paramInfo

	// lockMode is LockLease, LockLifetime or LockNone; lockTimeout the
	// LockServer timeout (0: none).
	lockMode    string
	lockTimeout time.Duration
	// lockMu serialises LockServer and UnlockServer: lease hooks run on
	// their own goroutines, a release may still be pending when the next
	// lease is acquired.
	lockMu     sync.Mutex
	held       *heldLock      // guarded by lockMu
	leases     map[string]int // guarded by lockMu: granted lease acquires not yet released, per holder
	lockClosed bool           // guarded by lockMu: Close has given the lock back

	// link follows the connection New made (nil over Options.Backend); fdls are the
	// definitions the device was built from, which a server coming back
	// must still serve.
	link *adapters.Link
	fdls []string
}

type paramInfo struct {
	name    string
	limited bool
}

type cached struct {
	value any
	at    time.Time
	err   error
	ok    bool
}

type subscription struct {
	signal, feature, property string
}

func newAdapter(cfg *Config, b Backend, cancellable bool, log *slog.Logger) *adapter {
	return &adapter{cfg: cfg, b: b, cancellable: cancellable, log: log,
		cancelWait:  seconds(cfg.CancelWaitS, 30*time.Second),
		resubscribe: seconds(cfg.ResubscribeS, 10*time.Second),
		leases:      map[string]int{}, cache: map[string]*cached{}, running: map[string]string{}, params: map[string]paramInfo{}, cancelledErrors: map[string]bool{}}
}

func (a *adapter) setDriver(d *binding.Driver) {
	a.mu.Lock()
	a.driver = d
	a.mu.Unlock()
}

// setup starts the subscriptions and, in lifetime mode, takes the lock.
func (a *adapter) setup(ctx context.Context) error {
	if a.link != nil {
		a.link.Start()
	}
	if a.lockMode == LockLifetime && (a.link == nil || a.link.Connected()) {
		id := a.cfg.Lock.Identifier
		if id == "" {
			id = randomID()
		}
		a.lockMu.Lock()
		err := a.takeLockLocked(ctx, "", id, a.lockTimeout)
		a.lockMu.Unlock()
		if err != nil {
			return err
		}
	}
	subCtx, cancel := context.WithCancel(context.Background())
	a.mu.Lock()
	a.stopSub = cancel
	a.mu.Unlock()
	for _, s := range a.subs {
		a.wg.Add(1)
		go a.runSubscription(subCtx, s)
	}
	return nil
}

// runSubscription keeps one observable property subscribed: each value is
// cached and published; a broken stream makes the signal unavailable until
// a resubscription delivers a value again.
func (a *adapter) runSubscription(ctx context.Context, s subscription) {
	defer a.wg.Done()
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := a.b.Subscribe(ctx, s.feature, s.property, func(v any) error {
			backoff = 100 * time.Millisecond
			now := time.Now()
			a.mu.Lock()
			a.cache[s.signal] = &cached{value: v, at: now, ok: true}
			d := a.driver
			a.mu.Unlock()
			// While the link still reads down (a resubscription after a
			// restart is quicker than the link's probe, which also checks
			// it is the same server), the value is only cached: it is
			// published when the link is reported up (linkChanged), so no
			// update comes before the link-up.
			if d != nil && (a.link == nil || a.link.Connected()) {
				d.PublishSignal(s.signal, binding.Sample{Value: v, Time: now})
			}
			return nil
		})
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			err = errors.New("subscription ended")
		}
		a.lost(err)
		a.mu.Lock()
		a.cache[s.signal] = &cached{err: err}
		a.mu.Unlock()
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
		if backoff < 5*time.Second {
			backoff *= 2
		}
	}
}

func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func (a *adapter) close() error {
	if a.link != nil {
		a.link.Close()
	}
	a.mu.Lock()
	stop := a.stopSub
	a.mu.Unlock()
	if stop != nil {
		stop()
	}
	a.wg.Wait()
	var errs []error
	// The lock (lifetime, or a lease's whose release has not run yet) is
	// given back before the connection closes; later lease hooks are no-ops.
	a.lockMu.Lock()
	a.lockClosed = true
	if a.held != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		errs = append(errs, a.giveLockLocked(ctx))
		cancel()
	}
	a.lockMu.Unlock()
	if a.client != nil && a.ownsClient {
		errs = append(errs, a.client.Close())
	}
	return errors.Join(errs...)
}
