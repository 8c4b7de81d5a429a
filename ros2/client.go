package ros2

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
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
	// NoReconnect turns reconnecting off: after a drop of the main
	// connection every call returns ErrNotConnected.
	NoReconnect bool
	// Clock stamps message arrival; default the system clock.
	Clock clock.Clock
	// BackoffClock times the waits between redials; default the system
	// clock.
	BackoffClock clock.Clock
	// Logger receives connection events; default slog.Default().
	Logger *slog.Logger
	// ReadLimit caps one incoming message; default 64 MiB.
	ReadLimit int64
	// OnLink, when set, is called when the main connection comes up (err
	// nil) and when it goes down or an attempt to bring it up fails (with
	// the error). It runs on the client's goroutines and must not block.
	OnLink func(up bool, err error)
	// MaxIdle is how many idle connections are kept for service calls;
	// default 2.
	MaxIdle int
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
	if o.BackoffClock == nil {
		o.BackoffClock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.ReadLimit <= 0 {
		o.ReadLimit = 64 << 20
	}
	if o.OnLink == nil {
		o.OnLink = func(bool, error) {}
	}
	if o.MaxIdle <= 0 {
		o.MaxIdle = 2
	}
	return o
}

// Client is a set of rosbridge v2 connections to one robot, laid out so that
// nothing urgent ever waits behind a goal or a slow service call: rosbridge
// handles one connection's ops one at a time, in order (its IncomingQueue,
// with call_services_in_new_thread and send_action_goals_in_new_thread false
// as shipped), so an op queued behind a running goal waits until the goal
// ends, and behind a goal or call that never gets an answer, for good.
//
//   - the main connection carries only ops rosbridge handles at once:
//     advertise, publish, subscribe, unsubscribe and cancel_action_goal.
//     It redials with exponential backoff after a drop, sends the cancels
//     owed for goals orphaned by a drop first, then restores advertisements
//     and subscriptions;
//   - every call_service runs alone on a connection of a small pool; a
//     call that gets no answer in time takes its connection down with it;
//   - every goal holds a connection of that pool for its whole life (a new
//     one when none is idle); its cancel goes over the main connection (rosbridge 2.x keeps goal handles
//     in one table for all connections, so it reaches the goal);
//   - the estop path (a context from [StopPath]) has a connection of its own,
//     kept warm and re-advertised, that never carries anything else.
//
// Goal ids carry a random prefix drawn at Dial, so they are unique across
// processes and restarts (rosbridge's goal table is shared by every client).
type Client struct {
	url    string
	opts   ClientOptions
	prefix string // random per client: goal ids never collide with another client's

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	redial chan struct{}

	mu         sync.Mutex
	ws         *websocket.Conn // main connection
	closed     bool
	seq        uint64
	goals      map[string]*goalState // in flight, each on its own side connection
	subs       map[string]*subState
	advertised map[string]string // topic -> type, on the current main connection
	adverts    map[string]string // topic -> type, every topic ever advertised: restored on reconnect
	owed       []owedOp          // sent first on the next main connection
	reconnects int
	everUp     bool
	ready      bool // the main connection is up and restored

	up          chan struct{} // closed while ready
	sides       map[*side]bool
	idle        []*side
	stop        *side
	stopAdverts map[string]string
	stopDialing chan struct{} // closed when the stop connection's dial in progress ends
}

type reply struct {
	values json.RawMessage
	result bool
	err    error
}

type goalState struct {
	action    string
	result    chan GoalResult
	feedback  func(json.RawMessage)
	side      *side
	feedbacks int  // action_feedback seen
	cancelled bool // a cancel was sent before any feedback: re-sent on the first
}

type subState struct {
	id string
	s  Subscription
	fn func(TopicEvent)
}

// maxOwed caps the messages owed to a robot that stays away.
const maxOwed = 256

// owedOp is a message owed to the robot once the main connection is back:
// the cancel of a goal orphaned by a drop.
type owedOp struct {
	what string
	msg  map[string]any
	// expires, when set, drops the message from a later reconnect: a cancel
	// already sent on a connection (via) that may have been dying. If via
	// drops before expires, the write proved nothing (a bridge restarting
	// takes it into its grave): the message is owed again, without expiry,
	// however long the bridge stays away.
	expires time.Time
	via     *websocket.Conn
}

