package mqtt_test

import (
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/mqtt"
)

// swallowProxy forwards a client's connections to a broker; while swallow
// is on, what the client sends is read and thrown away (a link that died
// one way: the client's packets leave it and never arrive, no PUBACK comes).
type swallowProxy struct {
	ln      net.Listener
	target  string
	swallow atomic.Bool

	mu    sync.Mutex
	conns []net.Conn
}

func newSwallowProxy(t *testing.T, target string) *swallowProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &swallowProxy{ln: ln, target: target}
	go p.serve()
	t.Cleanup(func() { _ = ln.Close(); p.drop() })
	return p
}

func (p *swallowProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		go func() { // client -> broker, unless swallowed
			buf := make([]byte, 4096)
			for {
				n, err := c.Read(buf)
				if n > 0 && !p.swallow.Load() {
					if _, werr := up.Write(buf[:n]); werr != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			_ = c.Close()
			_ = up.Close()
		}()
		go func() { // broker -> client
			_, _ = io.Copy(c, up)
			_ = c.Close()
			_ = up.Close()
		}()
	}
}

// drop cuts every connection made so far.
func (p *swallowProxy) drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

// A publish left without its PUBACK when the link dropped is never sent
// again on the next connection: its answer was already given (no
// acknowledgement: outcome unknown, the device in fault), and a setpoint or
// an action arriving after that, or after an estop, would be a command
// nobody gave any more. paho resumes such packets even with a clean
// session; the client's store drops them.
func TestNothingSentBeforeADropIsSentAgain(t *testing.T) {
	b := newBroker(t, "127.0.0.1:0")
	px := newSwallowProxy(t, strings.TrimPrefix(b.Addr(), "tcp://"))
	dial := func(id, addr string) *mqtt.PahoClient {
		c, err := mqtt.DialPaho(mqtt.DialOptions{Broker: addr, ClientID: id, Logger: quietLogger(),
			RetryInterval: 20 * time.Millisecond, MaxReconnectInterval: 100 * time.Millisecond, ConnectTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		conformance.EventuallyWithin(t, id+" connected", 10*time.Second, func() bool { return c.State().Up })
		return c
	}
	sub := dial("resend-sub", b.Addr())
	var setpoints, markers atomic.Int32
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := sub.Subscribe(ctx, "lab/x/set/#", 1, func(m mqtt.Message) {
		switch m.Topic {
		case "lab/x/set/setpoint":
			setpoints.Add(1)
		case "lab/x/set/marker":
			markers.Add(1)
		}
	}); err != nil {
		t.Fatal(err)
	}
	pub := dial("resend-pub", "tcp://"+px.ln.Addr().String())
	first := pub.State().Conn

	px.swallow.Store(true)
	pctx, pcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err := pub.Publish(pctx, "lab/x/set/setpoint", 1, false, []byte(`{"id":"w1","value":50}`))
	pcancel()
	if err == nil {
		t.Fatal("a publish whose bytes never reached the broker was acknowledged")
	}
	px.swallow.Store(false)
	px.drop()
	conformance.EventuallyWithin(t, "the publisher reconnected", 10*time.Second, func() bool {
		st := pub.State()
		return st.Up && st.Conn > first
	})
	// Packets of one connection arrive in order: once a marker sent on the
	// new connection has come through, a resent setpoint would have too.
	if err := pub.Publish(ctx, "lab/x/set/marker", 1, false, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	conformance.EventuallyWithin(t, "the marker delivered", 10*time.Second, func() bool { return markers.Load() > 0 })
	if n := setpoints.Load(); n != 0 {
		t.Fatalf("the setpoint published before the drop reached the subscriber %d time(s) after the reconnect", n)
	}
}
