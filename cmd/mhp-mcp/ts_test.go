package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/examples/sim"
	"github.com/openmhp/mhp-go/transport"
)

// TestTypeScriptSDKClient drives mhp-mcp over Streamable HTTP with the
// official TypeScript MCP SDK client (the peer the issue was found with).
func TestTypeScriptSDKClient(t *testing.T) {
	sdk := conformance.Peer(t, "TS_SDK", "a directory holding node_modules/@modelcontextprotocol/sdk (mkdir ts && cd ts && npm install @modelcontextprotocol/sdk)")
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("real-peer test: node is not installed")
	}
	drv, dev := simDevice(t)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("ts-t0ken"), 0o600); err != nil {
		t.Fatal(err)
	}
	url := serveHTTP(t, "--http", "0", "--token-file", tokenFile, "thermo="+dev.URL)
	ctx := context.Background()

	script := peerScript(t, sdk, dir, "tsclient.mjs")
	nctx, ncancel := context.WithTimeout(ctx, 120*time.Second)
	defer ncancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(nctx, node, script, url, "ts-t0ken")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node: %v\n%s", err, stderr.String())
	}
	type result struct {
		IsError    bool           `json:"isError"`
		Structured map[string]any `json:"structured"`
		Bytes      int            `json:"bytes"`
		Thrown     string         `json:"thrown"`
	}
	var out struct {
		Tools                                        []string
		ToolsBytes                                   int
		Find, AcquireA, WriteA, WriteB, NamesString  result
		WaitNegative, LimitMany, DescribeFull, Estop result
		Updates, Script                              result
		CloseLid, CloseLidB                          result
		Asked                                        []string
		Cancel                                       struct {
			Aborted  bool
			Progress []float64
		}
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("node output: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	t.Logf("TypeScript client: %d tools, tools/list %d bytes\n%s", len(out.Tools), out.ToolsBytes, stdout.String())
	code := func(r result) float64 {
		e, _ := r.Structured["mhpError"].(map[string]any)
		c, _ := e["code"].(float64)
		return c
	}
	if len(out.Tools) != 9 || out.ToolsBytes > 4096 {
		t.Errorf("tools: %v (%d bytes)", out.Tools, out.ToolsBytes)
	}
	for name, r := range map[string]result{"find": out.Find, "acquire A": out.AcquireA, "write A": out.WriteA, "estop": out.Estop} {
		if r.Thrown != "" || r.IsError {
			t.Errorf("%s: %+v", name, r)
		}
	}
	if !out.WriteB.IsError || code(out.WriteB) != float64(mhp.CodeNotLeased) {
		t.Errorf("B wrote under A's lease: %+v", out.WriteB)
	}
	for name, r := range map[string]result{"names as a string": out.NamesString, "wait_s -5": out.WaitNegative, "limit many": out.LimitMany} {
		if !r.IsError || code(r) != float64(mhp.CodeInvalidParams) {
			t.Errorf("%s accepted: %+v", name, r)
		}
	}
	if !out.Script.IsError || !strings.Contains(jsonOf(out.Script.Structured), "on purpose") {
		t.Errorf("fail() in a script: %+v", out.Script)
	}
	for name, r := range map[string]result{"describe full": out.DescribeFull, "updates": out.Updates} {
		if r.Thrown != "" || r.Bytes > 2*4096+1024 { // text + structured, each within the budget
			t.Errorf("%s: %d bytes %s", name, r.Bytes, r.Thrown)
		}
	}
	// Confirmation through the host's person (elicitation), and only there.
	if out.CloseLid.IsError || len(out.Asked) != 1 || !strings.Contains(out.Asked[0], "close_lid") {
		t.Errorf("confirmed close_lid: %+v, asked %q", out.CloseLid, out.Asked)
	}
	if !out.CloseLidB.IsError || code(out.CloseLidB) != float64(mhp.CodeApprovalRequired) {
		t.Errorf("close_lid from a client that cannot ask a person: %+v", out.CloseLidB)
	}
	if !out.Cancel.Aborted || len(out.Cancel.Progress) == 0 {
		t.Errorf("progress then cancel: %+v", out.Cancel)
	}
	jobs, err := drv.Jobs(context.Background(), mhp.JobsRequest{})
	if err != nil || len(jobs) == 0 || jobs[0].Action != "run_protocol" || jobs[0].State != mhp.JobCancelled {
		t.Errorf("the run the TypeScript client cancelled: %+v %v", jobs, err)
	}
	if drv.State() != mhp.StateEStop {
		t.Errorf("device state %s after the TypeScript client's estop", drv.State())
	}
}

func jsonOf(v any) string { b, _ := json.Marshal(v); return string(b) }

// TestTypeScriptSDKClientStdio spawns the mhp-mcp binary from the official
// TypeScript MCP SDK client over stdio (LineTransport with a real peer).
func TestTypeScriptSDKClientStdio(t *testing.T) {
	sdk := conformance.Peer(t, "TS_SDK", "a directory holding node_modules/@modelcontextprotocol/sdk (mkdir ts && cd ts && npm install @modelcontextprotocol/sdk)")
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("real-peer test: node is not installed")
	}
	_, dev := simDevice(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "mhp-mcp")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	script := peerScript(t, sdk, dir, "tsstdio.mjs")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, node, script, bin, dev.URL)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node: %v\n%s", err, stderr.String())
	}
	var out struct {
		Tools     int
		Read, Bad struct {
			IsError    bool
			Structured map[string]any
		}
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("node output: %v\n%s", err, stdout.String())
	}
	values, _ := out.Read.Structured["values"].(map[string]any)
	if out.Tools != 9 || out.Read.IsError || values == nil || !out.Bad.IsError {
		t.Fatalf("over stdio: %s", stdout.String())
	}
}

// simDevice serves a simulated thermocycler over HTTP for the test.
func simDevice(t *testing.T) (*binding.Driver, *httptest.Server) {
	t.Helper()
	cfg, err := sim.Config("sim:thermocycler", sim.Options{Speed: 100})
	if err != nil {
		t.Fatal(err)
	}
	drv, err := binding.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drv.Close() })
	srv := transport.NewServer(drv, transport.Options{})
	t.Cleanup(func() { srv.Close() })
	dev := httptest.NewServer(srv.Handler())
	t.Cleanup(dev.Close)
	return drv, dev
}

// peerScript copies testdata/name into dir next to a node_modules link to
// the SDK (node resolves packages from the script's directory).
func peerScript(t *testing.T, sdk, dir, name string) string {
	t.Helper()
	if _, err := os.Stat(filepath.Join(sdk, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		t.Fatalf("MHP_PEER_TS_SDK=%s has no node_modules/@modelcontextprotocol/sdk: %v", sdk, err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "node_modules")); err != nil {
		if err := os.Symlink(filepath.Join(sdk, "node_modules"), filepath.Join(dir, "node_modules")); err != nil {
			t.Fatal(err)
		}
	}
	src, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, name)
	if err := os.WriteFile(script, src, 0o600); err != nil {
		t.Fatal(err)
	}
	return script
}
