package transport

import (
	"errors"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"
)

// armCounter counts the deadlines set on the connection under a lazyConn.
type armCounter struct {
	net.Conn
	reads, writes atomic.Int64
}

func (c *armCounter) SetReadDeadline(t time.Time) error {
	c.reads.Add(1)
	return c.Conn.SetReadDeadline(t)
}

func (c *armCounter) SetWriteDeadline(t time.Time) error {
	c.writes.Add(1)
	return c.Conn.SetWriteDeadline(t)
}

// lazyPair is a lazyConn over one end of a pipe (counted), and the other end.
func lazyPair(t *testing.T) (*lazyConn, *armCounter, net.Conn) {
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	ac := &armCounter{Conn: a}
	return &lazyConn{Conn: ac, horizon: time.Hour}, ac, b
}

// readResult is what one Read on c gave, and when.
type readResult struct {
	n   int
	err error
	at  time.Time
}

func readAsync(c net.Conn) <-chan readResult {
	ch := make(chan readResult, 1)
	go func() {
		buf := make([]byte, 8)
		n, err := c.Read(buf)
		ch <- readResult{n, err, time.Now()}
	}()
	return ch
}

// TestLazyDeadlinesFailAtTheDeadlineAskedFor: a deadline moved later fails
// the read at the later one, not at the one set first; a deadline moved
// earlier (net/http's abort of its background read) cuts a blocked read at
// once; no deadline after one lets a read wait past it.
func TestLazyDeadlinesFailAtTheDeadlineAskedFor(t *testing.T) {
	const first = 20 * time.Millisecond
	tests := []struct {
		name string
		// run sets deadlines on c, the peer may write; it returns the
		// earliest time the read may fail (zero: it must succeed).
		run      func(c *lazyConn, peer net.Conn) time.Time
		wantData bool
	}{
		{"moved later: fails at the later one", func(c *lazyConn, _ net.Conn) time.Time {
			_ = c.SetReadDeadline(time.Now().Add(first))
			later := time.Now().Add(10 * first)
			_ = c.SetReadDeadline(later)
			return later
		}, false},
		{"moved earlier: fails at once", func(c *lazyConn, _ net.Conn) time.Time {
			_ = c.SetReadDeadline(time.Now().Add(time.Hour))
			_ = c.SetReadDeadline(time.Unix(1, 0))
			return time.Unix(1, 0)
		}, false},
		{"none after one: data after it is read", func(c *lazyConn, peer net.Conn) time.Time {
			_ = c.SetReadDeadline(time.Now().Add(first))
			_ = c.SetReadDeadline(time.Time{})
			go func() {
				time.Sleep(3 * first) // past the deadline set first: the read must still be waiting
				_, _ = peer.Write([]byte("x"))
			}()
			return time.Time{}
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _, peer := lazyPair(t)
			start := time.Now()
			earliest := tt.run(c, peer)
			var res readResult
			select {
			case res = <-readAsync(c):
			case <-time.After(10 * time.Second):
				t.Fatal("read neither failed nor returned within 10s")
			}
			if tt.wantData {
				if res.err != nil || res.n != 1 {
					t.Fatalf("read = %d, %v after %v; want the byte sent after the first deadline", res.n, res.err, res.at.Sub(start))
				}
				return
			}
			if !errors.Is(res.err, os.ErrDeadlineExceeded) {
				t.Fatalf("read = %d, %v; want the deadline exceeded", res.n, res.err)
			}
			if res.at.Before(earliest) {
				t.Fatalf("read failed %v before the deadline asked for", earliest.Sub(res.at))
			}
		})
	}
}

// TestLazyWriteResumesPastAnEarlierDeadline: a write blocked past the
// deadline set first, but within the later one asked for, completes.
func TestLazyWriteResumesPastAnEarlierDeadline(t *testing.T) {
	c, _, peer := lazyPair(t)
	_ = c.SetWriteDeadline(time.Now().Add(20 * time.Millisecond))
	_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	got := make(chan []byte, 1)
	go func() {
		time.Sleep(60 * time.Millisecond) // the reader comes after the first deadline
		buf := make([]byte, 5)
		n, _ := peer.Read(buf)
		got <- buf[:n]
	}()
	if n, err := c.Write([]byte("hello")); err != nil || n != 5 {
		t.Fatalf("write = %d, %v; want all 5 bytes", n, err)
	}
	if b := <-got; string(b) != "hello" {
		t.Fatalf("peer read %q", b)
	}
	// A write nobody reads fails at its deadline.
	_ = c.SetWriteDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := c.Write([]byte("x")); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("unread write = %v; want the deadline exceeded", err)
	}
}

// TestLazyDeadlinesSetOnlyWhenEarlier: net/http's moves of one request (the
// header deadline, the whole request's, the idle one, none) and the
// handler's write deadline per answer reach the connection once each, not
// at every request.
func TestLazyDeadlinesSetOnlyWhenEarlier(t *testing.T) {
	c, ac, _ := lazyPair(t)
	for i := 0; i < 100; i++ {
		t0 := time.Now()
		_ = c.SetReadDeadline(t0.Add(10 * time.Second)) // header
		_ = c.SetReadDeadline(t0.Add(30 * time.Second)) // whole request
		_ = c.SetWriteDeadline(time.Now().Add(30 * time.Second))
		_ = c.SetReadDeadline(time.Now().Add(60 * time.Second)) // idle
		_ = c.SetReadDeadline(time.Time{})
	}
	if r, w := ac.reads.Load(), ac.writes.Load(); r != 1 || w != 1 {
		t.Fatalf("deadlines set on the connection: %d reads, %d writes for 100 requests; want 1 and 1", r, w)
	}
}
