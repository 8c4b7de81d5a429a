package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/auth/authtest"
)

// methodLog is the MHP methods a fake device was sent, in order.
type methodLog struct {
	mu      sync.Mutex
	methods []string
	labels  []string // clientInfo.name of each initialize
}

func (l *methodLog) saw(method string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range l.methods {
		if m == method {
			return true
		}
	}
	return false
}

// recordedDevice is a simulated thermocycler served over MHP HTTP
// (simDevice) behind a recorder of every JSON-RPC method it is sent.
func recordedDevice(t *testing.T) (*methodLog, string) {
	t.Helper()
	_, dev := simDevice(t)
	backend, err := url.Parse(dev.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(backend)
	proxy.FlushInterval = -1 // the event stream flows as it comes
	log := &methodLog{}
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var msg struct {
				Method string `json:"method"`
				Params struct {
					ClientInfo struct{ Name string } `json:"clientInfo"`
				} `json:"params"`
			}
			if json.Unmarshal(body, &msg) == nil && msg.Method != "" {
				log.mu.Lock()
				log.methods = append(log.methods, msg.Method)
				if msg.Method == mhp.MethodInitialize {
					log.labels = append(log.labels, msg.Params.ClientInfo.Name)
				}
				log.mu.Unlock()
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	return log, front.URL
}

// toolCaller connects the Go SDK client with a bearer token and returns a
// call answering whether the result was an error and its structured body.
func toolCaller(t *testing.T, url, token string) func(tool string, args map[string]any) (bool, map[string]any) {
	t.Helper()
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "roles-test", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{token}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return func(tool string, args map[string]any) (bool, map[string]any) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		var body map[string]any
		b, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(b, &body)
		return res.IsError, body
	}
}

// mhpErrorData is the data of a tool result's MHP error, and its code.
func mhpErrorData(body map[string]any) (float64, map[string]any) {
	e, _ := body["mhpError"].(map[string]any)
	code, _ := e["code"].(float64)
	data, _ := e["data"].(map[string]any)
	return code, data
}

// roleCredentials writes a credentials file of a viewer, two agents and an
// operator (tokens "<name>-token").
func roleCredentials(t *testing.T) string {
	return authtest.Credentials(t, t.TempDir(), "vera=viewer:vera-token", "adam=agent:adam-token",
		"bea=agent:bea-token", "otto=operator:otto-token")
}

// Over Streamable HTTP with named identities, each caller's device calls are
// checked against its role with the MHP servers' table before they leave the
// bridge: a viewer reads and stops but never writes nor invokes (and the
// device sees nothing of it), an agent writes, only an operator uses the
// operator tools.
func TestCallerRolesOverStreamableHTTP(t *testing.T) {
	log, devURL := recordedDevice(t)
	dir := t.TempDir()
	policy := filepath.Join(dir, "policy.json")
	os.WriteFile(policy, []byte(`{"enabled": true, "allow_hardware": true, "operator_tools": true}`), 0o600)
	opTok := filepath.Join(dir, "operator-token")
	os.WriteFile(opTok, []byte("operator-token-0123456789\n"), 0o600)
	url := serveHTTP(t, "--http", "127.0.0.1:0", "--credentials", roleCredentials(t), "--policy", policy,
		"--operator-token-file", opTok, "thermo="+devURL)
	viewer, agent, operator := toolCaller(t, url, "vera-token"), toolCaller(t, url, "adam-token"), toolCaller(t, url, "otto-token")

	type refusal struct{ method, need string }
	for _, tc := range []struct {
		who    string
		call   func(string, map[string]any) (bool, map[string]any)
		role   string
		tool   string
		args   map[string]any
		refuse *refusal // nil: allowed
	}{
		{"viewer", viewer, "viewer", "mhp_read", map[string]any{"device": "thermo"}, nil},
		{"viewer", viewer, "viewer", "mhp_describe", map[string]any{"device": "thermo"}, nil},
		{"viewer", viewer, "viewer", "mhp_write", map[string]any{"device": "thermo", "name": "target_temperature", "value": 60},
			&refusal{mhp.MethodSettingsWrite, "agent"}},
		{"viewer", viewer, "viewer", "mhp_invoke", map[string]any{"device": "thermo", "action": "open_lid"},
			&refusal{mhp.MethodActionsInvoke, "agent"}},
		{"viewer", viewer, "viewer", "mhp_lab", map[string]any{"op": "acquire", "device": "thermo", "ttl_s": 30},
			&refusal{mhp.MethodSessionAcquire, "agent"}},
		{"agent", agent, "agent", "mhp_permit", map[string]any{"device": "thermo", "for": "write", "name": "target_temperature", "value": 60},
			&refusal{"mhp_permit", "operator"}},
		{"agent", agent, "agent", "mhp_write", map[string]any{"device": "thermo", "name": "target_temperature", "value": 60}, nil},
	} {
		isErr, body := tc.call(tc.tool, tc.args)
		if tc.refuse == nil {
			if isErr {
				t.Fatalf("%s %s: refused: %v", tc.who, tc.tool, body)
			}
			continue
		}
		code, data := mhpErrorData(body)
		if !isErr || code != float64(mhp.CodeServerError) || data["reason"] != "role_forbidden" && data["reason"] != mhp.ReasonOperatorRequired ||
			data["role"] != tc.role || data["need"] != tc.refuse.need || data["method"] != tc.refuse.method || data["tool"] != tc.tool {
			t.Fatalf("%s %s: want a role refusal (%s needs %s): isError %v %v", tc.who, tc.tool, tc.refuse.method, tc.refuse.need, isErr, body)
		}
		if strings.Contains(tc.refuse.method, "/") && log.saw(tc.refuse.method) {
			t.Fatalf("%s %s: the device was sent %s although the bridge refused it", tc.who, tc.tool, tc.refuse.method)
		}
	}
	if !log.saw(mhp.MethodSettingsWrite) {
		t.Fatal("the agent's write never reached the device")
	}
	// The operator passes the role check of the operator tools (what the
	// device then answers is the device's).
	if isErr, body := operator("mhp_permit", map[string]any{"device": "thermo", "for": "write", "name": "target_temperature", "value": 60}); isErr {
		if _, data := mhpErrorData(body); data["reason"] == "role_forbidden" || data["need"] != nil {
			t.Fatalf("operator mhp_permit refused for its role: %v", body)
		}
	}
	// Estop is anyone's, a viewer's too.
	if isErr, body := viewer("mhp_estop", map[string]any{"device": "thermo", "reason": "viewer saw smoke"}); isErr || !log.saw(mhp.MethodSafetyEStop) {
		t.Fatalf("viewer estop: isError %v %v (device saw estop: %v)", isErr, body, log.saw(mhp.MethodSafetyEStop))
	}
	// The remote sessions the bridge opened name their callers.
	log.mu.Lock()
	labels := strings.Join(log.labels, " ")
	log.mu.Unlock()
	for _, name := range []string{"vera", "adam"} {
		if !strings.Contains(" "+labels+" ", " "+name+" ") {
			t.Errorf("no device session opened for %s: clientInfo names %q", name, labels)
		}
	}
}

// Serving the fleet in process, a caller's device calls carry its identity:
// the evidence receipt of an agent's write names it (name/mhp-mcp#hex), a
// viewer's write is refused before the hosted device sees it, and two
// identities hold distinct sessions: one's lease is not the other's, and
// the lease names its holder.
func TestFleetDevicesSeeTheCaller(t *testing.T) {
	home, e := twinFleet(t)
	dir := t.TempDir()
	policy := filepath.Join(dir, "policy.json")
	os.WriteFile(policy, []byte(`{"enabled": true, "operator_tools": true}`), 0o600)
	opTok := filepath.Join(dir, "operator-token")
	os.WriteFile(opTok, []byte("operator-token-0123456789\n"), 0o600)
	url := serveHTTP(t, "--http", "127.0.0.1:0", "--home", home, "--evidence", t.TempDir(), "--credentials", roleCredentials(t),
		"--policy", policy, "--operator-token-file", opTok)
	viewer, adam, bea := toolCaller(t, url, "vera-token"), toolCaller(t, url, "adam-token"), toolCaller(t, url, "bea-token")
	write := map[string]any{"device": e.ID, "name": "target_temperature", "value": 60}

	if isErr, body := viewer("mhp_write", write); !isErr {
		t.Fatalf("viewer write of a hosted device was not refused: %v", body)
	} else if _, data := mhpErrorData(body); data["reason"] != "role_forbidden" || data["role"] != "viewer" || data["need"] != "agent" {
		t.Fatalf("viewer write: want a role refusal: %v", body)
	}
	if isErr, body := adam("mhp_write", write); isErr {
		t.Fatalf("agent write: %v", body)
	}
	isErr, body := viewer("mhp_evidence", map[string]any{"device": e.ID})
	list, _ := body["entries"].([]any)
	if isErr || len(list) != 1 {
		t.Fatalf("receipts (only the agent's write, none of the refused one): isError %v %v", isErr, body)
	}
	if r, _ := list[0].(map[string]any); !strings.HasPrefix(r["session"].(string), "adam/mhp-mcp#") {
		t.Fatalf("the receipt of adam's write names session %v, want adam/mhp-mcp#…", r["session"])
	}

	isErr, lease := adam("mhp_lab", map[string]any{"op": "acquire", "device": e.ID, "ttl_s": 60})
	if holder, _ := lease["holder"].(string); isErr || !strings.HasPrefix(holder, "adam/mhp-mcp#") {
		t.Fatalf("adam's lease: isError %v %v, want a holder naming adam", isErr, lease)
	}
	isErr, body = bea("mhp_write", write)
	if code, data := mhpErrorData(body); !isErr || code != float64(mhp.CodeNotLeased) || data["holder"] != lease["holder"] {
		t.Fatalf("bea wrote under adam's lease: isError %v %v", isErr, body)
	}
	if isErr, body := adam("mhp_write", write); isErr {
		t.Fatalf("adam's write under his own lease: %v", body)
	}

	// The operator's permit is issued over the operator's own connection,
	// named for the operator: its receipt says who issued it.
	otto := toolCaller(t, url, "otto-token")
	if isErr, body := otto("mhp_permit", map[string]any{"device": e.ID, "for": "write", "name": "target_temperature", "value": 60}); isErr {
		t.Fatalf("operator permit: %v", body)
	}
	_, body = viewer("mhp_evidence", map[string]any{"device": e.ID})
	list, _ = body["entries"].([]any)
	var issued any
	for _, r := range list {
		if r, _ := r.(map[string]any); r["method"] == mhp.MethodPermitsIssue {
			issued = r["session"]
		}
	}
	if s, _ := issued.(string); !strings.HasPrefix(s, "otto/mhp-mcp-operator#") {
		t.Fatalf("the permit's receipt names session %v, want otto/mhp-mcp-operator#…: %v", issued, list)
	}
}
