package transport

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/auth"
)

// MaxClientHeader caps the X-MHP-Client value ([mhp.HeaderClient]) that keys a
// session, in bytes.
const MaxClientHeader = 128

// Handler returns the HTTP transport:
//
//   - POST /rpc: one JSON-RPC request per body. initialize opens a session
//     and returns its secret in the result (field "session") and in the
//     Mhp-Session response header; every later request sends it back in
//     Mhp-Session. A request without Mhp-Session but with X-MHP-Client is
//     served in the header session of that name (opened by an initialize
//     that carried the header and no Mhp-Session). An unknown or expired
//     session gets -32000 (data.reason "session_unknown", or
//     "not_initialized" when none was named), except safety/estop, served to
//     any caller, and ping without a session (session label "anonymous").
//     JSON-RPC errors travel with status 200; a body over MaxFrame gets 413
//     with a -32600 error.
//   - GET /events: the session's notifications as Server-Sent Events (the
//     session in Mhp-Session, or ?session= for EventSource clients that
//     cannot set headers, or X-MHP-Client for a header session). Each event
//     has an id; Last-Event-ID (header, or ?lastEventId=) resumes after it
//     from a per-session buffer of SSEBuffer events and SSEBufferBytes bytes;
//     without it a stream starts after the last event any earlier stream of
//     the session delivered (a fresh session: everything since initialize).
//     Events older than the buffer are reported in a comment ": lost N
//     events". Keep-alive comments every KeepAlive. The stream ends when the
//     session does; it does not keep the session alive.
//   - DELETE /session: ends the session in Mhp-Session at once (lease released).
//   - GET /mhp.json: the full descriptor, no handshake.
//   - [Options.Handlers]: extra routes, behind the same checks.
//
// Every path is behind the server's [Server.Guard]: with credentials
// configured ([Options.Auth], or [Options.Token]) a request needs a verified
// client certificate or bearer token naming an identity (401 otherwise),
// /mhp.json included unless [Options.PublicDescriptor]; while none is
// required, a Host that is not an IP literal, localhost or in
// [Options.AllowedHosts] gets 403 (DNS rebinding). A request with an Origin
// header not in [Options.AllowedOrigins] gets 403 (browsers). The identity
// goes into the context of every device call (auth.FromContext); a method
// above its role is refused (auth.Authorize) before the device is called;
// sessions belong to the identity that opened them (their label starts with
// its name, "alice/<client>#8hex", and another identity presenting the
// secret, or the same X-MHP-Client header, does not find them).
func (s *Server) Handler() http.Handler {
	mux := s.routes() // routes.go
	plain := len(s.opts.Handlers) == 0
	guard := s.Guard(func(r *http.Request) bool { return s.opts.PublicDescriptor && r.URL.Path == "/mhp.json" })
	inner := func(w http.ResponseWriter, r *http.Request) {
		p, ok := guard.Admit(w, r)
		if !ok {
			return
		}
		if plain && r.URL.Path == "/rpc" && r.Method == http.MethodPost {
			// The identity goes along the server's own call path, into
			// the device call's context (callCtx), not into a copy of r.
			s.serveRPC(w, r, p)
			return
		}
		if p != nil && p != auth.PassFrom(r.Context()) {
			r = r.WithContext(auth.WithPass(r.Context(), p))
		}
		if r.URL.Path != "/rpc" {
			// Requests other than POST /rpc (whose body is read by its
			// handler) are in once their headers are: no longer evictable.
			markPhase(r, phaseServing)
		}
		mux.ServeHTTP(w, r)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if origin := headerValue(r.Header, "Origin"); origin != "" && !slices.Contains(s.opts.AllowedOrigins, origin) {
			writeJSON(w, http.StatusForbidden, &Response{JSONRPC: Version, ID: nullID,
				Error: s.errorf(mhp.CodeServerError, "origin %q is not allowed", origin).With(mhp.DataReason, "origin_forbidden")})
			s.log.Warn("mhp http request from a foreign origin refused", "origin", origin, "path", r.URL.Path, "remote", r.RemoteAddr)
			return
		}
		if onReserve(r) {
			w.Header().Set("Connection", "close")
			if r.URL.Path != "/rpc" {
				s.refuseReserve(w, nullID)
				return
			}
		}
		inner(w, r)
	})
}

