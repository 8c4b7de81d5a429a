package opcua

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/gopcua/opcua/id"
	"github.com/gopcua/opcua/ua"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/clock"
)

// Kind is the adapter kind of OPC UA config files (`adapter: opcua`).
const Kind = "opcua"

// Register adds the [Kind] "opcua" to r: its factory runs [Load], reads
// units and ranges from the server when it is up ([Probe]; a [RangeError]
// or a [KindError] refuses the file), then [New] with the source's Refine,
// and refines the driver with what Probe read (so that a later connection
// can replace it: refine.go); its discovery is [Discover].
func Register(r *adapters.Registry) error {
	if err := r.RegisterDiscovery(Kind, discoveryEntry); err != nil { // mhp init opcua (discover.go)
		return err
	}
	return r.Register(Kind, func(ctx context.Context, src adapters.Source) (*binding.Driver, error) {
		cfg, err := Load(src)
		if err != nil {
			return nil, err
		}
		// Units and ranges the file leaves out come from the server when it
		// is up; a limit wider than its EURange is refused here.
		d := cfg.withDefaults()
		pctx, cancel := context.WithTimeout(ctx, min(seconds(d.Timeouts.DialS), 3*time.Second)+seconds(d.Timeouts.RequestS))
		probed, perr := Probe(pctx, cfg, DialOptions{Logger: slog.Default()})
		cancel()
		var rerr *RangeError
		var kerr *KindError
		switch {
		case perr == nil:
		case errors.As(perr, &rerr), errors.As(perr, &kerr):
			return nil, fmt.Errorf("%s: %w", src.Path, perr)
		default:
			slog.Default().Warn(probeWarning(perr), "endpoint", cfg.Endpoint, "err", perr)
		}
		drv, err := New(ctx, cfg, Options{Options: adapters.Options{Refine: src.Refine}})
		if err == nil && perr == nil {
			// What the server said is the driver's first refinement, not
			// config: a later connection replaces it (refine.go).
			if _, rerr := drv.Refine(probeRefinement(cfg, probed)); rerr != nil {
				slog.Default().Warn("opcua: the server's units and ranges were not applied", "endpoint", cfg.Endpoint, "err", rerr)
			}
		}
		return drv, err
	})
}

// Load decodes (strictly) and validates a config file, resolving the
// certificate paths against the file's folder ([adapters.Source.Resolve]).
func Load(src adapters.Source) (Config, error) {
	var cfg Config
	if err := src.Decode(&cfg); err != nil {
		return Config{}, err
	}
	s := &cfg.Security
	s.ClientCertificate = src.Resolve(s.ClientCertificate)
	s.ClientKey = src.Resolve(s.ClientKey)
	if s.ServerCertificate != "" {
		if _, err := parseFingerprint(s.ServerCertificate); err != nil {
			s.ServerCertificate = src.Resolve(s.ServerCertificate)
		}
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, fmt.Errorf("%s: %w", src.Path, err)
	}
	return cfg, nil
}

// Options are the in-process options of [New], beyond the config file.
type Options struct {
	// Options are the options every adapter shares: the driver's Clock,
	// the LinkClock of the reconnect backoff (when Dial is nil), the Logger,
	// and Refine (edits the generated bindings, e.g. a poll interval or a
	// device package's descriptor).
	adapters.Options
	// Dial is the backend seam: it makes the [Client] when the driver
	// starts, and onConnect must run after every (re)connection. Default:
	// [Dial] over gopcua.
	Dial func(ctx context.Context, cfg Config, onConnect func(context.Context, Client) error) (Client, error)
	// KeepAlive is Conn's connection probe interval
	// ([DialOptions.KeepAlive]) when Dial is nil.
	KeepAlive time.Duration
}

