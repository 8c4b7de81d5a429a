package opcua

import (
	"context"
	"crypto/rsa"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gopcua/opcua"
	"github.com/gopcua/opcua/id"
	"github.com/gopcua/opcua/ua"

	"github.com/openmhp/mhp-go/clock"
)

// Client is the seam between the adapter's mapping and OPC UA: the mapping
// talks only to this interface. Conn implements it over gopcua; a unit test
// may use any struct of functions.
//
// Errors: a Client returns ErrNotConnected (or an error wrapping
// ua.StatusBadServerNotConnected) when the request was not sent; any other
// error of Write or Call means the request may have reached the server.
type Client interface {
	// Read reads attributes (values, DataType, AccessLevel, ...): one
	// DataValue per node, each with its own status.
	Read(ctx context.Context, nodes []*ua.ReadValueID) ([]*ua.DataValue, error)
	// Write writes one node's Value attribute and returns the server's
	// per-node status.
	Write(ctx context.Context, node *ua.NodeID, value *ua.Variant) (ua.StatusCode, error)
	// Call calls one method.
	Call(ctx context.Context, req *ua.CallMethodRequest) (*ua.CallMethodResult, error)
	// Browse returns the forward hierarchical references of a node.
	Browse(ctx context.Context, node *ua.NodeID) ([]*ua.ReferenceDescription, error)
	// Subscribe monitors the nodes' values and calls fn(index, value) for
	// every value the server reports, first the current one. The
	// subscription lives until stop is called: while the connection is down
	// fn gets a value with status BadServerNotConnected for every node, and
	// after a reconnect the subscription is rebuilt (current values again).
	// fn must not block.
	Subscribe(ctx context.Context, nodes []*ua.NodeID, fn func(index int, dv *ua.DataValue)) (stop func(), err error)
}

// DialOptions tune Dial beyond the config file.
type DialOptions struct {
	// Logger receives connection events; default slog.Default().
	Logger *slog.Logger
	// OnConnect runs after every successful (re)connection, before the
	// subscriptions are rebuilt (the adapter re-reads data types there and
	// may replace its subscription); an error counts as a lost connection.
	OnConnect func(ctx context.Context, c *Conn) error
	// KeepAlive is how often the connection is probed by a read of the
	// server state; two failed probes in a row count as a lost connection.
	// Default 5s; negative disables.
	KeepAlive time.Duration
	// LinkClock times the reconnect backoff; default the system clock.
	LinkClock clock.Clock
	// Background makes Dial return a Conn even when the first connection
	// fails: it keeps trying with backoff (requests fail with
	// ErrNotConnected meanwhile). Without it the first failure is Dial's
	// error (fail fast).
	Background bool
	// OnLink is told every change of the link: up (err nil) or down with
	// the reason. It must not block.
	OnLink func(up bool, err error)
}

// Conn is a Client over gopcua that keeps one session up: it connects with
// the configured security and identity, checks the pinned server
// certificate, and after a loss reconnects with exponential backoff
// (reconnect.min_s doubling to max_s) and rebuilds every subscription.
// gopcua's own auto-reconnect is off: requests made while disconnected fail
// at once with ErrNotConnected, and nothing is ever re-sent.
type Conn struct {
	cfg  Config
	opt  DialOptions
	log  *slog.Logger
	cert []byte
	key  *rsa.PrivateKey

	mu     sync.Mutex
	cl     *opcua.Client
	lost   chan struct{} // closed when the current client is lost
	subs   map[int]*subReg
	nextID int
	closed bool

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	// heard is when a subscription last heard from the server (a value or
	// the heartbeat), Unix nanoseconds; 0 while none is running.
	heard atomic.Int64
	// keepAlive is the last subscription's keep-alive period as the server
	// granted it (revised interval x revised count), in nanoseconds.
	keepAlive atomic.Int64
}