// onReserve reports whether r came on a connection admitted on an estop
// reserve slot (connlimit.go): it may carry one safety/estop only.
func onReserve(r *http.Request) bool {
	switch c := r.Context().Value(connKey{}).(type) {
	case *frontConn:
		return c.lc.reserve
	case *limitedConn:
		return c.reserve
	}
	return false
}

// refuseReserve answers a request other than safety/estop on a reserve
// connection: busy (503, Retry-After), nothing done; the connection closes.
func (s *Server) refuseReserve(w http.ResponseWriter, id json.RawMessage) {
	w.Header().Set("Retry-After", "1")
	s.writeAnswer(w, http.StatusServiceUnavailable, &Response{JSONRPC: Version, ID: id, Error: s.errorf(mhp.CodeServerError,
		"server busy: its %d connections are all serving requests; a connection beyond them carries only safety/estop; nothing was done, retry",
		s.opts.MaxConns).With(mhp.DataReason, ReasonServerBusy).With(mhp.DataLimit, s.opts.MaxConns)})
}

// Guard returns the server's front door (package auth): the Host check with
// Options.AllowedHosts, then the server's authenticator, refusals written
// as JSON-RPC errors on the server clock. public names routes served
// without a credential (nil: none). Consoles and metrics mounted beside the
// transport use the same guard, so every route has the same checks.
func (s *Server) Guard(public func(*http.Request) bool) auth.Guard {
	return auth.Guard{Auth: s.auth, Hosts: s.opts.AllowedHosts, Public: public, Logger: s.log,
		Refuse: func(w http.ResponseWriter, _ *http.Request, status int, e *mhp.Error) {
			writeJSON(w, status, &Response{JSONRPC: Version, ID: nullID, Error: e.At(s.clk.Now())})
		}}
}

// identityOf returns the identity a guard put in r's context, and the
// session owner it stands for ("" for the anonymous identity of a server
// without credentials).
func identityOf(r *http.Request) (auth.Identity, string) {
	p := auth.PassFrom(r.Context())
	if p == nil {
		return auth.Identity{}, ""
	}
	return p.Identity(), ownerOf(p)
}

// ownerOf is the session owner a pass stands for ("" for none, and for
// the anonymous identity of a server without credentials).
func ownerOf(p *auth.Pass) string {
	if p == nil {
		return ""
	}
	if id := p.Identity(); id.Via != "none" {
		return id.Name
	}
	return ""
}

// clientHeaderKey is mhp.HeaderClient in the canonical form net/http
// stores it under (Header.Get would canonicalise it on every request).
var clientHeaderKey = http.CanonicalHeaderKey(mhp.HeaderClient)