// reoweLocked makes the messages written on ws shortly before it dropped
// owed again until the next main connection. mu is held.
func (c *Client) reoweLocked(ws *websocket.Conn) {
	now := c.opts.Clock.Now()
	for i := range c.owed {
		o := &c.owed[i]
		if o.via == ws && !o.expires.IsZero() && now.Before(o.expires) {
			o.expires, o.via = time.Time{}, nil
		}
	}
}

// Dial connects to a rosbridge server ("ws://robot:9090") and keeps the
// connection up until Close. The first connection attempt must succeed
// within ctx and DialTimeout; later drops are redialled in the background.
func Dial(ctx context.Context, url string, opts ClientOptions) (*Client, error) {
	c := newClient(url, opts)
	ws, err := c.dial(ctx)
	if err != nil {
		c.cancel()
		err = fmt.Errorf("ros2: connect to rosbridge at %s: %w", url, err)
		c.opts.OnLink(false, err)
		return nil, err
	}
	c.attach(ws)
	if !c.opts.NoReconnect {
		c.wg.Add(1)
		go c.supervise()
	}
	return c, nil
}

// Connect returns a client at once, with the link down; it dials in the
// background with backoff until the bridge answers (and after every drop,
// unless NoReconnect), so a device server can start before its robot.
// OnLink reports each failed attempt's error and the link coming up.
func Connect(url string, opts ClientOptions) *Client {
	c := newClient(url, opts)
	c.wg.Add(1)
	go c.supervise()
	c.redial <- struct{}{}
	return c
}

func newClient(url string, opts ClientOptions) *Client {
	opts = opts.withDefaults()
	var r [8]byte
	_, _ = rand.Read(r[:])
	c := &Client{
		url:         url,
		opts:        opts,
		prefix:      "mhp-" + hex.EncodeToString(r[:]),
		redial:      make(chan struct{}, 1),
		goals:       map[string]*goalState{},
		subs:        map[string]*subState{},
		advertised:  map[string]string{},
		adverts:     map[string]string{},
		up:          make(chan struct{}),
		sides:       map[*side]bool{},
		stopAdverts: map[string]string{},
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c
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

// attach makes ws the main connection: it starts its reader, sends the
// cancels owed for orphaned goals, then restores advertisements and
// subscriptions, and reports the link up.
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
	now := c.opts.Clock.Now()
	var owed []owedOp
	for _, o := range c.owed {
		if o.expires.IsZero() || now.Before(o.expires) {
			owed = append(owed, o)
		}
	}
	c.owed = nil
	if c.everUp {
		c.reconnects++
	}
	c.everUp = true
	c.wg.Add(2) // the reader and the estop warm-up below
	c.mu.Unlock()

	go c.readLoop(ws, nil)

	ctx, cancel := context.WithTimeout(c.ctx, c.opts.RequestTimeout)
	defer cancel()
	// Owed cancels first: the robot may still be executing those goals.
	// A ROS 2 cancel needs no advertise; a ROS 1 actionlib cancel is a
	// publish, so its topic is advertised right before it.
	for i, o := range owed {
		c.opts.Logger.Warn("ros2: sending first after the reconnect: "+o.what, "op", o.msg["op"])
		if t, _ := o.msg["topic"].(string); t != "" && o.msg["op"] == "publish" {
			if typ := adverts[t]; typ != "" {
				_ = c.write(ctx, ws, map[string]any{"op": "advertise", "id": "advertise:" + t, "topic": t, "type": typ})
			}
		}
		if err := c.write(ctx, ws, o.msg); err != nil {
			c.mu.Lock()
			c.owed = append(c.owed, owed[i:]...)
			c.mu.Unlock()
			c.wg.Done()
			return
		}
	}
	for topic, typ := range adverts {
		if err := c.write(ctx, ws, map[string]any{"op": "advertise", "id": "advertise:" + topic, "topic": topic, "type": typ}); err != nil {
			c.wg.Done()
			return
		}
	}
	for _, s := range subs {
		if err := c.write(ctx, ws, subscribeOp(s)); err != nil {
			c.wg.Done()
			return // the drop handler takes over; the next attach retries
		}
	}
	c.mu.Lock()
	ready := c.ws == ws // not dropped meanwhile
	c.mu.Unlock()
	if ready {
		c.opts.OnLink(true, nil)
		c.mu.Lock()
		if c.ws == ws {
			c.ready = true
			close(c.up)
		}
		c.mu.Unlock()
	}
	go func() {
		defer c.wg.Done()
		wctx, cancel := context.WithTimeout(c.ctx, c.opts.DialTimeout)
		defer cancel()
		_, _ = c.stopSide(wctx) // keep the estop path warm
	}()
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
	first := true
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-c.redial:
		}
		wait := c.opts.BackoffInitial
		if first {
			wait, first = 0, false
		}
		for {
			if !c.sleep(wait) {
				return
			}
			ws, err := c.dial(c.ctx)
			if err == nil {
				c.opts.Logger.Info("ros2: connected to rosbridge", "url", c.url)
				c.attach(ws)
				break
			}
			c.opts.OnLink(false, fmt.Errorf("ros2: connect to rosbridge at %s: %w", c.url, err))
			c.opts.Logger.Debug("ros2: redial failed", "url", c.url, "err", err, "next_in", wait)
			wait = min(max(wait*2, c.opts.BackoffInitial), c.opts.BackoffMax)
		}
	}
}

