package mcpbridge_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/clock"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/mcpbridge"
)

// noStreamRT is an MCP HTTP client that never opens the GET stream (the
// server may refuse it), so its only signs of life are its requests.
type noStreamRT struct{}

func (noStreamRT) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet {
		return &http.Response{StatusCode: http.StatusMethodNotAllowed, Body: http.NoBody, Header: http.Header{}, Request: r}, nil
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestSilentHTTPSessionReleasesItsLease: a client that acquired a lease and
// went away without DELETE loses it once its session is idle for
// SessionIdle, not at the 30-minute session timeout; a client that keeps
// calling keeps it. The bridge's clock is manual, so a loaded machine
// stretching the real time between two calls cannot make them look idle.
func TestSilentHTTPSessionReleasesItsLease(t *testing.T) {
	r := newRig(t, "rig", true, "")
	clk := clock.NewManual(time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC))
	b := rigBridge(t, r, mcpbridge.Config{SessionIdle: 300 * time.Millisecond, Clock: clk})
	srv := httptest.NewServer(b.HTTPHandler(mcpbridge.HTTPOptions{}))
	t.Cleanup(srv.Close)
	connect := func() *mcp.ClientSession {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "gone", Version: "1"}, nil).Connect(context.Background(),
			&mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: &http.Client{Transport: noStreamRT{}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	busy := connect()
	if res, body := mustCall(t, busy, "mhp_lab", map[string]any{"op": "acquire", "device": "rig", "ttl_s": 60}); res.IsError {
		t.Fatalf("acquire: %v", body)
	}
	// Calling every 100 ms of the bridge's clock for 1.2 s (4 idle
	// windows), with the sweeper running in real time: the lease stays.
	for i := 0; i < 12; i++ {
		clk.Advance(100 * time.Millisecond)
		mustCall(t, busy, "mhp_read", map[string]any{"device": "rig"})
		if !leased(r) {
			t.Fatalf("the lease of a session calling every 100 ms was released after %d calls", i)
		}
	}
	// Silent from now on (no DELETE): once more than SessionIdle passed,
	// the next sweep releases the lease.
	clk.Advance(301 * time.Millisecond)
	conformance.Eventually(t, "the silent session's lease released", func() bool { return !leased(r) })
}

// leased reports whether someone holds the rig's lease: another session's
// acquire is refused.
func leased(r *rig) bool {
	ctx := mhp.WithSession(context.Background(), "probe")
	if _, err := r.drv.Acquire(ctx, time.Minute); err != nil {
		return true
	}
	r.drv.Release(ctx)
	return false
}

// TestOpenStreamIsLife: a silent client that keeps its GET stream open (it
// listens for notifications) keeps its lease.
func TestOpenStreamIsLife(t *testing.T) {
	r := newRig(t, "rig", true, "")
	b := rigBridge(t, r, mcpbridge.Config{SessionIdle: 200 * time.Millisecond})
	srv := httptest.NewServer(b.HTTPHandler(mcpbridge.HTTPOptions{}))
	t.Cleanup(srv.Close)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "listener", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: srv.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	if res, body := mustCall(t, cs, "mhp_lab", map[string]any{"op": "acquire", "device": "rig", "ttl_s": 60}); res.IsError {
		t.Fatalf("acquire: %v", body)
	}
	deadline := time.Now().Add(time.Second) // five idle windows without a request
	for time.Now().Before(deadline) {
		if !leased(r) {
			t.Fatal("the lease of a session with an open stream was released")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
