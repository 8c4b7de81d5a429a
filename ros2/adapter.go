package ros2

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/clock"
)

// Options are the parts of an adapter a config file cannot hold: the
// options every adapter shares ([adapters.Options]: Clock, LinkClock,
// Logger, Refine) and the backend seam. LinkClock times the [Client]'s
// redial backoff ([ClientOptions.BackoffClock]).
type Options struct {
	adapters.Options
	// Conn, when set, is used instead of dialling [Config.URL] (a test
	// fake, a shared connection); the adapter does not close it, and its
	// link is the caller's business (the driver does not report it).
	// Nil dials a [Client] at Start.
	Conn Conn
}

// New validates cfg and builds the robot's driver, unstarted: nothing is
// dialled until Start connects (Setup); Close disconnects. New does no
// I/O, so ctx is not used.
func New(ctx context.Context, cfg Config, opt Options) (*binding.Driver, error) {
	_, d, err := build(cfg, opt)
	return d, err
}

// build is New that also returns the adapter, for the package's tests.
func build(cfg Config, opt Options) (*adapter, *binding.Driver, error) {
	a, bc, err := newAdapter(cfg, opt)
	if err != nil {
		return nil, nil, err
	}
	d, err := opt.Options.NewDriver(bc)
	if err != nil {
		return nil, nil, err
	}
	a.bind(d)
	return a, d, nil
}

// adapter is the mapping of one robot's topics, services and actions onto
// bindings.
type adapter struct {
	cfg  Config
	opts Options
	clk  clock.Clock
	log  *slog.Logger

	reqTimeout time.Duration

	mu     sync.Mutex
	conn   Conn
	client *Client // owned: closed in Close
	unsubs []func()
	ctx    context.Context // lives until Close: background cancels after a drop
	stop   context.CancelFunc

	signals   map[string]*topicValue // by signal name
	confirms  map[string]*topicValue // by setting name
	actionlib map[string]*actionlibRouter

	// setLink reports the backend link to the driver (Driver.SetLink);
	// linkMu serialises the reports.
	setLink func(up bool, err error)
	linkMu  sync.Mutex
	// linkUp and linkErr are the client's last report; configErr, once
	// check_types found a mismatch after start, keeps the link reported down.
	linkUp    bool
	linkErr   error
	upCh      chan struct{} // closed while linkUp
	configErr error
	// bridge is what the probe learnt of the bridge; probed is set once it ran.
	bridge  Bridge
	probed  bool
	probing bool
	// actionTypes keeps, per action name, the verdict on its server's
	// type once rosapi gave one (nil: matches; errCannotCheck: rosapi
	// cannot tell), so each goal asks only for the server list.
	actionTypes map[string]error
	setupDone   bool
	// inflight counts jobs that talk to the robot right now (goals and
	// service calls), for the link-lost log's goals_in_flight.
	inflight atomic.Int64
}

// linkUpCh is closed while the client reports the link up.
func (a *adapter) linkUpCh() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.upCh
}

// bind connects the adapter to its driver: link reports go to SetLink.
func (a *adapter) bind(d *binding.Driver) {
	a.mu.Lock()
	a.setLink = d.SetLink
	a.mu.Unlock()
}

// onLink receives the client's link reports.
func (a *adapter) onLink(up bool, err error) {
	a.mu.Lock()
	wasUp := a.linkUp
	a.linkUp, a.linkErr = up, err
	probed := a.probed
	switch {
	case up && !wasUp:
		close(a.upCh)
	case !up && wasUp:
		a.upCh = make(chan struct{})
	}
	a.mu.Unlock()
	if wasUp && !up {
		a.log.Warn("ros2: link to rosbridge lost", "err", err, "goals_in_flight", a.inflight.Load())
	}
	a.mu.Lock()
	later := a.setupDone && !probed
	a.mu.Unlock()
	if up && later {
		// The bridge came up after the device started: report the link
		// once the probe and the checks ran.
		a.maybeProbe()
		return
	}
	a.reportLink()
}