// adapter is the mapping of one config onto bindings.
type adapter struct {
	cfg Config
	opt Options
	clk clock.Clock
	log *slog.Logger
	drv *binding.Driver

	mu        sync.Mutex
	cl        Client
	closeCl   func() error
	stopSub   func()
	subIDs    []*ua.NodeID              // the node ids of the running subscription
	subGen    int                       // generation of the running subscription
	stopFresh func()                    // stops watchFreshness
	latest    []sample                  // by signal index
	types     map[string]ua.TypeID      // node id -> built-in type of its value
	args      map[string][]*ua.Argument // method node id -> input arguments
	ladsNS    int                       // LADS namespace index, -1 unknown
	units     map[string]*ladsUnit      // functional unit node id -> resolved nodes
	progs     map[string]*programNodes  // program node id -> resolved nodes
	nodes     map[string]*ua.NodeID     // parsed node ids
	nsArray   []string                  // the server's namespace URIs
	live      map[string]bool           // signals read live (interlocks)
	sigByNode map[string][]int          // the signals of each configured node id
	info      map[string]nodeInfo       // setting node -> DataType, units, EURange
	badRange  map[string]string         // setting -> why its limits conflict with the EURange
	refined   bool                      // a connection read every signal's unit into the descriptor (refine.go)
	badKind   map[string]*KindError     // lads actions whose node is of a kind they cannot run (ladskind.go)

	// The shared subscription's state nodes (functional units, programs).
	watched      []*ua.NodeID
	watchIdx     map[string]int
	watchLatest  []*ua.DataValue
	listeners    map[int]*listener
	nextListener int
}

type sample struct {
	have bool
	dv   *ua.DataValue
	at   time.Time
	// floor is the source timestamp of a value confirmed by a write's
	// read-back: subscription values older than it are late news.
	floor time.Time
	// liveUntil: a write without read-back was applied; reads go to the
	// server until the subscription has surely caught up.
	liveUntil time.Time
}

// New validates cfg and builds its unstarted driver, which talks to the
// server through opt.Dial (default [Dial]). The driver connects in Start
// (an error when the server cannot be reached and reconnect.fail_fast is
// set) and keeps reconnecting after a loss. New itself does no I/O; ctx is
// for the shape every adapter shares.
func New(ctx context.Context, cfg Config, opt Options) (*binding.Driver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	a := &adapter{
		cfg:      cfg,
		opt:      opt,
		clk:      opt.Clock,
		log:      opt.Logger,
		latest:   make([]sample, len(cfg.Signals)),
		types:    map[string]ua.TypeID{},
		args:     map[string][]*ua.Argument{},
		units:    map[string]*ladsUnit{},
		progs:    map[string]*programNodes{},
		nodes:    map[string]*ua.NodeID{},
		ladsNS:   -1,
		info:     map[string]nodeInfo{},
		badRange: map[string]string{},
		badKind:  map[string]*KindError{},
	}
	if a.clk == nil {
		a.clk = clock.Real{}
	}
	if a.log == nil {
		a.log = slog.Default()
	}
	if a.opt.Dial == nil {
		a.opt.Dial = func(ctx context.Context, cfg Config, onConnect func(context.Context, Client) error) (Client, error) {
			c, err := Dial(ctx, cfg, DialOptions{Logger: a.log, KeepAlive: opt.KeepAlive, LinkClock: opt.LinkClock,
				Background: !cfg.Reconn.FailFast, OnLink: a.setLink,
				OnConnect: func(ctx context.Context, c *Conn) error { return onConnect(ctx, c) }})
			if err != nil {
				return nil, err
			}
			return c, nil
		}
	}
	a.sigByNode = map[string][]int{}
	for i, sig := range cfg.Signals {
		a.sigByNode[sig.Node] = append(a.sigByNode[sig.Node], i)
	}
	// Interlock signals are read live unless timeouts.interlock_max_age_s
	// lets a fresh subscription serve them; every other signal is served
	// from the subscription.
	a.live = map[string]bool{}
	for _, n := range cfg.Safety.Interlocks {
		a.live[n] = true
	}
	for _, s := range cfg.Settings {
		for _, n := range s.Interlocks {
			a.live[n] = true
		}
	}
	for _, it := range cfg.Actions {
		for _, n := range it.Interlocks {
			a.live[n] = true
		}
	}
	bc := binding.Config{Clock: a.clk, Logger: a.log}
	cfg.Common.Apply(&bc)
	for i, s := range cfg.Signals {
		spec := s.Signal
		if s.StaleAfterS > 0 {
			// Staleness is a matter of time passing, not of a new value:
			// the driver polls the cached value so that it turns null.
			bc.Signals = append(bc.Signals, binding.Signal{Spec: spec, Read: a.readSignal(i)})
		} else {
			bc.Signals = append(bc.Signals, binding.Signal{Spec: spec, Read: a.readSignal(i), Pushed: true})
		}
	}
	for _, s := range cfg.Settings {
		bc.Settings = append(bc.Settings, binding.Setting{Spec: s.Setting, Write: a.writeSetting(s)})
	}
	for _, it := range cfg.Actions {
		act := binding.Action{Spec: it.Action, Timeout: seconds(it.TimeoutS)}
		switch {
		case it.Method != nil:
			act.Run = a.runMethod(it)
			// A method call cannot be cancelled at the server.
			act.Spec.Cancellable = false
			act.Spec.Pausable = false
		case it.LADS != nil:
			act.Run = a.runLADS(it)
			act.Validate = a.validateKind(it)
			act.Spec.Cancellable = true
			act.Spec.Pausable = false
		case it.Program != nil:
			act.Run = a.runProgram(it)
			act.Pause = a.pauseProgram(it)
			act.Resume = a.resumeProgram(it)
			act.Spec.Cancellable = true
			act.Spec.Pausable = true
		}
		bc.Actions = append(bc.Actions, act)
	}
	if cfg.EStop != nil {
		bc.EStop = a.estop
	}
	bc.Setup = a.setup
	bc.Verify = a.verify
	bc.Close = a.close
	d, err := opt.Options.NewDriver(bc)
	if err != nil {
		return nil, err
	}
	a.drv = d
	return d, nil
}

