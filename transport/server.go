package transport

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/clock"
)

// Options configure a Server. Zero values take the documented defaults.
type Options struct {
	// Token, when set, is the bearer token every HTTP request must carry
	// ("Authorization: Bearer <token>"); it is compared in constant time. The
	// stdio transport is not token-checked: whoever holds the pipe started the
	// process.
	Token string
	// PublicDescriptor serves GET /mhp.json without the token, for discovery
	// probes on a trusted network. Default false: with a Token, every path
	// needs it.
	PublicDescriptor bool
	// AllowedOrigins lists the browser origins ("https://lab.example.org")
	// whose requests are served. A request that carries any other Origin
	// header gets 403: a web page the operator happens to open must not
	// drive the device (DNS rebinding, cross-site POSTs). Clients that are
	// not browsers send no Origin and are unaffected.
	AllowedOrigins []string
	// MaxFrame is the largest request frame accepted, in bytes; default 4 MiB.
	MaxFrame int
	// SSEBuffer is how many notifications each session keeps for SSE resume
	// (Last-Event-ID); default 1024.
	SSEBuffer int
	// KeepAlive is the interval of SSE keep-alive comments; default 15s.
	KeepAlive time.Duration
	// SessionTTL forgets an HTTP session (EndSession: its lease is released)
	// after this long without a request or an open event stream; default 10m.
	SessionTTL time.Duration
	// MaxSessions caps the live HTTP sessions; an initialize beyond it is
	// refused. Default 1024.
	MaxSessions int
	// MaxInFlight caps the ordinary requests one stdio stream runs at once;
	// safety/estop and ping are never counted. Default 64.
	MaxInFlight int
	// Logger receives request and session logs; default slog.Default().
	Logger *slog.Logger
	// Clock drives session expiry; default the system clock.
	Clock clock.Clock
}

// Validate reports a negative option.
func (o Options) Validate() error {
	switch {
	case o.MaxFrame < 0:
		return fmt.Errorf("transport: MaxFrame %d is negative", o.MaxFrame)
	case o.SSEBuffer < 0:
		return fmt.Errorf("transport: SSEBuffer %d is negative", o.SSEBuffer)
	case o.KeepAlive < 0:
		return fmt.Errorf("transport: KeepAlive %v is negative", o.KeepAlive)
	case o.SessionTTL < 0:
		return fmt.Errorf("transport: SessionTTL %v is negative", o.SessionTTL)
	case o.MaxSessions < 0 || o.MaxInFlight < 0:
		return fmt.Errorf("transport: MaxSessions and MaxInFlight must not be negative")
	}
	return nil
}

// Defaults.
const (
	DefaultMaxFrame    = 4 << 20
	DefaultSSEBuffer   = 1024
	DefaultKeepAlive   = 15 * time.Second
	DefaultSessionTTL  = 10 * time.Minute
	DefaultMaxSessions = 1024
	DefaultMaxInFlight = 64
)