// headerValue is h.Get(key) for a key already canonical.
func headerValue(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"response not serialisable"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// serveRPC serves POST /rpc for a request the guard let in as p (nil: no
// identity).
func (s *Server) serveRPC(w http.ResponseWriter, r *http.Request, p *auth.Pass) {
	body, err := s.readBody(w, r)
	markPhase(r, phaseServing) // the request is in: its connection is no longer evictable
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeJSON(w, http.StatusRequestEntityTooLarge, &Response{JSONRPC: Version, ID: nullID,
				Error: s.errorf(mhp.CodeInvalidRequest, "frame of more than %d bytes refused", s.opts.MaxFrame).
					With(mhp.DataLimit, s.opts.MaxFrame)})
			return
		}
		writeJSON(w, http.StatusBadRequest, &Response{JSONRPC: Version, ID: nullID,
			Error: s.errorf(mhp.CodeParseError, "reading the request body: %v", err)})
		return
	}
	reserve := onReserve(r)
	if reserve && !mayBeEStop(body) {
		id := nullID
		if req, _ := decodeFrame(body); req != nil && req.ID != nil {
			id = req.ID
		}
		s.refuseReserve(w, id)
		return
	}
	// Admission (admission.go): an estop is recognised in the raw frame and
	// goes first; an ordinary request waits for a slot or is refused busy.
	tk, aerr := s.admission().admitFrame(r.Context(), body)
	if aerr != nil {
		s.refuseBusy(w, body, aerr)
		return
	}
	defer tk.release()
	var frame Request // on the stack: nothing keeps it past the answer
	req := &frame
	filled, derr := decodeFrameInto(body, req)
	if derr != nil {
		id := nullID
		if filled && req.ID != nil {
			id = req.ID
		}
		s.writeAnswer(w, http.StatusOK, &Response{JSONRPC: Version, ID: id, Error: derr.At(s.clk.Now())})
		return
	}
	if reserve && req.Method != mhp.MethodSafetyEStop {
		s.refuseReserve(w, req.ID)
		return
	}
	if aerr := tk.confirm(r.Context(), req.Method); aerr != nil {
		s.refuseBusy(w, body, aerr)
		return
	}
	header := headerValue(r.Header, clientHeaderKey)
	if len(header) > MaxClientHeader || !utf8.ValidString(header) {
		if req.Method != mhp.MethodSafetyEStop {
			s.writeAnswer(w, http.StatusOK, &Response{JSONRPC: Version, ID: req.ID, Error: s.errorf(mhp.CodeInvalidRequest,
				"%s must be UTF-8 of at most %d bytes", mhp.HeaderClient, MaxClientHeader).With(mhp.DataField, mhp.HeaderClient)})
			return
		}
		header = "" // an estop is served whatever the header
	}
	sid := headerValue(r.Header, mhp.HeaderSession)
	var ss *session
	var answer Response // on the stack: written out before serveRPC returns
	var resp *Response
	ctx := newCallCtx(r.Context(), p)
	owner := ownerOf(p)
	switch {
	case req.Method == mhp.MethodInitialize:
		resp = s.handle(ctx, nil, req, func(name string) (*session, *mhp.Error) {
			if name == "" {
				name = header
			}
			greet := ""
			if sid == "" {
				// A client that may never echo Mhp-Session (the reference
				// client): its later header-only requests open the header
				// session of this name.
				greet = header
			}
			var err *mhp.Error
			ss, err = s.openOwned(kindIssued, owner, name, greet)
			return ss, err
		}, &answer)
		if ss != nil && resp != nil && resp.Error == nil {
			w.Header().Set(mhp.HeaderSession, ss.secret)
		}
	case sid != "":
		if found, ok := s.lookup(owner, sid); ok {
			resp = s.handle(ctx, found, req, nil, &answer)
		} else if _, known := s.methods[req.Method]; known && req.Method != mhp.MethodSafetyEStop {
			resp = &Response{JSONRPC: Version, ID: req.ID, Error: s.errUnknownSession(req.Method)}
			if req.IsNotification() {
				resp = nil
			}
		} else { // unknown method (-32601), or an estop, served anonymously
			resp = s.handle(ctx, nil, req, nil, &answer)
		}
	case header != "":
		hs, err := s.headerSession(owner, header)
		if err != nil && req.Method != mhp.MethodSafetyEStop {
			resp = &Response{JSONRPC: Version, ID: req.ID, Error: err}
			if req.IsNotification() {
				resp = nil
			}
			break
		}
		resp = s.handle(ctx, hs, req, nil, &answer)
	default:
		resp = s.handle(ctx, nil, req, nil, &answer)
	}
	if resp == nil { // a notification: nothing to answer
		w.WriteHeader(http.StatusNoContent)
		return
	}
	s.writeAnswer(w, http.StatusOK, resp)
}

// readBody reads a request body of at most MaxFrame bytes (else an
// *http.MaxBytesError, and the connection closes after the answer). A body
// of a known length within the bound is read into a buffer of its size;
// any other goes through http.MaxBytesReader.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if n := r.ContentLength; n > 0 && n <= int64(s.opts.MaxFrame) {
		body := make([]byte, n)
		if _, err := io.ReadFull(r.Body, body); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF // net/http's body says so itself; a reader that does not
			}
			return nil, err
		}
		return body, nil
	}
	return io.ReadAll(http.MaxBytesReader(w, r.Body, int64(s.opts.MaxFrame)))
}

// writeAnswer writes a response with a fresh write deadline of WriteTimeout
// (the device call before it may have taken a while).
func (s *Server) writeAnswer(w http.ResponseWriter, status int, resp *Response) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.opts.WriteTimeout))
	writeResponse(w, status, resp)
}

