package mcpbridge_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/auth"
	"github.com/openmhp/mhp-go/auth/authtest"
	"github.com/openmhp/mhp-go/client"
	"github.com/openmhp/mhp-go/directory"
	"github.com/openmhp/mhp-go/mcpbridge"
)

// credentialed serves b over Streamable HTTP behind a credentials file of a
// viewer ("v-token") and an agent ("a-token").
func credentialed(t *testing.T, b *mcpbridge.Bridge) string {
	t.Helper()
	authn, err := auth.New(auth.Config{CredentialsFile: authtest.Credentials(t, t.TempDir(), "vic=viewer:v-token", "ada=agent:a-token")})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(b.HTTPHandler(mcpbridge.HTTPOptions{Guard: auth.Guard{Auth: authn}}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// The role check is the connection's, not a tool's: whatever tool sends a
// method (a script of mhp_run, mhp_lab's acquire, mhp_job's cancel), a
// viewer's write, invoke, lease or reset never reaches the device, while
// its read, describe and ping do; the agent's go through.
func TestEveryToolIsBoundByTheCallersRole(t *testing.T) {
	r := newRig(t, "rig", true, "")
	b := rigBridge(t, r, mcpbridge.Config{Policy: &mcpbridge.Policy{Enabled: true, OperatorTools: true}})
	url := credentialed(t, b)
	viewer, agent := httpClient(t, url, "v-token"), httpClient(t, url, "a-token")

	for _, tc := range []struct {
		tool   string
		args   map[string]any
		method string // refused for the viewer; "" allowed
	}{
		{"mhp_read", map[string]any{"device": "rig"}, ""},
		{"mhp_describe", map[string]any{"device": "rig"}, ""},
		{"mhp_invoke", map[string]any{"device": "rig", "action": "home", "wait_s": 10}, mhp.MethodActionsInvoke},
		{"mhp_run", map[string]any{"script": "lab['rig'].invoke('home')"}, mhp.MethodActionsInvoke},
		{"mhp_lab", map[string]any{"op": "acquire", "device": "rig", "ttl_s": 30}, mhp.MethodSessionAcquire},
		{"mhp_lab", map[string]any{"op": "reset", "device": "rig"}, mhp.MethodSafetyReset},
		{"mhp_job", map[string]any{"op": "cancel", "device": "rig", "id": "job_x"}, mhp.MethodJobsCancel},
	} {
		res, body := mustCall(t, viewer, tc.tool, tc.args)
		if tc.method == "" {
			if res.IsError {
				t.Fatalf("viewer %s: %v", tc.tool, body)
			}
			continue
		}
		e, _ := body["mhpError"].(map[string]any)
		data, _ := e["data"].(map[string]any)
		refused := res.IsError && errCode(body) == float64(mhp.CodeServerError) && data["reason"] == auth.ReasonRoleForbidden &&
			data["method"] == tc.method && data["role"] == "viewer" && data["need"] == "agent" && data["tool"] == tc.tool
		if tc.tool == "mhp_run" { // a script's failure is its message: the refusal is in it
			refused = res.IsError && strings.Contains(jsonOf(body), "vic has role viewer, and "+tc.method+" needs role agent")
		}
		if !refused {
			t.Fatalf("viewer %s: want %s refused for the role: isError %v %v", tc.tool, tc.method, res.IsError, body)
		}
	}
	if n := r.homed.Load(); n != 0 {
		t.Fatalf("the viewer's calls homed the rig %d times", n)
	}
	if res, body := mustCall(t, agent, "mhp_invoke", map[string]any{"device": "rig", "action": "home", "wait_s": 10}); res.IsError || r.homed.Load() != 1 {
		t.Fatalf("agent home: isError %v %v (homed %d)", res.IsError, body, r.homed.Load())
	}
	if res, body := mustCall(t, viewer, "mhp_estop", map[string]any{"device": "rig", "reason": "test"}); res.IsError {
		t.Fatalf("viewer estop: %v", body)
	}
}

// A bridge given only Config.Dial cannot put the caller's gate on its
// connections: a caller below operator is refused (fail closed, naming
// DialWith), never let through unchecked.
func TestDialWithoutDialWithFailsClosed(t *testing.T) {
	r := newRig(t, "rig", true, "")
	dir, err := directory.New(directory.Config{Index: directory.NewIndex([]directory.Card{{
		DeviceInfo: mhp.DeviceInfo{ID: "rig", Class: "incubator"}, Target: "mem:rig"}})})
	if err != nil {
		t.Fatal(err)
	}
	b2, err := mcpbridge.New(mcpbridge.Config{Finder: dir, Simulated: func(string) bool { return true },
		Dial: func(ctx context.Context, target string) (*client.Device, error) {
			r.dials.Add(1)
			return client.Connect(r.drv, client.Options{}), nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b2.Close() })
	before := r.dials.Load()
	res, body := mustCall(t, httpClient(t, credentialed(t, b2), "v-token"), "mhp_read", map[string]any{"device": "rig"})
	if !res.IsError || !strings.Contains(jsonOf(body), "DialWith") || r.dials.Load() != before {
		t.Fatalf("a caller over a Dial without DialWith: isError %v %v (dials %d→%d)", res.IsError, body, before, r.dials.Load())
	}
}

// An MCP session belongs to the identity that opened it: a request of
// another identity on its session id is refused before any tool runs, so
// two identities never share device connections, nor a lease.
func TestAnotherIdentityCannotUseTheSession(t *testing.T) {
	r := newRig(t, "rig", true, "")
	b := rigBridge(t, r, mcpbridge.Config{})
	url := credentialed(t, b)
	agent := httpClient(t, url, "a-token")
	if res, body := mustCall(t, agent, "mhp_lab", map[string]any{"op": "acquire", "device": "rig", "ttl_s": 60}); res.IsError {
		t.Fatalf("agent acquire: %v", body)
	}
	call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"mhp_invoke","arguments":{"device":"rig","action":"home","wait_s":5}}}`
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(call))
	req.Header.Set("Authorization", "Bearer v-token")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", agent.ID())
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK || r.homed.Load() != 0 {
		t.Fatalf("the viewer's request on the agent's session: %s (homed %d)", resp.Status, r.homed.Load())
	}
}
