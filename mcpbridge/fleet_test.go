package mcpbridge_test

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/examples/sim"
	"github.com/openmhp/mhp-go/host"
	"github.com/openmhp/mhp-go/mcpbridge"
	"github.com/openmhp/mhp-go/transport"
)

// fleetBridge is a bridge over a fresh fleet in a temporary home.
func fleetBridge(t *testing.T) (*mcpbridge.Bridge, *host.Fleet) {
	t.Helper()
	f, err := host.Open(host.Config{Home: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	b, err := mcpbridge.New(mcpbridge.Config{Fleet: f})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, f
}

// serveTagged serves a simulated thermocycler whose own card says
// "simulated" over HTTP: the host still counts a URL as hardware.
func serveTagged(t *testing.T) string {
	t.Helper()
	drv, err := binding.New(sim.Thermocycler(sim.Options{ID: "remote-tc"}))
	if err != nil {
		t.Fatal(err)
	}
	srv := transport.NewServer(drv, transport.Options{})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { srv.Close(); hs.CloseClientConnections(); hs.Close(); drv.Close() })
	return hs.URL
}

// mhp_lab's fleet ops: adding hardware asks the person (and says what
// becomes reachable), a twin is added without asking and may be actuated
// under the default policy, hardware may not (whatever its own tags say).
func TestLabFleetOps(t *testing.T) {
	b, f := fleetBridge(t)
	var asked atomic.Value
	answer := atomic.Bool{}
	cs := session(t, b, &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked.Store(r.Params.Message)
		if answer.Load() {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
		}
		return &mcp.ElicitResult{Action: "decline"}, nil
	}})
	url := serveTagged(t)
	res, body := mustCall(t, cs, "mhp_lab", map[string]any{"op": "add", "target": url})
	if !res.IsError || errCode(body) != float64(mhp.CodeApprovalRequired) {
		t.Fatalf("declined hardware add: %v", body)
	}
	if msg, _ := asked.Load().(string); !strings.Contains(msg, "makes hardware reachable to the agent") || !strings.Contains(msg, "run_protocol") {
		t.Fatalf("the person was asked %q", msg)
	}
	if list, _ := f.List(); len(list) != 0 {
		t.Fatalf("declined add landed: %v", list)
	}
	answer.Store(true)
	if res, body := mustCall(t, cs, "mhp_lab", map[string]any{"op": "add", "target": url, "location": "bench 1"}); res.IsError {
		t.Fatalf("confirmed hardware add: %v", body)
	}
	asked.Store("")
	pkg, _ := filepath.Abs("../examples/devices/thermocycler-01")
	if res, body := mustCall(t, cs, "mhp_lab", map[string]any{"op": "add", "target": pkg, "twin": true}); res.IsError {
		t.Fatalf("twin add: %v", body)
	}
	if msg, _ := asked.Load().(string); msg != "" {
		t.Fatalf("a twin asked the person: %q", msg)
	}
	_, body = mustCall(t, cs, "mhp_lab", map[string]any{"op": "list"})
	if fl, _ := body["fleet"].([]any); len(fl) != 2 {
		t.Fatalf("list: %v", body)
	}
	// The twin actuates; the hardware (tagged simulated by itself) does not.
	if res, body := mustCall(t, cs, "mhp_write", map[string]any{"device": "thermocycler-01-sim", "name": "target_temperature", "value": 50}); res.IsError {
		t.Fatalf("write on the twin: %v", body)
	}
	res, body = mustCall(t, cs, "mhp_write", map[string]any{"device": "remote-tc", "name": "target_temperature", "value": 50})
	if !res.IsError || errCode(body) != float64(mhp.CodeForbidden) {
		t.Fatalf("write on hardware under the default policy: %v", body)
	}
	_, body = mustCall(t, cs, "mhp_find", map[string]any{"query": "bench 1"})
	if rs, _ := body["results"].([]any); len(rs) == 0 || rs[0].(map[string]any)["id"] != "remote-tc" {
		t.Fatalf("find by the recorded location: %v", body)
	}
	if res, body := mustCall(t, cs, "mhp_lab", map[string]any{"op": "remove", "device": "thermocycler-01-sim"}); res.IsError {
		t.Fatalf("remove: %v", body)
	}
	res, _ = mustCall(t, cs, "mhp_read", map[string]any{"device": "thermocycler-01-sim"})
	if !res.IsError {
		t.Fatal("a removed device still answers")
	}
}

// Without elicitation a hardware add is refused, never added silently.
func TestLabAddHardwareWithoutElicitation(t *testing.T) {
	b, f := fleetBridge(t)
	cs := session(t, b, nil)
	res, body := mustCall(t, cs, "mhp_lab", map[string]any{"op": "add", "target": serveTagged(t)})
	if !res.IsError || errCode(body) != float64(mhp.CodeApprovalRequired) {
		t.Fatalf("hardware add without elicitation: %v", body)
	}
	if list, _ := f.List(); len(list) != 0 {
		t.Fatalf("added without a person: %v", list)
	}
}

// With the fleet and interview ops, tools/list holds its size: 4,374 bytes
// (4,421 before the second trim, 4,556 before issue 30's first); an
// operator's host with the fleet lists mhp_permit, mhp_operator and reset
// too: 5,404 (5,452; 5,583).
func TestToolsListSizeWithFleet(t *testing.T) {
	for _, c := range []struct {
		name  string
		p     mcpbridge.Policy
		token string
		limit int
	}{
		{"fleet", mcpbridge.DefaultPolicy(), "", 4380},
		{"fleet and operator tools", mcpbridge.Policy{Enabled: true, OperatorTools: true}, "op-tok", 5410},
	} {
		b := onboardBridgeWith(t, t.TempDir(), mcpbridge.Config{Policy: &c.p, OperatorToken: c.token})
		res, err := session(t, b, nil).ListTools(context.Background(), &mcp.ListToolsParams{})
		if err != nil {
			t.Fatal(err)
		}
		size := len(jsonOf(res))
		t.Logf("tools/list, %s: %d bytes", c.name, size)
		if size > c.limit {
			t.Errorf("tools/list, %s: %d bytes, over %d", c.name, size, c.limit)
		}
	}
}
