package ros2

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/clock"
)

// Options are the parts of an adapter a config file cannot hold.
type Options struct {
	// Conn, when set, is used instead of dialling Config.URL (a test fake,
	// a shared connection); the adapter does not close it.
	Conn Conn
	// Clock is the time source of the driver and of signal staleness;
	// default the system clock.
	Clock clock.Clock
	// Logger receives connection events; default slog.Default().
	Logger *slog.Logger
	// Binding, when set, adjusts the binding config before the driver is
	// built (timeouts, job history).
	Binding func(*binding.Config)
}

// New validates cfg and builds the robot's driver. Start connects (Setup),
// Close disconnects.
func New(cfg Config, opts Options) (*binding.Driver, error) {
	_, bc, err := newAdapter(cfg, opts)
	if err != nil {
		return nil, err
	}
	return binding.New(bc)
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
	if opts.Binding != nil {
		opts.Binding(&bc)
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
		cctx, cancel := context.WithTimeout(ctx, seconds(a.cfg.ConnectTimeoutS, 10*time.Second))
		defer cancel()
		c, err := Dial(cctx, a.cfg.URL, ClientOptions{
			RequestTimeout: a.reqTimeout,
			BackoffInitial: seconds(a.cfg.Reconnect.InitialS, 0),
			BackoffMax:     seconds(a.cfg.Reconnect.MaxS, 0),
			NoReconnect:    a.cfg.Reconnect.Disabled,
			Clock:          a.clk,
			Logger:         a.log,
		})
		if err != nil {
			return err
		}
		a.mu.Lock()
		a.client = c
		a.mu.Unlock()
		conn = c
	}
	a.mu.Lock()
	a.conn = conn
	a.mu.Unlock()
	if a.cfg.CheckTypes {
		if err := a.checkTypes(ctx, conn); err != nil {
			return err
		}
	}
	if adv, ok := conn.(interface {
		Advertise(ctx context.Context, topic, typ string) error
	}); ok {
		// Publishers up front: the first estop or goal must not race its
		// own advertise (ROS 1 loses such publishes).
		for topic, typ := range a.publishedTopics() {
			if err := adv.Advertise(ctx, topic, typ); err != nil {
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
	}
	return nil
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

// checkTypes compares configured message types with the robot's, via rosapi.
func (a *adapter) checkTypes(ctx context.Context, conn Conn) error {
	type want struct{ what, topic, typ string }
	var all []want
	for _, s := range a.cfg.Signals {
		all = append(all, want{"signal " + s.Name, s.Topic, s.MsgType})
	}
	for _, s := range a.cfg.Settings {
		all = append(all, want{"setting " + s.Name, s.Topic, s.MsgType})
		if s.Confirm != nil {
			all = append(all, want{"setting " + s.Name + " confirm", s.Confirm.Topic, s.Confirm.MsgType})
		}
	}
	if e := a.cfg.EStop; e != nil {
		all = append(all, want{"estop", e.Topic, e.MsgType})
	}
	for _, w := range all {
		if w.topic == "" || w.typ == "" {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, a.reqTimeout)
		raw, err := conn.CallService(cctx, "/rosapi/topic_type", map[string]any{"topic": w.topic})
		cancel()
		if err != nil {
			return fmt.Errorf("ros2: check_types: %s: asking /rosapi/topic_type for %s: %w", w.what, w.topic, err)
		}
		var r struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(raw, &r)
		if r.Type != "" && !SameType(r.Type, w.typ) {
			return fmt.Errorf("ros2: check_types: %s: topic %s has type %s on the robot, the config says %s (rosbridge would drop the messages silently)",
				w.what, w.topic, r.Type, w.typ)
		}
	}
	return nil
}

// SameType compares ROS type names, treating "pkg/msg/T" (ROS 2) and
// "pkg/T" (ROS 1) as the same type.
func SameType(a, b string) bool {
	norm := func(t string) string {
		p := strings.Split(t, "/")
		if len(p) == 3 {
			return p[0] + "/" + p[2]
		}
		return t
	}
	return norm(a) == norm(b)
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

// ---- signals ----

// topicValue is the last value of one field of a topic, with its arrival time.
type topicValue struct {
	name, topic, typ string
	path             []pathStep
	clk              clock.Clock

	mu      sync.Mutex
	seq     uint64
	has     bool
	value   any
	at      time.Time
	bad     error // the last message did not hold a usable value
	lost    error // the link is down
	since   time.Time
	changed chan struct{}
}

func newTopicValue(name, topic, typ string, path []pathStep, clk clock.Clock) *topicValue {
	return &topicValue{name: name, topic: topic, typ: typ, path: path, clk: clk, changed: make(chan struct{})}
}

func (tv *topicValue) start() {
	tv.mu.Lock()
	tv.since = tv.clk.Now()
	tv.mu.Unlock()
}

func (tv *topicValue) onEvent(e TopicEvent) {
	tv.mu.Lock()
	defer tv.mu.Unlock()
	tv.seq++
	defer func() {
		close(tv.changed)
		tv.changed = make(chan struct{})
	}()
	if e.Err != nil {
		tv.lost = e.Err
		return
	}
	tv.lost = nil
	tv.at = e.At
	var msg any
	if err := json.Unmarshal(e.Msg, &msg); err != nil {
		tv.has, tv.bad = false, fmt.Errorf("unparsable message on %s: %v", tv.topic, err)
		return
	}
	v, err := getPath(msg, tv.path)
	if err == nil {
		v, err = coerce(v, tv.typ)
	}
	if err != nil {
		tv.has, tv.bad = false, fmt.Errorf("message on %s: %v", tv.topic, err)
		return
	}
	tv.has, tv.bad, tv.value = true, nil, v
}

// coerce checks a decoded JSON value against an MHP type.
func coerce(v any, typ string) (any, error) {
	if v == nil {
		return nil, errors.New("value is null (NaN or Inf on the robot, or an empty field)")
	}
	switch typ {
	case mhp.TypeNumber:
		if f, ok := v.(float64); ok {
			return f, nil
		}
	case mhp.TypeInteger:
		if f, ok := v.(float64); ok && f == math.Trunc(f) {
			return int64(f), nil
		}
	case mhp.TypeBoolean:
		if b, ok := v.(bool); ok {
			return b, nil
		}
	case mhp.TypeString:
		if s, ok := v.(string); ok {
			return s, nil
		}
	case mhp.TypeArray:
		if _, ok := v.([]any); ok {
			return v, nil
		}
	case mhp.TypeObject:
		if _, ok := v.(map[string]any); ok {
			return v, nil
		}
	default:
		return v, nil
	}
	return nil, fmt.Errorf("value %v (%T) is not a %s", v, v, typ)
}

// snapshot returns the value for a read, or why there is none.
func (tv *topicValue) snapshot(maxAge time.Duration) (any, time.Time, error) {
	tv.mu.Lock()
	defer tv.mu.Unlock()
	now := tv.clk.Now()
	switch {
	case tv.lost != nil:
		return nil, time.Time{}, binding.Unavailable("%s: link to rosbridge lost (%v); no fresh %s messages", tv.name, tv.lost, tv.topic)
	case tv.bad != nil:
		return nil, time.Time{}, binding.Unavailable("%s: %v", tv.name, tv.bad)
	case !tv.has:
		return nil, time.Time{}, binding.Unavailable("%s: no message on %s in the %v since subscribing (is the topic published? rosbridge drops a subscribe with a wrong msg_type silently)",
			tv.name, tv.topic, now.Sub(tv.since).Round(time.Millisecond))
	case maxAge > 0 && now.Sub(tv.at) > maxAge:
		return nil, time.Time{}, binding.Unavailable("%s: stale: last message on %s arrived %v ago, max_age_s is %v",
			tv.name, tv.topic, now.Sub(tv.at).Round(time.Millisecond), maxAge.Seconds())
	}
	return tv.value, tv.at, nil
}

func (tv *topicValue) reader(maxAge time.Duration) func(context.Context) (binding.Sample, error) {
	return func(ctx context.Context) (binding.Sample, error) {
		v, at, err := tv.snapshot(maxAge)
		if err != nil {
			return binding.Sample{}, err
		}
		return binding.Sample{Value: v, Time: at}, nil
	}
}

// waitMatch waits until a message that arrived after sequence number after
// holds want (numbers within tol).
func (tv *topicValue) waitMatch(ctx context.Context, after uint64, want any, tol float64) (any, error) {
	for {
		tv.mu.Lock()
		seq, has, v, ch := tv.seq, tv.has, tv.value, tv.changed
		tv.mu.Unlock()
		if seq > after && has && matches(v, want, tol) {
			return v, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			if !has {
				return nil, fmt.Errorf("no message on %s", tv.topic)
			}
			return nil, fmt.Errorf("last state on %s was %v", tv.topic, v)
		}
	}
}

func (tv *topicValue) sequence() uint64 {
	tv.mu.Lock()
	defer tv.mu.Unlock()
	return tv.seq
}

func matches(got, want any, tol float64) bool {
	gf, gok := mhp.Number(got)
	wf, wok := mhp.Number(want)
	if gok && wok {
		return math.Abs(gf-wf) <= tol
	}
	return reflect.DeepEqual(got, want)
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

func decodeValues(raw json.RawMessage) any {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
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

// progressFn turns feedback into job progress.
func progressFn(ac ActionConfig, job *binding.Job) func(any) {
	path, _ := parsePath(ac.ProgressField)
	full := ac.ProgressMax
	if full <= 0 {
		full = 1
	}
	var mu sync.Mutex
	last := 0.0
	return func(fb any) {
		mu.Lock()
		defer mu.Unlock()
		if ac.ProgressField != "" {
			if v, err := getPath(fb, path); err == nil {
				if f, ok := v.(float64); ok {
					last = f / full
				}
			}
		}
		job.Progress(last, map[string]any{"feedback": fb})
	}
}

// goalRun is a long action on a ROS 2 action server.
func (a *adapter) goalRun(ac ActionConfig) func(context.Context, *binding.Job) (any, error) {
	item := "action " + ac.Name
	return func(ctx context.Context, job *binding.Job) (any, error) {
		conn := a.connection()
		if conn == nil {
			return nil, refusal(item, "not_connected", "the adapter has not connected yet, nothing was sent")
		}
		progress := progressFn(ac, job)
		h, err := conn.SendGoal(ctx, GoalRequest{Action: ac.ROSAction, Type: ac.ActionType, Args: mergeArgs(ac.Args, job.Params()), Feedback: true},
			func(raw json.RawMessage) { progress(decodeValues(raw)) })
		if err != nil {
			return nil, classify(item, err)
		}
		select {
		case r := <-h.Result:
			return a.goalEnd(ac, conn, item, h.ID, r)
		case <-ctx.Done():
		}
		// Cancel, estop or timeout: ask the robot to cancel, then (unless
		// this is the timeout) let the robot's final status decide.
		cancelled := job.CancelRequested()
		wctx := context.WithoutCancel(ctx)
		cctx, cancel := context.WithTimeout(wctx, a.reqTimeout)
		cerr := conn.CancelGoal(cctx, ac.ROSAction, h.ID)
		cancel()
		if !cancelled {
			return nil, fmt.Errorf("%s: no action_result for goal %s before the deadline (%v); cancel_action_goal sent (err %v): outcome unknown",
				item, h.ID, ctx.Err(), cerr)
		}
		wait := seconds(ac.CancelWaitS, 30*time.Second)
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case r := <-h.Result:
			return a.goalEnd(ac, conn, item, h.ID, r)
		case <-t.C:
			return nil, fmt.Errorf("%s: cancel of goal %s sent (err %v), but no action_result within %v: outcome unknown", item, h.ID, cerr, wait)
		}
	}
}

// goalEnd maps the result and, for a goal lost with the link, asks the
// action server itself to cancel all its goals once the link is back when
// the config says so (rosbridge 2.x may not find the old connection's goal
// handle for a cancel_action_goal sent on the new connection).
func (a *adapter) goalEnd(ac ActionConfig, conn Conn, item, id string, r GoalResult) (any, error) {
	if r.Err != nil && ac.CancelAllOnReconnect {
		service := ac.ROSAction + "/_action/cancel_goal"
		go a.retryWhenBack("cancel all goals of "+ac.ROSAction, func(ctx context.Context) error {
			_, err := conn.CallService(ctx, service, cancelAllArgs())
			return err
		})
	}
	return goalOutcome(item, id, r)
}

// cancelAllArgs is an action_msgs/srv/CancelGoal request with a zero goal
// id and a zero stamp: cancel every goal of the action server.
func cancelAllArgs() map[string]any {
	return map[string]any{"goal_info": map[string]any{
		"goal_id": map[string]any{"uuid": make([]int, 16)},
		"stamp":   map[string]any{"sec": 0, "nanosec": 0},
	}}
}

// goalOutcome maps a ROS 2 action_result to the job's end.
func goalOutcome(item, id string, r GoalResult) (any, error) {
	switch {
	case r.Err != nil:
		return nil, fmt.Errorf("%s: goal %s: %w: outcome unknown (the goal is cancelled once the link is back)", item, id, r.Err)
	case !r.Result:
		return nil, fmt.Errorf("%s: rosbridge failed goal %s (result:false, status %d): %s: outcome unknown", item, id, r.Status, valuesText(r.Values))
	}
	values := decodeValues(r.Values)
	switch r.Status {
	case StatusSucceeded:
		return values, nil
	case StatusCanceled:
		return values, fmt.Errorf("%w: the robot reports goal %s CANCELED", binding.ErrCancelled, id)
	case StatusAborted:
		return nil, binding.Failed(fmt.Errorf("the robot aborted goal %s: %s", id, valuesText(r.Values)),
			map[string]any{"status": "ABORTED", "values": values})
	}
	return nil, fmt.Errorf("%s: action_result for goal %s carries non-terminal status %s: protocol violation, outcome unknown", item, id, StatusName(r.Status))
}

// ---- ROS 1 actionlib ----

// actionlibRouter demultiplexes one actionlib namespace's result and
// feedback topics to the goals in flight.
type actionlibRouter struct {
	ns, typ string
	mu      sync.Mutex
	goals   map[string]*alGoal
}

type alGoal struct {
	result   chan alResult
	feedback func(any)
}

type alResult struct {
	status int
	text   string
	values any
	err    error
}

type alStatus struct {
	GoalID struct {
		ID string `json:"id"`
	} `json:"goal_id"`
	Status int    `json:"status"`
	Text   string `json:"text"`
}

func (r *actionlibRouter) add(id string, g *alGoal) {
	r.mu.Lock()
	r.goals[id] = g
	r.mu.Unlock()
}

func (r *actionlibRouter) remove(id string) {
	r.mu.Lock()
	delete(r.goals, id)
	r.mu.Unlock()
}

func (r *actionlibRouter) onResult(e TopicEvent) {
	if e.Err != nil {
		// The link dropped: a result sent meanwhile is lost for good.
		r.mu.Lock()
		goals := r.goals
		r.goals = map[string]*alGoal{}
		r.mu.Unlock()
		for _, g := range goals {
			g.result <- alResult{err: e.Err}
		}
		return
	}
	var m struct {
		Status alStatus        `json:"status"`
		Result json.RawMessage `json:"result"`
	}
	if json.Unmarshal(e.Msg, &m) != nil {
		return
	}
	r.mu.Lock()
	g := r.goals[m.Status.GoalID.ID]
	delete(r.goals, m.Status.GoalID.ID)
	r.mu.Unlock()
	if g != nil {
		g.result <- alResult{status: m.Status.Status, text: m.Status.Text, values: decodeValues(m.Result)}
	}
}

func (r *actionlibRouter) onFeedback(e TopicEvent) {
	if e.Err != nil {
		return
	}
	var m struct {
		Status   alStatus        `json:"status"`
		Feedback json.RawMessage `json:"feedback"`
	}
	if json.Unmarshal(e.Msg, &m) != nil {
		return
	}
	r.mu.Lock()
	g := r.goals[m.Status.GoalID.ID]
	r.mu.Unlock()
	if g != nil && g.feedback != nil {
		g.feedback(decodeValues(m.Feedback))
	}
}

func goalIDMsg(id string) map[string]any {
	return map[string]any{"stamp": map[string]any{"secs": 0, "nsecs": 0}, "id": id}
}

// actionlibRun is a long action on a ROS 1 actionlib server, over topics.
func (a *adapter) actionlibRun(ac ActionConfig, r *actionlibRouter) func(context.Context, *binding.Job) (any, error) {
	item := "action " + ac.Name
	cancelTopic, cancelType := r.ns+"/cancel", "actionlib_msgs/GoalID"
	return func(ctx context.Context, job *binding.Job) (any, error) {
		conn := a.connection()
		if conn == nil {
			return nil, refusal(item, "not_connected", "the adapter has not connected yet, nothing was sent")
		}
		id := fmt.Sprintf("mhp-%s-%s-%s", a.cfg.Device.ID, job.ID(), strconv.FormatInt(time.Now().UnixNano(), 36))
		progress := progressFn(ac, job)
		g := &alGoal{result: make(chan alResult, 1), feedback: progress}
		r.add(id, g)
		defer r.remove(id)
		goal := map[string]any{"header": map[string]any{}, "goal_id": goalIDMsg(id), "goal": mergeArgs(ac.Args, job.Params())}
		if err := conn.Publish(ctx, r.ns+"/goal", r.typ+"ActionGoal", goal); err != nil {
			return nil, classify(item, err)
		}
		sendCancel := func() error {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.reqTimeout)
			defer cancel()
			return conn.Publish(cctx, cancelTopic, cancelType, goalIDMsg(id))
		}
		var res alResult
		select {
		case res = <-g.result:
		case <-ctx.Done():
			cancelled := job.CancelRequested()
			cerr := sendCancel()
			if !cancelled {
				return nil, fmt.Errorf("%s: no result for actionlib goal %s before the deadline (%v); cancel sent (err %v): outcome unknown", item, id, ctx.Err(), cerr)
			}
			wait := seconds(ac.CancelWaitS, 30*time.Second)
			t := time.NewTimer(wait)
			defer t.Stop()
			select {
			case res = <-g.result:
			case <-t.C:
				return nil, fmt.Errorf("%s: cancel of actionlib goal %s sent (err %v), but no result within %v: outcome unknown", item, id, cerr, wait)
			}
		}
		if res.err != nil {
			go a.retryWhenBack("cancel of actionlib goal "+id, func(ctx context.Context) error {
				return conn.Publish(ctx, cancelTopic, cancelType, goalIDMsg(id))
			})
			return nil, fmt.Errorf("%s: actionlib goal %s: %w: outcome unknown (the goal is cancelled once the link is back)", item, id, res.err)
		}
		switch res.status {
		case ActionlibSucceeded:
			return res.values, nil
		case ActionlibPreempted, ActionlibRecalled:
			return res.values, fmt.Errorf("%w: the robot reports goal %s %s", binding.ErrCancelled, id, ActionlibStatusName(res.status))
		case ActionlibAborted:
			return nil, binding.Failed(fmt.Errorf("the robot aborted goal %s: %s", id, res.text),
				map[string]any{"status": "ABORTED", "text": res.text, "values": res.values})
		case ActionlibRejected:
			return nil, refusal(item, "robot_rejected", "the robot rejected goal %s: %s", id, res.text).With("backend_error", res.text)
		}
		return nil, fmt.Errorf("%s: actionlib result for goal %s has status %s (%s): outcome unknown", item, id, ActionlibStatusName(res.status), res.text)
	}
}

// retryWindow bounds how long a cancel for a goal lost with the link is
// retried while the link stays down.
const retryWindow = 10 * time.Minute

// retryWhenBack runs fn until it succeeds or fails for another reason than
// a link that is down, with backoff, until the adapter closes: a ROS 1 cancel
// or a ROS 2 cancel-all for a goal whose client vanished (the robot keeps
// executing it).
func (a *adapter) retryWhenBack(what string, fn func(ctx context.Context) error) {
	wait := 50 * time.Millisecond
	giveUp := time.Now().Add(retryWindow)
	for {
		if time.Now().After(giveUp) {
			a.log.Error("ros2: gave up after " + retryWindow.String() + " without a link: " + what)
			return
		}
		ctx, cancel := context.WithTimeout(a.ctx, a.reqTimeout)
		err := fn(ctx)
		cancel()
		switch {
		case err == nil:
			a.log.Warn("ros2: sent after the reconnect: " + what)
			return
		case !errors.Is(err, ErrNotConnected) && !errors.Is(err, ErrConnLost) && !errors.Is(err, ErrNoReply):
			a.log.Error("ros2: failed after the reconnect: "+what, "err", err)
			return
		}
		t := time.NewTimer(wait)
		select {
		case <-a.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(wait*2, 5*time.Second)
	}
}

// ---- estop ----

func (a *adapter) estop(ctx context.Context) error {
	e := a.cfg.EStop
	conn := a.connection()
	if conn == nil {
		return errors.New("ros2 estop: not connected to the robot")
	}
	ctx, cancel := context.WithTimeout(ctx, seconds(e.TimeoutS, 2*time.Second))
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