// node returns the node id of s (validated by Config.Validate); an
// nsu= id is resolved against the server's namespace array, and one whose
// namespace the server lacks becomes an id no server knows (the request is
// then refused with BadNodeIdUnknown).
func (a *adapter) node(s string) *ua.NodeID {
	a.mu.Lock()
	defer a.mu.Unlock()
	if n, ok := a.nodes[s]; ok {
		return n
	}
	n := resolveNode(s, a.nsArray)
	if n.Namespace() != 0xFFFF {
		a.nodes[s] = n
	}
	return n
}

func (a *adapter) client() Client {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cl
}

// setup connects (or, unless reconnect.fail_fast, starts connecting in
// the background); every connection runs onConnect, which reads the types
// and structure and subscribes the signals.
func (a *adapter) setup(ctx context.Context) error {
	cl, err := a.opt.Dial(ctx, a.cfg, a.onConnect)
	if err != nil {
		return err
	}
	a.mu.Lock()
	var conflict string
	for _, s := range a.cfg.Settings {
		if why, bad := a.badRange[s.Name]; bad {
			conflict = why
			break
		}
	}
	a.mu.Unlock()
	var refuse error
	if conflict != "" {
		refuse = &RangeError{Why: conflict}
	} else if ke := a.firstBadKind(); ke != nil {
		refuse = ke
	}
	if refuse != nil {
		// The server was reachable at start and contradicts the config.
		if c, ok := cl.(interface{ Close() error }); ok {
			_ = c.Close()
		}
		return refuse
	}
	stop := make(chan struct{})
	a.mu.Lock()
	a.cl = cl
	if c, ok := cl.(interface{ Close() error }); ok {
		a.closeCl = c.Close
	}
	a.stopFresh = func() { close(stop) }
	a.mu.Unlock()
	go a.watchFreshness(stop)
	return nil
}

// setLink reports the link to the driver (Conn's OnLink).
func (a *adapter) setLink(up bool, err error) {
	if a.drv != nil {
		a.drv.SetLink(up, err)
	}
}

