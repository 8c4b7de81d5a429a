package mqtt

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"
)

// testBroker is an embedded mochi-mqtt broker on a random loopback port.
type testBroker struct {
	srv  *mochi.Server
	addr string // tcp://127.0.0.1:port
	gate *gateHook
}

// gateHook allows every client and topic, except clients the test banned.
type gateHook struct {
	mochi.HookBase
	mu     sync.Mutex
	banned map[string]bool
}

func (h *gateHook) ID() string { return "test-gate" }

func (h *gateHook) Provides(b byte) bool {
	return b == mochi.OnConnectAuthenticate || b == mochi.OnACLCheck
}

func (h *gateHook) OnConnectAuthenticate(cl *mochi.Client, _ packets.Packet) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.banned[cl.ID]
}

func (h *gateHook) OnACLCheck(*mochi.Client, string, bool) bool { return true }

// ban refuses (or again allows) a client id's connections.
func (b *testBroker) ban(clientID string, banned bool) {
	b.gate.mu.Lock()
	defer b.gate.mu.Unlock()
	b.gate.banned[clientID] = banned
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newBroker(t testing.TB) *testBroker { t.Helper(); return newBrokerAt(t, "127.0.0.1:0") }

// newBrokerAt is newBroker listening on addr (a broker coming back where
// an adapter expects it).
func newBrokerAt(t testing.TB, addr string) *testBroker {
	t.Helper()
	srv := mochi.New(&mochi.Options{InlineClient: true, Logger: quietLogger()})
	gate := &gateHook{banned: map[string]bool{}}
	if err := srv.AddHook(gate, nil); err != nil {
		t.Fatalf("broker hook: %v", err)
	}
	l := listeners.NewTCP(listeners.Config{ID: "t1", Address: addr})
	if err := srv.AddListener(l); err != nil {
		t.Fatalf("broker listener: %v", err)
	}
	go func() { _ = srv.Serve() }()
	t.Cleanup(func() { closeBroker(srv) })
	return &testBroker{srv: srv, addr: "tcp://" + l.Address(), gate: gate}
}

// closeBroker closes a mochi broker without hanging the test. mochi v2.7.9
// takes its client-table read lock recursively while closing
// (Clients.GetByListener -> Len), so a client leaving at that moment
// deadlocks Close: wait (bounded) until only the inline client is left, and
// bound Close itself.
func closeBroker(srv *mochi.Server) {
	deadline := time.Now().Add(3 * time.Second)
	for srv.Clients.Len() > 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond) // polling the broker's client table
	}
	done := make(chan struct{})
	go func() { _ = srv.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
}

// kick drops a client's connection from the broker side (abrupt: the
// broker publishes its will).
func (b *testBroker) kick(clientID string) bool {
	cl, ok := b.srv.Clients.Get(clientID)
	if !ok {
		return false
	}
	cl.Stop(errors.New("kicked by the test"))
	return true
}

// drop cuts a client's connection and lets it back only once the broker
// has forgotten the old session (mochi cleans a kicked clean session
// asynchronously; a reconnect racing that cleanup can lose its fresh
// subscriptions, which no real broker does).
func (b *testBroker) drop(clientID string) bool {
	b.ban(clientID, true)
	defer b.ban(clientID, false)
	if !b.kick(clientID) {
		return false
	}
	b.gone(clientID)
	return true
}

// gone waits (bounded) until the broker has forgotten a client.
func (b *testBroker) gone(clientID string) {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if _, ok := b.srv.Clients.Get(clientID); !ok {
			return
		}
		time.Sleep(time.Millisecond) // polling the broker's client table
	}
}

// dial connects a paho client and waits for the connection.
func dial(t testing.TB, addr, id string, will *Will) *PahoClient {
	t.Helper()
	c, err := DialPaho(DialOptions{Broker: addr, ClientID: id, Will: will, ConnectTimeout: 5 * time.Second,
		MaxReconnectInterval: 200 * time.Millisecond, Logger: quietLogger()})
	if err != nil {
		t.Fatalf("dial %s: %v", id, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := WaitUp(ctx, c); err != nil {
		t.Fatalf("connect %s: %v", id, err)
	}
	return c
}

// within fails t unless cond holds before the deadline, polling.
func within(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		<-tick.C
	}
}
