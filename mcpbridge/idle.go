package mcpbridge

import (
	"context"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultSessionIdle is how long an MCP session over HTTP may show no life
// (no request, no open stream) before the bridge stops renewing its device
// leases and releases them (Config.SessionIdle).
const DefaultSessionIdle = 2 * time.Minute

// Bounds of Config.SessionIdle.
const (
	MinSessionIdle = 100 * time.Millisecond
	MaxSessionIdle = 30 * time.Minute
)

// touchSessions is a receiving middleware: every message of an MCP session
// (a tool call, a ping, a list) is a sign of life.
func (b *Bridge) touchSessions(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if ss, ok := req.GetSession().(*mcp.ServerSession); ok {
			b.mu.Lock()
			s := b.sessions[ss]
			b.mu.Unlock()
			if s != nil {
				s.alive(b.cfg.Clock.Now())
			}
		}
		return next(ctx, method, req)
	}
}

// trackStreams counts the open GET streams of each MCP session id (a
// client listening for notifications shows life without calling).
func (b *Bridge) trackStreams(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("Mcp-Session-Id")
		if r.Method != http.MethodGet || id == "" {
			next.ServeHTTP(w, r)
			return
		}
		b.mu.Lock()
		if len(b.streams) < 4*b.cfg.MaxSessions || b.streams[id] > 0 { // bounded by the sessions served
			b.streams[id]++
		} else {
			id = ""
		}
		b.mu.Unlock()
		defer func() {
			if id == "" {
				return
			}
			b.mu.Lock()
			if b.streams[id]--; b.streams[id] <= 0 {
				delete(b.streams, id)
			}
			b.mu.Unlock()
			b.touchID(id)
		}()
		next.ServeHTTP(w, r)
	})
}

// touchID marks the session with the MCP session id alive (a stream ended:
// the client was there until now).
func (b *Bridge) touchID(id string) {
	b.mu.Lock()
	var s *session
	for ss, x := range b.sessions {
		if ss.ID() == id {
			s = x
			break
		}
	}
	b.mu.Unlock()
	if s != nil {
		s.alive(b.cfg.Clock.Now())
	}
}

// watchIdle releases the device leases of HTTP sessions that showed no
// life for SessionIdle, until the bridge closes. A stdio or in-memory
// session (no session id) lives as long as its stream: it is left alone.
func (b *Bridge) watchIdle() {
	idle := b.cfg.SessionIdle
	t := time.NewTicker(min(max(idle/4, 25*time.Millisecond), 30*time.Second))
	defer t.Stop()
	for {
		select {
		case <-b.done:
			return
		case <-t.C:
		}
		now := b.cfg.Clock.Now()
		var quiet []*session
		b.mu.Lock()
		for ss, s := range b.sessions {
			if id := ss.ID(); id != "" && b.streams[id] == 0 && s.idleSince(now) > idle {
				quiet = append(quiet, s)
			}
		}
		b.mu.Unlock()
		for _, s := range quiet {
			s.releaseIdle()
		}
	}
}

// alive records a sign of life.
func (s *session) alive(now time.Time) {
	s.mu.Lock()
	s.seen, s.idled = now, false
	s.mu.Unlock()
}

// idleSince is how long the session showed no life (0 once its leases were
// released for it, until it shows life again).
func (s *session) idleSince(now time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.idled || s.seen.IsZero() || len(s.slots) > 0 { // a call in flight (a wait, a script) is life
		return 0
	}
	return now.Sub(s.seen)
}

// releaseIdle stops renewing the session's leases and releases them: the
// agent is gone or silent, so it no longer holds the devices (nor feeds
// their watchdogs). Its connections stay; a later call acquires again.
func (s *session) releaseIdle() {
	s.mu.Lock()
	s.idled = true
	s.mu.Unlock()
	for _, d := range s.connected() {
		if !d.HoldsLease() {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = d.Release(ctx) // stops the heartbeat first; a device already gone has no lease to keep
		cancel()
	}
}