// subscribe (re)makes the one subscription when the resolved node ids
// differ from the running one's (first connection, namespace indexes moved
// on a restarted server). It carries the signals and every state node of
// the functional units and programs: jobs listen to it instead of making
// subscriptions of their own.
func (a *adapter) subscribe(ctx context.Context, cl Client) error {
	ids := make([]*ua.NodeID, len(a.cfg.Signals))
	for i, s := range a.cfg.Signals {
		ids[i] = a.node(s.Node)
	}
	watched, watchIdx := a.watchList()
	nSig := len(ids)
	ids = append(ids, watched...)
	if len(ids) == 0 {
		return nil
	}
	a.mu.Lock()
	if a.stopSub != nil && slices.EqualFunc(a.subIDs, ids, func(x, y *ua.NodeID) bool { return x.String() == y.String() }) {
		a.mu.Unlock()
		return nil
	}
	// A new generation: values of a subscription being replaced are
	// dropped, the shared state slots start empty.
	a.subGen++
	gen := a.subGen
	a.watched, a.watchIdx = watched, watchIdx
	a.watchLatest = make([]*ua.DataValue, len(watched))
	a.mu.Unlock()
	stop, err := cl.Subscribe(ctx, ids, func(i int, dv *ua.DataValue) {
		a.mu.Lock()
		cur := a.subGen == gen
		a.mu.Unlock()
		if !cur {
			return
		}
		if i < nSig {
			a.onValue(i, dv)
		} else {
			a.onWatch(i-nSig, dv)
		}
	})
	if err != nil {
		return fmt.Errorf("opcua: subscribe signals: %w", err)
	}
	a.mu.Lock()
	old := a.stopSub
	a.stopSub, a.subIDs = stop, ids
	a.mu.Unlock()
	if old != nil {
		a.log.Info("opcua: node ids moved on the server; subscription rebuilt", "endpoint", a.cfg.Endpoint)
		old()
	}
	return nil
}

func (a *adapter) close() error {
	a.mu.Lock()
	stop, closeCl, stopFresh := a.stopSub, a.closeCl, a.stopFresh
	a.stopSub, a.closeCl, a.stopFresh = nil, nil, nil
	a.mu.Unlock()
	if stopFresh != nil {
		stopFresh()
	}
	if stop != nil {
		stop()
	}
	if closeCl != nil {
		return closeCl()
	}
	return nil
}

