package transport

import (
	"errors"
	"net"
	"os"
	"sync"
	"time"
)

// A served connection's deadlines are set lazily. net/http moves the read
// deadline five or six times per request (the header deadline, the whole
// request's, the idle one, none, and the abort of its background read and
// back), and the handler moves the write deadline once per answer; each is
// a runtime timer change under the poller's lock. Almost every move is to
// a later time than the deadline already set. A deadline that would only
// move later is not set: the one set stays, and when it cuts an operation
// short before the deadline asked for, the operation is resumed with that
// deadline set (see lazyDeadline). So a read or write still fails at the
// deadline asked for, never earlier and never later; a deadline moved
// earlier (net/http's abort of its background read: a time long past) is
// set at once.

// lazyConn is a connection with lazy deadlines.
type lazyConn struct {
	net.Conn
	horizon time.Duration // how far ahead a resumed read's deadline is set at most
	rd, wd  lazyDeadline
}

// lazyDeadline is one direction's deadline: the one asked for and the one
// set on the connection, never later than it (zero: none).
type lazyDeadline struct {
	mu    sync.Mutex
	want  time.Time
	armed time.Time
}

// lazyListener gives each accepted connection lazy deadlines.
type lazyListener struct {
	net.Listener
	horizon time.Duration
}

func (l lazyListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &lazyConn{Conn: c, horizon: l.horizon}, nil
}

// lazyDeadlines wraps ln (see lazyConn). horizon bounds the deadline a
// resumed read gets when the one asked for is further off: the server's
// header timeout, so that the header deadline of the next request, which
// comes right after, need not move it again.
func lazyDeadlines(ln net.Listener, horizon time.Duration) net.Listener {
	if horizon <= 0 {
		horizon = DefaultReadHeaderTimeout
	}
	return lazyListener{Listener: ln, horizon: horizon}
}

// SetReadDeadline asks for t as the read deadline.
func (c *lazyConn) SetReadDeadline(t time.Time) error { return c.rd.set(t, c.Conn.SetReadDeadline) }

// SetWriteDeadline asks for t as the write deadline.
func (c *lazyConn) SetWriteDeadline(t time.Time) error { return c.wd.set(t, c.Conn.SetWriteDeadline) }

// SetDeadline asks for t as both deadlines.
func (c *lazyConn) SetDeadline(t time.Time) error {
	return errors.Join(c.SetReadDeadline(t), c.SetWriteDeadline(t))
}

// Read reads, resumed when a deadline earlier than the one asked for cut it
// short.
func (c *lazyConn) Read(p []byte) (int, error) {
	for {
		n, err := c.Conn.Read(p)
		if n > 0 || !errors.Is(err, os.ErrDeadlineExceeded) || !c.rd.resume(c.Conn.SetReadDeadline, c.horizon) {
			return n, err
		}
	}
}

// Write writes all of p, resumed when a deadline earlier than the one asked
// for cut it short.
func (c *lazyConn) Write(p []byte) (int, error) {
	done := 0
	for {
		n, err := c.Conn.Write(p[done:])
		done += n
		if err == nil || !errors.Is(err, os.ErrDeadlineExceeded) || !c.wd.resume(c.Conn.SetWriteDeadline, 0) {
			return done, err
		}
	}
}

// set asks for t. The connection's deadline is set only when t comes before
// the one set (or none is set); a t later than it (or none) waits for
// resume.
func (d *lazyDeadline) set(t time.Time, arm func(time.Time) error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.want = t
	if !d.armed.IsZero() && (t.IsZero() || !t.Before(d.armed)) {
		return nil // the deadline set comes first
	}
	d.armed = t
	return arm(t)
}

// resume is called when the deadline set cut an operation short. If the
// one asked for has come, it reports false (the operation fails with the
// timeout); else it sets the one asked for (at most horizon ahead, when
// horizon is not 0) and reports true (the operation goes on).
func (d *lazyDeadline) resume(arm func(time.Time) error, horizon time.Duration) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := time.Now()
	if !d.want.IsZero() && !now.Before(d.want) {
		return false
	}
	next := d.want
	if horizon > 0 && !next.IsZero() {
		if h := now.Add(horizon); h.Before(next) {
			next = h
		}
	}
	d.armed = next
	return arm(next) == nil
}
