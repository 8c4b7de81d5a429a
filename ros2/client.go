package ros2

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/openmhp/mhp-go/clock"
)

// ClientOptions tune a Client. Zero values take the documented defaults.
type ClientOptions struct {
	// DialTimeout bounds one connection attempt; default 5s.
	DialTimeout time.Duration
	// RequestTimeout is the deadline of a call_service or a write whose
	// context has none; default 10s.
	RequestTimeout time.Duration
	// BackoffInitial is the first wait before redialling after a drop;
	// default 250ms. It doubles up to BackoffMax (default 10s).
	BackoffInitial, BackoffMax time.Duration
	// NoReconnect turns reconnecting off: after a drop every call returns
	// ErrNotConnected.
	NoReconnect bool
	// Clock stamps message arrival; default the system clock.
	Clock clock.Clock
	// Logger receives connection events; default slog.Default().
	Logger *slog.Logger
	// ReadLimit caps one incoming message; default 64 MiB.
	ReadLimit int64
}

func (o ClientOptions) withDefaults() ClientOptions {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.DialTimeout, 5*time.Second)
	def(&o.RequestTimeout, 10*time.Second)
	def(&o.BackoffInitial, 250*time.Millisecond)
	def(&o.BackoffMax, 10*time.Second)
	if o.BackoffMax < o.BackoffInitial {
		o.BackoffMax = o.BackoffInitial
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.ReadLimit <= 0 {
		o.ReadLimit = 64 << 20
	}
	return o
}

// Client is one rosbridge v2 connection to one robot. A single reader
// goroutine routes service responses and action results by id and topic
// messages by topic; writes go out directly (coder/websocket serialises
// them). After a drop it redials with exponential backoff, restores every
// subscription, and sends cancel_action_goal for each goal that was in flight
// at the drop (rosbridge does not cancel a disconnected client's goals).
type Client struct {
	url  string
	opts ClientOptions

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	redial chan struct{}

	mu         sync.Mutex
	ws         *websocket.Conn
	closed     bool
	seq        uint64
	pending    map[string]chan reply
	goals      map[string]*goalState
	subs       map[string]*subState
	advertised map[string]string // topic -> type, on the current connection
	adverts    map[string]string // topic -> type, every topic ever advertised: restored on reconnect
	orphans    []orphan          // goals in flight at a drop, cancelled on reconnect
	reconnects int
	up         chan struct{} // closed while connected
}

type reply struct {
	values json.RawMessage
	result bool
	err    error
}

type goalState struct {
	action   string
	result   chan GoalResult
	feedback func(json.RawMessage)
}

type subState struct {
	id string
	s  Subscription
	fn func(TopicEvent)
}

type orphan struct{ action, id string }

// Dial connects to a rosbridge server ("ws://robot:9090") and keeps the
// connection up until Close. The first connection attempt must succeed
// within ctx and DialTimeout; later drops are redialled in the background.
func Dial(ctx context.Context, url string, opts ClientOptions) (*Client, error) {
	opts = opts.withDefaults()
	c := &Client{
		url:        url,
		opts:       opts,
		redial:     make(chan struct{}, 1),
		pending:    map[string]chan reply{},
		goals:      map[string]*goalState{},
		subs:       map[string]*subState{},
		advertised: map[string]string{},
		adverts:    map[string]string{},
		up:         make(chan struct{}),
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	ws, err := c.dial(ctx)
	if err != nil {
		c.cancel()
		return nil, fmt.Errorf("ros2: connect to rosbridge at %s: %w", url, err)
	}
	c.attach(ws)
	if !opts.NoReconnect {
		c.wg.Add(1)
		go c.supervise()
	}
	return c, nil
}

func (c *Client) dial(ctx context.Context) (*websocket.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.DialTimeout)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, c.url, nil)
	if err != nil {
		return nil, err
	}
	ws.SetReadLimit(c.opts.ReadLimit)
	return ws, nil
}