// onConnect runs after every (re)connection: the value types of settings
// and safe writes, method signatures, the LADS namespace and the structure
// of functional units and programs. A node that cannot be read is logged
// and stays unknown: its item is refused when used.
func (a *adapter) onConnect(ctx context.Context, cl Client) error {
	a.mu.Lock()
	a.cl = cl
	a.mu.Unlock()
	res, err := cl.Read(ctx, []*ua.ReadValueID{{NodeID: ua.NewNumericNodeID(0, id.Server_NamespaceArray), AttributeID: ua.AttributeIDValue}})
	if err != nil {
		return fmt.Errorf("opcua: read the namespace array: %w", err)
	}
	if res[0].Value == nil || isBad(res[0].Status) {
		return fmt.Errorf("opcua: namespace array unreadable: %s", StatusName(res[0].Status))
	}
	if arr, ok := res[0].Value.Value().([]string); ok {
		a.mu.Lock()
		if a.nsArray != nil && !slices.Equal(a.nsArray, arr) {
			a.log.Warn("opcua: the server's namespace array changed; nsu= node ids are resolved afresh", "endpoint", a.cfg.Endpoint)
		}
		a.nsArray = arr
		a.nodes = map[string]*ua.NodeID{} // indexes may have changed
		a.mu.Unlock()
	}
	var typed []string
	for _, s := range a.cfg.Settings {
		if s.DataType == "" {
			typed = append(typed, s.Node)
		}
	}
	if a.cfg.EStop != nil {
		for _, w := range a.cfg.EStop.Write {
			typed = append(typed, w.Node)
		}
	}
	if len(typed) > 0 {
		req := make([]*ua.ReadValueID, len(typed))
		for i, n := range typed {
			req[i] = &ua.ReadValueID{NodeID: a.node(n), AttributeID: ua.AttributeIDDataType}
		}
		res, err := cl.Read(ctx, req)
		if err != nil {
			return fmt.Errorf("opcua: read data types: %w", err)
		}
		a.mu.Lock()
		for i, dv := range res {
			if isBad(dv.Status) || dv.Value == nil {
				a.log.Warn("opcua: data type unreadable", "node", typed[i], "status", StatusName(dv.Status))
				delete(a.types, typed[i])
				continue
			}
			a.types[typed[i]] = builtinOf(dataTypeOf(dv.Value.Value()))
		}
		a.mu.Unlock()
	}
	methods := map[string]bool{}
	for _, it := range a.cfg.Actions {
		if it.Method != nil {
			methods[it.Method.Method] = true
		}
	}
	if a.cfg.EStop != nil && a.cfg.EStop.Method != nil {
		methods[a.cfg.EStop.Method.Method] = true
	}
	for m := range methods {
		args, err := a.readArguments(ctx, cl, a.node(m))
		if err != nil {
			a.log.Warn("opcua: method input arguments unreadable; parameters are sent with their natural types", "method", m, "err", err)
			continue
		}
		a.mu.Lock()
		a.args[m] = args
		a.mu.Unlock()
	}
	needLADS := false
	for _, it := range a.cfg.Actions {
		if it.LADS != nil {
			needLADS = true
		}
	}
	if needLADS {
		ns, err := namespaceIndex(ctx, cl, LADSNamespace)
		if err != nil {
			a.log.Warn("opcua: LADS namespace not found; states are matched by name", "err", err)
			ns = -1
		}
		a.mu.Lock()
		a.ladsNS = ns
		a.mu.Unlock()
	}
	for _, it := range a.cfg.Actions {
		if it.LADS != nil {
			u, err := resolveLADS(ctx, cl, a.node(it.LADS.FunctionalUnit))
			a.noteKind(it, err)
			var kind errUnsupportedKind
			if errors.As(err, &kind) {
				a.log.Error("opcua: action "+it.Name+" cannot run: its invokes are refused NotSupported", "node", it.LADS.FunctionalUnit, "err", err)
				continue
			}
			if err != nil {
				a.log.Warn("opcua: LADS functional unit not resolved", "action", it.Name, "node", it.LADS.FunctionalUnit, "err", err)
				continue
			}
			a.mu.Lock()
			a.units[it.LADS.FunctionalUnit] = u
			a.mu.Unlock()
		}
		if it.Program != nil {
			p, err := resolveProgram(ctx, cl, a.node(it.Program.Node))
			if err != nil {
				a.log.Warn("opcua: program not resolved", "action", it.Name, "node", it.Program.Node, "err", err)
				continue
			}
			a.mu.Lock()
			a.progs[it.Program.Node] = p
			a.mu.Unlock()
		}
	}
	_ = a.checkRanges(ctx, cl)  // logged; the settings concerned refuse writes
	a.refineFromServer(ctx, cl) // until one connection read them all: units and EURanges into the descriptor
	return a.subscribe(ctx, cl)
}

// readArguments reads a method's InputArguments property.
func (a *adapter) readArguments(ctx context.Context, cl Client, method *ua.NodeID) ([]*ua.Argument, error) {
	refs, err := cl.Browse(ctx, method)
	if err != nil {
		return nil, err
	}
	var prop *ua.NodeID
	for _, r := range refs {
		if r.BrowseName != nil && r.BrowseName.Name == "InputArguments" && r.NodeID != nil {
			prop = r.NodeID.NodeID
		}
	}
	if prop == nil {
		return nil, nil // no input arguments
	}
	res, err := cl.Read(ctx, []*ua.ReadValueID{{NodeID: prop, AttributeID: ua.AttributeIDValue}})
	if err != nil {
		return nil, err
	}
	if isBad(res[0].Status) || res[0].Value == nil {
		return nil, res[0].Status
	}
	var out []*ua.Argument
	switch v := res[0].Value.Value().(type) {
	case []*ua.ExtensionObject:
		for _, eo := range v {
			arg, ok := eo.Value.(*ua.Argument)
			if !ok {
				return nil, fmt.Errorf("InputArguments holds %T, not Argument", eo.Value)
			}
			out = append(out, arg)
		}
	case *ua.ExtensionObject:
		arg, ok := v.Value.(*ua.Argument)
		if !ok {
			return nil, fmt.Errorf("InputArguments holds %T, not Argument", v.Value)
		}
		out = append(out, arg)
	default:
		return nil, fmt.Errorf("InputArguments is %T", v)
	}
	return out, nil
}

