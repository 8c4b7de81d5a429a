package mqtt

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"
)

// testBroker is an embedded mochi-mqtt broker on a random loopback port.
type testBroker struct {
	srv  *mochi.Server
	addr string // tcp://127.0.0.1:port
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newBroker(t testing.TB) *testBroker {
	t.Helper()
	srv := mochi.New(&mochi.Options{InlineClient: true, Logger: quietLogger()})
	if err := srv.AddHook(new(auth.AllowHook), nil); err != nil {
		t.Fatalf("broker hook: %v", err)
	}
	l := listeners.NewTCP(listeners.Config{ID: "t1", Address: "127.0.0.1:0"})
	if err := srv.AddListener(l); err != nil {
		t.Fatalf("broker listener: %v", err)
	}
	go func() { _ = srv.Serve() }()
	t.Cleanup(func() { _ = srv.Close() })
	return &testBroker{srv: srv, addr: "tcp://" + l.Address()}
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