// Heard returns when a subscription last heard from the server: a data
// change or the heartbeat item every subscription carries (the server's
// CurrentTime, sampled at half the keep-alive period). gopcua swallows
// keep-alive messages, so the heartbeat is what shows that a subscription
// without data changes is alive. Zero while no subscription runs.
func (c *Conn) Heard() time.Time {
	n := c.heard.Load()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

type subReg struct {
	id    int
	nodes []*ua.NodeID
	fn    func(int, *ua.DataValue)
	// stopLive stops the subscription on the current client.
	stopLive func()
}

// Dial connects to cfg.Endpoint (an error when the first connection fails)
// and keeps the connection up until Close.
func Dial(ctx context.Context, cfg Config, opt DialOptions) (*Conn, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	if opt.KeepAlive == 0 {
		opt.KeepAlive = seconds(cfg.Timeouts.KeepAliveS)
	}
	if opt.LinkClock == nil {
		opt.LinkClock = clock.Real{}
	}
	c := &Conn{cfg: cfg, opt: opt, log: opt.Logger, subs: map[int]*subReg{}, done: make(chan struct{})}
	if cfg.Security.Policy != PolicyNone {
		if err := c.loadClientCert(); err != nil {
			return nil, err
		}
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	cl, lost, err := c.connect(ctx)
	if err != nil {
		if !opt.Background {
			c.cancel()
			return nil, err
		}
		c.log.Warn("opcua: server unreachable; serving and reconnecting in the background", "endpoint", cfg.Endpoint, "err", err)
		c.link(false, err)
		go c.supervise(true)
		return c, nil
	}
	if err := c.install(ctx, cl, lost); err != nil && !opt.Background {
		go c.supervise(false)
		c.Close()
		return nil, err
	}
	go c.supervise(false)
	return c, nil
}

// link reports a link change to OnLink.
func (c *Conn) link(up bool, err error) {
	if c.opt.OnLink != nil {
		c.opt.OnLink(up, err)
	}
}

// Connected reports whether a session is up.
func (c *Conn) Connected() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cl != nil
}

// Close ends the session and stops reconnecting.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	cl := c.cl
	c.cl = nil
	c.mu.Unlock()
	c.cancel()
	<-c.done
	if cl != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = cl.Close(ctx)
	}
	return nil
}

func (c *Conn) client() *opcua.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cl
}

// install makes cl the current client, runs OnConnect (which may replace
// subscriptions, e.g. when namespace indexes moved), then rebuilds every
// subscription OnConnect did not make afresh, and reports the link up.
func (c *Conn) install(ctx context.Context, cl *opcua.Client, lost chan struct{}) error {
	c.mu.Lock()
	c.cl = cl
	c.lost = lost
	c.mu.Unlock()
	if c.opt.OnConnect != nil {
		if err := c.opt.OnConnect(ctx, c); err != nil {
			// The session is not usable as the mapping needs it: treat it
			// as lost (the supervisor reconnects with backoff).
			c.log.Warn("opcua: after connecting", "endpoint", c.cfg.Endpoint, "err", err)
			c.markLost(cl)
			c.link(false, err)
			return err
		}
	}
	c.mu.Lock()
	regs := make([]*subReg, 0, len(c.subs))
	for _, r := range c.subs {
		if r.stopLive == nil {
			regs = append(regs, r)
		}
	}
	c.mu.Unlock()
	for _, r := range regs {
		sctx, cancel := context.WithTimeout(c.ctx, seconds(c.cfg.Timeouts.RequestS))
		stop, err := c.startSub(sctx, cl, r)
		cancel()
		if err != nil {
			c.log.Warn("opcua: rebuilding a subscription failed", "endpoint", c.cfg.Endpoint, "err", err)
			c.markLost(cl)
			continue
		}
		c.mu.Lock()
		if _, still := c.subs[r.id]; still && c.cl == cl && r.stopLive == nil {
			r.stopLive = stop
			stop = nil
		}
		c.mu.Unlock()
		if stop != nil {
			stop()
		}
	}
	c.link(true, nil)
	return nil
}

// markLost treats cl as lost (keep-alive failure, subscription failure).
func (c *Conn) markLost(cl *opcua.Client) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cl == cl && c.lost != nil {
		select {
		case <-c.lost:
		default:
			close(c.lost)
		}
	}
}