// namespaceIndex finds a namespace URI in the server's namespace array.
func namespaceIndex(ctx context.Context, cl Client, uri string) (int, error) {
	res, err := cl.Read(ctx, []*ua.ReadValueID{{NodeID: ua.NewNumericNodeID(0, id.Server_NamespaceArray), AttributeID: ua.AttributeIDValue}})
	if err != nil {
		return -1, err
	}
	if isBad(res[0].Status) || res[0].Value == nil {
		return -1, res[0].Status
	}
	arr, _ := res[0].Value.Value().([]string)
	for i, u := range arr {
		if u == uri {
			return i, nil
		}
	}
	return -1, fmt.Errorf("namespace %s not on the server", uri)
}

// ---- methods ----

// inputs converts the job's params to the method's input arguments, in
// declared order.
func (a *adapter) inputs(action string, params mhp.Params, values map[string]any, args []*ua.Argument) ([]*ua.Variant, error) {
	if args != nil && len(args) != len(params) {
		return nil, mhp.Errorf(mhp.CodeServerError, "action %s: the method takes %d input arguments but the config declares %d params", action, len(args), len(params)).
			With("reason", "signature_mismatch")
	}
	out := make([]*ua.Variant, 0, len(params))
	for i, p := range params {
		v, ok := values[p.Name]
		if !ok && p.Shape != nil && p.Shape.Default != nil {
			v, ok = p.Shape.Default, true
		}
		if !ok {
			return nil, mhp.Errorf(mhp.CodeInvalidValue, "action %s: param %s is needed by the method (positional argument %d)", action, p.Name, i+1).With("param", p.Name)
		}
		var t ua.TypeID
		rank := int32(-1)
		if args != nil {
			t = builtinOf(args[i].DataType)
			rank = args[i].ValueRank
		}
		if list, isList := v.([]any); isList && rank >= 0 && t != ua.TypeIDString {
			vv, err := arrayVariant(fmt.Sprintf("action %s param %s", action, p.Name), list, t)
			if err != nil {
				return nil, err
			}
			out = append(out, vv)
			continue
		}
		vv, err := toVariant(fmt.Sprintf("action %s param %s", action, p.Name), v, t)
		if err != nil {
			return nil, err
		}
		out = append(out, vv)
	}
	return out, nil
}

// arrayVariant converts a list to a one-dimensional array variant of t.
func arrayVariant(what string, list []any, t ua.TypeID) (*ua.Variant, error) {
	elems := make([]*ua.Variant, len(list))
	for i, x := range list {
		v, err := toVariant(fmt.Sprintf("%s[%d]", what, i), x, t)
		if err != nil {
			return nil, err
		}
		elems[i] = v
	}
	if len(elems) == 0 {
		return ua.NewVariant([]string{})
	}
	first := reflect.ValueOf(elems[0].Value())
	arr := reflect.MakeSlice(reflect.SliceOf(first.Type()), len(elems), len(elems))
	for i, e := range elems {
		arr.Index(i).Set(reflect.ValueOf(e.Value()))
	}
	return ua.NewVariant(arr.Interface())
}

