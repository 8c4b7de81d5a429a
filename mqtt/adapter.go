// Package mqtt serves devices that speak MQTT as MHP devices, on the
// BoundDriver (package binding).
//
// Mapping (Config, or the `adapter: mqtt` config file):
//   - a signal is a topic plus a payload extractor (JSON path, or the raw
//     payload parsed by the signal's type); retained values count as the
//     last value; while the device's availability topic (its last will)
//     says offline, or the broker connection is down, every signal is
//     unavailable, so every interlock is open;
//   - a setting publishes on a command topic; a reply carrying our id on an
//     ack topic, or the state topic showing the target within the timeout,
//     makes it "applied"; otherwise the write answers "sent";
//   - an action publishes a command carrying the job id; messages with that
//     id on the reply topic report progress, and only a terminal status
//     (done / failed / cancelled, names configurable) ends the job; no
//     terminal message before the deadline, or a broker connection lost
//     mid-job, is an unknown outcome (the device latches in fault); cancel
//     exists only where a cancel topic is configured, and the job ends as
//     the device reports;
//   - estop publishes on its own topic at QoS 1, never retained; a failed
//     publish (or a refusing ack) leaves the device in estop with stopped:false.
//
// The broker may come up after the adapter: Start waits connect_timeout for
// the connection and then serves anyway (link.fail_fast: it fails instead),
// the client reconnecting in the background. Every change of the broker
// connection is reported as the driver's backend link (ping and describe
// carry "backend"); while it is down, writes and invokes are refused
// not_started before anything is published and nothing latches.
//
// The broker sits behind the small [Client] interface; [DialPaho] is the
// eclipse/paho.mqtt.golang (MQTT 3.1.1) implementation, which reconnects and
// resubscribes. Package mqtttest has an embedded broker and a fake device
// for tests.
//
// This package has the shape every adapter has (see package adapters):
// Load, Config.Validate, New, Register.
//
//	const Kind = "mqtt"
//	func Load(src adapters.Source) (Config, error)
//	func (c Config) Validate() error
//	func New(ctx context.Context, cfg Config, opt Options) (*binding.Driver, error)
//	func Register(r *adapters.Registry) error
//
// [Options] carry the broker seam, [Options.Client] (nil: paho, dialled from
// the config).
package mqtt

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/clock"
)

// Options are what a program, not a config file, gives [New]: the shared
// [adapters.Options] and the broker seam.
//
// [adapters.Options.LinkClock] is not used: the paho client times its own
// reconnects (link.retry_min, link.retry_max).
type Options struct {
	adapters.Options
	// Client is the broker connection. Nil dials paho ([DialPaho]) from
	// the config: broker, client id, credentials (password_env read now),
	// connect_timeout and the link's retry bounds. The driver's Close
	// closes it either way.
	Client Client
}

// New builds the driver of an MQTT device, unstarted. It validates cfg,
// fills its defaults and maps its signals, settings, actions and estop
// onto topics of opt.Client (or of a paho client it dials in the
// background). The driver's Start subscribes and waits connect_timeout for
// the broker; its Close disconnects.
func New(ctx context.Context, cfg Config, opt Options) (*binding.Driver, error) {
	d, _, err := build(ctx, cfg, opt)
	return d, err
}

// build is New, also returning the adapter (for the package's tests).
func build(_ context.Context, cfg Config, opt Options) (*binding.Driver, *adapter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	cfg = cfg.withDefaults()
	client := opt.Client
	if client == nil {
		c, err := dialConfig(cfg, opt.Logger)
		if err != nil {
			return nil, nil, err
		}
		client = c
	}
	d, a, err := bind(cfg, client, opt.Options)
	if err != nil && opt.Client == nil {
		_ = client.Close()
	}
	return d, a, err
}

