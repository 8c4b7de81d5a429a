package mqtt

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/openmhp/mhp-go/adapters"
)

// Message is one message received from the broker.
type Message struct {
	Topic   string
	Payload []byte
	// Retained is the broker's retain flag. In MQTT 3.1.1 only messages
	// delivered because of a new subscription carry it, so it does not tell
	// a live value from a stale one.
	Retained bool
	// Conn numbers the connection the message arrived on (ConnState.Conn):
	// a value from an earlier connection may have changed unseen since.
	Conn uint64
}

// ConnState is the broker connection as the client sees it.
type ConnState struct {
	// Up: connected and subscribed.
	Up bool
	// Conn counts connections; it grows at every (re)connect.
	Conn uint64
	// Changed is closed at the next change (lost or re-established).
	Changed <-chan struct{}
}

// Client is the seam between the adapter (and the fleet publisher) and the
// broker: publish, subscribe and the connection state. DialPaho gives the
// real one; tests may use a struct of funcs.
type Client interface {
	// Publish sends a message and waits, bounded by ctx, for the broker's
	// acknowledgement (QoS 1 and 2). An error wrapping ErrNotConnected means
	// nothing was sent; any other error means the message may have reached
	// the broker.
	Publish(ctx context.Context, topic string, qos byte, retain bool, payload []byte) error
	// Subscribe registers fn for messages on filter, now and after every
	// reconnect (the client resubscribes). fn must not block.
	Subscribe(ctx context.Context, filter string, qos byte, fn func(Message)) error
	// State reports the connection: up or not, its number, and a channel
	// closed at the next change (lost or re-established).
	State() ConnState
	// Close disconnects cleanly (no last will).
	Close() error
}

// ErrNotConnected is wrapped by Publish when the broker connection is down
// and nothing was sent.
var ErrNotConnected = errors.New("mqtt: not connected to the broker")

// Will is the last-will message the broker publishes when the client drops
// without a clean disconnect.
type Will struct {
	Topic   string
	Payload []byte
	QoS     byte
	Retain  bool
}

// DialOptions configure the paho client behind DialPaho.
type DialOptions struct {
	// Broker is the broker address: tcp://host:1883, mqtt://host:1883,
	// ssl://host:8883, mqtts://host:8883, ws://host/mqtt.
	Broker   string
	ClientID string
	Username string
	Password string
	// TLS, when set, is the TLS configuration of an ssl:// (mqtts://)
	// broker: the CAs to trust, a client certificate (auth.ClientTLS.Config).
	TLS *tls.Config
	// Will, when set, is registered with the broker at every connect.
	Will *Will
	// OnConnect, when set, runs after every (re)connect, after the
	// subscriptions were renewed (publish retained "online" here).
	OnConnect func(ctx context.Context, c Client)
	// ConnectTimeout bounds one connection attempt; default 10s.
	ConnectTimeout time.Duration
	// KeepAlive is the MQTT keep-alive; default 30s.
	KeepAlive time.Duration
	// MaxReconnectInterval caps the reconnect back-off; default 10s.
	MaxReconnectInterval time.Duration
	// RetryInterval is the wait between attempts of the first connection
	// (paho retries it in the background); default 1s. It is jittered once
	// per client (drawn from its upper half) so that many adapters started
	// together do not connect in step.
	RetryInterval time.Duration
	// Logger receives connection events; default slog.Default().
	Logger *slog.Logger
}

// BrokerURL normalises a broker address for paho: mqtt:// becomes tcp://,
// mqtts:// becomes ssl://, a bare host:port gets tcp://. Any path is
// dropped (the fleet code reads it as a topic prefix).
func BrokerURL(s string) (string, error) {
	if s == "" {
		return "", fmt.Errorf("mqtt: no broker address")
	}
	if !strings.Contains(s, "://") {
		s = "tcp://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("mqtt: broker %q: %w", s, err)
	}
	switch u.Scheme {
	case "mqtt", "tcp":
		u.Scheme = "tcp"
	case "mqtts", "ssl", "tls":
		u.Scheme = "ssl"
	case "ws", "wss":
		return u.String(), nil
	default:
		return "", fmt.Errorf("mqtt: broker %q: scheme %q is not mqtt, mqtts, tcp, ssl, ws or wss", s, u.Scheme)
	}
	if u.Host == "" {
		return "", fmt.Errorf("mqtt: broker %q has no host", s)
	}
	if u.Port() == "" {
		if u.Scheme == "ssl" {
			u.Host += ":8883"
		} else {
			u.Host += ":1883"
		}
	}
	return u.Scheme + "://" + u.Host, nil
}

// PahoClient is the Client over eclipse/paho.mqtt.golang (MQTT 3.1.1). It
// keeps its own connection state and subscription table (both behind a
// lock), reconnects with back-off, and renews every subscription after each
// reconnect (clean sessions, so nothing stale is replayed but retained values).
type PahoClient struct {
	c   paho.Client
	log *slog.Logger
	opt DialOptions

	mu      sync.Mutex
	up      bool
	conn    uint64
	changed chan struct{}
	subs    map[string]sub
	closed  bool
	lastErr error
}

