package transport

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/auth"
)

// frontConn is the connection net/http serves: the limited connection, after
// TLS when the server has a certificate, with its HTTP/1.1 framing followed
// (see framer). TLS is terminated here rather than by net/http so that the
// framer reads the plain bytes; the handler puts the TLS state back on the
// request (r.TLS) before anything reads it. Serving HTTP/1.1 only (no h2)
// is the cost.
type frontConn struct {
	net.Conn              // the *tls.Conn, or the *limitedConn itself
	lc       *limitedConn // its slot in the connection limit
	tc       *tls.Conn    // nil without TLS
	log      *slog.Logger
	mu       sync.Mutex // guards fr (net/http reads from one goroutine at a time, but its background read is another)
	fr       framer
	smuggled atomic.Int64 // the framer's flagged: the request number to refuse from
	served   atomic.Int64 // requests handed to the handler
	logged   atomic.Bool
}

func (c *frontConn) limited() *limitedConn { return c.lc }

// Read reads from the connection (after TLS) and follows the framing of what it read.
func (c *frontConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		c.fr.feed(p[:n])
		flagged := c.fr.flagged
		c.mu.Unlock()
		if flagged > 0 {
			c.smuggled.CompareAndSwap(0, flagged)
		}
	}
	if err != nil && c.tc != nil && !c.tc.ConnectionState().HandshakeComplete && c.logged.CompareAndSwap(false, true) {
		c.log.Info("mhp tls handshake failed", "remote", c.RemoteAddr().String(), "why", auth.ExplainServerSide(err))
	}
	return n, err
}

// frontListener wraps each connection of the limited listener in a frontConn.
type frontListener struct {
	*connLimiter
	tls *tls.Config
	log *slog.Logger
}

// Accept admits a connection under the limit and wraps it (TLS, framing).
func (l *frontListener) Accept() (net.Conn, error) {
	c, err := l.connLimiter.Accept()
	if err != nil {
		return nil, err
	}
	lc := c.(*limitedConn)
	fc := &frontConn{Conn: lc, lc: lc, log: l.log}
	if l.tls != nil {
		fc.tc = tls.Server(lc, l.tls)
		fc.Conn = fc.tc
	}
	return fc, nil
}

// frontDoor is the handler in front of everything a listener serves: it
// refuses a request that carried both Content-Length and Transfer-Encoding
// (400, connection closed: RFC 9112 §6.1) and restores r.TLS.
func frontDoor(log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fc, _ := r.Context().Value(connKey{}).(*frontConn)
		if fc == nil {
			next.ServeHTTP(w, r)
			return
		}
		// The framer has read this request's head (and maybe pipelined
		// ones after it): refuse from the flagged request on.
		if n, at := fc.served.Add(1), fc.smuggled.Load(); at > 0 && n >= at {
			log.Warn("mhp http request with both Content-Length and Transfer-Encoding refused; connection closed (request smuggling)",
				"path", r.URL.Path, "remote", r.RemoteAddr)
			w.Header().Set("Connection", "close")
			auth.WriteRefusal(w, r, http.StatusBadRequest, mhp.Errorf(mhp.CodeInvalidRequest,
				"a request with both Content-Length and Transfer-Encoding is refused and its connection closed (RFC 9112 §6.1: request smuggling)"))
			return
		}
		if fc.tc != nil && r.TLS == nil {
			st := fc.tc.ConnectionState()
			r.TLS = &st
		}
		next.ServeHTTP(w, r)
	})
}

// ServeOptions configure [Serve].
type ServeOptions struct {
	// TLS, when set, serves HTTPS (auth.ServerTLS.Config).
	TLS *tls.Config
	// MaxConns caps the open connections; default DefaultMaxConns.
	MaxConns int
	// Logger receives refusals; default slog.Default().
	Logger *slog.Logger
}

// Serve serves h on ln until ctx ends (then shuts down, requests get 5s),
// for servers without a device (a directory, the MCP bridge) with the same
// front door as [ServeHTTP]: the connection limit, TLS when configured, and
// a request with both Content-Length and Transfer-Encoding refused with its
// connection closed. Headers must come within DefaultReadHeaderTimeout;
// idle keep-alive connections close after DefaultIdleTimeout.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, o ServeOptions) error {
	if o.MaxConns <= 0 {
		o.MaxConns = DefaultMaxConns
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: DefaultReadHeaderTimeout, IdleTimeout: DefaultIdleTimeout, MaxHeaderBytes: 64 << 10,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	return serveFront(ctx, ln, hs, o.MaxConns, 0, o.TLS, o.Logger)
}

// closeIdle closes the connections that are between requests or never sent
// one (for shutdown).
func (l *connLimiter) closeIdle() {
	l.mu.Lock()
	var idle []net.Conn
	for c := range l.conns {
		if phase, _ := c.phase(); phase == phaseIdle {
			idle = append(idle, c)
		}
	}
	l.mu.Unlock()
	for _, c := range idle {
		_ = c.Close()
	}
}
