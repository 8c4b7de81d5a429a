package transport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/openmhp/mhp-go"
)

// HTTP header names.
const (
	// HeaderSession carries the session id initialize returned. It is the
	// only identity the server honours; leases belong to it.
	HeaderSession = "Mhp-Session"
	// HeaderClient is the client's display name, for logs only: it grants nothing.
	HeaderClient = "X-MHP-Client"
	// HeaderLastEventID resumes an SSE stream after the given event id.
	HeaderLastEventID = "Last-Event-ID"
)

// Handler returns the HTTP transport:
//
//   - POST /rpc: one JSON-RPC request per body. initialize opens a session
//     and returns its id in the result (field "session") and in the
//     Mhp-Session response header; every later request sends it back in
//     Mhp-Session. A missing, unknown or expired session gets -32000
//     (data.reason "session_unknown", or "not_initialized" when no header was
//     sent). JSON-RPC errors travel with status 200; a body over MaxFrame gets
//     413 with a -32600 error.
//   - GET /events: the session's notifications as Server-Sent Events (the
//     session in Mhp-Session, or ?session= for EventSource clients that
//     cannot set headers). Each event has an id; Last-Event-ID (header, or
//     ?lastEventId=) resumes after it from a per-session buffer of SSEBuffer
//     events; without it a stream starts after the last event any earlier
//     stream of the session delivered (a fresh session: everything since
//     initialize). Events older than the buffer are reported in a
//     comment ": lost N events". Keep-alive comments every KeepAlive.
//   - DELETE /session: ends the session in Mhp-Session at once (lease released).
//   - GET /mhp.json: the full descriptor, no handshake.
//
// With Options.Token every path needs "Authorization: Bearer <token>" (401
// otherwise), /mhp.json included unless Options.PublicDescriptor. A request
// with an Origin header not in Options.AllowedOrigins gets 403 (browsers).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /rpc", s.serveRPC)
	mux.HandleFunc("GET /events", s.serveEvents)
	mux.HandleFunc("DELETE /session", s.serveEndSession)
	mux.HandleFunc("GET /mhp.json", s.serveDescriptor)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if origin := r.Header.Get("Origin"); origin != "" && !slices.Contains(s.opts.AllowedOrigins, origin) {
			writeJSON(w, http.StatusForbidden, &Response{JSONRPC: Version, ID: nullID,
				Error: s.errorf(mhp.CodeServerError, "origin %q is not allowed", origin).With("reason", "origin_forbidden")})
			s.log.Warn("mhp http request from a foreign origin refused", "origin", origin, "path", r.URL.Path, "remote", r.RemoteAddr)
			return
		}
		public := s.opts.PublicDescriptor && r.URL.Path == "/mhp.json"
		if !public && !s.checkToken(bearer(r)) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="mhp"`)
			writeJSON(w, http.StatusUnauthorized, &Response{JSONRPC: Version, ID: nullID,
				Error: s.errorf(mhp.CodeServerError, "unauthorized: a valid bearer token is required").With("reason", "unauthorized")})
			s.log.Info("mhp http unauthorized", "path", r.URL.Path, "remote", r.RemoteAddr, "client", r.Header.Get(HeaderClient))
			return
		}
		mux.ServeHTTP(w, r)
	})
}

func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	const p = "bearer "
	if len(h) > len(p) && strings.EqualFold(h[:len(p)], p) {
		return strings.TrimSpace(h[len(p):])
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

func (s *Server) serveRPC(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(s.opts.MaxFrame)))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeJSON(w, http.StatusRequestEntityTooLarge, &Response{JSONRPC: Version, ID: nullID,
				Error: s.errorf(mhp.CodeInvalidRequest, "frame of more than %d bytes refused", s.opts.MaxFrame).
					With("limit", s.opts.MaxFrame)})
			return
		}
		writeJSON(w, http.StatusBadRequest, &Response{JSONRPC: Version, ID: nullID,
			Error: s.errorf(mhp.CodeParseError, "reading the request body: %v", err)})
		return
	}
	req, derr := DecodeFrame(body)
	if derr != nil {
		id := nullID
		if req != nil && req.ID != nil {
			id = req.ID
		}
		writeJSON(w, http.StatusOK, &Response{JSONRPC: Version, ID: id, Error: derr.At(s.clk.Now())})
		return
	}
	client := r.Header.Get(HeaderClient)
	var ss *session
	var resp *Response
	if req.Method == "initialize" {
		resp = s.handle(r.Context(), nil, req, func() (*session, *mhp.Error) {
			var err *mhp.Error
			ss, err = s.openSession(client, false)
			return ss, err
		})
		if ss != nil && resp != nil && resp.Error == nil {
			w.Header().Set(HeaderSession, ss.id)
		}
	} else {
		sid := r.Header.Get(HeaderSession)
		if sid == "" {
			resp = s.handle(r.Context(), nil, req, nil)
		} else if found, ok := s.lookup(sid); ok {
			resp = s.handle(r.Context(), found, req, nil)
		} else {
			resp = &Response{JSONRPC: Version, ID: req.ID, Error: s.errUnknownSession(req.Method)}
			if _, known := s.methods[req.Method]; !known {
				resp.Error = s.errorf(mhp.CodeMethodNotFound, "method %q not found", req.Method).With("method", req.Method)
			}
			if req.IsNotification() {
				resp = nil
			}
		}
	}
	if resp == nil { // a notification: nothing to answer
		w.WriteHeader(http.StatusNoContent)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// sessionOf finds the session of an events or session request.
func (s *Server) sessionOf(r *http.Request) (*session, *mhp.Error) {
	sid := r.Header.Get(HeaderSession)
	if sid == "" {
		sid = r.URL.Query().Get("session")
	}
	if sid == "" {
		return nil, s.errNotInitialized(r.Method + " " + r.URL.Path)
	}
	ss, ok := s.lookup(sid)
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
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeJSON(w, http.StatusInternalServerError, &Response{JSONRPC: Version, ID: nullID,
			Error: s.errorf(mhp.CodeInternal, "streaming is not supported by this server")})
		return
	}
	cursor := ss.resumePoint()
	last := r.Header.Get(HeaderLastEventID)
	if last == "" {
		last = r.URL.Query().Get("lastEventId")
	}
	if last != "" {
		n, err := strconv.ParseUint(last, 10, 64)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, &Response{JSONRPC: Version, ID: nullID,
				Error: s.errorf(mhp.CodeInvalidParams, "Last-Event-ID %q is not an event id", last).With("field", HeaderLastEventID)})
			return
		}
		cursor = n
	}
	ss.streamOpened(s.clk.Now())
	defer ss.streamClosed(s.clk.Now())

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if _, err := io.WriteString(w, ": mhp events for session "+ss.id+"\n\n"); err != nil {
		return
	}
	flusher.Flush()
	s.log.Debug("mhp events stream opened", "session", ss.id, "after", cursor)

	keep := time.NewTicker(s.opts.KeepAlive)
	defer keep.Stop()
	for {
		evs, lost, wake, ok := ss.since(cursor)
		if !ok {
			return // the session ended
		}
		if lost > 0 {
			if _, err := fmt.Fprintf(w, ": lost %d events (buffer %d)\n\n", lost, s.opts.SSEBuffer); err != nil {
				return
			}
		}
		for _, e := range evs {
			if _, err := fmt.Fprintf(w, "id: %d\ndata: %s\n\n", e.id, e.data); err != nil {
				return
			}
			cursor = e.id
		}
		if len(evs) > 0 || lost > 0 {
			flusher.Flush()
			ss.markDelivered(cursor)
		}
		select {
		case <-r.Context().Done():
			return
		case <-wake:
		case <-keep.C:
			if _, err := io.WriteString(w, ": keep-alive\n\n"); err != nil {
				return
			}
			flusher.Flush()
			ss.touch(s.clk.Now())
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
// ListenHTTP; use it with ServeHTTP to learn the bound port (addr ":0").
func Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", LoopbackDefault(addr))
	if err != nil {
		return nil, fmt.Errorf("transport: listen %s: %w", addr, err)
	}
	return ln, nil
}

// ServeHTTP serves srv.Handler on ln until ctx is cancelled (see ListenHTTP).
func ServeHTTP(ctx context.Context, ln net.Listener, srv *Server) error {
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
		return nil
	}
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