// sessionOf finds the session of an events or session request.
func (s *Server) sessionOf(r *http.Request) (*session, *mhp.Error) {
	_, owner := identityOf(r)
	sid := r.Header.Get(mhp.HeaderSession)
	if sid == "" {
		sid = r.URL.Query().Get("session")
	}
	if sid == "" {
		if h := r.Header.Get(mhp.HeaderClient); h != "" {
			if ss, _ := s.headerSession(owner, h); ss != nil {
				return ss, nil
			}
		}
		return nil, s.errNotInitialized(r.Method + " " + r.URL.Path)
	}
	ss, ok := s.lookup(owner, sid)
	if !ok {
		return nil, s.errUnknownSession(r.Method + " " + r.URL.Path)
	}
	return ss, nil
}

func (s *Server) serveEndSession(w http.ResponseWriter, r *http.Request) {
	ss, err := s.sessionOf(r)
	if err != nil {
		writeJSON(w, http.StatusNotFound, &Response{JSONRPC: Version, ID: nullID, Error: err})
		return
	}
	s.closeSession(ss, "ended by the client")
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request) {
	ss, merr := s.sessionOf(r)
	if merr != nil {
		writeJSON(w, http.StatusNotFound, &Response{JSONRPC: Version, ID: nullID, Error: merr})
		return
	}
	if _, ok := w.(http.Flusher); !ok {
		writeJSON(w, http.StatusInternalServerError, &Response{JSONRPC: Version, ID: nullID,
			Error: s.errorf(mhp.CodeInternal, "streaming is not supported by this server")})
		return
	}
	cursor := ss.resumePoint()
	last := r.Header.Get(mhp.HeaderLastEventID)
	if last == "" {
		last = r.URL.Query().Get("lastEventId")
	}
	if last != "" {
		n, err := strconv.ParseUint(last, 10, 64)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, &Response{JSONRPC: Version, ID: nullID,
				Error: s.errorf(mhp.CodeInvalidParams, "Last-Event-ID %q is not an event id", mhp.Truncate(last, 64)).With(mhp.DataField, mhp.HeaderLastEventID)})
			return
		}
		cursor = n
	}
	ss.streamOpened(s.clk.Now())
	defer ss.streamClosed()
	markPhase(r, phaseStream)

	// A stream is long-lived: no read deadline (the request has no body; the
	// server's read of the connection only watches for the client leaving),
	// and a write deadline per write, so a client that stops reading is cut
	// off after WriteTimeout.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	write := func(f func() error) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(s.opts.WriteTimeout))
		if f() != nil {
			return false
		}
		return rc.Flush() == nil
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	if !write(func() error {
		w.WriteHeader(http.StatusOK)
		_, err := io.WriteString(w, ": mhp events for session "+ss.label+"\n\n")
		return err
	}) {
		return
	}
	s.log.Debug("mhp events stream opened", "session", ss.label, "after", cursor)

	keep := time.NewTicker(s.opts.KeepAlive)
	defer keep.Stop()
	for {
		evs, lost, wake, ok := ss.since(cursor)
		if !ok {
			return // the session ended
		}
		if len(evs) > 0 || lost > 0 {
			if !write(func() error {
				if lost > 0 {
					if _, err := fmt.Fprintf(w, ": lost %d events (buffer %d)\n\n", lost, s.opts.SSEBuffer); err != nil {
						return err
					}
				}
				for _, e := range evs {
					if _, err := fmt.Fprintf(w, "id: %d\ndata: %s\n\n", e.id, e.data); err != nil {
						return err
					}
					cursor = e.id
				}
				return nil
			}) {
				return
			}
			ss.markDelivered(cursor)
		}
		select {
		case <-r.Context().Done():
			return
		case <-wake:
		case <-keep.C:
			if !write(func() error { _, err := io.WriteString(w, ": keep-alive\n\n"); return err }) {
				return
			}
		}
	}
}

func (s *Server) serveDescriptor(w http.ResponseWriter, r *http.Request) {
	d, err := s.dev.Describe(context.WithoutCancel(r.Context()), mhp.DescribeRequest{Detail: mhp.DetailFull})
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, &Response{JSONRPC: Version, ID: nullID, Error: s.wireError(err)})
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// ListenHTTP serves srv.Handler on addr until ctx is cancelled, then shuts
// down (open event streams end at once, requests get 5s) and returns nil.
// An addr without a host (":18900", "18900") binds 127.0.0.1 only: to listen
// on another interface name it explicitly ("0.0.0.0:18900", "[::]:18900",
// "lab-pc.local:18900").
func ListenHTTP(ctx context.Context, addr string, srv *Server) error {
	ln, err := Listen(addr)
	if err != nil {
		return err
	}
	return ServeHTTP(ctx, ln, srv)
}