func (o Options) withDefaults() Options {
	if o.MaxFrame <= 0 {
		o.MaxFrame = DefaultMaxFrame
	}
	if o.SSEBuffer <= 0 {
		o.SSEBuffer = DefaultSSEBuffer
	}
	if o.KeepAlive <= 0 {
		o.KeepAlive = DefaultKeepAlive
	}
	if o.SessionTTL <= 0 {
		o.SessionTTL = DefaultSessionTTL
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = DefaultMaxSessions
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = DefaultMaxInFlight
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	return o
}

// Server serves one mhp.Device over JSON-RPC 2.0 (stdio and HTTP+SSE). It
// is safe for concurrent use; one Server may serve any number of streams and
// an HTTP handler at once.
type Server struct {
	dev     mhp.Device
	opts    Options
	log     *slog.Logger
	clk     clock.Clock
	methods map[string]method
	token   [32]byte // sha256 of Options.Token

	mu       sync.Mutex
	sessions map[string]*session
	sweep    clock.Timer
	closed   bool
	done     chan struct{} // closed by Close: streams end
	stop     func()        // stops device notifications
}

// NewServer builds a server for dev. Invalid options (negative sizes) are
// replaced by their defaults; call Options.Validate first to refuse them.
// Close the server to stop its listener on the device and end its sessions.
func NewServer(dev mhp.Device, opts Options) *Server {
	opts = opts.withDefaults()
	s := &Server{dev: dev, opts: opts, log: opts.Logger, clk: opts.Clock, sessions: map[string]*session{},
		done: make(chan struct{})}
	s.token = sha256.Sum256([]byte(opts.Token))
	s.methods = s.methodTable()
	s.stop = dev.Listen(s.fanout)
	s.mu.Lock()
	s.scheduleSweepLocked()
	s.mu.Unlock()
	return s
}

// Close stops listening to the device and ends every session (EndSession on
// the device, so their leases are released). Streams being served end.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.done)
	if s.sweep != nil {
		s.sweep.Stop()
	}
	all := make([]*session, 0, len(s.sessions))
	for _, ss := range s.sessions {
		all = append(all, ss)
	}
	s.sessions = map[string]*session{}
	s.mu.Unlock()
	s.stop()
	for _, ss := range all {
		s.endSession(ss, "server closed")
	}
	return nil
}

// Sessions reports how many sessions are live.
func (s *Server) Sessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}

// checkToken compares a presented bearer token with Options.Token in
// constant time (hashes first, so the length does not leak either).
func (s *Server) checkToken(presented string) bool {
	if s.opts.Token == "" {
		return true
	}
	h := sha256.Sum256([]byte(presented))
	return subtle.ConstantTimeCompare(h[:], s.token[:]) == 1
}

// openSession issues a new session.
func (s *Server) openSession(client string, stdio bool) (*session, *mhp.Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, s.errorf(mhp.CodeServerError, "server is shutting down")
	}
	if !stdio && s.countHTTPLocked() >= s.opts.MaxSessions {
		return nil, s.errorf(mhp.CodeServerError, "too many sessions (%d): close one or wait for idle sessions to expire", s.opts.MaxSessions).
			With("reason", "too_many_sessions")
	}
	ss := newSession(client, s.opts.SSEBuffer, s.clk.Now())
	ss.stdio = stdio
	s.sessions[ss.id] = ss
	s.log.Info("mhp session opened", "session", ss.id, "client", client, "stdio", stdio)
	return ss, nil
}

func (s *Server) countHTTPLocked() int {
	n := 0
	for _, ss := range s.sessions {
		if !ss.stdio {
			n++
		}
	}
	return n
}

// lookup returns a live session and records activity.
func (s *Server) lookup(id string) (*session, bool) {
	s.mu.Lock()
	ss, ok := s.sessions[id]
	s.mu.Unlock()
	if ok {
		ss.touch(s.clk.Now())
	}
	return ss, ok
}

// closeSession forgets the session and tells the device.
func (s *Server) closeSession(ss *session, why string) {
	s.mu.Lock()
	_, ok := s.sessions[ss.id]
	delete(s.sessions, ss.id)
	s.mu.Unlock()
	if ok {
		s.endSession(ss, why)
	}
}

func (s *Server) endSession(ss *session, why string) {
	ss.close()
	ctx, cancel := context.WithTimeout(mhp.WithSession(context.Background(), ss.id), 10*time.Second)
	defer cancel()
	s.dev.EndSession(ctx)
	s.log.Info("mhp session ended", "session", ss.id, "client", ss.client, "why", why)
}

// scheduleSweepLocked arms the idle-session sweep on the server clock.
func (s *Server) scheduleSweepLocked() {
	if s.closed {
		return
	}
	every := s.opts.SessionTTL / 4
	if every < time.Millisecond {
		every = time.Millisecond
	}
	s.sweep = s.clk.AfterFunc(every, s.sweepIdle)
}

