package transport

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/auth"
	"github.com/openmhp/mhp-go/clock"
)

// Options configure a Server. Zero values take the documented defaults.
type Options struct {
	// Auth decides who an HTTP request is (client certificate, bearer
	// token) and so what its role allows; see package auth. Nil: one is
	// built from Token and OperatorToken (the legacy agent and operator
	// identities). The stdio transport is not authenticated: whoever holds
	// the pipe started the process.
	Auth *auth.Authenticator
	// TLS, when set, serves HTTPS ([ServeHTTP], [ServeHandler]); build it
	// with auth.ServerTLS so certificates reload without a restart.
	TLS *tls.Config
	// Token, when set (and Auth is nil), is the bearer token every HTTP
	// request must carry ("Authorization: Bearer <token>"): the identity
	// auth.LegacyAgent, role agent. It is compared in constant time.
	Token string
	// OperatorToken, when set, is the operator's own token: a request that
	// carries it in the Mhp-Operator header (HTTP only) may call operator
	// methods (permits/issue). Agents are never given it; the bearer Token
	// alone never reaches an operator method.
	OperatorToken string
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
	// AllowedHosts lists the host names ("lab-pc.local", "lab-pc.local:18900")
	// a request's Host header may carry besides IP literals and localhost.
	// While no credential is required any other name gets 403 (DNS
	// rebinding: a page on attacker.example whose name now resolves to
	// 127.0.0.1). With credentials every name is accepted: the rebinding
	// page holds none.
	AllowedHosts []string
	// StrictSessions refuses actuation (writes, invokes, job control, leases,
	// reset) from sessions keyed only by the X-MHP-Client header; estop,
	// reads and describe stay open to them. See the package doc.
	StrictSessions bool
	// MaxFrame is the largest request frame accepted, in bytes; default 4 MiB.
	MaxFrame int
	// SSEBuffer is how many notifications each session keeps for SSE resume
	// (Last-Event-ID); default 1024.
	SSEBuffer int
	// SSEBufferBytes caps the bytes of the notifications each session keeps;
	// the oldest are dropped first (default 1 MiB).
	SSEBufferBytes int
	// KeepAlive is the interval of SSE keep-alive comments; default 15s.
	KeepAlive time.Duration
	// SessionTTL forgets an HTTP session (EndSession: its lease is released)
	// after this long without a request; an open event stream does not keep
	// it alive (the stream ends with it). Default 10m.
	SessionTTL time.Duration
	// MaxSessions caps the live HTTP sessions. A new session beyond it
	// evicts the least recently used session that holds no lease; only when
	// every session holds one is the newcomer refused. Default 1024.
	MaxSessions int
	// MaxInFlight caps the ordinary requests one stdio stream runs at once;
	// safety/estop and ping are never counted. Default 64.
	MaxInFlight int
	// Admission bounds the ordinary HTTP requests served at once, estop
	// first (admission.go); the zero value has the defaults.
	Admission Admission
	// MaxConns caps the open HTTP connections ([ServeHTTP], [ListenHTTP]). At the
	// cap, a new connection closes the connection idle the longest; with every
	// connection serving, it is admitted on one of [EStopReserve] reserve
	// slots, which carry a single safety/estop (anything else is refused busy);
	// with those taken too it waits up to a second for one to end, then is
	// closed. Default 512.
	MaxConns int
	// ReadTimeout bounds reading one HTTP request, body included (a body
	// trickling in is cut off); default 30s. ReadHeaderTimeout bounds the
	// headers alone; default 10s.
	ReadTimeout, ReadHeaderTimeout time.Duration
	// WriteTimeout bounds writing one answer or one event to a client that
	// does not read; default 30s.
	WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection idle this long; default 60s.
	IdleTimeout time.Duration
	// Handlers are extra HTTP routes ("GET /console", "/ui/") served by
	// Handler behind the same Host, Origin and token checks as /rpc.
	Handlers map[string]http.Handler
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
	case o.SSEBuffer < 0 || o.SSEBufferBytes < 0:
		return fmt.Errorf("transport: SSEBuffer and SSEBufferBytes must not be negative")
	case o.KeepAlive < 0:
		return fmt.Errorf("transport: KeepAlive %v is negative", o.KeepAlive)
	case o.SessionTTL < 0:
		return fmt.Errorf("transport: SessionTTL %v is negative", o.SessionTTL)
	case o.MaxSessions < 0 || o.MaxInFlight < 0 || o.MaxConns < 0:
		return fmt.Errorf("transport: MaxSessions, MaxInFlight and MaxConns must not be negative")
	case o.ReadTimeout < 0 || o.ReadHeaderTimeout < 0 || o.WriteTimeout < 0 || o.IdleTimeout < 0:
		return fmt.Errorf("transport: HTTP timeouts must not be negative")
	}
	return o.Admission.validate()
}