// dialConfig dials the paho client of a defaulted config (reconnecting with
// link.retry_min jittered, then up to link.retry_max).
func dialConfig(cfg Config, log *slog.Logger) (*PahoClient, error) {
	pw := cfg.Password
	if cfg.PasswordEnv != "" {
		v, ok := os.LookupEnv(cfg.PasswordEnv)
		if !ok {
			return nil, fmt.Errorf("mqtt: password_env %s is not set", cfg.PasswordEnv)
		}
		pw = v
	}
	link := cfg.Link.Defaults()
	return DialPaho(DialOptions{Broker: cfg.Broker, ClientID: cfg.ClientID, Username: cfg.Username,
		Password: pw, ConnectTimeout: cfg.ConnectTimeout, RetryInterval: link.RetryMin,
		MaxReconnectInterval: link.RetryMax, Logger: log})
}

// bind maps a validated, defaulted config onto client and builds the driver.
func bind(cfg Config, client Client, opt adapters.Options) (*binding.Driver, *adapter, error) {
	a := newAdapter(cfg, client, opt.Clock, opt.Log())
	var bc binding.Config
	cfg.Common.Apply(&bc)
	for i := range cfg.Signals {
		s := cfg.Signals[i]
		bc.Signals = append(bc.Signals, binding.Signal{Spec: s.Signal, Pushed: true,
			Read: func(ctx context.Context) (binding.Sample, error) { return a.read(s.Name) }})
	}
	for i := range cfg.Settings {
		s := cfg.Settings[i]
		bc.Settings = append(bc.Settings, binding.Setting{Spec: s.Setting,
			Write: func(ctx context.Context, v any) (binding.WriteStatus, error) { return a.write(ctx, &s, v) }})
	}
	for i := range cfg.Actions {
		ac := cfg.Actions[i]
		bc.Actions = append(bc.Actions, binding.Action{Spec: ac.Action, Timeout: ac.Timeout,
			Run: func(ctx context.Context, job *binding.Job) (any, error) { return a.run(ctx, &ac, job) }})
	}
	bc.Safety.EStop = cfg.EStop != nil // the descriptor claims a stop only where there is a stop topic
	if cfg.EStop != nil {
		bc.EStop = a.estop
	}
	bc.Setup = a.setup
	bc.Verify = a.verify
	bc.Close = func() error {
		a.stopLink()
		return client.Close()
	}
	bc.Clock = a.clk // the driver and the adapter's timestamps share one clock
	d, err := opt.NewDriver(bc)
	if err != nil {
		return nil, nil, err
	}
	a.drv.Store(d)
	return d, a, nil
}

// adapter is the state shared by the hooks and the message handlers. Every
// map is behind mu (handlers and hooks run on different goroutines).
type adapter struct {
	cfg    Config
	c      Client
	clk    clock.Clock
	log    *slog.Logger
	drv    atomic.Pointer[binding.Driver]
	routes map[string][]func(Message, time.Time)
	order  []string // filters in first-use order

	mu         sync.Mutex
	values     map[string]*sample        // signal name -> last value
	online     *bool                     // availability; nil = not reported
	onlineConn uint64                    // the connection it was reported on
	states     map[string]*sample        // setting name -> last state-topic value
	stateCh    map[string]chan struct{}  // setting name -> closed at each state message
	acks       map[string]chan ackReply  // request id -> waiter (settings, estop)
	jobs       map[string]*pendingJob    // job id -> waiter
	specs      map[string]mhp.Signal     // signal name -> spec
	sigNames   map[string][]SignalConfig // filter -> signals on it (for pushes)
	linkStop   chan struct{}             // closes the link reporter (startLink)
	linkDone   chan struct{}
	linkMu     sync.Mutex // serialises link reports
}

type sample struct {
	val  any
	err  error
	at   time.Time
	raw  []byte
	conn uint64 // broker connection it arrived on
}

type ackReply struct {
	status string
	errMsg string
	doc    map[string]any
}

