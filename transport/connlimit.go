package transport

import (
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// shedWait is how long a connection accepted at the cap waits for another
// to end when none is idle, before it is closed.
const shedWait = time.Second

// connLimiter is a listener that keeps at most max connections open. At the
// cap a new connection evicts the connection idle the longest (a keep-alive
// connection between requests, or one that never sent a byte): idle
// connections cannot starve a newcomer, an estop among them. With none idle
// it waits up to shedWait for one to end, then closes the newcomer.
type connLimiter struct {
	net.Listener
	max int
	log *slog.Logger

	mu    sync.Mutex
	conns map[net.Conn]*connInfo
	freed chan struct{} // one token per close, non-blocking
}

type connInfo struct {
	idle  bool
	since time.Time
}

func limitConns(ln net.Listener, max int, log *slog.Logger) *connLimiter {
	return &connLimiter{Listener: ln, max: max, log: log, conns: map[net.Conn]*connInfo{}, freed: make(chan struct{}, 1)}
}

// limitedConn releases its slot when closed.
type limitedConn struct {
	net.Conn
	l    *connLimiter
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c) })
	return err
}

func (l *connLimiter) release(c net.Conn) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
	select {
	case l.freed <- struct{}{}:
	default:
	}
}

// Open reports the open connections.
func (l *connLimiter) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		lc := &limitedConn{Conn: c, l: l}
		if l.admit(lc) {
			return lc, nil
		}
		_ = c.Close()
		l.log.Warn("mhp http connection refused: connection limit reached, none idle", "limit", l.max, "remote", c.RemoteAddr().String())
	}
}

// admit registers c, evicting the longest-idle connection at the cap.
func (l *connLimiter) admit(c *limitedConn) bool {
	deadline := time.Now().Add(shedWait)
	for {
		l.mu.Lock()
		if len(l.conns) < l.max {
			l.conns[c] = &connInfo{idle: true, since: time.Now()}
			l.mu.Unlock()
			return true
		}
		var victim net.Conn
		var oldest time.Time
		for k, ci := range l.conns {
			if ci.idle && (victim == nil || ci.since.Before(oldest)) {
				victim, oldest = k, ci.since
			}
		}
		l.mu.Unlock()
		if victim != nil {
			_ = victim.Close() // releases its slot
			continue
		}
		wait := time.Until(deadline)
		if wait <= 0 {
			return false
		}
		t := time.NewTimer(wait)
		select {
		case <-l.freed:
		case <-t.C:
		}
		t.Stop()
	}
}

// connState is the http.Server hook that tracks which connections are idle.
func (l *connLimiter) connState(c net.Conn, st http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ci, ok := l.conns[c]
	if !ok {
		return
	}
	switch st {
	case http.StateNew, http.StateIdle:
		ci.idle, ci.since = true, time.Now()
	case http.StateActive:
		ci.idle = false
	case http.StateHijacked, http.StateClosed:
		delete(l.conns, c)
	}
}