// Defaults.
const (
	DefaultMaxFrame          = 4 << 20
	DefaultSSEBuffer         = 1024
	DefaultSSEBufferBytes    = 1 << 20
	DefaultKeepAlive         = 15 * time.Second
	DefaultSessionTTL        = 10 * time.Minute
	DefaultMaxSessions       = 1024
	DefaultMaxInFlight       = 64
	DefaultMaxConns          = 512
	DefaultReadTimeout       = 30 * time.Second
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultWriteTimeout      = 30 * time.Second
	DefaultIdleTimeout       = 60 * time.Second
	// MaxReason caps a stored estop reason, in bytes ([mhp.Truncate] marks the cut).
	MaxReason = 1 << 10
	// MinLeaseTTL and [MaxLeaseTTL] bound session/acquire's ttl.
	MinLeaseTTL = 100 * time.Millisecond
	MaxLeaseTTL = time.Hour
	// AnonymousLabel is the session label of a safety/estop or ping served
	// without a session.
	AnonymousLabel = "anonymous"
)

func (o Options) withDefaults() Options {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defD := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.MaxFrame, DefaultMaxFrame)
	def(&o.SSEBuffer, DefaultSSEBuffer)
	def(&o.SSEBufferBytes, DefaultSSEBufferBytes)
	def(&o.MaxSessions, DefaultMaxSessions)
	def(&o.MaxInFlight, DefaultMaxInFlight)
	def(&o.MaxConns, DefaultMaxConns)
	defD(&o.KeepAlive, DefaultKeepAlive)
	defD(&o.SessionTTL, DefaultSessionTTL)
	defD(&o.ReadTimeout, DefaultReadTimeout)
	defD(&o.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	defD(&o.WriteTimeout, DefaultWriteTimeout)
	defD(&o.IdleTimeout, DefaultIdleTimeout)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	return o
}

// Server serves one [mhp.Device] over JSON-RPC 2.0 (stdio and HTTP+SSE). It
// is safe for concurrent use; one Server may serve any number of streams and
// an HTTP handler at once.
type Server struct {
	dev     mhp.Device
	opts    Options
	log     *slog.Logger
	clk     clock.Clock
	methods map[string]method
	adm     atomic.Pointer[admission] // HTTP admission control (admission.go), made by the first request
	// resources serves resources/list and resources/read (nil: none).
	resources mhp.ResourceProvider
	auth      *auth.Authenticator
	// opMethods are the operator extensions (mhp.OperatorExtension): they
	// need role operator.
	opMethods map[string]bool
	// methodsCapable: a saved-methods store is in the device chain.
	methodsCapable bool
	// dcache holds the encoded describe answers (describe.go), made on the
	// first describe.
	dcache atomic.Pointer[describeCache]

	// The session table: every live session by secret, by label, and the
	// header-keyed ones by their X-MHP-Client value. Guarded by mu. The
	// maps are made with the first session (a server nobody talked to
	// holds none: 10,000 served devices), and the idle sweep is armed only
	// while HTTP sessions live.
	mu       sync.RWMutex        // read-locked by the per-request lookups and the notification fanout
	sessions map[string]*session // by secret
	labels   map[string]*session // by label
	byHeader map[string]*session // kindHeader sessions by X-MHP-Client
	greeted  map[string]*session // X-MHP-Client of a header-only initialize -> its issued session
	nHTTP    int                 // sessions that count against MaxSessions
	sweep    clock.Timer
	closed   bool
	done     chan struct{} // closed by Close: streams end (made by the first stream: doneChan)
	stop     func()        // stops device notifications
}