func newAdapter(cfg Config, c Client, clk clock.Clock, log *slog.Logger) *adapter {
	a := &adapter{cfg: cfg, c: c, clk: clk, log: log,
		routes: map[string][]func(Message, time.Time){},
		values: map[string]*sample{}, states: map[string]*sample{}, stateCh: map[string]chan struct{}{},
		acks: map[string]chan ackReply{}, jobs: map[string]*pendingJob{}, specs: map[string]mhp.Signal{}}
	if a.clk == nil {
		a.clk = clock.Real{}
	}
	if a.log == nil {
		a.log = slog.Default()
	}
	if av := cfg.Availability; av != nil {
		a.route(av.Topic, a.onAvailability)
	}
	for _, s := range cfg.Signals {
		a.specs[s.Name] = s.Signal
		s := s
		a.route(s.Topic, func(m Message, at time.Time) { a.onSignal(s, m, at) })
	}
	for _, s := range cfg.Settings {
		s := s
		a.stateCh[s.Name] = make(chan struct{})
		if s.StateTopic != "" {
			a.route(s.StateTopic, func(m Message, at time.Time) { a.onState(s, m, at) })
		}
		if s.Ack != nil {
			ack := *s.Ack
			a.route(ack.Topic, func(m Message, _ time.Time) { a.onAck(ack, m) })
		}
	}
	for _, ac := range cfg.Actions {
		ac := ac
		a.route(ac.ReplyTopic, func(m Message, _ time.Time) { a.onJobReply(&ac, m) })
	}
	if e := cfg.EStop; e != nil && e.Ack != nil {
		ack := *e.Ack
		a.route(ack.Topic, func(m Message, _ time.Time) { a.onAck(ack, m) })
	}
	return a
}

// route adds a handler for a filter; each distinct filter is subscribed once.
func (a *adapter) route(filter string, fn func(Message, time.Time)) {
	if _, ok := a.routes[filter]; !ok {
		a.order = append(a.order, filter)
	}
	a.routes[filter] = append(a.routes[filter], fn)
}

// setup subscribes every route and waits for the broker connection.
func (a *adapter) setup(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.ConnectTimeout)
	defer cancel()
	for _, f := range a.order {
		fns := a.routes[f]
		if err := a.c.Subscribe(ctx, f, byte(a.cfg.QoS), func(m Message) {
			at := a.clk.Now()
			for _, fn := range fns {
				if Match(f, m.Topic) {
					fn(m, at)
				}
			}
		}); err != nil {
			return fmt.Errorf("mqtt: subscribe %q: %w", f, err)
		}
	}
	a.startLink()
	defer a.reportLink() // Start returns with the link as it is now
	if err := WaitUp(ctx, a.c); err != nil {
		if a.cfg.Link.FailFast {
			a.stopLink()
			return fmt.Errorf("mqtt: broker %s: no connection within %s: %w (link.fail_fast is set)", a.cfg.Broker, a.cfg.ConnectTimeout, err)
		}
		// Start anyway: the client keeps reconnecting, the device reports
		// the backend down and refuses actuation not_started until then.
		if a.log != nil {
			a.log.Warn("mqtt: broker not reachable at start; serving and reconnecting", "broker", a.cfg.Broker)
		}
	}
	return nil
}