type sub struct {
	qos byte
	fn  func(Message)
}

// DialPaho creates the client and starts connecting in the background; it
// returns at once. Use State (or WaitUp) to wait for the connection.
func DialPaho(opt DialOptions) (*PahoClient, error) {
	broker, err := BrokerURL(opt.Broker)
	if err != nil {
		return nil, err
	}
	if opt.ClientID == "" {
		return nil, fmt.Errorf("mqtt: a client id is required")
	}
	if opt.ConnectTimeout <= 0 {
		opt.ConnectTimeout = 10 * time.Second
	}
	if opt.KeepAlive <= 0 {
		opt.KeepAlive = 30 * time.Second
	}
	if opt.MaxReconnectInterval <= 0 {
		opt.MaxReconnectInterval = 10 * time.Second
	}
	if opt.RetryInterval <= 0 {
		opt.RetryInterval = time.Second
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	p := &PahoClient{log: opt.Logger, opt: opt, changed: make(chan struct{}), subs: map[string]sub{}}
	o := paho.NewClientOptions().
		AddBroker(broker).
		SetClientID(opt.ClientID).
		SetProtocolVersion(4).
		SetCleanSession(true).
		SetStore(newCopyStore()).
		SetOrderMatters(true).
		SetAutoReconnect(true).
		SetConnectRetry(true).
		SetConnectRetryInterval(adapters.NewBackoff(opt.RetryInterval, opt.RetryInterval, nil).Next()).
		SetMaxReconnectInterval(opt.MaxReconnectInterval).
		SetConnectTimeout(opt.ConnectTimeout).
		SetKeepAlive(opt.KeepAlive).
		SetPingTimeout(opt.ConnectTimeout).
		SetWriteTimeout(opt.ConnectTimeout).
		SetOnConnectHandler(p.onConnect).
		SetReconnectingHandler(p.onReconnecting).
		SetConnectionLostHandler(p.onLost)
	if opt.TLS != nil {
		o.SetTLSConfig(opt.TLS)
	}
	if opt.Username != "" {
		o.SetUsername(opt.Username)
		o.SetPassword(opt.Password)
	}
	if w := opt.Will; w != nil {
		o.SetBinaryWill(w.Topic, w.Payload, w.QoS, w.Retain)
	}
	p.c = paho.NewClient(o)
	p.c.Connect() // retries in the background (SetConnectRetry)
	return p, nil
}

func (p *PahoClient) setUp(up bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.up = up
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *PahoClient) onConnect(c paho.Client) {
	// Renew every subscription before reporting the connection up: a
	// half-subscribed connection would silently miss replies. Subscriptions
	// added meanwhile are picked up before the state flips, under the lock.
	done := map[string]bool{}
	p.mu.Lock()
	p.conn++
	conn := p.conn
	p.mu.Unlock()
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return
		}
		var todo []string
		for f := range p.subs {
			if !done[f] {
				todo = append(todo, f)
			}
		}
		if len(todo) == 0 {
			if !c.IsConnectionOpen() {
				p.mu.Unlock()
				return
			}
			p.up = true
			close(p.changed)
			p.changed = make(chan struct{})
			p.mu.Unlock()
			break
		}
		subs := make([]sub, len(todo))
		for i, f := range todo {
			subs[i] = p.subs[f]
		}
		p.mu.Unlock()
		for i, f := range todo {
			for {
				err := p.subscribeNow(f, subs[i], conn)
				if err == nil {
					break
				}
				p.log.Warn("mqtt: subscribe failed", "filter", f, "err", err)
				if !c.IsConnectionOpen() || p.isClosed() {
					return
				}
				// Brokers refuse transiently too (mochi answers 0x91 "packet
				// identifier in use" when our id matches one of its own in flight).
				time.Sleep(200 * time.Millisecond)
			}
			done[f] = true
		}
	}
	p.log.Info("mqtt: connected", "client", p.opt.ClientID, "subscriptions", len(done))
	if p.opt.OnConnect != nil {
		ctx, cancel := context.WithTimeout(context.Background(), p.opt.ConnectTimeout)
		p.opt.OnConnect(ctx, p)
		cancel()
	}
}