// NewServer builds a server for dev. Invalid options (negative sizes) are
// replaced by their defaults; call [Options.Validate] first to refuse them.
// Close the server to stop its listener on the device and end its sessions.
func NewServer(dev mhp.Device, opts Options) *Server {
	opts = opts.withDefaults()
	s := &Server{dev: dev, opts: opts, log: opts.Logger, clk: opts.Clock}
	s.auth = opts.Auth
	if s.auth == nil && (opts.Token != "" || opts.OperatorToken != "") {
		a, err := auth.New(auth.Config{Token: opts.Token, OperatorToken: opts.OperatorToken, Logger: opts.Logger})
		if err != nil { // the two tokens are the same: no operator
			s.log.Error("mhp operator token ignored", "err", err)
			a, _ = auth.New(auth.Config{Token: opts.Token, Logger: opts.Logger})
		}
		s.auth = a
	}
	s.methods = builtinMethods()
	s.resources, _ = mhp.Find[mhp.ResourceProvider](dev)
	s.addExtensions()
	s.stop = dev.Listen(s.fanout)
	return s
}

// doneChan is closed once the server is closed (streams end on it).
func (s *Server) doneChan() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done == nil {
		s.done = make(chan struct{})
		if s.closed {
			close(s.done)
		}
	}
	return s.done
}

// admission is the server's admission state, made on first use.
func (s *Server) admission() *admission {
	if a := s.adm.Load(); a != nil {
		return a
	}
	s.adm.CompareAndSwap(nil, newAdmission(s.opts.Admission))
	return s.adm.Load()
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
	if s.done != nil {
		close(s.done)
	}
	if s.sweep != nil {
		s.sweep.Stop()
	}
	all := make([]*session, 0, len(s.sessions))
	for _, ss := range s.sessions {
		all = append(all, ss)
	}
	s.sessions, s.labels, s.byHeader, s.greeted, s.nHTTP = nil, nil, nil, nil, 0
	s.mu.Unlock()
	s.stop()
	for _, ss := range all {
		s.endSession(ss, "server closed")
	}
	return nil
}

// Sessions reports how many sessions are live.
func (s *Server) Sessions() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.sessions)
}

// Authenticator returns the server's authenticator (nil: none required).
func (s *Server) Authenticator() *auth.Authenticator { return s.auth }

// openSession issues a new session of kind for a client named name. header
// is the X-MHP-Client key of a kindHeader session, or, for a kindIssued
// session, the X-MHP-Client of an initialize that sent no Mhp-Session: the
// greeting that lets later header-only requests open the header session. At
// MaxSessions it evicts the least recently used HTTP session that holds no
// lease.
func (s *Server) openSession(kind sessionKind, name, header string) (*session, *mhp.Error) {
	return s.openOwned(kind, "", name, header)
}

// ownedKey is the key of a header-keyed session (and of its greeting): the
// X-MHP-Client value within the identity that sent it, so that a copied
// header names nothing without the credential.
func ownedKey(owner, header string) string {
	if owner == "" {
		return header
	}
	return owner + "\x00" + header
}