// startLink reports the broker connection to the driver (backend link) at
// every change, until stopLink.
func (a *adapter) startLink() {
	a.mu.Lock()
	if a.linkStop != nil {
		a.mu.Unlock()
		return
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	a.linkStop, a.linkDone = stop, done
	a.mu.Unlock()
	go func() {
		defer close(done)
		for {
			changed := a.reportLink()
			select {
			case <-changed:
			case <-stop:
				return
			}
		}
	}()
}

// reportLink tells the driver the connection state as it is now and
// returns the channel of its next change. Reports are serialised and each
// reads the state under the lock, so the last report is never stale.
func (a *adapter) reportLink() <-chan struct{} {
	a.linkMu.Lock()
	defer a.linkMu.Unlock()
	st := a.c.State()
	if d := a.drv.Load(); d != nil {
		var err error
		if !st.Up {
			err = fmt.Errorf("mqtt broker %s: not connected (reconnecting)", a.cfg.Broker)
			if le, ok := a.c.(interface{ LastError() error }); ok && le.LastError() != nil {
				err = fmt.Errorf("mqtt broker %s: connection lost (reconnecting): %w", a.cfg.Broker, le.LastError())
			}
		}
		d.SetLink(st.Up, err)
	}
	return st.Changed
}

// stopLink ends the link reports and waits for them.
func (a *adapter) stopLink() {
	a.mu.Lock()
	stop, done := a.linkStop, a.linkDone
	a.linkStop = nil
	a.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
}

// verify is the adapter's part of the reset check: the broker connection is
// back (waiting for it, bounded) and the interlock and required_for_recovery
// signals read.
func (a *adapter) verify(ctx context.Context) error {
	wctx, cancel := context.WithTimeout(ctx, a.cfg.ConnectTimeout)
	defer cancel()
	if err := WaitUp(wctx, a.c); err != nil {
		return fmt.Errorf("mqtt: broker %s not connected: %w", a.cfg.Broker, err)
	}
	// Just after a (re)connection the broker may not have delivered the
	// retained values yet: poll the signals a reset needs (interlocks and
	// those required for recovery), bounded by the same deadline. The
	// binding then reads every signal and names the others that are
	// unavailable without blocking the reset.
	var required map[string]bool
	if d := a.drv.Load(); d != nil {
		required = d.RecoverySignals()
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		var bad []string
		for _, s := range a.cfg.Signals {
			if !required[s.Name] {
				continue
			}
			if _, err := a.read(s.Name); err != nil {
				bad = append(bad, fmt.Sprintf("%s: %v", s.Name, err))
			}
		}
		if len(bad) == 0 {
			return nil
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("mqtt: signals unavailable: %s", strings.Join(bad, "; "))
		case <-tick.C:
		}
	}
}

// newID returns a random request id.
func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ---- signals and availability ----

func (a *adapter) onAvailability(m Message, _ time.Time) {
	av := a.cfg.Availability
	text := string(m.Payload)
	if av.Path != "" {
		v, err := extract(m.Payload, av.Path, mhp.TypeString)
		if err != nil {
			text = ""
		} else {
			text, _ = v.(string)
		}
	}
	var on *bool
	switch text {
	case av.Online:
		t := true
		on = &t
	case av.Offline:
		f := false
		on = &f
	default:
		// an empty (cleared) or unknown availability message: not known to be online
		if len(m.Payload) > 0 {
			a.log.Warn("mqtt: unknown availability payload", "topic", m.Topic, "payload", text)
		}
	}
	a.mu.Lock()
	a.online, a.onlineConn = on, m.Conn
	a.mu.Unlock()
}

func (a *adapter) onSignal(s SignalConfig, m Message, at time.Time) {
	v, err := extract(m.Payload, s.Path, s.Type)
	if err != nil {
		err = fmt.Errorf("topic %s: %w", m.Topic, err)
	}
	a.mu.Lock()
	a.values[s.Name] = &sample{val: v, err: err, at: at, raw: m.Payload, conn: m.Conn}
	a.mu.Unlock()
	if err == nil {
		if d := a.drv.Load(); d != nil {
			d.PublishSignal(s.Name, binding.Sample{Value: v, Time: at})
		}
	}
}

// read answers a signal from the last message, or unavailable: broker
// down, device offline, nothing received, a bad payload, or stale.
func (a *adapter) read(name string) (binding.Sample, error) {
	conn := a.c.State()
	if !conn.Up {
		return binding.Sample{}, binding.Unavailable("broker %s not connected", a.cfg.Broker)
	}
	var sc *SignalConfig
	for i := range a.cfg.Signals {
		if a.cfg.Signals[i].Name == name {
			sc = &a.cfg.Signals[i]
		}
	}
	if sc == nil {
		return binding.Sample{}, binding.Unavailable("no signal %q in the mapping", name)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if av := a.cfg.Availability; av != nil {
		online := a.online
		if a.onlineConn != conn.Conn {
			online = nil // reported on an earlier connection: not known now
		}
		switch {
		case online != nil && !*online:
			return binding.Sample{}, binding.Unavailable("device offline (%s says %q)", av.Topic, av.Offline)
		case online == nil && !av.AssumeOnline:
			return binding.Sample{}, binding.Unavailable("device availability unknown (nothing on %s)", av.Topic)
		}
	}
	s, ok := a.values[name]
	if !ok || s.conn != conn.Conn {
		return binding.Sample{}, binding.Unavailable("no message on %s since the broker connection began", sc.Topic)
	}
	if s.err != nil {
		return binding.Sample{}, binding.Unavailable("%v", s.err)
	}
	if sc.StaleAfter > 0 {
		if age := a.clk.Now().Sub(s.at); age > sc.StaleAfter {
			return binding.Sample{}, binding.Unavailable("stale: last message on %s %s ago (stale_after %s)", sc.Topic, age.Round(time.Millisecond), sc.StaleAfter)
		}
	}
	return binding.Sample{Value: s.val, Time: s.at}, nil
}

// ---- settings ----

func (a *adapter) onState(s SettingConfig, m Message, at time.Time) {
	v, err := extract(m.Payload, s.StatePath, s.Type)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.states[s.Name] = &sample{val: v, err: err, at: at}
	close(a.stateCh[s.Name])
	a.stateCh[s.Name] = make(chan struct{})
}

// onAck hands a reply carrying a request id to its waiter (first reply
// wins; QoS 1 duplicates and replies to others are dropped).
func (a *adapter) onAck(ack Ack, m Message) {
	doc, err := decodeJSON(m.Payload)
	if err != nil {
		return
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return
	}
	id := fmt.Sprint(obj[ack.IDField])
	r := ackReply{doc: obj}
	if st, ok := obj[ack.StatusField]; ok && st != nil {
		r.status = fmt.Sprint(st)
	}
	if e, ok := obj[ack.ErrorField]; ok && e != nil && e != "" && e != false {
		r.errMsg = fmt.Sprint(e)
	}
	a.mu.Lock()
	ch, ok := a.acks[id]
	a.mu.Unlock()
	if ok {
		select {
		case ch <- r:
		default:
		}
	}
}

func (a *adapter) waitAck(id string) (chan ackReply, func()) {
	ch := make(chan ackReply, 1)
	a.mu.Lock()
	a.acks[id] = ch
	a.mu.Unlock()
	return ch, func() {
		a.mu.Lock()
		delete(a.acks, id)
		a.mu.Unlock()
	}
}

// judge turns an ack into nil (confirmed), an *mhp.Error (refused, nothing
// took effect) or another error (outcome unknown).
func judge(ack *Ack, r ackReply, what string) error {
	switch {
	case r.status != "" && slices.Contains(ack.OK, r.status) && r.errMsg == "":
		return nil
	case r.status != "" && slices.Contains(ack.Refused, r.status):
		return mhp.Errorf(mhp.CodeServerError, "%s refused by the device: %s", what, orStatus(r)).
			With("status", r.status).With("reason", "device_refused")
	case r.status == "" && r.errMsg == "":
		return nil
	}
	return fmt.Errorf("%s: device answered %s: outcome unknown", what, orStatus(r))
}

func orStatus(r ackReply) string {
	if r.errMsg != "" {
		if r.status != "" {
			return fmt.Sprintf("%s (%s)", r.errMsg, r.status)
		}
		return r.errMsg
	}
	return fmt.Sprintf("status %q", r.status)
}

// notSent is the refusal when nothing reached the broker.
func (a *adapter) notSent(what string, err error) error {
	return mhp.Errorf(mhp.CodeServerError, "%s not sent: broker %s not connected", what, a.cfg.Broker).
		With("reason", "broker_disconnected").With("detail", err.Error())
}

func (a *adapter) publish(ctx context.Context, topic string, qos int, payload []byte) error {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.ConnectTimeout)
	defer cancel()
	return a.c.Publish(ctx, topic, byte(qos), false, payload)
}

func (a *adapter) write(ctx context.Context, s *SettingConfig, v any) (binding.WriteStatus, error) {
	what := fmt.Sprintf("setting %s=%v", s.Name, v)
	id := newID()
	var payload []byte
	var err error
	if s.ValueField != "" {
		obj := map[string]any{s.ValueField: v}
		if s.Ack != nil {
			obj[s.Ack.IDField] = id
		}
		payload, err = json.Marshal(obj)
	} else {
		payload, err = encodeValue(v, s.Raw)
	}
	if err != nil {
		return binding.Sent, mhp.Errorf(mhp.CodeInvalidValue, "%s: cannot encode: %v", what, err)
	}
	st := a.c.State()
	changed := st.Changed
	if !st.Up {
		return binding.Sent, a.notSent(what, ErrNotConnected)
	}
	var ackCh chan ackReply
	if s.Ack != nil {
		var done func()
		ackCh, done = a.waitAck(id)
		defer done()
	}
	if err := a.publish(ctx, s.CommandTopic, a.cfg.QoS, payload); err != nil {
		if errors.Is(err, ErrNotConnected) {
			return binding.Sent, a.notSent(what, err)
		}
		return binding.Sent, fmt.Errorf("%s: %w (the broker may have it: outcome unknown)", what, err)
	}
	// Network deadlines run on wall time: the broker does not follow an injected clock.
	timer := time.NewTimer(s.Timeout)
	defer timer.Stop()
	switch {
	case s.Ack != nil:
		select {
		case r := <-ackCh:
			if err := judge(s.Ack, r, what); err != nil {
				return binding.Sent, err
			}
			return binding.Applied, nil
		case <-changed:
			return binding.Sent, fmt.Errorf("%s: broker connection lost before the acknowledgement: outcome unknown", what)
		case <-timer.C:
			return binding.Sent, fmt.Errorf("%s: no acknowledgement on %s within %s: outcome unknown", what, s.Ack.Topic, s.Timeout)
		case <-ctx.Done():
			return binding.Sent, fmt.Errorf("%s: %w before the acknowledgement: outcome unknown", what, ctx.Err())
		}
	case s.StateTopic != "":
		for {
			a.mu.Lock()
			st, ch := a.states[s.Name], a.stateCh[s.Name]
			a.mu.Unlock()
			if st != nil && st.err == nil && sameValue(st.val, v) {
				return binding.Applied, nil
			}
			select {
			case <-ch:
			case <-changed:
				return binding.Sent, nil // sent; the connection dropped before the state showed it
			case <-timer.C:
				return binding.Sent, nil
			case <-ctx.Done():
				return binding.Sent, nil
			}
		}
	}
	return binding.Sent, nil
}

// ---- estop ----

func (a *adapter) estop(ctx context.Context) error {
	e := a.cfg.EStop
	ctx, cancel := context.WithTimeout(ctx, e.Timeout)
	defer cancel()
	id := newID()
	payload := []byte(e.Payload)
	if e.Ack != nil || e.Payload == "" {
		obj := map[string]any{"estop": true, "id": id}
		if e.Ack != nil {
			obj[e.Ack.IDField] = id
		}
		payload, _ = json.Marshal(obj)
	}
	var ackCh chan ackReply
	if e.Ack != nil {
		var done func()
		ackCh, done = a.waitAck(id)
		defer done()
	}
	if err := a.c.Publish(ctx, e.Topic, byte(e.QoS), false, payload); err != nil {
		return fmt.Errorf("estop: publish on %s failed: %w", e.Topic, err)
	}
	if e.Ack == nil {
		return nil
	}
	select {
	case r := <-ackCh:
		if err := judge(e.Ack, r, "estop"); err != nil {
			return fmt.Errorf("estop: %w", err) // never a refusal: the device stays in estop
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("estop: no acknowledgement on %s within %s", e.Ack.Topic, e.Timeout)
	}
}