// sweepIdle ends the HTTP sessions idle longer than SessionTTL.
func (s *Server) sweepIdle() {
	now := s.clk.Now()
	var idle []*session
	s.mu.Lock()
	for id, ss := range s.sessions {
		last, pinned := ss.idleSince()
		if !pinned && now.Sub(last) > s.opts.SessionTTL {
			idle = append(idle, ss)
			delete(s.sessions, id)
		}
	}
	s.scheduleSweepLocked()
	s.mu.Unlock()
	for _, ss := range idle {
		s.endSession(ss, "idle longer than "+s.opts.SessionTTL.String())
	}
}

// fanout receives every device notification: it is marshalled once and
// queued on every session that should see it (signals/update only for
// sessions subscribed to that signal). It never blocks.
func (s *Server) fanout(n mhp.Notification) {
	data, err := json.Marshal(NotificationFrame{JSONRPC: Version, Method: n.Method, Params: n.Params})
	if err != nil {
		s.log.Error("mhp notification not serialisable", "method", n.Method, "err", err)
		return
	}
	signal := n.Signal()
	s.mu.Lock()
	targets := make([]*session, 0, len(s.sessions))
	for _, ss := range s.sessions {
		targets = append(targets, ss)
	}
	s.mu.Unlock()
	for _, ss := range targets {
		if n.Method == mhp.NotifySignalsUpdate && !ss.wants(signal) {
			continue
		}
		ss.push(data)
	}
}

// errorf makes an *mhp.Error stamped with the server clock.
func (s *Server) errorf(code mhp.Code, format string, args ...any) *mhp.Error {
	return mhp.Errorf(code, format, args...).At(s.clk.Now())
}

// errNotInitialized is the refusal of anything before initialize.
func (s *Server) errNotInitialized(method string) *mhp.Error {
	return s.errorf(mhp.CodeServerError, "initialize must come first (got %s)", method).With("reason", "not_initialized")
}

// errUnknownSession refuses an HTTP request whose session is unknown or expired.
func (s *Server) errUnknownSession(method string) *mhp.Error {
	return s.errorf(mhp.CodeServerError, "unknown or expired session: initialize first (got %s)", method).
		With("reason", "session_unknown")
}

// handle runs one decoded request for a session (nil before initialize) and
// returns the response, or nil for a notification. init is called when the
// request is an initialize, to open or reuse the session.
func (s *Server) handle(ctx context.Context, ss *session, req *Request, init func() (*session, *mhp.Error)) *Response {
	start := time.Now()
	result, err := s.dispatch(ctx, ss, req, init)
	if s.log.Enabled(ctx, slog.LevelDebug) {
		sid, client := "", ""
		if ss != nil {
			sid, client = ss.id, ss.client
		}
		if err != nil {
			s.log.Debug("mhp request refused", "method", req.Method, "session", sid, "client", client,
				"code", int(mhp.CodeOf(err)), "err", err, "took", time.Since(start))
		} else {
			s.log.Debug("mhp request", "method", req.Method, "session", sid, "client", client, "took", time.Since(start))
		}
	}
	if req.IsNotification() {
		return nil
	}
	resp := &Response{JSONRPC: Version, ID: req.ID}
	if err != nil {
		resp.Error = s.wireError(err)
	} else {
		if result == nil {
			result = map[string]any{"ok": true}
		}
		resp.Result = result
	}
	return resp
}

// wireError turns any error into the JSON-RPC error object: an *mhp.Error
// as is (stamped with the server clock if it carries no ts), anything else
// as -32603.
func (s *Server) wireError(err error) *mhp.Error {
	if e, ok := mhp.AsError(err); ok {
		if e.TS == 0 {
			c := *e
			c.TS = mhp.UnixSeconds(s.clk.Now())
			return &c
		}
		return e
	}
	return s.errorf(mhp.CodeInternal, "internal error: %v", err)
}