// onReconnecting runs in paho's reconnect loop before every attempt, so
// before a new connection can deliver anything: a connection that was up
// reads down from here until onConnect has renewed the subscriptions. paho
// starts the connection-lost handler and the reconnect as two goroutines;
// on a loaded machine onLost can come after the new connection opened, and
// the state then read up (of the old connection) while replies to the
// not yet renewed subscriptions were lost.
func (p *PahoClient) onReconnecting(paho.Client, *paho.ClientOptions) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.up || p.closed {
		return
	}
	p.up = false
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *PahoClient) onLost(c paho.Client, err error) {
	p.log.Warn("mqtt: connection lost", "client", p.opt.ClientID, "err", err)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lastErr = err
	// paho runs this handler and the reconnect as two goroutines, and the
	// reconnect reports the loss first (onReconnecting, before its first
	// attempt). When this handler comes only after a new connection opened
	// (a loaded machine deschedules it), the loss was reported already: a
	// change now would be a spurious one of the healthy new connection,
	// and a job or write waiting on it would read its link as lost (outcome
	// unknown, the device in fault) though nothing dropped.
	if c.IsConnectionOpen() {
		return
	}
	p.up = false
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *PahoClient) subscribeNow(filter string, s sub, conn uint64) error {
	tok := p.c.Subscribe(filter, s.qos, handler(s.fn, conn))
	if !tok.WaitTimeout(p.opt.ConnectTimeout) {
		return fmt.Errorf("mqtt: subscribe %q: no SUBACK within %s", filter, p.opt.ConnectTimeout)
	}
	return subackErr(tok, filter)
}

// subackErr is the token's error, or the broker's refusal in the SUBACK
// (return code 0x80), which paho does not report as an error.
func subackErr(tok paho.Token, filter string) error {
	if err := tok.Error(); err != nil {
		return fmt.Errorf("mqtt: subscribe %q: %w", filter, err)
	}
	if st, ok := tok.(*paho.SubscribeToken); ok {
		for f, code := range st.Result() {
			if code >= 0x80 {
				return fmt.Errorf("mqtt: subscribe %q: the broker refused %q (code %#x)", filter, f, code)
			}
		}
	}
	return nil
}

func (p *PahoClient) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// Publish implements Client.
//
// A publish still waiting for its acknowledgement when the connection
// drops ends then, as possibly delivered: paho never sends it again on the
// next connection (the store drops it, see copyStore), so its token would
// otherwise wait for ever.
func (p *PahoClient) Publish(ctx context.Context, topic string, qos byte, retain bool, payload []byte) error {
	st := p.State()
	if !st.Up {
		return fmt.Errorf("publish %s: %w", topic, ErrNotConnected)
	}
	tok := p.c.Publish(topic, qos, retain, payload)
	done := func() error {
		if err := tok.Error(); err != nil {
			if errors.Is(err, paho.ErrNotConnected) {
				return fmt.Errorf("publish %s: %w", topic, ErrNotConnected)
			}
			return fmt.Errorf("mqtt: publish %s: %w", topic, err)
		}
		return nil
	}
	select {
	case <-tok.Done():
		return done()
	case <-st.Changed: // the connection it went out on dropped
		select {
		case <-tok.Done():
			return done()
		default:
		}
		return fmt.Errorf("mqtt: publish %s: the broker connection dropped before the broker acknowledged it (it may have reached the broker)", topic)
	case <-ctx.Done():
		return fmt.Errorf("mqtt: publish %s: no acknowledgement from the broker: %w", topic, ctx.Err())
	}
}

// Subscribe implements Client.
func (p *PahoClient) Subscribe(ctx context.Context, filter string, qos byte, fn func(Message)) error {
	s := sub{qos: qos, fn: fn}
	p.mu.Lock()
	p.subs[filter] = s
	up, conn := p.up, p.conn
	p.mu.Unlock()
	if !up {
		return nil // subscribed on connect
	}
	for {
		tok := p.c.Subscribe(filter, qos, handler(fn, conn))
		var err error
		select {
		case <-tok.Done():
			err = subackErr(tok, filter)
		case <-ctx.Done():
			return fmt.Errorf("mqtt: subscribe %q: %w", filter, ctx.Err())
		}
		if err == nil || !p.State().Up {
			return nil // done, or the next connect subscribes it
		}
		p.log.Warn("mqtt: subscribe failed, retrying", "filter", filter, "err", err)
		t := time.NewTimer(200 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
	}
}

// handler adapts fn to paho, tagging messages with the connection number.
func handler(fn func(Message), conn uint64) paho.MessageHandler {
	return func(_ paho.Client, m paho.Message) {
		fn(Message{Topic: m.Topic(), Payload: m.Payload(), Retained: m.Retained(), Conn: conn})
	}
}

// State implements Client.
func (p *PahoClient) State() ConnState {
	p.mu.Lock()
	defer p.mu.Unlock()
	return ConnState{Up: p.up, Conn: p.conn, Changed: p.changed}
}

// LastError is why the connection was last lost, or nil.
func (p *PahoClient) LastError() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastErr
}

// WaitUp waits until the connection is up or ctx ends.
func WaitUp(ctx context.Context, c Client) error {
	for {
		st := c.State()
		if st.Up {
			return nil
		}
		select {
		case <-st.Changed:
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", ErrNotConnected, ctx.Err())
		}
	}
}

// Close implements Client: a clean disconnect (the broker does not publish
// the will).
func (p *PahoClient) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	p.c.Disconnect(250)
	p.mu.Lock()
	wasUp := p.up
	p.mu.Unlock()
	if wasUp {
		p.setUp(false)
	}
	return nil
}

var _ Client = (*PahoClient)(nil)