// supervise waits for the connection to be lost, marks every subscribed
// value unavailable, and reconnects with backoff; down says the first
// connection already failed.
func (c *Conn) supervise(down bool) {
	defer close(c.done)
	for {
		if !down {
			c.mu.Lock()
			lost, cl := c.lost, c.cl
			c.mu.Unlock()
			if !c.waitLost(cl, lost) {
				return
			}
			// The link is reported down only when the first reconnect
			// fails: a blip healed at once (a server closing idle channels,
			// a proxy restart) is not an outage, and a reset verifying right
			// after it waits for the session instead of being refused.
			c.log.Warn("opcua: connection lost; reconnecting", "endpoint", c.cfg.Endpoint)
			c.teardown(cl)
		}
		down = false
		wait := seconds(c.cfg.Reconn.MinS)
		for {
			if !c.backoff(wait) {
				return
			}
			ctx, cancel := context.WithTimeout(c.ctx, seconds(c.cfg.Timeouts.DialS)+seconds(c.cfg.Timeouts.RequestS))
			ncl, nlost, err := c.connect(ctx)
			if err == nil {
				c.mu.Lock()
				closed := c.closed
				c.mu.Unlock()
				if closed {
					cancel()
					_ = ncl.Close(context.Background())
					return
				}
				_ = c.install(ctx, ncl, nlost)
				cancel()
				c.log.Info("opcua: connected", "endpoint", c.cfg.Endpoint)
				break
			}
			cancel()
			c.link(false, err)
			c.log.Warn("opcua: connect failed", "endpoint", c.cfg.Endpoint, "err", err, "retry_in", wait)
			wait *= 2
			if max := seconds(c.cfg.Reconn.MaxS); wait > max {
				wait = max
			}
		}
	}
}

// backoff waits d on the link clock; false when the Conn closes first.
func (c *Conn) backoff(d time.Duration) bool {
	due := make(chan struct{})
	t := c.opt.LinkClock.AfterFunc(d, func() { close(due) })
	defer t.Stop()
	select {
	case <-c.ctx.Done():
		return false
	case <-due:
		return true
	}
}

// teardown forgets the lost client cl: its subscriptions stop, every
// subscribed value turns BadServerNotConnected, and cl closes.
func (c *Conn) teardown(cl *opcua.Client) {
	c.heard.Store(0)
	c.mu.Lock()
	c.cl = nil
	regs := make([]*subReg, 0, len(c.subs))
	var stops []func()
	for _, r := range c.subs {
		regs = append(regs, r)
		if r.stopLive != nil {
			stops = append(stops, r.stopLive)
			r.stopLive = nil
		}
	}
	c.mu.Unlock()
	go func() {
		for _, s := range stops {
			s()
		}
	}()
	for _, r := range regs {
		for i := range r.nodes {
			r.fn(i, &ua.DataValue{EncodingMask: ua.DataValueStatusCode, Status: ua.StatusBadServerNotConnected})
		}
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = cl.Close(ctx)
	}()
}

// waitLost blocks until the client is lost (true) or the Conn closes (false),
// probing the server state every KeepAlive.
func (c *Conn) waitLost(cl *opcua.Client, lost chan struct{}) bool {
	var tick <-chan time.Time
	if c.opt.KeepAlive > 0 {
		t := time.NewTicker(c.opt.KeepAlive)
		defer t.Stop()
		tick = t.C
	}
	failures := 0
	for {
		select {
		case <-c.ctx.Done():
			return false
		case <-lost:
			return true
		case <-tick:
			ctx, cancel := context.WithTimeout(c.ctx, seconds(c.cfg.Timeouts.RequestS))
			_, err := cl.Read(ctx, &ua.ReadRequest{NodesToRead: []*ua.ReadValueID{{NodeID: ua.NewNumericNodeID(0, id.Server_ServerStatus_State), AttributeID: ua.AttributeIDValue}}})
			cancel()
			if err != nil && c.ctx.Err() == nil {
				failures++
				if failures >= 2 {
					return true
				}
			} else {
				failures = 0
			}
		}
	}
}

