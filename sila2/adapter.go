package sila2

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/openmhp/mhp-go"
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
		a.link.Attach(d.SetLink)
	}
	return d, a, nil
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

func isCore(f *Feature) bool {
	return f.category() == "core" || strings.HasPrefix(f.category(), "core.")
}

type featureIndex map[string]*Compiled

func (ix featureIndex) find(id string) (*Compiled, bool) {
	f, ok := ix[strings.ToLower(strings.TrimSpace(id))]
	return f, ok
}

func (ix featureIndex) names() string {
	seen := map[*Compiled]bool{}
	var out []string
	for _, f := range ix {
		if !seen[f] {
			seen[f] = true
			out = append(out, f.Feature.FullyQualifiedID())
		}
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

func itemKey(f *Compiled, id string) string {
	return strings.ToLower(f.Feature.FullyQualifiedID() + "/" + id)
}

// build maps the selected features onto bindings.
func (a *adapter) build(feats []*Compiled) (binding.Config, error) {
	cfg := a.cfg
	bc := binding.Config{
		PollInterval: seconds(cfg.PollIntervalS, time.Second),
		JobTimeout:   seconds(cfg.JobTimeoutS, time.Hour),
		Setup:        a.setup,
		Close:        a.close,
	}
	cfg.Common.Apply(&bc)
	ix := featureIndex{}
	for _, f := range feats {
		ix[strings.ToLower(f.Feature.FullyQualifiedID())] = f
		ix[strings.ToLower(f.Feature.Identifier)] = f
	}
	resolve := func(ref string) (*Compiled, string, error) {
		fid, item, err := splitRef(ref)
		if err != nil {
			return nil, "", err
		}
		f, ok := ix.find(fid)
		if !ok {
			return nil, "", fmt.Errorf("sila2: %s: the server does not implement feature %q (it has: %s)", ref, fid, ix.names())
		}
		return f, item, nil
	}
	propEntries := map[string]*PropertyEntry{}
	cmdEntries := map[string]*CommandEntry{}
	type pick struct {
		f    *Compiled
		id   string
		prop bool
	}
	var picks []pick
	picked := map[string]bool{}
	add := func(f *Compiled, id string, prop bool) {
		k := itemKey(f, id)
		if prop {
			k = "p:" + k
		} else {
			k = "c:" + k
		}
		if !picked[k] {
			picked[k] = true
			picks = append(picks, pick{f, id, prop})
		}
	}
	var selected []*Compiled
	for _, id := range cfg.Features {
		f, ok := ix.find(id)
		if !ok {
			return bc, fmt.Errorf("sila2: features: the server does not implement %q (it has: %s)", id, ix.names())
		}
		selected = append(selected, f)
	}
	if len(cfg.Features) == 0 && len(cfg.Properties) == 0 && len(cfg.Commands) == 0 {
		for _, f := range feats {
			if !isCore(f.Feature) {
				selected = append(selected, f)
			}
		}
	}
	for i := range cfg.Properties {
		e := &cfg.Properties[i]
		f, id, err := resolve(e.Property)
		if err != nil {
			return bc, err
		}
		p, ok := f.Feature.Property(id)
		if !ok {
			return bc, fmt.Errorf("sila2: properties: feature %s has no property %q", f.Feature.Identifier, id)
		}
		propEntries[itemKey(f, p.Identifier)] = e
	}
	for i := range cfg.Commands {
		e := &cfg.Commands[i]
		f, id, err := resolve(e.Command)
		if err != nil {
			return bc, err
		}
		c, ok := f.Feature.Command(id)
		if !ok {
			return bc, fmt.Errorf("sila2: commands: feature %s has no command %q", f.Feature.Identifier, id)
		}
		cmdEntries[itemKey(f, c.Identifier)] = e
	}
	for _, ref := range cfg.CancelledErrors {
		if strings.Contains(strings.ToLower(ref), "/definedexecutionerror/") {
			a.cancelledErrors[strings.ToLower(ref)] = true
			continue
		}
		f, id, err := resolve(ref)
		if err != nil {
			return bc, fmt.Errorf("sila2: cancelled_errors: %w", err)
		}
		known := false
		for _, e := range f.Feature.Errors {
			if strings.EqualFold(e.Identifier, id) {
				known = true
				id = e.Identifier
			}
		}
		if !known {
			return bc, fmt.Errorf("sila2: cancelled_errors: feature %s declares no error %q", f.Feature.Identifier, id)
		}
		a.cancelledErrors[strings.ToLower(f.FQID("DefinedExecutionError", id))] = true
	}
	var estopKey string
	if cfg.EStop != "" {
		f, id, err := resolve(cfg.EStop)
		if err != nil {
			return bc, err
		}
		c, ok := f.Feature.Command(id)
		if !ok {
			return bc, fmt.Errorf("sila2: estop: feature %s has no command %q", f.Feature.Identifier, id)
		}
		if c.IsObservable() || len(c.Parameters) > 0 {
			return bc, fmt.Errorf("sila2: estop: %s must be an unobservable command without parameters", cfg.EStop)
		}
		estopKey = itemKey(f, c.Identifier)
		fid, cid := f.Feature.FullyQualifiedID(), c.Identifier
		bc.EStop = func(ctx context.Context) error {
			_, err := a.b.Call(ctx, fid, cid, map[string]any{})
			if err != nil {
				return fmt.Errorf("sila2: estop command %s: %w", cid, err)
			}
			return nil
		}
	}
	for _, f := range selected {
		for _, p := range f.Feature.Properties {
			add(f, p.Identifier, true)
		}
		for _, c := range f.Feature.Commands {
			add(f, c.Identifier, false)
		}
	}
	for i := range cfg.Properties {
		f, id, _ := resolve(cfg.Properties[i].Property)
		p, _ := f.Feature.Property(id)
		add(f, p.Identifier, true)
	}
	for i := range cfg.Commands {
		f, id, _ := resolve(cfg.Commands[i].Command)
		c, _ := f.Feature.Command(id)
		add(f, c.Identifier, false)
	}
	for _, pk := range picks {
		k := itemKey(pk.f, pk.id)
		if pk.prop {
			e := propEntries[k]
			if e != nil && e.Hide {
				continue
			}
			p, _ := pk.f.Feature.Property(pk.id)
			bc.Signals = append(bc.Signals, a.signal(pk.f, p, e))
			continue
		}
		if k == estopKey {
			continue
		}
		e := cmdEntries[k]
		if e != nil && e.Hide {
			continue
		}
		c, _ := pk.f.Feature.Command(pk.id)
		if e != nil && e.Setting != "" {
			s, err := a.setting(pk.f, c, e)
			if err != nil {
				return bc, err
			}
			bc.Settings = append(bc.Settings, s)
			continue
		}
		act, err := a.action(pk.f, c, e)
		if err != nil {
			return bc, err
		}
		bc.Actions = append(bc.Actions, act)
	}
	return bc, nil
}

func describeText(display, desc string) string {
	d := strings.Join(strings.Fields(desc), " ")
	if display != "" && d != "" {
		return display + ": " + d
	}
	return display + d
}

func (a *adapter) signal(f *Compiled, p *Property, e *PropertyEntry) binding.Signal {
	shape := f.Shape(&p.DataType)
	spec := mhp.Signal{Name: SnakeCase(p.Identifier), Type: shape.Type, Unit: shape.Unit,
		Notes: describeText(strings.TrimSpace(p.DisplayName), p.Description)}
	if e != nil {
		if e.Signal != "" {
			spec.Name = e.Signal
		}
		if e.Unit != "" {
			spec.Unit = e.Unit
		}
		if e.Notes != "" {
			spec.Notes = e.Notes
		}
	}
	fid, pid := f.Feature.FullyQualifiedID(), p.Identifier
	if !p.IsObservable() {
		return binding.Signal{Spec: spec, Read: func(ctx context.Context) (binding.Sample, error) {
			v, err := a.b.Property(ctx, fid, pid)
			if err != nil {
				// A read changes nothing at the instrument: any failure is "no value".
				if ctx.Err() == nil {
					a.lost(err)
				}
				return binding.Sample{}, binding.Unavailable("%s: %v", spec.Name, err)
			}
			return binding.Sample{Value: v}, nil
		}}
	}
	name := spec.Name
	a.subs = append(a.subs, subscription{signal: name, feature: fid, property: pid})
	return binding.Signal{Spec: spec, Pushed: true, Read: func(ctx context.Context) (binding.Sample, error) {
		a.mu.Lock()
		c := a.cache[name]
		a.mu.Unlock()
		if c == nil || !c.ok {
			reason := "no value received yet"
			if c != nil && c.err != nil {
				reason = c.err.Error()
			}
			return binding.Sample{}, binding.Unavailable("%s: subscription: %s", name, reason)
		}
		return binding.Sample{Value: c.value, Time: c.at}, nil
	}}
}

// narrow intersects the server's limits with the config's: the config may
// only narrow. It returns an error when the config would widen a bound.
func narrow(where string, server, cfg *mhp.Limits) (*mhp.Limits, error) {
	if cfg == nil || cfg.Empty() {
		return server, nil
	}
	if server == nil || server.Empty() {
		c := *cfg
		return &c, nil
	}
	out := *server
	lower := func(name string, dst **float64, v *float64) error {
		if v == nil {
			return nil
		}
		if *dst != nil && *v < **dst {
			return fmt.Errorf("%s: %s %v would widen the server's %v", where, name, *v, **dst)
		}
		*dst = v
		return nil
	}
	upper := func(name string, dst **float64, v *float64) error {
		if v == nil {
			return nil
		}
		if *dst != nil && *v > **dst {
			return fmt.Errorf("%s: %s %v would widen the server's %v", where, name, *v, **dst)
		}
		*dst = v
		return nil
	}
	if err := lower("min", &out.Min, cfg.Min); err != nil {
		return nil, err
	}
	if err := upper("max", &out.Max, cfg.Max); err != nil {
		return nil, err
	}
	if err := lower("exclusiveMin", &out.ExclusiveMin, cfg.ExclusiveMin); err != nil {
		return nil, err
	}
	if err := upper("exclusiveMax", &out.ExclusiveMax, cfg.ExclusiveMax); err != nil {
		return nil, err
	}
	if len(cfg.Enum) > 0 {
		if len(server.Enum) > 0 {
			for _, v := range cfg.Enum {
				found := false
				for _, s := range server.Enum {
					if fmt.Sprint(s) == fmt.Sprint(v) {
						found = true
					}
				}
				if !found {
					return nil, fmt.Errorf("%s: enum value %v is not in the server's set %v", where, v, server.Enum)
				}
			}
		}
		out.Enum = cfg.Enum
	}
	if cfg.Pattern != "" {
		if server.Pattern != "" && server.Pattern != cfg.Pattern {
			return nil, fmt.Errorf("%s: the server already constrains the pattern to %q", where, server.Pattern)
		}
		out.Pattern = cfg.Pattern
	}
	if cfg.MinLength != nil {
		if server.MinLength != nil && *cfg.MinLength < *server.MinLength {
			return nil, fmt.Errorf("%s: minLength %d would widen the server's %d", where, *cfg.MinLength, *server.MinLength)
		}
		out.MinLength = cfg.MinLength
	}
	if cfg.MaxLength != nil {
		if server.MaxLength != nil && *cfg.MaxLength > *server.MaxLength {
			return nil, fmt.Errorf("%s: maxLength %d would widen the server's %d", where, *cfg.MaxLength, *server.MaxLength)
		}
		out.MaxLength = cfg.MaxLength
	}
	return &out, nil
}

func (a *adapter) approval(e *CommandEntry) mhp.Approval {
	if e != nil && e.Approval != "" {
		return e.Approval
	}
	if a.cfg.DefaultApproval != "" {
		return a.cfg.DefaultApproval
	}
	return mhp.ApprovalConfirm
}

func (a *adapter) setting(f *Compiled, c *Command, e *CommandEntry) (binding.Setting, error) {
	if c.IsObservable() || len(c.Parameters) != 1 {
		return binding.Setting{}, fmt.Errorf("sila2: commands: %s can be a setting only if it is unobservable with exactly one parameter", c.Identifier)
	}
	p := c.Parameters[0]
	shape := f.Shape(&p.DataType)
	lim, err := narrow("sila2: setting "+e.Setting, shape.Limits, e.Limits)
	if err != nil {
		return binding.Setting{}, err
	}
	spec := mhp.Setting{Name: e.Setting, Type: shape.Type, Unit: shape.Unit, Limits: lim, Approval: a.approval(e),
		Interlocks: e.Interlocks, DuringJob: e.DuringJob, Notes: describeText(strings.TrimSpace(c.DisplayName), c.Description)}
	if e.Unit != "" {
		spec.Unit = e.Unit
	}
	if e.Notes != "" {
		spec.Notes = e.Notes
	}
	pname := SnakeCase(p.Identifier)
	a.params[strings.ToLower(f.FQID("Command", c.Identifier, "Parameter", p.Identifier))] = paramInfo{name: e.Setting, limited: !lim.Empty()}
	fid, cid := f.Feature.FullyQualifiedID(), c.Identifier
	return binding.Setting{Spec: spec, Write: func(ctx context.Context, value any) (binding.WriteStatus, error) {
		_, err := a.b.Call(ctx, fid, cid, map[string]any{pname: value})
		if err == nil {
			return binding.Applied, nil
		}
		if me := a.refusal(e.Setting, err); me != nil {
			return binding.Applied, me
		}
		if se, ok := AsSiLAError(err); ok && (se.Kind == KindDefined || se.Kind == KindUndefined) {
			// The server answered that the command failed: it says what
			// happened, so the state is known and nothing was applied.
			return binding.Applied, mhp.Errorf(mhp.CodeServerError, "%s: the server reported: %s", e.Setting, se.Message).
				With("sila_error", silaErrorData(se))
		}
		return binding.Sent, fmt.Errorf("%s: write %v: outcome unknown: %w", e.Setting, value, err)
	}}, nil
}

func silaErrorData(se *Error) map[string]any {
	d := map[string]any{"kind": se.Kind.String(), "message": se.Message}
	if se.Identifier != "" {
		d["identifier"] = se.Identifier
	}
	if se.Parameter != "" {
		d["parameter"] = se.Parameter
	}
	if se.Kind == KindFramework {
		d["type"] = FrameworkErrorName(se.FrameworkType)
	}
	return d
}

// refusal maps the errors that mean "nothing was executed" to an *mhp.Error:
// encoding errors, ValidationErrors and the framework errors of an
// initiating call. Anything else returns nil.
func (a *adapter) refusal(item string, err error) *mhp.Error {
	if me, ok := mhp.AsError(err); ok {
		return me
	}
	if neverSent(err) {
		// No connection: gRPC sent nothing, the server never saw the call.
		a.lost(err)
		return adapters.NotSent("sila2: "+item, err)
	}
	se, ok := AsSiLAError(err)
	if !ok {
		return nil
	}
	if isLockRefusal(err) && (se.Kind == KindDefined || strings.Contains(strings.ToLower(se.Message), "lock")) {
		return mhp.Errorf(mhp.CodeNotLeased, "%s: the SiLA server is locked by another client: %s", item, se.Message).
			With("reason", "server_locked").With("sila_error", silaErrorData(se))
	}
	switch se.Kind {
	case KindValidation:
		info, known := a.params[strings.ToLower(se.Parameter)]
		field := info.name
		if !known {
			field = SnakeCase(lastPart(se.Parameter))
		}
		code := mhp.CodeInvalidValue
		if info.limited {
			code = mhp.CodeLimitViolation
		}
		return mhp.Errorf(code, "%s: the server refused %s: %s", item, field, se.Message).
			With("field", field).With("sila_error", silaErrorData(se))
	case KindFramework:
		switch se.FrameworkType {
		case FrameworkCommandExecutionNotAccepted:
			return mhp.Errorf(mhp.CodeServerError, "%s: the server did not accept the command: %s", item, se.Message).
				With("sila_error", silaErrorData(se))
		case FrameworkInvalidMetadata, FrameworkNoMetadataAllowed:
			code := mhp.CodeServerError
			a.mu.Lock()
			locked := a.lockID != ""
			a.mu.Unlock()
			if locked || strings.Contains(strings.ToLower(se.Message), "lock") {
				code = mhp.CodeNotLeased
			}
			return mhp.Errorf(code, "%s: the server refused the call's metadata: %s", item, se.Message).
				With("sila_error", silaErrorData(se))
		}
	}
	return nil
}

func lastPart(s string) string {
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		return s[i+1:]
	}
	if i := strings.LastIndexByte(s, '.'); i >= 0 {
		return s[:i]
	}
	return s
}

func (a *adapter) action(f *Compiled, c *Command, e *CommandEntry) (binding.Action, error) {
	name := SnakeCase(c.Identifier)
	if e != nil && e.Action != "" {
		name = e.Action
	}
	spec := mhp.Action{Name: name, Duration: mhp.DurationShort, Approval: a.approval(e),
		Notes: describeText(strings.TrimSpace(c.DisplayName), c.Description)}
	if c.IsObservable() {
		spec.Duration = mhp.DurationLong
		spec.Cancellable = a.cancellable
		spec.Pausable = a.pausable
	}
	var timeout time.Duration
	if e != nil {
		if e.Duration != "" {
			spec.Duration = e.Duration
		}
		spec.Interlocks = e.Interlocks
		spec.Concurrent = e.Concurrent
		if e.Notes != "" {
			spec.Notes = e.Notes
		}
		timeout = seconds(e.TimeoutS, 0)
	}
	declared := map[string]bool{}
	for _, p := range c.Parameters {
		pname := SnakeCase(p.Identifier)
		declared[pname] = true
		shape := f.Shape(&p.DataType)
		if e != nil {
			if pe, ok := e.Params[pname]; ok {
				lim, err := narrow("sila2: action "+name+" param "+pname, shape.Limits, pe.Limits)
				if err != nil {
					return binding.Action{}, err
				}
				shape.Limits = lim
				if pe.Unit != "" {
					shape.Unit = pe.Unit
				}
				if pe.Notes != "" {
					shape.Notes = pe.Notes
				}
			}
		}
		spec.Params = append(spec.Params, mhp.Param{Name: pname, Shape: shape})
		a.params[strings.ToLower(f.FQID("Command", c.Identifier, "Parameter", p.Identifier))] = paramInfo{name: pname, limited: !shape.Limits.Empty()}
	}
	if e != nil {
		for k := range e.Params {
			if !declared[k] {
				return binding.Action{}, fmt.Errorf("sila2: commands %s: params names %q, which the command does not have", c.Identifier, k)
			}
		}
	}
	if len(c.Responses) > 0 {
		ret := &mhp.Shape{Type: mhp.TypeObject, Properties: map[string]*mhp.Shape{}}
		for _, r := range c.Responses {
			ret.Properties[SnakeCase(r.Identifier)] = f.Shape(&r.DataType)
			ret.Required = append(ret.Required, SnakeCase(r.Identifier))
		}
		spec.Returns = ret
	}
	if len(c.Intermediate) > 0 {
		spec.Notes = strings.TrimSpace(spec.Notes + " " + intermediateNote(f, c))
	}
	fid, cid := f.Feature.FullyQualifiedID(), c.Identifier
	act := binding.Action{Spec: spec, Timeout: timeout}
	if !c.IsObservable() {
		act.Run = func(ctx context.Context, job *binding.Job) (any, error) {
			// Once sent, the command runs at the server: a cancel or estop does
			// not cut the call (that would make the outcome unknown); the reply
			// is awaited until the job's deadline.
			cctx, cancel := keepDeadline(ctx)
			defer cancel()
			res, err := a.b.Call(cctx, fid, cid, job.Params())
			if err != nil {
				if ctx.Err() != nil && a.isCancelledError(err) {
					return nil, binding.ErrCancelled
				}
				return nil, a.commandError(name, err)
			}
			return res, nil
		}
		return act, nil
	}
	hasIntermediate := len(c.Intermediate) > 0
	act.Run = func(ctx context.Context, job *binding.Job) (any, error) {
		return a.runObservable(ctx, job, name, fid, cid, hasIntermediate)
	}
	if a.pausable {
		act.Pause = func(ctx context.Context, job *binding.Job) error { return a.pauseControl(ctx, job, name, "Pause") }
		act.Resume = func(ctx context.Context, job *binding.Job) error { return a.pauseControl(ctx, job, name, "Resume") }
	}
	return act, nil
}

// intermediateNote lists an observable command's intermediate responses
// with their types: the job's progress carries each as
// detail.intermediate.<name>.
func intermediateNote(f *Compiled, c *Command) string {
	parts := make([]string, 0, len(c.Intermediate))
	for _, r := range c.Intermediate {
		parts = append(parts, SnakeCase(r.Identifier)+" ("+shapeText(f.Shape(&r.DataType))+")")
	}
	return "Intermediate responses, in job progress detail.intermediate: " + strings.Join(parts, ", ") + "."
}

// shapeText is a shape in a few words: type, unit, limits, item type.
func shapeText(sh *mhp.Shape) string {
	if sh == nil {
		return mhp.TypeAny
	}
	t := sh.Type
	if sh.Type == mhp.TypeArray && sh.Items != nil {
		t = "array of " + shapeText(sh.Items)
	}
	if sh.Type == mhp.TypeObject && len(sh.Properties) > 0 {
		names := make([]string, 0, len(sh.Properties))
		for k := range sh.Properties {
			names = append(names, k)
		}
		sort.Strings(names)
		t = "object {" + strings.Join(names, ", ") + "}"
	}
	if sh.Unit != "" {
		t += ", " + sh.Unit
	}
	if l := sh.Limits; l != nil {
		if l.Min != nil {
			t += fmt.Sprintf(", min %g", *l.Min)
		}
		if l.Max != nil {
			t += fmt.Sprintf(", max %g", *l.Max)
		}
		if len(l.Enum) > 0 {
			t += fmt.Sprintf(", one of %v", l.Enum)
		}
	}
	return t
}

// pauseControl asks the server's PauseController to pause or resume the
// job's command execution. The server's refusals (OperationNotSupported,
// InvalidCommandState, ...) refuse the request and change nothing.
func (a *adapter) pauseControl(ctx context.Context, job *binding.Job, action, verb string) error {
	a.mu.Lock()
	id, ok := a.running[job.ID()]
	a.mu.Unlock()
	if !ok {
		return mhp.Errorf(mhp.CodeDeviceBusy, "%s: job %s has no command running at the server yet", action, job.ID())
	}
	_, err := a.b.Call(ctx, PauseControllerID, verb, map[string]any{"CommandExecutionUUID": id})
	if err == nil {
		return nil
	}
	if me := a.refusal(action, err); me != nil {
		return me
	}
	if se, ok := AsSiLAError(err); ok && (se.Kind == KindDefined || se.Kind == KindUndefined) {
		code := mhp.CodeDeviceBusy
		if strings.EqualFold(se.ShortIdentifier(), "OperationNotSupported") {
			code = mhp.CodeNotSupported
		}
		return mhp.Errorf(code, "%s: the server refused to %s: %s", action, strings.ToLower(verb), se.Message).
			With("sila_error", silaErrorData(se))
	}
	return fmt.Errorf("%s: %s: %w", action, strings.ToLower(verb), err)
}

// commandError maps the error of a command call: refusals stay *mhp.Error,
// execution errors the server reported are binding.Failed with the SiLA
// error, anything else (connection errors) is a plain error: outcome unknown.
func (a *adapter) commandError(action string, err error) error {
	if me := a.refusal(action, err); me != nil {
		return me
	}
	if se, ok := AsSiLAError(err); ok && (se.Kind == KindDefined || se.Kind == KindUndefined) {
		data := map[string]any{"sila_error": silaErrorData(se)}
		if se.Identifier != "" {
			data["error_identifier"] = se.Identifier
		}
		return binding.Failed(fmt.Errorf("%s: %s", action, se.Error()), data)
	}
	return fmt.Errorf("%s: outcome unknown: %w", action, err)
}

// runObservable follows an observable command to its real end state.
func (a *adapter) runObservable(ctx context.Context, job *binding.Job, action, fid, cid string, intermediate bool) (any, error) {
	// The initiating call is not cut by a cancel either: once the server
	// confirms, the cancel goes through CancelController.
	x, err := a.b.Start(context.WithoutCancel(ctx), fid, cid, job.Params())
	if err != nil {
		return nil, a.commandError(action, err)
	}
	a.mu.Lock()
	a.running[job.ID()] = x.UUID()
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		delete(a.running, job.ID())
		a.mu.Unlock()
	}()
	// The command runs at the server now: keep talking to it after ctx ends
	// (cancel, estop, timeout) until it says how the command ended.
	follow, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	var cancelOK atomic.Bool
	// cancelSent is closed once the cancel request was answered (or not
	// sent: the job's context did not end, or the server cannot cancel).
	cancelSent := make(chan struct{})
	go func() {
		select {
		case <-follow.Done():
			close(cancelSent)
			return
		case <-ctx.Done():
		}
		if follow.Err() != nil {
			// Run already returned (the job's context ends after it): no cancel.
			close(cancelSent)
			return
		}
		if a.cancellable {
			cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), a.cancelWait)
			err := x.Cancel(cctx)
			ccancel()
			if err == nil {
				cancelOK.Store(true)
			} else {
				a.log.Warn("sila2: cancel refused", "action", action, "uuid", x.UUID(), "error", err)
			}
		}
		close(cancelSent)
		t := time.NewTimer(a.cancelWait)
		defer t.Stop()
		select {
		case <-t.C:
			stop()
		case <-follow.Done():
		}
	}()
	var progressMu sync.Mutex
	lastProgress := 0.0
	extra := map[string]any{}
	report := func(p float64, more map[string]any) {
		progressMu.Lock()
		defer progressMu.Unlock()
		if p >= 0 {
			lastProgress = p
		}
		for k, v := range more {
			extra[k] = v
		}
		cp := make(map[string]any, len(extra)+1)
		for k, v := range extra {
			cp[k] = v
		}
		cp["command_execution_uuid"] = x.UUID()
		job.Progress(lastProgress, cp)
	}
	if intermediate {
		go func() {
			_ = x.Intermediate(follow, func(v map[string]any) { report(-1, map[string]any{"intermediate": v}) })
		}()
	}
	final, err := a.follow(follow, x, func(i ExecInfo) {
		more := map[string]any{}
		if i.Remaining >= 0 {
			more["eta_s"] = i.Remaining.Seconds()
		}
		if i.Status == StatusWaiting {
			more["message"] = "waiting"
		}
		report(i.Progress, more)
	})
	if err != nil {
		if ctx.Err() != nil && follow.Err() != nil {
			return nil, fmt.Errorf("%s: no end state within %v after the job was stopped (uuid %s): outcome unknown", action, a.cancelWait, x.UUID())
		}
		return nil, fmt.Errorf("%s: lost the command (uuid %s): outcome unknown: %w", action, x.UUID(), err)
	}
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), a.cancelWait)
	defer rcancel()
	res, rerr := x.Result(rctx)
	if final.Status == StatusFinishedSuccessfully {
		if rerr != nil {
			return nil, fmt.Errorf("%s: finished successfully but _Result failed: outcome unknown: %w", action, rerr)
		}
		return res, nil
	}
	// finishedWithError: cancelled only when our CancelCommand succeeded.
	if ctx.Err() != nil {
		<-cancelSent
		if cancelOK.Load() {
			return nil, binding.ErrCancelled
		}
		if a.isCancelledError(rerr) {
			return nil, binding.ErrCancelled
		}
	}
	if rerr == nil {
		return nil, binding.Failed(fmt.Errorf("%s: finished with error, but _Result returned responses", action), nil)
	}
	if se, ok := AsSiLAError(rerr); ok && (se.Kind == KindDefined || se.Kind == KindUndefined) {
		return nil, a.commandError(action, rerr)
	}
	return nil, binding.Failed(fmt.Errorf("%s: finished with error: %w", action, rerr), nil)
}

