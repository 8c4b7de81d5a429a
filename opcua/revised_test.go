package opcua

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gopcua/opcua/ua"

	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/opcua/opcuatest"
)

// lockedBuffer is a log sink safe for the adapter's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestKeepAliveFollowsTheGrantedInterval: a server that revises the 50 ms
// publishing interval to 100 ms (open62541 1.4) gets the keep-alive count
// recomputed from what it granted, so the keep-alive period stays at
// keepalive_s, below the request timeout, and no "link may drop" warning is
// logged. Before the fix the count was kept, the period doubled to the
// request timeout and every connection warned.
func TestKeepAliveFollowsTheGrantedInterval(t *testing.T) {
	srv, err := opcuatest.StartWith(conformance.NewInstrument(), opcuatest.Options{MinPublishingInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	cfg := fixtureConfig(srv.URL, conformance.Options{})
	cfg.Timeouts.PublishS, cfg.Timeouts.KeepAliveS, cfg.Timeouts.RequestS = 0.05, 5, 10
	var logged lockedBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, cfg, DialOptions{Logger: slog.New(slog.NewTextHandler(&logged, nil)), KeepAlive: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	stop, err := c.Subscribe(ctx, []*ua.NodeID{ua.MustParseNodeID(opcuatest.NodeID(conformance.SignalTemperature))}, func(int, *ua.DataValue) {})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	conformance.EventuallyWithin(t, "the subscription", 10*time.Second, func() bool { return c.keepAlive.Load() > 0 })
	if ka := time.Duration(c.keepAlive.Load()); ka > 5*time.Second || ka < 4*time.Second {
		t.Fatalf("keep-alive period %v with the granted 100 ms interval, want keepalive_s 5s", ka)
	}
	if strings.Contains(logged.String(), "link may drop") {
		t.Fatalf("warned although the keep-alive fits:\n%s", logged.String())
	}
}