// sleep waits d on the backoff clock; false when the client closed first.
func (c *Client) sleep(d time.Duration) bool {
	if d <= 0 {
		return c.ctx.Err() == nil
	}
	fired := make(chan struct{})
	t := c.opts.BackoffClock.AfterFunc(d, func() { close(fired) })
	select {
	case <-c.ctx.Done():
		t.Stop()
		return false
	case <-fired:
		return true
	}
}

// readLoop reads one connection: the main one (from nil) or a side one.
func (c *Client) readLoop(ws *websocket.Conn, from *side) {
	defer c.wg.Done()
	frags := map[string][]string{}
	for {
		typ, data, err := ws.Read(c.ctx)
		if err != nil {
			if from != nil {
				c.sideDropped(from, err)
			} else {
				c.dropped(ws, err)
			}
			return
		}
		if typ != websocket.MessageText {
			continue // binary frames need cbor compression, which is never requested
		}
		c.handle(data, frags, from)
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

func (c *Client) handle(data []byte, frags map[string][]string, from *side) {
	var e envelope
	if err := json.Unmarshal(data, &e); err != nil {
		c.opts.Logger.Warn("ros2: unparsable message from rosbridge", "err", err)
		return
	}
	switch e.Op {
	case "fragment":
		var part string
		if json.Unmarshal(e.Data, &part) != nil || e.Total <= 0 || e.Num < 0 || e.Num >= e.Total || e.Total > maxFragments {
			return
		}
		parts := frags[e.ID]
		if len(parts) != e.Total {
			if len(frags) >= maxFragmentIDs {
				clear(frags) // a peer that never finishes its fragments cannot grow the map
			}
			parts = make([]string, e.Total)
			frags[e.ID] = parts
		}
		parts[e.Num] = part
		if e.Num == e.Total-1 {
			delete(frags, e.ID)
			c.handle([]byte(strings.Join(parts, "")), frags, from)
		}
	case "publish":
		if from != nil {
			return // side connections subscribe to nothing
		}
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
		if from != nil {
			from.deliver(e.ID, reply{values: e.Values, result: e.Result != nil && *e.Result})
		}
	case "action_feedback":
		c.mu.Lock()
		g := c.goals[e.ID]
		if g == nil || g.side != from {
			c.mu.Unlock()
			return
		}
		g.feedbacks++
		resend := g.feedbacks == 1 && g.cancelled
		c.mu.Unlock()
		if resend {
			// rosbridge 2.1.0 drops a cancel that arrives before the goal
			// response; the first feedback proves the goal is known now.
			c.wg.Add(1)
			go func() {
				defer c.wg.Done()
				ctx, cancel := context.WithTimeout(c.ctx, c.opts.RequestTimeout)
				defer cancel()
				_ = c.sendCancel(ctx, g.action, e.ID)
			}()
		}
		if g.feedback != nil {
			g.feedback(e.Values)
		}
	case "action_result":
		c.mu.Lock()
		g := c.goals[e.ID]
		if g == nil || g.side != from {
			c.mu.Unlock()
			return
		}
		delete(c.goals, e.ID)
		c.mu.Unlock()
		r := GoalResult{Values: e.Values, Result: e.Result != nil && *e.Result}
		if len(e.Status) == 0 || string(e.Status) == "null" {
			r.NoStatus = true
		} else if err := json.Unmarshal(e.Status, &r.Status); err != nil {
			r.NoStatus = true
		}
		g.result <- r
		c.putSide(from) // the goal is over: its connection is free again
	case "status":
		c.opts.Logger.Info("ros2: rosbridge status", "level", e.Level, "id", e.ID, "msg", string(e.Msg))
	}
}

// Limits on fragment reassembly: a peer cannot make the client hold more.
const (
	maxFragments   = 1 << 16
	maxFragmentIDs = 64
)

// dropped handles the end of the main connection ws: subscribers get an Err
// event, OnLink hears of it, and the supervisor redials. Goals and calls on
// their own connections are not affected by the main connection's drop.
func (c *Client) dropped(ws *websocket.Conn, cause error) {
	ws.CloseNow()
	c.mu.Lock()
	if c.ws != ws {
		c.mu.Unlock()
		return
	}
	c.ws = nil
	c.reoweLocked(ws)
	if c.ready {
		c.up = make(chan struct{})
	}
	c.ready = false
	var fns []func(TopicEvent)
	for _, s := range c.subs {
		fns = append(fns, s.fn)
	}
	goals := len(c.goals)
	closed := c.closed
	// The idle and estop connections most likely went with the main one; a
	// fresh estop connection comes with the next main connection, rather
	// than a dead one found only when the estop needs it.
	spare := c.idle
	c.idle = nil
	if c.stop != nil {
		spare = append(spare, c.stop)
		c.stop = nil
	}
	c.mu.Unlock()
	for _, s := range spare {
		s.release()
	}

	lost := ErrConnLost
	if closed {
		lost = ErrClosed
	} else {
		c.opts.Logger.Warn("ros2: main connection to rosbridge lost", "url", c.url, "err", cause, "ros2_goals_in_flight", goals)
		c.opts.OnLink(false, fmt.Errorf("ros2: connection to rosbridge at %s lost: %w", c.url, cause))
	}
	now := c.opts.Clock.Now()
	for _, fn := range fns {
		fn(TopicEvent{At: now, Err: lost})
	}
	if !closed && !c.opts.NoReconnect {
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

// goalID is a goal id no other client of the bridge uses: rosbridge keeps
// the goal handles of every connection in one table, so a second process
// (or this one after a restart) counting from 1 would cancel our goals.
func (c *Client) goalID(action string) string {
	c.seq++
	return "send_action_goal:" + action + ":" + c.prefix + "-" + strconv.FormatUint(c.seq, 10)
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

// Connected reports whether the main connection is up, with its
// subscriptions restored.
func (c *Client) Connected() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ready
}

// WaitConnected blocks until the main connection is up, with its
// subscriptions restored, or ctx ends.
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

// Reconnects counts the successful redials after the first connection.
func (c *Client) Reconnects() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reconnects
}

// Close ends every connection and the reconnect loop. Pending calls and
// goals get ErrClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	ws := c.ws
	sides := make([]*side, 0, len(c.sides))
	for s := range c.sides {
		sides = append(sides, s)
	}
	c.mu.Unlock()
	c.cancel()
	if ws != nil {
		ws.CloseNow()
	}
	for _, s := range sides {
		s.ws.CloseNow()
	}
	c.wg.Wait()
	return nil
}

var _ Conn = (*Client)(nil)