// attach makes ws the current connection: it starts its reader, restores
// subscriptions and cancels orphaned goals.
func (c *Client) attach(ws *websocket.Conn) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		ws.CloseNow()
		return
	}
	c.ws = ws
	c.advertised = map[string]string{}
	adverts := make(map[string]string, len(c.adverts))
	for topic, typ := range c.adverts {
		adverts[topic] = typ
		c.advertised[topic] = typ
	}
	subs := make([]*subState, 0, len(c.subs))
	for _, s := range c.subs {
		subs = append(subs, s)
	}
	orphans := c.orphans
	c.orphans = nil
	close(c.up)
	c.mu.Unlock()

	c.wg.Add(1)
	go c.readLoop(ws)

	ctx, cancel := context.WithTimeout(c.ctx, c.opts.RequestTimeout)
	defer cancel()
	// Publishers first: on ROS 1 a publish right after its advertise can be
	// lost while subscribers connect, so an estop or cancel must not be the
	// first message of a fresh advertise.
	for topic, typ := range adverts {
		if err := c.write(ctx, ws, map[string]any{"op": "advertise", "id": "advertise:" + topic, "topic": topic, "type": typ}); err != nil {
			return
		}
	}
	for _, s := range subs {
		if err := c.write(ctx, ws, subscribeOp(s)); err != nil {
			return // the drop handler takes over; the next attach retries
		}
	}
	for _, o := range orphans {
		c.opts.Logger.Warn("ros2: cancelling goal left in flight by a dropped connection", "action", o.action, "goal", o.id)
		if err := c.write(ctx, ws, map[string]any{"op": "cancel_action_goal", "id": o.id, "action": o.action}); err != nil {
			c.mu.Lock()
			c.orphans = append(c.orphans, o)
			c.mu.Unlock()
		}
	}
}

func subscribeOp(s *subState) map[string]any {
	m := map[string]any{"op": "subscribe", "id": s.id, "topic": s.s.Topic}
	if s.s.Type != "" {
		m["type"] = s.s.Type
	}
	if s.s.ThrottleMs > 0 {
		m["throttle_rate"] = s.s.ThrottleMs
	}
	if s.s.QueueLength > 0 {
		m["queue_length"] = s.s.QueueLength
	}
	return m
}

// supervise redials after each drop, with exponential backoff.
func (c *Client) supervise() {
	defer c.wg.Done()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-c.redial:
		}
		wait := c.opts.BackoffInitial
		for {
			t := time.NewTimer(wait)
			select {
			case <-c.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			ws, err := c.dial(c.ctx)
			if err == nil {
				c.mu.Lock()
				c.reconnects++
				c.mu.Unlock()
				c.opts.Logger.Info("ros2: reconnected to rosbridge", "url", c.url)
				c.attach(ws)
				break
			}
			c.opts.Logger.Debug("ros2: redial failed", "url", c.url, "err", err, "next_in", wait)
			wait *= 2
			if wait > c.opts.BackoffMax {
				wait = c.opts.BackoffMax
			}
		}
	}
}

func (c *Client) readLoop(ws *websocket.Conn) {
	defer c.wg.Done()
	frags := map[string][]string{}
	for {
		typ, data, err := ws.Read(c.ctx)
		if err != nil {
			c.dropped(ws, err)
			return
		}
		if typ != websocket.MessageText {
			continue // binary frames need cbor compression, which is never requested
		}
		c.handle(data, frags)
	}
}

// envelope is every field of every server op the client reads.
type envelope struct {
	Op      string          `json:"op"`
	ID      string          `json:"id"`
	Topic   string          `json:"topic"`
	Service string          `json:"service"`
	Action  string          `json:"action"`
	Msg     json.RawMessage `json:"msg"`
	Values  json.RawMessage `json:"values"`
	Result  *bool           `json:"result"`
	Status  json.RawMessage `json:"status"`
	Level   string          `json:"level"`
	Data    json.RawMessage `json:"data"`
	Num     int             `json:"num"`
	Total   int             `json:"total"`
}