// maybeProbe runs the probe and the checks in the background once the
// link is up after a start without it (the bridge came up after the
// device), and reports the link when done.
func (a *adapter) maybeProbe() {
	a.mu.Lock()
	run := a.setupDone && a.linkUp && !a.probed && !a.probing
	if run {
		a.probing = true
	}
	a.mu.Unlock()
	if !run {
		return
	}
	go func() {
		defer func() {
			a.mu.Lock()
			a.probing = false
			a.mu.Unlock()
			a.reportLink()
		}()
		wait := time.Second
		for {
			ctx, cancel := context.WithTimeout(a.ctx, 4*a.reqTimeout)
			err := a.probeAndCheck(ctx, a.connection())
			cancel()
			switch {
			case err == nil:
				return
			case !transient(err):
				a.mu.Lock()
				a.configErr = err
				a.mu.Unlock()
				a.log.Error("ros2: the robot does not match the config; the device stays unusable until it is fixed and restarted", "err", err)
				return
			}
			a.log.Warn("ros2: rosapi did not answer the probe; retrying", "err", err, "in", wait)
			t := time.NewTimer(wait)
			select {
			case <-a.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			wait = min(2*wait, 30*time.Second)
			a.mu.Lock()
			up := a.linkUp
			a.mu.Unlock()
			if !up {
				return // the next link-up probes again
			}
		}
	}()
}

// transient reports whether err is the link's fault rather than an answer:
// a probe that failed so is tried again.
func transient(err error) bool {
	return errors.Is(err, ErrNotConnected) || errors.Is(err, ErrConnLost) || errors.Is(err, ErrNoReply) ||
		errors.Is(err, ErrNotSent) || errors.Is(err, context.DeadlineExceeded)
}

// reportLink tells the driver the link as it stands.
func (a *adapter) reportLink() {
	if a.opts.Conn != nil {
		return // a Conn from the caller: its link is the caller's business
	}
	// One report at a time, so that the driver ends with the latest state.
	a.linkMu.Lock()
	defer a.linkMu.Unlock()
	a.mu.Lock()
	set, up, err := a.setLink, a.linkUp, a.linkErr
	if up && a.cfg.CheckTypes && !a.probed {
		up, err = false, errors.New("check_types has not run yet: rosapi did not answer; retrying")
	}
	if a.configErr != nil {
		up, err = false, a.configErr
	}
	a.mu.Unlock()
	if set != nil {
		set(up, err)
	}
}

func newAdapter(cfg Config, opts Options) (*adapter, binding.Config, error) {
	if err := cfg.Validate(); err != nil {
		return nil, binding.Config{}, err
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	a := &adapter{
		cfg: cfg, opts: opts, clk: opts.Clock, log: opts.Logger,
		reqTimeout: seconds(cfg.RequestTimeoutS, 5*time.Second),
		signals:    map[string]*topicValue{},
		confirms:   map[string]*topicValue{},
		actionlib:  map[string]*actionlibRouter{},
	}
	a.ctx, a.stop = context.WithCancel(context.Background())
	a.upCh = make(chan struct{})
	bc := binding.Config{
		Clock:        opts.Clock,
		Setup:        a.setup,
		Close:        a.close,
		PollInterval: seconds(cfg.PollIntervalS, 0),
		Logger:       opts.Logger,
	}
	cfg.Common.Apply(&bc)
	for _, s := range cfg.Signals {
		path, _ := parsePath(s.Field)
		tv := newTopicValue(s.Name, s.Topic, s.Type, path, a.clk)
		a.signals[s.Name] = tv
		bc.Signals = append(bc.Signals, binding.Signal{Spec: s.Signal, Read: tv.reader(seconds(s.MaxAgeS, 0))})
	}
	for _, s := range cfg.Settings {
		bc.Settings = append(bc.Settings, binding.Setting{Spec: s.Setting, Write: a.writer(s)})
	}
	for _, ac := range cfg.Actions {
		spec := ac.Action
		act := binding.Action{Spec: spec, FaultOnFailure: ac.FaultOnFailure, Timeout: seconds(ac.TimeoutS, 0)}
		switch {
		case ac.Service != "":
			if act.Spec.Duration == "" {
				act.Spec.Duration = mhp.DurationShort
			}
			if act.Timeout == 0 {
				act.Timeout = a.reqTimeout
			}
			act.Run = a.serviceRun(ac)
		case ac.ROSAction != "":
			act.Run = a.goalRun(ac)
		default:
			r := a.actionlib[ac.Actionlib]
			if r == nil {
				r = &actionlibRouter{ns: ac.Actionlib, typ: ac.ActionType, goals: map[string]*alGoal{}}
				a.actionlib[ac.Actionlib] = r
			}
			act.Run = a.actionlibRun(ac, r)
		}
		bc.Actions = append(bc.Actions, act)
	}
	if cfg.EStop != nil {
		bc.EStop = a.estop
	}
	return a, bc, nil
}

// refusal is the error of a request the robot never received or refused
// before anything took effect.
func refusal(item, reason string, format string, args ...any) *mhp.Error {
	return mhp.Errorf(mhp.CodeServerError, "%s: %s", item, fmt.Sprintf(format, args...)).With("reason", reason)
}

// classify turns a Conn error into the hook contract: nothing sent or
// rejected by rosbridge before anything ran -> *mhp.Error; anything else
// -> a plain error (outcome unknown).
func classify(item string, err error) error {
	var se *ServiceError
	switch {
	case errors.Is(err, ErrNotConnected), errors.Is(err, ErrClosed):
		return refusal(item, "not_connected", "the robot's rosbridge is not connected, nothing was sent")
	case errors.Is(err, ErrNotSent):
		return refusal(item, "not_sent", "the request ended before it was sent: %v", err)
	case errors.As(err, &se) && se.NothingExecuted():
		return refusal(item, "rosbridge_rejected", "rosbridge rejected the call before it ran: %s", se.Message).
			With("backend_error", se.Message)
	}
	return fmt.Errorf("%s: %w", item, err)
}

func (a *adapter) connection() Conn {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.conn
}

func (a *adapter) setup(ctx context.Context) error {
	conn := a.opts.Conn
	if conn == nil {
		copts := ClientOptions{
			RequestTimeout: a.reqTimeout,
			BackoffInitial: seconds(a.cfg.Reconnect.InitialS, 0),
			BackoffMax:     seconds(a.cfg.Reconnect.MaxS, 0),
			NoReconnect:    a.cfg.Reconnect.Disabled,
			Clock:          a.clk,
			BackoffClock:   a.opts.LinkClock,
			Logger:         a.log,
			OnLink:         a.onLink,
		}
		connectTimeout := seconds(a.cfg.ConnectTimeoutS, 10*time.Second)
		var c *Client
		if a.cfg.FailFast {
			cctx, cancel := context.WithTimeout(ctx, connectTimeout)
			defer cancel()
			var err error
			if c, err = Dial(cctx, a.cfg.URL, copts); err != nil {
				return err
			}
		} else {
			// Start whatever the bridge does; give a reachable one a moment
			// so that the checks below run at start.
			c = Connect(a.cfg.URL, copts)
			wctx, cancel := context.WithTimeout(ctx, min(connectTimeout, firstConnectWait))
			_ = c.WaitConnected(wctx)
			cancel()
		}
		a.mu.Lock()
		a.client = c
		a.mu.Unlock()
		conn = c
	}
	a.mu.Lock()
	a.conn = conn
	a.mu.Unlock()
	if a.connected(conn) {
		if err := a.probeAndCheck(ctx, conn); err != nil {
			if !transient(err) || a.opts.Conn != nil {
				return err
			}
			// The link failed during the probe: it is tried again in the
			// background once the start is done.
			a.log.Warn("ros2: rosapi probe at start failed; retrying in the background", "err", err)
		}
	} else {
		a.log.Warn("ros2: rosbridge not reachable at start; serving with the backend link down and dialling with backoff", "url", a.cfg.URL, "err", a.lastLinkErr())
		a.reportLink()
	}
	if adv, ok := conn.(interface {
		Advertise(ctx context.Context, topic, typ string) error
	}); ok {
		// Publishers up front: the first estop or goal must not race its
		// own advertise (ROS 1 loses such publishes). The estop topic goes
		// on the estop connection.
		for topic, typ := range a.publishedTopics() {
			actx := ctx
			if e := a.cfg.EStop; e != nil && e.Topic == topic {
				actx = StopPath(ctx)
			}
			if err := adv.Advertise(actx, topic, typ); err != nil && !errors.Is(err, ErrNotConnected) {
				return fmt.Errorf("ros2: advertise %s: %w", topic, err)
			}
		}
	}
	sub := func(s Subscription, fn func(TopicEvent)) error {
		un, err := conn.Subscribe(ctx, s, fn)
		if err != nil {
			return fmt.Errorf("ros2: subscribe %s: %w", s.Topic, err)
		}
		a.mu.Lock()
		a.unsubs = append(a.unsubs, un)
		a.mu.Unlock()
		return nil
	}
	for _, s := range a.cfg.Signals {
		tv := a.signals[s.Name]
		tv.start()
		if err := sub(Subscription{Topic: s.Topic, Type: s.MsgType, ThrottleMs: s.ThrottleMs, QueueLength: s.QueueLength}, tv.onEvent); err != nil {
			return err
		}
	}
	for _, s := range a.cfg.Settings {
		if s.Confirm == nil {
			continue
		}
		path, _ := parsePath(s.Confirm.Field)
		tv := newTopicValue(s.Name, s.Confirm.Topic, s.Type, path, a.clk)
		tv.start()
		a.mu.Lock()
		a.confirms[s.Name] = tv
		a.mu.Unlock()
		if err := sub(Subscription{Topic: s.Confirm.Topic, Type: s.Confirm.MsgType}, tv.onEvent); err != nil {
			return err
		}
	}
	for _, r := range a.actionlib {
		if err := sub(Subscription{Topic: r.ns + "/result", Type: r.typ + "ActionResult"}, r.onResult); err != nil {
			return err
		}
		if err := sub(Subscription{Topic: r.ns + "/feedback", Type: r.typ + "ActionFeedback"}, r.onFeedback); err != nil {
			return err
		}
		if err := sub(Subscription{Topic: r.ns + "/status", Type: "actionlib_msgs/GoalStatusArray"}, r.onStatus); err != nil {
			return err
		}
	}
	a.mu.Lock()
	a.setupDone = true
	probed := a.probed
	a.mu.Unlock()
	if probed {
		a.reportLink()
	}
	a.maybeProbe() // the link may have come up during the start
	return nil
}

// firstConnectWait is how long a start without fail_fast waits for the
// first connection before serving with the link down.
const firstConnectWait = 2 * time.Second

// connected reports whether conn is up: a Client says so; any other Conn
// is taken as up.
func (a *adapter) connected(conn Conn) bool {
	if c, ok := conn.(*Client); ok {
		return c.Connected()
	}
	return true
}

func (a *adapter) lastLinkErr() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.linkErr
}

// publishedTopics lists every topic the adapter publishes on, with its type.
func (a *adapter) publishedTopics() map[string]string {
	out := map[string]string{}
	for _, s := range a.cfg.Settings {
		if s.Topic != "" {
			out[s.Topic] = s.MsgType
		}
	}
	for _, r := range a.actionlib {
		out[r.ns+"/goal"] = r.typ + "ActionGoal"
		out[r.ns+"/cancel"] = "actionlib_msgs/GoalID"
	}
	if e := a.cfg.EStop; e != nil && e.Topic != "" {
		out[e.Topic] = e.MsgType
	}
	return out
}

func (a *adapter) close() error {
	a.stop()
	a.mu.Lock()
	unsubs, client := a.unsubs, a.client
	a.unsubs, a.client = nil, nil
	a.mu.Unlock()
	for _, un := range unsubs {
		un()
	}
	if client != nil {
		return client.Close()
	}
	return nil
}

// ---- settings ----

func (a *adapter) writer(s SettingConfig) func(context.Context, any) (binding.WriteStatus, error) {
	path, _ := parsePath(s.Field)
	item := "setting " + s.Name
	return func(ctx context.Context, value any) (binding.WriteStatus, error) {
		conn := a.connection()
		if conn == nil {
			return binding.Sent, refusal(item, "not_connected", "the adapter has not connected yet, nothing was sent")
		}
		msg, err := setPath(deepCopy(toAnyMap(s.Template)), path, value)
		if err != nil {
			return binding.Sent, refusal(item, "bad_template", "cannot place the value: %v", err)
		}
		if s.Service != "" {
			return a.writeService(ctx, conn, s, item, msg)
		}
		var confirm *topicValue
		var before uint64
		if s.Confirm != nil {
			a.mu.Lock()
			confirm = a.confirms[s.Name]
			a.mu.Unlock()
			before = confirm.sequence()
		}
		if err := conn.Publish(ctx, s.Topic, s.MsgType, msg); err != nil {
			return binding.Sent, classify(item, err)
		}
		if confirm == nil {
			return binding.Sent, nil
		}
		timeout := seconds(s.Confirm.TimeoutS, 2*time.Second)
		wctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		if _, err := confirm.waitMatch(wctx, before, value, s.Confirm.Tolerance); err != nil {
			return binding.Sent, fmt.Errorf("%s: published %v on %s, but %s did not report it within %v (%v); the robot may have ignored it (a wrong msg_type is dropped silently by rosbridge): outcome unknown",
				item, value, s.Topic, s.Confirm.Topic, timeout, err)
		}
		return binding.Applied, nil
	}
}

func (a *adapter) writeService(ctx context.Context, conn Conn, s SettingConfig, item string, args any) (binding.WriteStatus, error) {
	cctx, cancel := context.WithTimeout(ctx, seconds(s.TimeoutS, a.reqTimeout))
	defer cancel()
	raw, err := conn.CallService(cctx, s.Service, args)
	if err != nil {
		return binding.Sent, classify(item, err)
	}
	if ok, msg := appSuccess(raw); !ok {
		return binding.Applied, refusal(item, "robot_refused", "%s answered success:false: %s", s.Service, msg).With("backend_error", msg)
	}
	return binding.Applied, nil
}

// appSuccess reads a std_srvs-like {success, message} response.
func appSuccess(raw json.RawMessage) (bool, string) {
	var r struct {
		Success *bool  `json:"success"`
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &r) != nil || r.Success == nil || *r.Success {
		return true, r.Message
	}
	if r.Message == "" {
		r.Message = "(no message)"
	}
	return false, r.Message
}

// toAnyMap turns a template into a JSON-like value (yaml decodes maps as
// map[string]any already; nil stays an empty object).
func toAnyMap(m map[string]any) any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// ---- actions ----

func mergeArgs(fixed map[string]any, params map[string]any) map[string]any {
	out, _ := deepCopy(toAnyMap(fixed)).(map[string]any)
	for k, v := range params {
		out[k] = v
	}
	return out
}

// decodeValues decodes result or feedback values, integers exact.
func decodeValues(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	v, err := decodeJSON(raw)
	if err != nil {
		return nil
	}
	return v
}

// serviceRun is a short action on a service. The call keeps its own
// deadline (the action's timeout) even when the job's context ends: only
// the robot's answer says what happened.
func (a *adapter) serviceRun(ac ActionConfig) func(context.Context, *binding.Job) (any, error) {
	item := "action " + ac.Name
	return func(ctx context.Context, job *binding.Job) (any, error) {
		conn := a.connection()
		if conn == nil {
			return nil, refusal(item, "not_connected", "the adapter has not connected yet, nothing was sent")
		}
		a.inflight.Add(1)
		defer a.inflight.Add(-1)
		cctx := context.WithoutCancel(ctx)
		var cancel context.CancelFunc
		if dl, ok := ctx.Deadline(); ok {
			cctx, cancel = context.WithDeadline(cctx, dl)
		} else {
			cctx, cancel = context.WithTimeout(cctx, a.reqTimeout)
		}
		defer cancel()
		raw, err := conn.CallService(cctx, ac.Service, mergeArgs(ac.Args, job.Params()))
		if err != nil {
			return nil, classify(item, err)
		}
		if ok, msg := appSuccess(raw); !ok {
			return nil, binding.Failed(fmt.Errorf("%s answered success:false: %s", ac.Service, msg),
				map[string]any{"backend_error": msg, "values": decodeValues(raw)})
		}
		return decodeValues(raw), nil
	}
}

// ---- estop ----

func (a *adapter) estop(ctx context.Context) error {
	e := a.cfg.EStop
	conn := a.connection()
	if conn == nil {
		return errors.New("ros2 estop: not connected to the robot")
	}
	// The estop has a connection of its own: it never waits behind a goal
	// or a slow service call (rosbridge handles one connection's ops in
	// order, one at a time).
	ctx, cancel := context.WithTimeout(StopPath(ctx), seconds(e.TimeoutS, 2*time.Second))
	defer cancel()
	if e.Topic != "" {
		msg := any(e.Msg)
		if e.Msg == nil {
			msg = map[string]any{}
		}
		if err := conn.Publish(ctx, e.Topic, e.MsgType, msg); err != nil {
			return fmt.Errorf("ros2 estop: publish %s: %w", e.Topic, err)
		}
		return nil
	}
	raw, err := conn.CallService(ctx, e.Service, toAnyMap(e.Args))
	if err != nil {
		return fmt.Errorf("ros2 estop: %w", err)
	}
	if ok, msg := appSuccess(raw); !ok {
		return fmt.Errorf("ros2 estop: %s refused: %s", e.Service, msg)
	}
	return nil
}
