package mcpbridge_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/client"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/mcpbridge"
	"github.com/openmhp/mhp-go/transport"
)

// TestWaitEndsWhenTheLinkDrops: a device that dies while mhp_invoke waits
// for its job ends the wait with reason link_dropped, well before wait_s.
func TestWaitEndsWhenTheLinkDrops(t *testing.T) {
	r := newRig(t, "rig", true, "")
	srv := transport.NewServer(r.drv, transport.Options{Logger: slog.New(slog.DiscardHandler)})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); srv.Close() })
	b2, err := mcpbridge.New(mcpbridge.Config{Finder: &mcpbridge.Named{Targets: map[string]string{"rig": hs.URL}, Simulated: map[string]bool{"rig": true}},
		Dial: func(ctx context.Context, target string) (*client.Device, error) {
			return client.Dial(ctx, target, client.Options{})
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b2.Close() })
	cs := session(t, b2, nil)
	type answer struct {
		res *mcp.CallToolResult
		err error
		at  time.Duration
	}
	done := make(chan answer, 1)
	start := time.Now()
	go func() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "mhp_invoke",
			Arguments: map[string]any{"device": "rig", "action": "hold", "wait_s": 120}})
		done <- answer{res, err, time.Since(start)}
	}()
	conformance.Eventually(t, "the hold job to run", func() bool { return r.drv.State() == mhp.StateBusy })
	hs.CloseClientConnections()
	hs.Listener.Close() // the device is gone: nothing answers any more
	var a answer
	select {
	case a = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the wait did not end after the device's link dropped")
	}
	if a.err != nil {
		t.Fatal(a.err)
	}
	body := decode(a.res)
	e, _ := body["mhpError"].(map[string]any)
	data, _ := e["data"].(map[string]any)
	if !a.res.IsError || data["reason"] != mcpbridge.ReasonLinkDropped || a.at > 60*time.Second {
		t.Fatalf("after %v: %s", a.at, text(a.res))
	}
}