// Listen opens a TCP listener on addr with the loopback default of
// [ListenHTTP]; use it with [ServeHTTP] to learn the bound port (addr ":0").
func Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", LoopbackDefault(addr))
	if err != nil {
		return nil, fmt.Errorf("transport: listen %s: %w", addr, err)
	}
	return ln, nil
}

// ServeHTTP serves srv.Handler on ln until ctx is cancelled (see
// [ListenHTTP]), with the server's HTTP timeouts (ReadTimeout,
// ReadHeaderTimeout, WriteTimeout per answer, IdleTimeout) and at most
// MaxConns connections open (see [Options.MaxConns]).
func ServeHTTP(ctx context.Context, ln net.Listener, srv *Server) error {
	return ServeHandler(ctx, ln, srv, srv.Handler())
}

// ServeHandler is [ServeHTTP] with h in front (h routes to srv.Handler(), as a
// console or a metrics middleware does): the same timeouts, connection
// limit and shutdown.
func ServeHandler(ctx context.Context, ln net.Listener, srv *Server, h http.Handler) error {
	hs := srv.HTTPServer(ctx)
	hs.Handler = h
	return serveFront(ctx, ln, hs, srv.opts.MaxConns, EStopReserve, srv.opts.TLS, srv.log)
}

// serveFront serves hs on ln behind the connection limit, TLS when tlsCfg
// is set, and the front door (request smuggling refused), until ctx ends.
func serveFront(ctx context.Context, ln net.Listener, hs *http.Server, maxConns, reserve int, tlsCfg *tls.Config, log *slog.Logger) error {
	// Deadlines are set lazily (deadline.go): a read or write still fails
	// at the deadline asked for, without a timer change at every move.
	lim := limitConns(lazyDeadlines(ln, hs.ReadHeaderTimeout), maxConns, reserve, log)
	hs.Handler = frontDoor(log, hs.Handler)
	hs.ConnState = lim.connState
	hs.ConnContext = withConn
	hs.TLSNextProto = noNextProto // TLS is terminated by the front listener: HTTP/1.1
	// Serve runs on the caller's goroutine (one goroutine per served
	// listener, not two); the shutdown is registered on ctx and only runs
	// once it ends.
	shut := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(shut)
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		// net/http waits up to 5s for a connection that never sent a
		// request (a client's spare keep-alive dial, a TLS handshake that
		// stalled): those carry nothing, close them now.
		lim.closeIdle()
		_ = hs.Shutdown(sctx)
	})
	err := hs.Serve(&frontListener{connLimiter: lim, tls: tlsCfg, log: log})
	if stop() { // Serve failed on its own: no shutdown was started
		return err
	}
	<-shut // ctx ended: return once the shutdown is done
	return nil
}

// noNextProto is the empty TLSNextProto of every served listener (h2 off),
// one map for all: net/http only reads it.
var noNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}

// HTTPServer returns an [http.Server] for srv.Handler with the server's
// timeouts, for callers that run their own listener ([ServeHTTP] adds the
// connection limit). Its write timeout is applied per answer and per event
// by the handler itself, so event streams may last.
func (s *Server) HTTPServer(ctx context.Context) *http.Server {
	return &http.Server{Handler: s.Handler(), ReadTimeout: s.opts.ReadTimeout, ReadHeaderTimeout: s.opts.ReadHeaderTimeout,
		IdleTimeout: s.opts.IdleTimeout, MaxHeaderBytes: 64 << 10,
		BaseContext: func(net.Listener) context.Context { return ctx }}
}

// LoopbackDefault returns addr with host 127.0.0.1 when it names none
// (":8080" or "8080"); an explicit host is kept.
func LoopbackDefault(addr string) string {
	if !strings.Contains(addr, ":") {
		return net.JoinHostPort("127.0.0.1", addr)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host != "" {
		return addr
	}
	return net.JoinHostPort("127.0.0.1", port)
}