// call calls a method once, classifying the outcome: refusal -> *mhp.Error,
// transport trouble after sending -> plain error (unknown), another Bad code
// -> binding.Failed (the method ran and reported failure).
func (a *adapter) call(ctx context.Context, what string, object, method *ua.NodeID, in []*ua.Variant) (*ua.CallMethodResult, error) {
	cl := a.client()
	if cl == nil {
		return nil, mhp.Errorf(mhp.CodeServerError, "%s refused: the OPC UA server is not connected (nothing was called)", what).With("reason", "not_connected")
	}
	res, err := cl.Call(ctx, &ua.CallMethodRequest{ObjectID: object, MethodID: method, InputArguments: in})
	if err != nil {
		return nil, transportError(what, err)
	}
	if isBad(res.StatusCode) {
		if IsRefusal(res.StatusCode) {
			e := refusalError(what, res.StatusCode)
			for i, r := range res.InputArgumentResults {
				if isBad(r) {
					e = e.With(fmt.Sprintf("argument_%d", i+1), StatusName(r))
				}
			}
			return nil, e
		}
		return nil, binding.Failed(fmt.Errorf("%s: the method reported %s", what, StatusName(res.StatusCode)),
			map[string]any{"opcua_status": StatusName(res.StatusCode)})
	}
	return res, nil
}

// callCtx detaches a call from the job's cancel (a call cannot be taken
// back once sent) and bounds it by the request timeout.
func (a *adapter) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), seconds(a.cfg.Timeouts.RequestS)+time.Second)
}

func (a *adapter) runMethod(item ActionItem) func(context.Context, *binding.Job) (any, error) {
	m := item.Method
	return func(ctx context.Context, job *binding.Job) (any, error) {
		a.mu.Lock()
		args := a.args[m.Method]
		a.mu.Unlock()
		in, err := a.inputs(item.Name, item.Params, job.Params(), args)
		if err != nil {
			return nil, err
		}
		cctx, cancel := a.callCtx(ctx)
		defer cancel()
		res, err := a.call(cctx, fmt.Sprintf("action %s: call %s", item.Name, m.Method), a.node(m.Object), a.node(m.Method), in)
		if err != nil {
			return nil, err
		}
		return outputs(m.Outputs, res), nil
	}
}

// outputs names a call's output arguments.
func outputs(names []string, res *ua.CallMethodResult) map[string]any {
	out := map[string]any{}
	for i, v := range res.OutputArguments {
		name := fmt.Sprintf("out%d", i)
		if i < len(names) && names[i] != "" {
			name = names[i]
		}
		out[name] = fromVariant(v)
	}
	if !isGood(res.StatusCode) {
		out["opcua_status"] = StatusName(res.StatusCode)
	}
	return out
}

// ---- estop ----

// estop calls the configured method, then writes every safe value; it
// reports the first failure after trying everything.
func (a *adapter) estop(ctx context.Context) error {
	var errs []error
	if m := a.cfg.EStop.Method; m != nil {
		a.mu.Lock()
		args := a.args[m.Method]
		a.mu.Unlock()
		in, err := a.inputs("estop", nil, nil, nil)
		if err == nil && len(args) > 0 {
			err = fmt.Errorf("estop method %s takes %d arguments; it must take none", m.Method, len(args))
		}
		if err == nil {
			_, err = a.call(ctx, "estop: call "+m.Method, a.node(m.Object), a.node(m.Method), in)
			if e, ok := mhp.AsError(err); ok && e.Data["opcua_status"] == StatusName(ua.StatusBadInvalidState) {
				// A LADS unit answers Abort/Stop with BadInvalidState when
				// it is already Stopped or Aborted: it is stopped.
				if st, isUnit := a.unitStateOf(ctx, a.node(m.Object)); isUnit && haltedLADS(st) {
					a.log.Info("opcua: estop: the functional unit is already "+st+"; nothing to stop", "method", m.Method)
					err = nil
				}
			}
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	for _, w := range a.cfg.EStop.Write {
		if _, err := a.write(ctx, "estop: write "+w.Node, w.Node, 0, normalise(w.Value)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// normalise turns YAML-decoded numbers into the driver's forms.
func normalise(v any) any {
	switch x := v.(type) {
	case int:
		return int64(x)
	case int32:
		return int64(x)
	case uint64:
		return float64(x)
	}
	return v
}