// connect makes one connection: endpoint selection, certificate pin,
// security, identity, session; then a read proves the session is active.
func (c *Conn) connect(ctx context.Context) (*opcua.Client, chan struct{}, error) {
	dctx, cancel := context.WithTimeout(ctx, seconds(c.cfg.Timeouts.DialS))
	eps, err := opcua.GetEndpoints(dctx, c.cfg.Endpoint, opcua.DialTimeout(seconds(c.cfg.Timeouts.DialS)),
		opcua.RequestTimeout(seconds(c.cfg.Timeouts.RequestS)))
	cancel()
	if err != nil {
		return nil, nil, fmt.Errorf("opcua: %s: get endpoints: %w", c.cfg.Endpoint, err)
	}
	policy := ua.FormatSecurityPolicyURI(c.cfg.Security.Policy)
	mode := ua.MessageSecurityModeNone
	if c.cfg.Security.Mode == ModeSignAndEncrypt {
		mode = ua.MessageSecurityModeSignAndEncrypt
	}
	ep, err := opcua.SelectEndpoint(eps, policy, mode)
	if err != nil {
		return nil, nil, fmt.Errorf("opcua: %s: no endpoint with security %s/%s: %w", c.cfg.Endpoint, c.cfg.Security.Policy, c.cfg.Security.Mode, err)
	}
	if err := c.checkPin(ep.ServerCertificate); err != nil {
		return nil, nil, err
	}
	states := make(chan opcua.ConnState, 16)
	opts := []opcua.Option{
		opcua.SecurityPolicy(ep.SecurityPolicyURI),
		opcua.SecurityMode(ep.SecurityMode),
		opcua.AutoReconnect(false),
		// Nothing here expires on a healthy link: the session timeout is
		// far beyond the keep-alive (every publish request, at least one per
		// keep-alive, keeps the session alive), gopcua renews the secure
		// channel at 75% of its lifetime, and the subscription's timing is
		// set in startSub.
		opcua.SessionTimeout(20 * time.Minute),
		opcua.RequestTimeout(seconds(c.cfg.Timeouts.RequestS)),
		opcua.DialTimeout(seconds(c.cfg.Timeouts.DialS)),
		opcua.ApplicationURI(c.cfg.Security.ApplicationURI),
		opcua.ApplicationName("mhp-go opcua adapter"),
		opcua.StateChangedCh(states),
	}
	if c.cert != nil {
		opts = append(opts, opcua.Certificate(c.cert), opcua.PrivateKey(c.key))
	}
	tokenType := ua.UserTokenTypeAnonymous
	switch c.cfg.Auth.Type {
	case AuthUsername:
		pw, err := c.cfg.Auth.password()
		if err != nil {
			return nil, nil, err
		}
		opts = append(opts, opcua.AuthUsername(c.cfg.Auth.Username, pw))
		tokenType = ua.UserTokenTypeUserName
	default:
		opts = append(opts, opcua.AuthAnonymous())
	}
	opts = append(opts, opcua.SecurityFromEndpoint(ep, tokenType))
	cl, err := opcua.NewClient(c.cfg.Endpoint, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("opcua: %s: %w", c.cfg.Endpoint, err)
	}
	cctx, cancel := context.WithTimeout(ctx, seconds(c.cfg.Timeouts.DialS)+seconds(c.cfg.Timeouts.RequestS))
	defer cancel()
	if err := cl.Connect(cctx); err != nil {
		_ = cl.Close(context.Background())
		if hint := c.certificateHint(err); hint != "" {
			return nil, nil, fmt.Errorf("opcua: %s: connect (%s/%s, %s): %s: %w", c.cfg.Endpoint, c.cfg.Security.Policy, c.cfg.Security.Mode, c.cfg.Auth.Type, hint, err)
		}
		return nil, nil, fmt.Errorf("opcua: %s: connect (%s/%s, %s): %w", c.cfg.Endpoint, c.cfg.Security.Policy, c.cfg.Security.Mode, c.cfg.Auth.Type, err)
	}
	// gopcua can report a successful Connect on a session that was never
	// activated; a read proves it is usable.
	res, err := cl.Read(cctx, &ua.ReadRequest{NodesToRead: []*ua.ReadValueID{{NodeID: ua.NewNumericNodeID(0, id.Server_ServerStatus_State), AttributeID: ua.AttributeIDValue}}})
	if err == nil && (len(res.Results) != 1 || isBad(res.Results[0].Status)) {
		err = errors.New("server state unreadable")
		if len(res.Results) == 1 {
			err = res.Results[0].Status
		}
	}
	if err != nil {
		_ = cl.Close(context.Background())
		return nil, nil, fmt.Errorf("opcua: %s: session not usable: %w", c.cfg.Endpoint, err)
	}
	lost := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-states:
				if s == opcua.Disconnected || s == opcua.Closed {
					c.markLost(cl)
					return
				}
			case <-lost:
				return
			case <-c.ctx.Done():
				return
			}
		}
	}()
	return cl, lost, nil
}

// Read implements Client.
func (c *Conn) Read(ctx context.Context, nodes []*ua.ReadValueID) ([]*ua.DataValue, error) {
	cl := c.client()
	if cl == nil {
		return nil, ErrNotConnected
	}
	res, err := cl.Read(ctx, &ua.ReadRequest{NodesToRead: nodes, TimestampsToReturn: ua.TimestampsToReturnBoth})
	if err != nil {
		c.checkLost(cl, err)
		return nil, err
	}
	if len(res.Results) != len(nodes) {
		return nil, fmt.Errorf("opcua: read of %d nodes returned %d results", len(nodes), len(res.Results))
	}
	return res.Results, nil
}

