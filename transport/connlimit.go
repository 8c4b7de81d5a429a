package transport

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// shedWait is how long a connection accepted at the cap waits for another
// to end when none is idle, before it is closed.
const shedWait = time.Second

// connLimiter is a listener that keeps at most max connections open. At the
// cap a new connection evicts, oldest first, a connection that is idle (a
// keep-alive connection between requests, or one that never sent a byte);
// else one still sending its request (headers or body: a slow or trickling
// sender); else an event stream (its client resumes with Last-Event-ID). A
// connection whose request is being served is never evicted. So neither idle
// nor trickling connections can starve a newcomer, an estop among them. With
// nothing evictable it waits up to shedWait for a connection to end, then
// closes the newcomer.
//
// A device server keeps EStopReserve connections beyond the cap for the
// estop: with every connection serving and none evictable, a newcomer is
// admitted at once on a reserve slot, which carries one safety/estop and
// nothing else (any other request on it is refused busy and the connection
// closed; the estop's answer closes it too). So an estop client dialling a
// new connection into a server at its cap is served, not shut out.
type connLimiter struct {
	net.Listener
	max     int
	reserve int // slots beyond max for an estop (0: none)
	log     *slog.Logger

	// changes counts the phase changes so far: a connection's phase is
	// stamped with the count at its last change (the order of the changes
	// is all eviction needs, and a counter costs no clock read).
	changes atomic.Uint64

	mu       sync.Mutex
	conns    map[*limitedConn]struct{}
	reserved int           // conns admitted on a reserve slot
	freed    chan struct{} // one token per close, non-blocking; made by the first newcomer that waits
}

// EStopReserve is how many connections beyond [Options.MaxConns] a device
// server admits, when every connection is being served, for a
// safety/estop each.
const EStopReserve = 4

// connPhase is what a connection is doing, in eviction order.
type connPhase int

const (
	phaseIdle    connPhase = iota // between requests, or nothing sent yet
	phaseReading                  // sending its request (headers, body)
	phaseStream                   // an event stream
	phaseServing                  // a request being served: never evicted
)

// phaseShift places a connection's phase above its change count in one
// word (limitedConn.state), so both change together without a lock.
const phaseShift = 56

func limitConns(ln net.Listener, max, reserve int, log *slog.Logger) *connLimiter {
	return &connLimiter{Listener: ln, max: max, reserve: reserve, log: log} // conns, freed: made when first needed
}

// limitedConn releases its slot when closed.
type limitedConn struct {
	net.Conn
	l       *connLimiter
	once    sync.Once
	reserve bool // admitted on a reserve slot: one safety/estop only
	// state is the connection's phase (above phaseShift) and the
	// limiter's change count at its last change: a request's phase
	// changes take no lock, and eviction reads them under the limiter's.
	state atomic.Uint64
}

// setPhase records that the connection entered phase p.
func (c *limitedConn) setPhase(p connPhase) {
	c.state.Store(uint64(p)<<phaseShift | c.l.changes.Add(1)&(1<<phaseShift-1))
}

// phase is the connection's phase and the count of its last change.
func (c *limitedConn) phase() (connPhase, uint64) {
	s := c.state.Load()
	return connPhase(s >> phaseShift), s & (1<<phaseShift - 1)
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c) })
	return err
}

func (l *connLimiter) release(c *limitedConn) {
	l.mu.Lock()
	l.forgetLocked(c)
	freed := l.freed
	l.mu.Unlock()
	select {
	case freed <- struct{}{}: // nil while no newcomer ever waited
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

// forgetLocked drops c from the table (and its reserve slot).
func (l *connLimiter) forgetLocked(c *limitedConn) {
	if _, ok := l.conns[c]; !ok {
		return
	}
	delete(l.conns, c)
	if c.reserve {
		l.reserved--
	}
}

// admit registers c: on a free slot; else by evicting the longest-idle
// connection; else, with every connection serving, on a reserve slot;
// else, when a reserve connection can be evicted, in its place; else it
// waits up to shedWait for a close.
func (l *connLimiter) admit(c *limitedConn) bool {
	deadline := time.Now().Add(shedWait)
	for {
		l.mu.Lock()
		if l.conns == nil {
			l.conns = map[*limitedConn]struct{}{}
		}
		if len(l.conns)-l.reserved < l.max {
			c.setPhase(phaseIdle)
			l.conns[c] = struct{}{}
			l.mu.Unlock()
			return true
		}
		victim := l.victimLocked(false)
		if victim == nil && l.reserved < l.reserve {
			c.reserve = true
			l.reserved++
			c.setPhase(phaseIdle)
			l.conns[c] = struct{}{}
			l.mu.Unlock()
			l.log.Warn("mhp http connection admitted on an estop reserve slot: every connection is serving", "limit", l.max,
				"remote", c.RemoteAddr().String())
			return true
		}
		if victim == nil {
			victim = l.victimLocked(true)
		}
		if l.freed == nil {
			l.freed = make(chan struct{}, 1)
		}
		freed := l.freed
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
		case <-freed:
		case <-t.C:
		}
		t.Stop()
	}
}

// victimLocked is the connection to evict for a newcomer: the one idle the
// longest, else reading the longest, else streaming the longest; never one
// being served. reserve chooses among the reserve connections or the
// others.
func (l *connLimiter) victimLocked(reserve bool) net.Conn {
	var victim *limitedConn
	var vPhase connPhase
	var vSince uint64
	for c := range l.conns {
		phase, since := c.phase()
		if phase == phaseServing || c.reserve != reserve {
			continue
		}
		if victim == nil || phase < vPhase || (phase == vPhase && since < vSince) {
			victim, vPhase, vSince = c, phase, since
		}
	}
	if victim == nil {
		return nil
	}
	return victim
}

// connState is the http.Server hook that tracks which connections are
// idle. A request's phase changes take no lock; only a connection's end
// takes the limiter's.
func (l *connLimiter) connState(c net.Conn, st http.ConnState) {
	var lc *limitedConn
	switch c := c.(type) {
	case *frontConn:
		lc = c.limited()
	case *limitedConn:
		lc = c
	default:
		return
	}
	switch st {
	case http.StateNew, http.StateIdle:
		lc.setPhase(phaseIdle)
	case http.StateActive:
		lc.setPhase(phaseReading)
	case http.StateHijacked, http.StateClosed:
		l.mu.Lock()
		l.forgetLocked(lc)
		l.mu.Unlock()
	}
}

// connKey carries a request's *limitedConn in its context (ConnContext).
type connKey struct{}

func withConn(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// markPhase records that r's connection has read its request and is being
// served (phaseServing) or streams events (phaseStream). A request not
// served through ServeHTTP has no limiter: nothing to do.
func markPhase(r *http.Request, p connPhase) {
	var lc *limitedConn
	switch c := r.Context().Value(connKey{}).(type) {
	case *frontConn:
		lc = c.limited()
	case *limitedConn:
		lc = c
	default:
		return
	}
	lc.setPhase(p)
}