// openOwned is openSession for the identity named owner ("" for none): the
// label starts with the owner's name ("alice/<client>#8hex"), header is
// keyed within the owner, and only the owner finds the session again.
func (s *Server) openOwned(kind sessionKind, owner, name, header string) (*session, *mhp.Error) {
	now := s.clk.Now()
	key := ""
	if header != "" {
		key = ownedKey(owner, header)
	}
	var evicted *session
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, s.errorf(mhp.CodeServerError, "server is shutting down")
	}
	if prev := s.byHeader[key]; kind == kindHeader && prev != nil {
		s.mu.Unlock() // opened meanwhile by a concurrent request of the same client
		return prev, nil
	}
	if kind != kindStream && s.nHTTP >= s.opts.MaxSessions {
		evicted = s.lruIdleLocked(now)
		if evicted == nil {
			s.mu.Unlock()
			return nil, s.errorf(mhp.CodeServerError, "too many sessions (%d), each holding a lease: wait for one to end", s.opts.MaxSessions).
				With(mhp.DataReason, "too_many_sessions").With(mhp.DataLimit, s.opts.MaxSessions)
		}
		s.removeLocked(evicted)
	}
	def := "client"
	if kind == kindStream {
		def = "stdio"
	}
	client := labelName(name, def)
	if owner != "" {
		client = labelName(owner, "id") + "/" + client
	}
	label := newLabel(client)
	for s.labels[label] != nil { // labels contain "#": never AnonymousLabel
		label = newLabel(client)
	}
	ss := newSession(kind, label, client, s.opts.SSEBuffer, s.opts.SSEBufferBytes, now)
	ss.header, ss.owner = key, owner
	if s.sessions == nil {
		s.sessions, s.labels, s.byHeader, s.greeted = map[string]*session{}, map[string]*session{}, map[string]*session{}, map[string]*session{}
	}
	s.sessions[ss.secret] = ss
	s.labels[label] = ss
	switch {
	case kind == kindHeader:
		s.byHeader[key] = ss
	case key != "":
		s.greeted[key] = ss
	}
	if kind != kindStream {
		s.nHTTP++
		if s.sweep == nil {
			s.scheduleSweepLocked()
		}
	}
	s.mu.Unlock()
	if evicted != nil {
		s.endSession(evicted, fmt.Sprintf("evicted: %d sessions, least recently used without a lease", s.opts.MaxSessions))
	}
	s.log.Info("mhp session opened", "session", label, "kind", kind.String())
	return ss, nil
}

// headerSession returns the session keyed by an X-MHP-Client value. It is
// opened on first use when an initialize carrying that header and no
// Mhp-Session is still live (the reference client initializes, then never
// echoes the session); otherwise it is nil (not initialized).
func (s *Server) headerSession(owner, header string) (*session, *mhp.Error) {
	key := ownedKey(owner, header)
	s.mu.RLock()
	ss, ok := s.byHeader[key]
	greeted := s.greeted[key] != nil
	s.mu.RUnlock()
	if ok {
		ss.touch(s.clk.Now())
		return ss, nil
	}
	if !greeted {
		return nil, nil
	}
	return s.openOwned(kindHeader, owner, header, header)
}

// lruIdleLocked picks the HTTP session heard from longest ago that holds no
// lease, or nil.
func (s *Server) lruIdleLocked(now time.Time) *session {
	var best *session
	var bestSeen time.Time
	for _, ss := range s.sessions {
		if ss.kind == kindStream || ss.leased(now) {
			continue
		}
		if seen := ss.idleSince(); best == nil || seen.Before(bestSeen) {
			best, bestSeen = ss, seen
		}
	}
	return best
}

// removeLocked drops ss from the table; it reports whether ss was in it.
func (s *Server) removeLocked(ss *session) bool {
	if s.sessions[ss.secret] != ss {
		return false
	}
	delete(s.sessions, ss.secret)
	delete(s.labels, ss.label)
	if ss.kind == kindHeader && s.byHeader[ss.header] == ss {
		delete(s.byHeader, ss.header)
	}
	if ss.kind == kindIssued && ss.header != "" && s.greeted[ss.header] == ss {
		delete(s.greeted, ss.header)
	}
	if ss.kind != kindStream {
		s.nHTTP--
	}
	return true
}

// lookup returns a live session by its secret and records activity. A
// session opened by another identity than owner is unknown to it: a secret
// replayed under another credential gains nothing.
func (s *Server) lookup(owner, secret string) (*session, bool) {
	s.mu.RLock()
	ss, ok := s.sessions[secret]
	if ok && ss.owner != owner {
		ss, ok = nil, false
	}
	s.mu.RUnlock()
	if ok {
		ss.touch(s.clk.Now())
	}
	return ss, ok
}