func (s *Server) dispatch(ctx context.Context, ss *session, req *Request, init func() (*session, *mhp.Error)) (any, error) {
	if req.Method == "initialize" {
		return s.initialize(ctx, req, init)
	}
	m, ok := s.methods[req.Method]
	if ss == nil {
		if !ok {
			// The method is unknown whatever the session: say so first.
			return nil, s.errorf(mhp.CodeMethodNotFound, "method %q not found", req.Method).With("method", req.Method)
		}
		return nil, s.errNotInitialized(req.Method)
	}
	if !ok {
		return nil, s.errorf(mhp.CodeMethodNotFound, "method %q not found", req.Method).With("method", req.Method)
	}
	// Device calls are not cancelled when the caller goes away: a hook cut
	// off mid-write would turn a dropped connection into an unknown outcome.
	// The device's own hook timeouts bound them.
	dctx := mhp.WithSession(context.WithoutCancel(ctx), ss.id)
	return m(dctx, ss, req.Params)
}

// initialize negotiates the version, opens (or, on a stream, reuses) the
// session and answers the device card and capabilities.
func (s *Server) initialize(ctx context.Context, req *Request, init func() (*session, *mhp.Error)) (any, error) {
	var p struct {
		ProtocolVersion string `json:"protocolVersion"`
		ClientInfo      *struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"clientInfo"`
		Capabilities map[string]any `json:"capabilities"`
	}
	if err := decodeParams(req.Method, req.Params, &p); err != nil {
		return nil, err.At(s.clk.Now())
	}
	version, err := mhp.NegotiateVersion(p.ProtocolVersion)
	if err != nil {
		return nil, err
	}
	desc, err := s.dev.Describe(context.WithoutCancel(ctx), mhp.DescribeRequest{Detail: mhp.DetailFull})
	if err != nil {
		return nil, err
	}
	ss, merr := init()
	if merr != nil {
		return nil, merr
	}
	if p.ClientInfo != nil && p.ClientInfo.Name != "" && ss.client == "" {
		ss.client = p.ClientInfo.Name
	}
	_, resources := s.dev.(mhp.ResourceProvider)
	return &InitializeResult{
		ProtocolVersion: version,
		Device:          mhp.DeviceInfo{ID: desc.ID, Class: desc.Class, Make: desc.Make, Model: desc.Model},
		Capabilities: Capabilities{
			Signals:   len(desc.Signals) > 0,
			Settings:  len(desc.Settings) > 0,
			Actions:   len(desc.Actions) > 0,
			Methods:   false,
			Subscribe: len(desc.Signals) > 0,
			Lease:     true,
			EStop:     desc.Safety.EStop,
			Resources: resources,
		},
		Session: ss.id,
	}, nil
}

// InitializeResult is the answer of initialize.
type InitializeResult struct {
	ProtocolVersion string         `json:"protocolVersion"`
	Device          mhp.DeviceInfo `json:"device"`
	Capabilities    Capabilities   `json:"capabilities"`
	// Session is the server-issued session id. HTTP clients send it back in
	// the Mhp-Session header; on a stream it is informational.
	Session string `json:"session"`
}

// Capabilities are the initialize capability booleans.
type Capabilities struct {
	Signals   bool `json:"signals"`
	Settings  bool `json:"settings"`
	Actions   bool `json:"actions"`
	Methods   bool `json:"methods"`
	Subscribe bool `json:"subscribe"`
	Lease     bool `json:"lease"`
	EStop     bool `json:"estop"`
	// Resources is true when the device serves resources/list and resources/read.
	Resources bool `json:"resources"`
	// CommandIDs is true when settings/write and actions/invoke honour
	// commandId (a retry with the same id never acts twice), so clients may
	// resend after a transport failure.
	CommandIDs bool `json:"commandIds,omitempty"`
}

// isPriority reports the methods answered on the priority path: never queued
// behind other requests of the same stream and never refused for load.
func isPriority(method string) bool {
	return method == "safety/estop" || method == "ping"
}