// Write implements Client.
func (c *Conn) Write(ctx context.Context, node *ua.NodeID, value *ua.Variant) (ua.StatusCode, error) {
	cl := c.client()
	if cl == nil {
		return 0, ErrNotConnected
	}
	res, err := cl.Write(ctx, &ua.WriteRequest{NodesToWrite: []*ua.WriteValue{{
		NodeID: node, AttributeID: ua.AttributeIDValue,
		Value: &ua.DataValue{EncodingMask: ua.DataValueValue, Value: value},
	}}})
	if err != nil {
		c.checkLost(cl, err)
		return 0, err
	}
	if len(res.Results) != 1 {
		return 0, fmt.Errorf("opcua: write returned %d results", len(res.Results))
	}
	return res.Results[0], nil
}

// Call implements Client.
func (c *Conn) Call(ctx context.Context, req *ua.CallMethodRequest) (*ua.CallMethodResult, error) {
	cl := c.client()
	if cl == nil {
		return nil, ErrNotConnected
	}
	res, err := cl.Call(ctx, req)
	if err != nil {
		c.checkLost(cl, err)
	}
	return res, err
}

// checkLost starts a reconnect when a request met a broken connection
// (gopcua does not always report it as a state change).
func (c *Conn) checkLost(cl *opcua.Client, err error) {
	if connectionTrouble(err) && !errors.Is(err, ua.StatusBadTimeout) {
		c.markLost(cl)
	}
}

// Browse implements Client (forward hierarchical references, following
// continuation points).
func (c *Conn) Browse(ctx context.Context, node *ua.NodeID) ([]*ua.ReferenceDescription, error) {
	cl := c.client()
	if cl == nil {
		return nil, ErrNotConnected
	}
	return cl.Node(node).References(ctx, id.HierarchicalReferences, ua.BrowseDirectionForward, ua.NodeClassAll, true)
}

// Subscribe implements Client.
func (c *Conn) Subscribe(ctx context.Context, nodes []*ua.NodeID, fn func(int, *ua.DataValue)) (func(), error) {
	c.mu.Lock()
	idx := c.nextID
	r := &subReg{id: idx, nodes: nodes, fn: fn}
	c.nextID++
	c.subs[idx] = r
	cl := c.cl
	c.mu.Unlock()
	stop := func() {
		c.mu.Lock()
		delete(c.subs, idx)
		s := r.stopLive
		r.stopLive = nil
		c.mu.Unlock()
		if s != nil {
			s()
		}
	}
	if cl == nil {
		for i := range nodes {
			fn(i, &ua.DataValue{EncodingMask: ua.DataValueStatusCode, Status: ua.StatusBadServerNotConnected})
		}
		return stop, nil
	}
	s, err := c.startSub(ctx, cl, r)
	if err != nil {
		stop()
		return nil, err
	}
	c.mu.Lock()
	_, still := c.subs[idx]
	if still && c.cl == cl && r.stopLive == nil {
		r.stopLive, s = s, nil
	}
	c.mu.Unlock()
	if s != nil {
		// Stopped meanwhile, or the client was lost (the next connection
		// rebuilds it), or a reconnect rebuilt it first.
		s()
	}
	return stop, nil
}