// closeSession forgets the session and tells the device.
func (s *Server) closeSession(ss *session, why string) {
	s.mu.Lock()
	ok := s.removeLocked(ss)
	s.mu.Unlock()
	if ok {
		s.endSession(ss, why)
	}
}

func (s *Server) endSession(ss *session, why string) {
	ss.close()
	ctx, cancel := context.WithTimeout(mhp.WithSession(context.Background(), ss.label), 10*time.Second)
	defer cancel()
	s.dev.EndSession(ctx)
	s.log.Info("mhp session ended", "session", ss.label, "why", why)
}

// scheduleSweepLocked arms the idle-session sweep on the server clock,
// while HTTP sessions live.
func (s *Server) scheduleSweepLocked() {
	s.sweep = nil
	if s.closed || s.nHTTP == 0 {
		return
	}
	every := s.opts.SessionTTL / 4
	if every < time.Millisecond {
		every = time.Millisecond
	}
	s.sweep = s.clk.AfterFunc(every, s.sweepIdle)
}

// sweepIdle ends the HTTP sessions idle longer than SessionTTL, open event
// streams or not.
func (s *Server) sweepIdle() {
	now := s.clk.Now()
	var idle []*session
	s.mu.Lock()
	for _, ss := range s.sessions {
		if ss.kind != kindStream && now.Sub(ss.idleSince()) > s.opts.SessionTTL {
			idle = append(idle, ss)
		}
	}
	for _, ss := range idle {
		s.removeLocked(ss)
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
	s.mu.RLock()
	targets := make([]*session, 0, len(s.sessions))
	for _, ss := range s.sessions {
		targets = append(targets, ss)
	}
	s.mu.RUnlock()
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
	return s.errorf(mhp.CodeServerError, "initialize must come first (got %s)", method).With(mhp.DataReason, mhp.ReasonNotInitialized)
}

// errUnknownSession refuses an HTTP request whose session is unknown or expired.
func (s *Server) errUnknownSession(method string) *mhp.Error {
	return s.errorf(mhp.CodeServerError, "unknown or expired session: initialize first (got %s)", method).
		With(mhp.DataReason, mhp.ReasonSessionUnknown)
}

// initFunc opens (or, on a stream, reuses) the session of an initialize;
// name is the clientInfo name, "" when none was given.
type initFunc func(name string) (*session, *mhp.Error)

// handle runs one decoded request for a session (nil before initialize or
// without one) and returns the response, written into out (the caller's, on
// its stack), or nil for a notification. init is called when the request is
// an initialize.
func (s *Server) handle(ctx context.Context, ss *session, req *Request, init initFunc, out *Response) *Response {
	debug := s.log.Enabled(ctx, slog.LevelDebug)
	var start time.Time
	if debug {
		start = time.Now()
	}
	result, err := s.dispatch(ctx, ss, req, init)
	if debug {
		label := AnonymousLabel
		if ss != nil {
			label = ss.label
		}
		if err != nil {
			s.log.Debug("mhp request refused", "method", req.Method, "session", label,
				"code", int(mhp.CodeOf(err)), "err", err, "took", time.Since(start))
		} else {
			s.log.Debug("mhp request", "method", req.Method, "session", label, "took", time.Since(start))
		}
	}
	if req.IsNotification() {
		return nil
	}
	*out = Response{JSONRPC: Version, ID: req.ID}
	resp := out
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

// actuating lists the methods StrictSessions refuses to header-keyed sessions.
var actuating = map[string]bool{
	mhp.MethodSettingsWrite: true, mhp.MethodActionsInvoke: true, mhp.MethodJobsCancel: true, mhp.MethodJobsPause: true, mhp.MethodJobsResume: true,
	mhp.MethodSessionAcquire: true, mhp.MethodSessionRenew: true, mhp.MethodSessionRelease: true, mhp.MethodSafetyReset: true,
	mhp.MethodMethodsSave: true, mhp.MethodMethodsDelete: true,
}

func (s *Server) dispatch(ctx context.Context, ss *session, req *Request, init initFunc) (any, error) {
	if req.Method == mhp.MethodInitialize {
		if req.paramsErr != nil {
			return nil, req.paramsErr.At(s.clk.Now())
		}
		return s.initialize(ctx, req, init)
	}
	m, ok := s.methods[req.Method]
	if !ok {
		// The method is unknown whatever the session: say so first.
		return nil, s.errorf(mhp.CodeMethodNotFound, "method %q not found", req.Method).With(mhp.DataMethod, req.Method)
	}
	if id, ok := auth.FromContext(ctx); ok {
		if e := auth.Authorize(id, req.Method, auth.Need(req.Method, s.opMethods[req.Method])); e != nil {
			return nil, e.At(s.clk.Now())
		}
	}
	label, labelV := AnonymousLabel, anonymousLabel
	switch {
	case ss != nil:
		label, labelV = ss.label, ss.labelV
	case !isPriority(req.Method):
		return nil, s.errNotInitialized(req.Method)
	}
	if req.paramsErr != nil && req.Method != mhp.MethodSafetyEStop {
		return nil, req.paramsErr.At(s.clk.Now())
	}
	if ss != nil && ss.kind == kindHeader && s.opts.StrictSessions && actuating[req.Method] {
		return nil, s.errorf(mhp.CodeServerError,
			"%s needs a server-issued session (this server runs with strict sessions): send the session initialize returned in the %s header",
			req.Method, mhp.HeaderSession).With(mhp.DataReason, "session_required")
	}
	// Device calls are not cancelled when the caller goes away: a hook cut
	// off mid-write would turn a dropped connection into an unknown outcome.
	// The device's own hook timeouts bound them. The device sees the label,
	// never the secret. (An HTTP request's context is a callCtx, already
	// without cancellation: deviceContext only adds the label.)
	return m(s, deviceContext(ctx, label, labelV), ss, req.Params)
}

// initialize negotiates the version, opens (or, on a stream, reuses) the
// session and answers the device card and capabilities.
func (s *Server) initialize(ctx context.Context, req *Request, init initFunc) (any, error) {
	var p struct {
		ProtocolVersion string `json:"protocolVersion"`
		ClientInfo      *struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"clientInfo"`
		Capabilities map[string]any `json:"capabilities"`
	}
	if err := mhp.DecodeParams(req.Method, req.Params, &p); err != nil {
		return nil, err
	}
	version, err := mhp.NegotiateVersion(p.ProtocolVersion)
	if err != nil {
		return nil, err
	}
	desc, err := s.dev.Describe(context.WithoutCancel(ctx), mhp.DescribeRequest{Detail: mhp.DetailFull})
	if err != nil {
		return nil, err
	}
	name := ""
	if p.ClientInfo != nil {
		name = p.ClientInfo.Name
	}
	ss, merr := init(name)
	if merr != nil {
		return nil, merr
	}
	_, resources := mhp.Find[mhp.ResourceProvider](s.dev)
	methods := s.methodsCapable
	cids, _ := mhp.Find[mhp.CommandIDer](s.dev)
	return &mhp.InitializeResult{
		ProtocolVersion: version,
		Device:          mhp.DeviceInfo{ID: desc.ID, Class: desc.Class, Make: desc.Make, Model: desc.Model},
		Capabilities: mhp.Capabilities{
			Signals:    len(desc.Signals) > 0,
			Settings:   len(desc.Settings) > 0,
			Actions:    len(desc.Actions) > 0,
			Methods:    methods,
			Subscribe:  len(desc.Signals) > 0,
			Lease:      true,
			EStop:      desc.Safety.EStop,
			Resources:  resources,
			CommandIDs: cids != nil && cids.HonoursCommandIDs(),
		},
		Session: ss.secret,
		Label:   ss.label,
	}, nil
}

// isPriority reports the methods answered on the priority path: never queued
// behind other requests of the same stream and never refused for load.
func isPriority(method string) bool {
	return method == mhp.MethodSafetyEStop || method == mhp.MethodPing
}