// isCancelledError reports whether err is a defined execution error the
// config lists as "the command was cancelled".
func (a *adapter) isCancelledError(err error) bool {
	se, ok := AsSiLAError(err)
	return ok && se.Kind == KindDefined && a.cancelledErrors[strings.ToLower(se.Identifier)]
}

// keepDeadline returns a context that ctx's cancellation does not end but
// its deadline does.
func keepDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	base := context.WithoutCancel(ctx)
	if d, ok := ctx.Deadline(); ok {
		return context.WithDeadline(base, d)
	}
	return context.WithCancel(base)
}

// follow reads _Info until a finished status, resubscribing after a broken
// stream within the resubscribe window (and the lifetime of execution).
func (a *adapter) follow(ctx context.Context, x Execution, fn func(ExecInfo)) (ExecInfo, error) {
	var lastErr error
	var deadline time.Time
	backoff := 50 * time.Millisecond
	for {
		info, err := x.Follow(ctx, fn)
		if err == nil {
			return info, nil
		}
		if ctx.Err() != nil {
			return info, ctx.Err()
		}
		if _, ok := AsSiLAError(err); ok {
			// The server answered: INVALID_COMMAND_EXECUTION_UUID (it forgot
			// the command) or another SiLA error. No point retrying.
			return info, err
		}
		lastErr = err
		if deadline.IsZero() {
			window := a.resubscribe
			if l := x.Lifetime(); l > 0 && l < window {
				window = l
			}
			deadline = time.Now().Add(window)
		}
		if time.Now().After(deadline) {
			return info, fmt.Errorf("no _Info stream within %v: %w", a.resubscribe, lastErr)
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return info, ctx.Err()
		}
		if backoff < time.Second {
			backoff *= 2
		}
	}
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
			if d != nil {
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