func (c *Client) handle(data []byte, frags map[string][]string) {
	var e envelope
	if err := json.Unmarshal(data, &e); err != nil {
		c.opts.Logger.Warn("ros2: unparsable message from rosbridge", "err", err)
		return
	}
	switch e.Op {
	case "fragment":
		var part string
		if json.Unmarshal(e.Data, &part) != nil || e.Total <= 0 || e.Num < 0 || e.Num >= e.Total {
			return
		}
		parts := frags[e.ID]
		if len(parts) != e.Total {
			parts = make([]string, e.Total)
			frags[e.ID] = parts
		}
		parts[e.Num] = part
		if e.Num == e.Total-1 {
			delete(frags, e.ID)
			c.handle([]byte(strings.Join(parts, "")), frags)
		}
	case "publish":
		now := c.opts.Clock.Now()
		c.mu.Lock()
		var fns []func(TopicEvent)
		for _, s := range c.subs {
			if s.s.Topic == e.Topic {
				fns = append(fns, s.fn)
			}
		}
		c.mu.Unlock()
		for _, fn := range fns {
			fn(TopicEvent{Msg: e.Msg, At: now})
		}
	case "service_response":
		c.mu.Lock()
		ch := c.pending[e.ID]
		delete(c.pending, e.ID)
		c.mu.Unlock()
		if ch != nil {
			ch <- reply{values: e.Values, result: e.Result != nil && *e.Result}
		}
	case "action_feedback":
		c.mu.Lock()
		g := c.goals[e.ID]
		c.mu.Unlock()
		if g != nil && g.feedback != nil {
			g.feedback(e.Values)
		}
	case "action_result":
		c.mu.Lock()
		g := c.goals[e.ID]
		delete(c.goals, e.ID)
		c.mu.Unlock()
		if g != nil {
			var st int
			_ = json.Unmarshal(e.Status, &st)
			g.result <- GoalResult{Status: st, Values: e.Values, Result: e.Result != nil && *e.Result}
		}
	case "status":
		c.opts.Logger.Info("ros2: rosbridge status", "level", e.Level, "id", e.ID, "msg", string(e.Msg))
	}
}

// dropped handles the end of connection ws: pending calls and goals learn
// the link is lost, subscribers get an Err event, and the supervisor redials.
func (c *Client) dropped(ws *websocket.Conn, cause error) {
	ws.CloseNow()
	c.mu.Lock()
	if c.ws != ws {
		c.mu.Unlock()
		return
	}
	c.ws = nil
	c.up = make(chan struct{})
	pending := c.pending
	c.pending = map[string]chan reply{}
	goals := c.goals
	c.goals = map[string]*goalState{}
	for id, g := range goals {
		c.orphans = append(c.orphans, orphan{action: g.action, id: id})
	}
	var fns []func(TopicEvent)
	for _, s := range c.subs {
		fns = append(fns, s.fn)
	}
	closed := c.closed
	c.mu.Unlock()

	if !closed {
		c.opts.Logger.Warn("ros2: connection to rosbridge lost", "url", c.url, "err", cause, "goals_in_flight", len(goals))
	}
	lost := ErrConnLost
	if closed {
		lost = ErrClosed
	}
	for _, ch := range pending {
		ch <- reply{err: lost}
	}
	for id, g := range goals {
		g.result <- GoalResult{Err: fmt.Errorf("%w (goal %s on %s)", lost, id, g.action)}
	}
	now := c.opts.Clock.Now()
	for _, fn := range fns {
		fn(TopicEvent{At: now, Err: lost})
	}
	if !closed {
		select {
		case c.redial <- struct{}{}:
		default:
		}
	}
}

// write sends one message. The caller's ctx only gates the start: once
// begun, the write runs under the client's own deadline, because
// coder/websocket closes the whole connection when a write's context ends,
// and a job's cancel must not cut the link for everyone.
func (c *Client) write(ctx context.Context, ws *websocket.Conn, v any) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %v", ErrNotSent, err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(c.ctx, c.opts.RequestTimeout)
	defer cancel()
	if err := ws.Write(wctx, websocket.MessageText, b); err != nil {
		c.opts.Logger.Warn("ros2: write to rosbridge failed; dropping the connection", "err", err)
		ws.CloseNow() // the reader sees the close and runs the drop handling
		return err
	}
	return nil
}

