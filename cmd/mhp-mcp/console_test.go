package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/auth"
	"github.com/openmhp/mhp-go/client"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/host"
)

// The console tests' identities (credentials file: token hashes only).
const (
	agentTok  = "agent-token-0123456789"
	operTok   = "operator-token-0123456789"
	viewerTok = "viewer-token-0123456789"
)

// consoleMu serialises the tests that listen for the console's URL
// (consoleListening is the package's one hook).
var consoleMu sync.Mutex

// labHome is a home with the manual stirrer package under devices/; added
// to the fleet when add is true (else the agent adds it later).
func labHome(t *testing.T, add bool) string {
	t.Helper()
	home := t.TempDir()
	dir := filepath.Join(home, host.DevicesDir, "stirrer-01")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "stirrer-01"))); err != nil {
		t.Fatal(err)
	}
	if !add {
		return home
	}
	f, err := host.Open(host.Config{Home: home})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	e, err := f.Prepare(context.Background(), dir, host.AddOptions{})
	if err == nil {
		_, err = f.Commit(e)
	}
	if err != nil {
		t.Fatal(err)
	}
	return home
}

// labFlags are the credentials (agent, operator, viewer) and a policy that
// lets the agent actuate hardware (a manual device is hardware).
func labFlags(t *testing.T) []string {
	t.Helper()
	dir := t.TempDir()
	creds := "- {name: claude, role: agent, token_sha256: " + auth.HashToken(agentTok) + "}\n" +
		"- {name: alice, role: operator, token_sha256: " + auth.HashToken(operTok) + "}\n" +
		"- {name: wall, role: viewer, token_sha256: " + auth.HashToken(viewerTok) + "}\n"
	credFile, polFile := filepath.Join(dir, "credentials.yaml"), filepath.Join(dir, "policy.json")
	if err := os.WriteFile(credFile, []byte(creds), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(polFile, []byte(`{"enabled": true, "allow_hardware": true}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"--credentials", credFile, "--policy", polFile}
}

// serveConsole runs mhp-mcp with args (--http and --console) until the
// test ends and returns the MCP URL and the console's base URL.
func serveConsole(t *testing.T, args ...string) (mcpURL, consoleURL string) {
	t.Helper()
	consoleMu.Lock()
	consoles := make(chan string, 1)
	consoleListening = func(u string) { consoles <- u }
	defer func() { consoleListening = nil; consoleMu.Unlock() }()
	mcpURL = serveHTTP(t, args...)
	select {
	case consoleURL = <-consoles:
	case <-time.After(10 * time.Second):
		t.Fatal("the console did not listen")
	}
	return mcpURL, consoleURL
}

// agentSession is the agent's MCP session with its token; its person says
// yes to every confirmation the bridge asks for (adding hardware).
func agentSession(t *testing.T, url string) *mcp.ClientSession {
	t.Helper()
	yes := &mcp.ClientOptions{ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
	}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, yes).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{agentTok}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// toolCall calls a tool and returns its structured result and whether it failed.
func toolCall(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) (map[string]any, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &body)
	if body == nil && len(res.Content) > 0 {
		if tc, ok := res.Content[0].(*mcp.TextContent); ok {
			body = map[string]any{"text": tc.Text}
		}
	}
	return body, res.IsError
}

// consoleDevice connects to a hosted device's console as an MHP client with token.
func consoleDevice(t *testing.T, consoleURL, id, token string) *client.Device {
	t.Helper()
	d, err := client.Dial(context.Background(), consoleURL+"devices/"+id, client.Options{ClientName: "bench", Token: token})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// labSearch is the lab page's directory/search on the console.
func labSearch(t *testing.T, consoleURL, token string) []map[string]any {
	t.Helper()
	var out struct {
		Result struct {
			Results []map[string]any `json:"results"`
		} `json:"result"`
		Error *mhp.Error `json:"error"`
	}
	status, body := post(t, consoleURL+"rpc", token, `{"jsonrpc":"2.0","id":1,"method":"directory/search","params":{"query":"","limit":200,"live":true}}`)
	if err := json.Unmarshal(body, &out); err != nil || status != http.StatusOK || out.Error != nil {
		t.Fatalf("lab search: %d %s", status, body)
	}
	return out.Result.Results
}

func post(t *testing.T, url, token, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader([]byte(body)))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return do(t, req)
}

func get(t *testing.T, url, token string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return do(t, req)
}

func do(t *testing.T, req *http.Request) (int, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, b
}

// TestConsoleAnswersTheAgentsOperatorPrompt: the agent starts an action of
// a hosted manual device that waits for the person; the person answers on
// the console (operator credentials) and the agent's own job ends done
// with the note: one device, one job. A viewer is refused the answer
// (naming the roles) and sees no operator controls, yet may estop.
func TestConsoleAnswersTheAgentsOperatorPrompt(t *testing.T) {
	mcpURL, consoleURL := serveConsole(t, append(labFlags(t), "--http", "127.0.0.1:0", "--console", "127.0.0.1:0", "--home", labHome(t, true))...)
	agent := agentSession(t, mcpURL)
	stirred := agentStir(agent)
	op := consoleDevice(t, consoleURL, "stirrer-01", operTok)
	job := waitingJob(t, op)

	// A viewer: no operator controls on its page, the answer refused
	// before the device sees it, naming who and the role needed.
	viewer := consoleDevice(t, consoleURL, "stirrer-01", viewerTok)
	status, who := get(t, consoleURL+"devices/stirrer-01/whoami", viewerTok)
	if status != http.StatusOK || !strings.Contains(string(who), `"role":"viewer"`) || strings.Contains(string(who), `"operator"`) {
		t.Fatalf("viewer whoami: %d %s", status, who)
	}
	err := viewer.Call(context.Background(), mhp.MethodOperatorAnswer, map[string]any{"job": job.ID, "outcome": "done"}, nil)
	if me, ok := mhp.AsError(err); !ok || me.Code != mhp.CodeServerError || me.Data[mhp.DataReason] != mhp.ReasonOperatorRequired ||
		!strings.Contains(me.Message, "wall has role viewer") || !strings.Contains(me.Message, "needs role operator") {
		t.Fatalf("viewer's answer: %v", err)
	}
	if j, err := op.Job(context.Background(), job.ID); err != nil || j.State != mhp.JobWaitingOperator {
		t.Fatalf("the viewer's refused answer moved the job: %+v %v", j, err)
	}

	var res map[string]any
	if err := op.Call(context.Background(), mhp.MethodOperatorAnswer, map[string]any{"job": job.ID, "outcome": "done", "note": "stirred at the bench"}, &res); err != nil {
		t.Fatalf("operator's answer on the console: %v", err)
	}
	if got := waitAnswer(t, stirred); !strings.Contains(got, `"done"`) || !strings.Contains(got, "stirred at the bench") || !strings.Contains(got, job.ID) {
		t.Fatalf("the agent's job after the console's answer: %s", got)
	}

	// Estop from any identity allowed on the device: the viewer's stops it,
	// and the agent sees the stop on its own device.
	if r, err := viewer.EStop(context.Background(), "console drill"); err != nil || r.State != mhp.StateEStop {
		t.Fatalf("viewer's estop: %+v %v", r, err)
	}
	conformance.Eventually(t, "the agent sees the console's estop", func() bool {
		body, _ := toolCall(t, agent, "mhp_find", map[string]any{"query": "stirrer"})
		rs, _ := body["results"].([]any)
		return len(rs) == 1 && rs[0].(map[string]any)["state"] == "estop"
	})
}

// TestConsoleListsDevicesAddedAndRemoved: a device the agent adds
// mid-conversation is on the lab page (its target the console's page of
// it) and its console answers without a restart; once removed it is
// neither listed nor served.
func TestConsoleListsDevicesAddedAndRemoved(t *testing.T) {
	mcpURL, consoleURL := serveConsole(t, append(labFlags(t), "--http", "127.0.0.1:0", "--console", "127.0.0.1:0", "--home", labHome(t, false))...)
	if rs := labSearch(t, consoleURL, viewerTok); len(rs) != 0 {
		t.Fatalf("lab before the add: %v", rs)
	}
	agent := agentSession(t, mcpURL)
	if body, failed := toolCall(t, agent, "mhp_lab", map[string]any{"op": "add", "target": "stirrer-01"}); failed {
		t.Fatalf("add: %v", body)
	}
	rs := labSearch(t, consoleURL, viewerTok)
	if len(rs) != 1 || rs[0]["id"] != "stirrer-01" || rs[0]["target"] != consoleURL+"devices/stirrer-01/" || rs[0]["state"] != "idle" {
		t.Fatalf("lab after the add: %v", rs)
	}
	d := consoleDevice(t, consoleURL, "stirrer-01", viewerTok)
	if desc, err := d.Describe(context.Background(), mhp.DescribeRequest{}); err != nil || desc.ID != "stirrer-01" {
		t.Fatalf("console of the added device: %+v %v", desc, err)
	}
	if status, page := get(t, consoleURL+"devices/stirrer-01/", ""); status != http.StatusOK || !strings.Contains(string(page), "device.js") {
		t.Fatalf("device page: %d %.200s", status, page)
	}
	// estop-all from the lab page (any identity, a viewer too) stops every
	// hosted device that runs; a manual device's stop is the person's to
	// confirm, and its answer says so.
	status, stopped := post(t, consoleURL+"lab/estop-all", viewerTok, `{"reason":"lab drill"}`)
	var all struct{ Answers []map[string]any }
	if err := json.Unmarshal(stopped, &all); err != nil || status != http.StatusOK || len(all.Answers) != 1 ||
		all.Answers[0]["id"] != "stirrer-01" || all.Answers[0]["state"] != "estop" ||
		!strings.Contains(fmt.Sprint(all.Answers[0]["error"]), "Switch the stirrer off at the front panel") {
		t.Fatalf("estop-all: %d %s", status, stopped)
	}
	if body, failed := toolCall(t, agent, "mhp_lab", map[string]any{"op": "remove", "device": "stirrer-01"}); failed {
		t.Fatalf("remove: %v", body)
	}
	if rs := labSearch(t, consoleURL, viewerTok); len(rs) != 0 {
		t.Fatalf("lab after the remove: %v", rs)
	}
	status, body := post(t, consoleURL+"devices/stirrer-01/rpc", viewerTok, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	if status != http.StatusNotFound || !strings.Contains(string(body), "no device") {
		t.Fatalf("console of a removed device: %d %s", status, body)
	}
	// A stranger learns nothing of the fleet: 401 on the device's routes.
	if status, _ := post(t, consoleURL+"devices/stirrer-01/rpc", "", `{"jsonrpc":"2.0","id":1,"method":"ping"}`); status != http.StatusUnauthorized {
		t.Fatalf("a request without credentials: %d", status)
	}
}

// TestConsoleBindRule: --console beyond loopback needs TLS and credentials
// (auth.CheckExposure, as --http), and it serves only the fleet.
func TestConsoleBindRule(t *testing.T) {
	home := labHome(t, true)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("t0ken-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--console", "0.0.0.0:0"}, "mhp-mcp --console: 0.0.0.0:0 listens beyond this machine without TLS"},
		{[]string{"--console", "0.0.0.0:0", "--token-file", tokenFile}, "without TLS"},
		{[]string{"--http", "127.0.0.1:0", "--console", "0.0.0.0:0", "--token-file", tokenFile}, "mhp-mcp --console"},
		{[]string{"--console", "127.0.0.1:0", "thermo=http://127.0.0.1:1"}, "--console serves the fleet's hosted devices"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // stdio: at EOF at once
		err := run(ctx, append([]string{"--home", home}, c.args...), strings.NewReader(""), io.Discard, io.Discard, nil)
		cancel()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("mhp-mcp %v: %v, want an error with %q", c.args, err, c.want)
		}
	}
}

// TestConsoleFollowsTheFleet: the console serves the fleet's running
// instance of a device; once the device is rebuilt (Reload) the next
// request gets a console over the new instance (the old one closed), and
// a device removed by another process on the same home is dropped by the
// sweep and then refused: nothing is kept for a device that is gone.
func TestConsoleFollowsTheFleet(t *testing.T) {
	home := labHome(t, true)
	f, err := host.Open(host.Config{Home: home})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	c, err := newFleetConsole(consoleConfig{Fleet: f})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.close)
	ctx := context.Background()
	first, _, e := c.device(ctx, "stirrer-01")
	if e != nil {
		t.Fatal(e)
	}
	entry, err := f.Entry("stirrer-01")
	if err != nil {
		t.Fatal(err)
	}
	if dev, _ := f.Running(entry.Target); dev == nil {
		t.Fatal("the console's device is not the fleet's running one")
	}
	if again, _, _ := c.device(ctx, "stirrer-01"); again != first {
		t.Fatal("a second request built a second console of the same run")
	}
	if err := f.Reload(filepath.Join(home, host.DevicesDir, "stirrer-01")); err != nil {
		t.Fatal(err)
	}
	second, _, e := c.device(ctx, "stirrer-01")
	if e != nil || second == first || second.inst == first.inst {
		t.Fatalf("after the reload: %v (same console %v)", e, second == first)
	}
	if _, inst := f.Running(entry.Target); inst != second.inst {
		t.Fatal("the console after the reload is not over the fleet's new instance")
	}

	other, err := host.Open(host.Config{Home: home}) // another process on the same home
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Remove(ctx, "stirrer-01", true); err != nil {
		t.Fatal(err)
	}
	other.Close()
	c.sweepOnce()
	c.mu.Lock()
	n := len(c.devs)
	c.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d consoles kept after the device was removed", n)
	}
	if _, status, e := c.device(ctx, "stirrer-01"); e == nil || status != http.StatusNotFound || e.Code != mhp.CodeUnknownName {
		t.Fatalf("a removed device's console: %d %v", status, e)
	}
}

// agentStir has the agent start the stirrer's stir and wait for it (it
// waits for the person); the channel gets the tool's answer as JSON.
func agentStir(agent *mcp.ClientSession) <-chan string {
	out := make(chan string, 1)
	go func() {
		res, err := agent.CallTool(context.Background(), &mcp.CallToolParams{Name: "mhp_invoke", Arguments: map[string]any{
			"device": "stirrer-01", "action": "stir", "params": map[string]any{"duration_s": 30}, "wait_s": 25}})
		if err != nil {
			out <- "error: " + err.Error()
			return
		}
		b, _ := json.Marshal(res.StructuredContent)
		if res.IsError {
			out <- "tool error: " + string(b)
			return
		}
		out <- string(b)
	}()
	return out
}

// waitAnswer is the agent's answer, failing the test when it does not come.
func waitAnswer(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case s := <-ch:
		return s
	case <-time.After(30 * time.Second):
		t.Fatal("the agent's invoke did not end")
		return ""
	}
}

// waitingJob is the job of the console's device that waits for the operator.
func waitingJob(t *testing.T, d *client.Device) mhp.Job {
	t.Helper()
	var job mhp.Job
	conformance.Eventually(t, "the agent's stir waits for the operator on the console", func() bool {
		jobs, err := d.Jobs(context.Background(), mhp.JobsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			if j.State == mhp.JobWaitingOperator {
				job = j
				return true
			}
		}
		return false
	})
	return job
}

// TestConsoleOperatorToken: without a credentials file, the devices'
// operator token (--operator-token-file, in the Mhp-Operator header as the
// page's operator dialog sends it) signs the person in as the operator, as
// on mhp serve; without it the answer is refused as operator_required.
func TestConsoleOperatorToken(t *testing.T) {
	dir := t.TempDir()
	opFile, polFile := filepath.Join(dir, "operator-token"), filepath.Join(dir, "policy.json")
	if err := os.WriteFile(opFile, []byte(operTok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(polFile, []byte(`{"enabled": true, "allow_hardware": true}`), 0o600); err != nil {
		t.Fatal(err)
	}
	mcpURL, consoleURL := serveConsole(t, "--http", "127.0.0.1:0", "--console", "127.0.0.1:0", "--home", labHome(t, true),
		"--operator-token-file", opFile, "--policy", polFile)
	stirred := agentStir(agentSession(t, mcpURL))
	anyone := consoleDevice(t, consoleURL, "stirrer-01", "")
	job := waitingJob(t, anyone)
	err := anyone.Call(context.Background(), mhp.MethodOperatorAnswer, map[string]any{"job": job.ID, "outcome": "done"}, nil)
	if me, ok := mhp.AsError(err); !ok || me.Data[mhp.DataReason] != mhp.ReasonOperatorRequired || !strings.Contains(me.Message, "needs role operator") {
		t.Fatalf("an answer without the operator token: %v", err)
	}
	d, err := client.Dial(context.Background(), consoleURL+"devices/stirrer-01", client.Options{ClientName: "bench", OperatorToken: operTok})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Call(context.Background(), mhp.MethodOperatorAnswer, map[string]any{"job": job.ID, "outcome": "done", "note": "by token"}, nil); err != nil {
		t.Fatalf("the operator's answer with the token: %v", err)
	}
	if got := waitAnswer(t, stirred); !strings.Contains(got, `"done"`) || !strings.Contains(got, "by token") {
		t.Fatalf("the agent's job: %s", got)
	}
	// No credentials required: every route has the DNS rebinding guard.
	for _, path := range []string{"", "rpc", "devices/stirrer-01/", "devices/stirrer-01/rpc"} {
		req, _ := http.NewRequest(http.MethodPost, consoleURL+path, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Host = "attacker.example"
		if status, body := do(t, req); status != http.StatusForbidden || !strings.Contains(string(body), auth.ReasonHostForbidden) {
			t.Errorf("POST /%s for a foreign host: %d %s", path, status, body)
		}
	}
}

// TestConsoleBesideStdio: the usual bench setup, the harness talking MCP
// over stdio, the person using --console; the console ends with the bridge.
func TestConsoleBesideStdio(t *testing.T) {
	consoleMu.Lock()
	consoles := make(chan string, 1)
	consoleListening = func(u string) { consoles <- u }
	defer func() { consoleListening = nil; consoleMu.Unlock() }()
	stdin, feed := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(context.Background(), []string{"--console", "127.0.0.1:0", "--home", labHome(t, true)}, stdin, io.Discard, io.Discard, nil)
	}()
	var consoleURL string
	select {
	case consoleURL = <-consoles:
	case err := <-done:
		t.Fatalf("mhp-mcp exited: %v", err)
	}
	if rs := labSearch(t, consoleURL, ""); len(rs) != 1 || rs[0]["id"] != "stirrer-01" {
		t.Fatalf("lab beside stdio: %v", rs)
	}
	if status, page := get(t, consoleURL+"devices/stirrer-01/", ""); status != http.StatusOK || !strings.Contains(string(page), "device.js") {
		t.Fatalf("device page: %d", status)
	}
	feed.Close() // the harness goes away
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("mhp-mcp at stdin's end: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("mhp-mcp did not end with its stdin")
	}
	if _, err := http.Get(consoleURL); err == nil {
		t.Fatal("the console still answers after the bridge ended")
	}
}