// startSub creates the subscription of r on cl and a goroutine draining its
// notifications (gopcua's publish loop blocks on a slow consumer).
func (c *Conn) startSub(ctx context.Context, cl *opcua.Client, r *subReg) (func(), error) {
	ch := make(chan *opcua.PublishNotificationData, 64)
	// Timing that cannot expire on a healthy link: the keep-alive period
	// (interval x MaxKeepAliveCount) stays below the request timeout, which
	// gopcua v0.8.0 uses as the publish wait when it is longer than the
	// keep-alive (its publish wait is max(keep-alive, RequestTimeout); with
	// its defaults, 3000 x interval, the wait equals the keep-alive and a
	// keep-alive arriving a little late drops the link). The lifetime is ten
	// keep-alives (the spec wants at least three).
	interval := seconds(c.cfg.Timeouts.PublishS)
	kaCount := uint32(max(1, int(c.cfg.Timeouts.KeepAliveS/c.cfg.Timeouts.PublishS)))
	sub, err := cl.Subscribe(ctx, &opcua.SubscriptionParameters{Interval: interval, MaxKeepAliveCount: kaCount, LifetimeCount: 10 * kaCount}, ch)
	if err != nil {
		return nil, fmt.Errorf("opcua: create subscription: %w", err)
	}
	// The server may grant another publishing interval (open62541 revises
	// 50 ms to 100 ms, which doubles the keep-alive period): count the
	// keep-alive and the lifetime again from what it granted, and create
	// the subscription once more with those (ModifySubscription is not
	// served everywhere; nothing is monitored yet).
	if got := sub.RevisedPublishingInterval; got > 0 && got != interval {
		want := uint32(max(1, int(seconds(c.cfg.Timeouts.KeepAliveS)/got)))
		if want != sub.RevisedMaxKeepAliveCount {
			again, err := cl.Subscribe(ctx, &opcua.SubscriptionParameters{Interval: got, MaxKeepAliveCount: want, LifetimeCount: 10 * want}, ch)
			if err != nil {
				c.log.Warn("opcua: could not fit the keep-alive to the publishing interval the server granted", "endpoint", c.cfg.Endpoint,
					"requested_interval", interval, "granted_interval", got, "err", err)
			} else {
				_ = sub.Cancel(ctx)
				sub = again
			}
		}
	}
	ka := time.Duration(sub.RevisedMaxKeepAliveCount) * sub.RevisedPublishingInterval
	c.keepAlive.Store(int64(ka))
	if ka >= seconds(c.cfg.Timeouts.RequestS) {
		c.log.Warn("opcua: the server revised the subscription's keep-alive to the request timeout or more; raise timeouts.request_s above it or the link may drop",
			"endpoint", c.cfg.Endpoint, "keepalive", ka, "request_timeout", seconds(c.cfg.Timeouts.RequestS))
	}
	items := make([]*ua.MonitoredItemCreateRequest, len(r.nodes), len(r.nodes)+1)
	for i, n := range r.nodes {
		items[i] = opcua.NewMonitoredItemCreateRequestWithDefaults(n, ua.AttributeIDValue, uint32(i))
		items[i].RequestedParameters.QueueSize = 16
		items[i].RequestedParameters.SamplingInterval = c.cfg.Timeouts.PublishS * 1000
	}
	hb := opcua.NewMonitoredItemCreateRequestWithDefaults(ua.NewNumericNodeID(0, id.Server_ServerStatus_CurrentTime), ua.AttributeIDValue, uint32(len(r.nodes)))
	hb.RequestedParameters.SamplingInterval = c.cfg.Timeouts.KeepAliveS * 1000 / 2
	items = append(items, hb)
	res, err := sub.Monitor(ctx, ua.TimestampsToReturnBoth, items...)
	if err != nil {
		_ = sub.Cancel(context.Background())
		return nil, fmt.Errorf("opcua: monitor %d nodes: %w", len(items), err)
	}
	for i, x := range res.Results {
		if i < len(r.nodes) && isBad(x.StatusCode) {
			r.fn(i, &ua.DataValue{EncodingMask: ua.DataValueStatusCode, Status: x.StatusCode})
		}
	}
	c.heard.Store(time.Now().UnixNano())
	sctx, cancel := context.WithCancel(c.ctx)
	go func() {
		for {
			select {
			case <-sctx.Done():
				return
			case msg := <-ch:
				if msg == nil {
					continue
				}
				if msg.Error != nil {
					continue
				}
				dcn, ok := msg.Value.(*ua.DataChangeNotification)
				if !ok {
					continue
				}
				c.heard.Store(time.Now().UnixNano())
				for _, it := range dcn.MonitoredItems {
					if it == nil || int(it.ClientHandle) >= len(r.nodes) {
						continue // the heartbeat, or a handle we never gave
					}
					dv := it.Value
					if dv == nil {
						dv = &ua.DataValue{EncodingMask: ua.DataValueStatusCode, Status: ua.StatusBadNoData}
					}
					r.fn(int(it.ClientHandle), dv)
				}
			}
		}
	}()
	return func() {
		cancel()
		ctx, c2 := context.WithTimeout(context.Background(), time.Second)
		defer c2()
		_ = sub.Cancel(ctx)
	}, nil
}

var _ Client = (*Conn)(nil)