func (c *Client) nextID(kind string) string {
	c.seq++
	return kind + ":" + strconv.FormatUint(c.seq, 10)
}

func (c *Client) current() (*websocket.Conn, error) {
	if c.closed {
		return nil, ErrClosed
	}
	if c.ws == nil {
		return nil, ErrNotConnected
	}
	return c.ws, nil
}

func (c *Client) withDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, c.opts.RequestTimeout)
}

// Connected reports whether the link is up.
func (c *Client) Connected() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ws != nil
}

// WaitConnected blocks until the link is up or ctx ends.
func (c *Client) WaitConnected(ctx context.Context) error {
	c.mu.Lock()
	up, closed := c.up, c.closed
	c.mu.Unlock()
	if closed {
		return ErrClosed
	}
	select {
	case <-up:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Reconnects counts the successful redials since Dial.
func (c *Client) Reconnects() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reconnects
}

// Subscribe implements Conn.
func (c *Client) Subscribe(ctx context.Context, sub Subscription, fn func(TopicEvent)) (func(), error) {
	if sub.Topic == "" || fn == nil {
		return nil, errors.New("ros2: subscribe needs a topic and a handler")
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	s := &subState{id: c.nextID("subscribe:" + sub.Topic), s: sub, fn: fn}
	c.subs[s.id] = s
	ws := c.ws
	c.mu.Unlock()
	if ws != nil {
		ctx, cancel := c.withDeadline(ctx)
		defer cancel()
		// A failed write drops the link; the next attach subscribes again.
		_ = c.write(ctx, ws, subscribeOp(s))
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			delete(c.subs, s.id)
			ws := c.ws
			c.mu.Unlock()
			if ws != nil {
				ctx, cancel := context.WithTimeout(c.ctx, c.opts.RequestTimeout)
				defer cancel()
				_ = c.write(ctx, ws, map[string]any{"op": "unsubscribe", "id": s.id, "topic": sub.Topic})
			}
		})
	}, nil
}

// Publish implements Conn.
func (c *Client) Publish(ctx context.Context, topic, typ string, msg any) error {
	c.mu.Lock()
	ws, err := c.current()
	if err != nil {
		c.mu.Unlock()
		return err
	}
	needAdvertise := typ != "" && c.advertised[topic] != typ
	var advID string
	if needAdvertise {
		c.advertised[topic] = typ
		c.adverts[topic] = typ
		advID = c.nextID("advertise:" + topic)
	}
	c.mu.Unlock()
	ctx, cancel := c.withDeadline(ctx)
	defer cancel()
	if needAdvertise {
		if err := c.write(ctx, ws, map[string]any{"op": "advertise", "id": advID, "topic": topic, "type": typ}); err != nil {
			c.mu.Lock()
			delete(c.advertised, topic)
			c.mu.Unlock()
			if errors.Is(err, ErrNotSent) {
				return err
			}
			return fmt.Errorf("%w (advertise %s failed: %v)", ErrNotConnected, topic, err)
		}
	}
	if msg == nil {
		msg = map[string]any{}
	}
	if err := c.write(ctx, ws, map[string]any{"op": "publish", "topic": topic, "msg": msg}); err != nil {
		if errors.Is(err, ErrNotSent) {
			return err
		}
		return fmt.Errorf("%w: publish %s: %v", ErrConnLost, topic, err)
	}
	return nil
}

// Advertise announces a topic the client will publish on, now and after
// every reconnect. Publish advertises by itself; advertising ahead (at
// start) matters on ROS 1, where a publish right after its advertise can be
// lost while subscribers connect.
func (c *Client) Advertise(ctx context.Context, topic, typ string) error {
	c.mu.Lock()
	ws, err := c.current()
	if err != nil {
		c.mu.Unlock()
		return err
	}
	c.adverts[topic] = typ
	c.advertised[topic] = typ
	c.mu.Unlock()
	if err := c.write(ctx, ws, map[string]any{"op": "advertise", "id": "advertise:" + topic, "topic": topic, "type": typ}); err != nil {
		return fmt.Errorf("%w: advertise %s: %v", ErrNotConnected, topic, err)
	}
	return nil
}

// CallService implements Conn.
func (c *Client) CallService(ctx context.Context, service string, args any) (json.RawMessage, error) {
	ctx, cancel := c.withDeadline(ctx)
	defer cancel()
	c.mu.Lock()
	ws, err := c.current()
	if err != nil {
		c.mu.Unlock()
		return nil, err
	}
	id := c.nextID("call_service:" + service)
	ch := make(chan reply, 1)
	c.pending[id] = ch
	c.mu.Unlock()
	if args == nil {
		args = map[string]any{}
	}
	start := time.Now()
	if err := c.write(ctx, ws, map[string]any{"op": "call_service", "id": id, "service": service, "args": args}); err != nil {
		c.forget(id)
		if errors.Is(err, ErrNotSent) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: call_service %s: %v", ErrConnLost, service, err)
	}
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, fmt.Errorf("%w: call_service %s", r.err, service)
		}
		if !r.result {
			return nil, &ServiceError{Service: service, Message: valuesText(r.values)}
		}
		return r.values, nil
	case <-ctx.Done():
		c.forget(id)
		return nil, fmt.Errorf("%w: call_service %s got no service_response within %v (rosbridge answers nothing for an unknown service or a wrong type)",
			ErrNoReply, service, time.Since(start).Round(time.Millisecond))
	}
}

func (c *Client) forget(id string) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// SendGoal implements Conn.
func (c *Client) SendGoal(ctx context.Context, req GoalRequest, feedback func(json.RawMessage)) (GoalHandle, error) {
	ctx, cancel := c.withDeadline(ctx)
	defer cancel()
	c.mu.Lock()
	ws, err := c.current()
	if err != nil {
		c.mu.Unlock()
		return GoalHandle{}, err
	}
	id := c.nextID("send_action_goal:" + req.Action)
	g := &goalState{action: req.Action, result: make(chan GoalResult, 1), feedback: feedback}
	c.goals[id] = g
	c.mu.Unlock()
	args := req.Args
	if args == nil {
		args = map[string]any{}
	}
	op := map[string]any{"op": "send_action_goal", "id": id, "action": req.Action, "action_type": req.Type, "args": args, "feedback": req.Feedback}
	// A failed write drops the link: the drop handler then delivers ErrConnLost
	// on the handle and cancels the goal on reconnect, in case it went out.
	if err := c.write(ctx, ws, op); errors.Is(err, ErrNotSent) {
		c.mu.Lock()
		delete(c.goals, id)
		c.mu.Unlock()
		return GoalHandle{}, err
	}
	return GoalHandle{ID: id, Result: g.result}, nil
}

// CancelGoal implements Conn.
func (c *Client) CancelGoal(ctx context.Context, action, goalID string) error {
	c.mu.Lock()
	ws, err := c.current()
	if err != nil {
		// The goal, if still in flight, is cancelled on reconnect.
		c.mu.Unlock()
		return err
	}
	c.mu.Unlock()
	ctx, cancel := c.withDeadline(ctx)
	defer cancel()
	if err := c.write(ctx, ws, map[string]any{"op": "cancel_action_goal", "id": goalID, "action": action}); err != nil {
		if errors.Is(err, ErrNotSent) {
			return err
		}
		return fmt.Errorf("%w: cancel_action_goal %s: %v", ErrConnLost, goalID, err)
	}
	return nil
}

// Close ends the connection and the reconnect loop. Pending calls and goals
// get ErrClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	ws := c.ws
	c.mu.Unlock()
	c.cancel()
	if ws != nil {
		ws.CloseNow()
	}
	c.wg.Wait()
	return nil
}

var _ Conn = (*Client)(nil)
