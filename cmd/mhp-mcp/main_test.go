package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// serveHTTP runs mhp-mcp with args (an --http server) until the test ends
// and returns its URL; it fails t when mhp-mcp exits before serving.
func serveHTTP(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	urls := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, nil, io.Discard, io.Discard, func(u string) { urls <- u }) }()
	select {
	case u := <-urls:
		t.Cleanup(func() { cancel(); <-done })
		return u
	case err := <-done:
		cancel()
		t.Fatalf("mhp-mcp %q exited: %v", args, err)
		return ""
	}
}

func TestBridgeOverStreamableHTTP(t *testing.T) {
	_, dev := simDevice(t)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("t0ken\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	url := serveHTTP(t, "--http", "127.0.0.1:0", "--token-file", tokenFile, "thermo="+dev.URL)
	ctx := context.Background()

	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{"t0ken"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mhp_find", Arguments: map[string]any{"query": "pcr", "state": "idle"}})
	if err != nil || res.IsError {
		t.Fatalf("find: %+v %v", res, err)
	}
	b, _ := json.Marshal(res.StructuredContent)
	var found struct {
		Results []struct{ ID, Class, State string }
	}
	_ = json.Unmarshal(b, &found)
	if len(found.Results) != 1 || found.Results[0].ID != "thermo" || found.Results[0].Class != "thermocycler" || found.Results[0].State != "idle" {
		t.Fatalf("find over HTTP: %s", b)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "mhp_write", Arguments: map[string]any{"device": "thermo", "name": "target_temperature", "value": 500}})
	if err != nil || !res.IsError {
		t.Fatalf("out-of-range write was not refused: %+v %v", res, err)
	}

	// GET /metrics next to /mcp, behind the token: tool calls by tool and outcome.
	metricsURL := strings.TrimSuffix(url, "/mcp") + "/metrics"
	if resp, err := http.Get(metricsURL); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("/metrics without the token: %v %v, want 401", resp, err)
	}
	resp, err := (&http.Client{Transport: bearer{"t0ken"}}).Get(metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	got := map[string]float64{}
	for _, m := range fams["mhp_mcp_tool_calls_total"].GetMetric() {
		l := map[string]string{}
		for _, lp := range m.GetLabel() {
			l[lp.GetName()] = lp.GetValue()
		}
		got[l["tool"]+"/"+l["outcome"]] = m.GetCounter().GetValue()
	}
	if got["mhp_find/ok"] != 1 || got["mhp_write/error"] != 1 {
		t.Errorf("mhp_mcp_tool_calls_total: %v, want mhp_find/ok 1 and mhp_write/error 1", got)
	}
}

func TestArgumentErrors(t *testing.T) {
	for _, args := range [][]string{{"noequals"}, {"a=x", "a=y"}, {"--directory", "http://d", "a=http://x"}} {
		if err := run(context.Background(), args, nil, io.Discard, io.Discard, nil); err == nil {
			t.Errorf("run(%q) accepted", args)
		}
	}
}

// A bad line on stdin is answered and the server goes on (it used to exit 1).
func TestStdioKeepsGoingAfterABadLine(t *testing.T) {
	_, dev := simDevice(t)

	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(context.Background(), []string{"thermo=" + dev.URL}, inR, outW, io.Discard, nil)
		outW.Close()
	}()
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func() string {
		select {
		case l := <-lines:
			return l
		case err := <-done:
			t.Fatalf("mhp-mcp exited: %v", err)
		case <-time.After(20 * time.Second):
			t.Fatal("no answer")
		}
		return ""
	}
	io.WriteString(inW, "hello?\n")
	if l := next(); !strings.Contains(l, `-32700`) {
		t.Fatalf("bad line answered %s", l)
	}
	io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`+"\n")
	if l := next(); !strings.Contains(l, `"result"`) || !strings.Contains(l, `"id":1`) {
		t.Fatalf("initialize after a bad line: %s", l)
	}
	inW.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("end of input: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("mhp-mcp did not end at end of input")
	}
}

func TestExposureAndPolicyFlags(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "policy.json")
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(good, []byte(`{"enabled": true, "allow_hardware": true}`), 0o600)
	os.WriteFile(bad, []byte(`{"enabeld": true}`), 0o600)
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, []byte("\n"), 0o600)
	short := filepath.Join(dir, "short")
	os.WriteFile(short, []byte("abc\n"), 0o600)
	same := filepath.Join(dir, "same")
	os.WriteFile(same, []byte("the-same-token-0123456789\n"), 0o600)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--http", "0.0.0.0:0", "a=http://127.0.0.1:1"}, "without a token"},
		{[]string{"--http", "10.0.0.1:0", "a=http://127.0.0.1:1"}, "--insecure"},
		{[]string{"--policy", filepath.Join(dir, "missing.json"), "a=http://127.0.0.1:1"}, "policy"},
		{[]string{"--policy", bad, "a=http://127.0.0.1:1"}, "enabeld"},
		{[]string{"--token-file", empty, "a=http://127.0.0.1:1"}, "empty"},
		{[]string{"--operator-token-file", filepath.Join(dir, "missing"), "a=http://127.0.0.1:1"}, "--operator-token-file"},
		{[]string{"--operator-token-file", short, "a=http://127.0.0.1:1"}, "at least 16"},
		{[]string{"--token-file", same, "--operator-token-file", same, "a=http://127.0.0.1:1"}, "differ"},
	} {
		err := run(context.Background(), tc.args, nil, io.Discard, io.Discard, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run(%q) = %v, want an error naming %q", tc.args, err, tc.want)
		}
	}
	// A good policy and a loopback address start (and stop with the context).
	ctx, cancel := context.WithCancel(context.Background())
	urls := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--policy", good, "--http", "0", "a=http://127.0.0.1:1"}, nil, io.Discard, io.Discard, func(u string) { urls <- u })
	}()
	select {
	case u := <-urls:
		if !strings.HasPrefix(u, "http://127.0.0.1:") {
			t.Errorf("a bare port bound %s, want loopback", u)
		}
	case err := <-done:
		t.Fatalf("exited: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestEnabledOverride(t *testing.T) {
	t.Setenv("MHP_MCP_ENABLED", "yes")
	if err := run(context.Background(), []string{"a=http://127.0.0.1:1"}, nil, io.Discard, io.Discard, nil); err == nil ||
		!strings.Contains(err.Error(), "MHP_MCP_ENABLED") {
		t.Fatalf("a bad override: %v", err)
	}
	// 0 disables: tools/list over stdio is empty.
	t.Setenv("MHP_MCP_ENABLED", "0")
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(context.Background(), []string{"a=http://127.0.0.1:1"}, inR, outW, io.Discard, nil)
		outW.Close()
	}()
	sc := bufio.NewScanner(outR)
	io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`+"\n")
	sc.Scan()
	io.WriteString(inW, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	io.WriteString(inW, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`+"\n")
	if !sc.Scan() || !strings.Contains(sc.Text(), `"tools":[]`) {
		t.Fatalf("tools/list with MHP_MCP_ENABLED=0: %s", sc.Text())
	}
	inW.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// --operator-token-file with a policy whose operator_tools is true lists
// mhp_permit; without either it is not listed.
func TestOperatorTokenListsPermit(t *testing.T) {
	dir := t.TempDir()
	ops := filepath.Join(dir, "ops.json")
	os.WriteFile(ops, []byte(`{"enabled": true, "operator_tools": true}`), 0o600)
	tok := filepath.Join(dir, "operator-token")
	os.WriteFile(tok, []byte("operator-token-0123456789\n"), 0o600)
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"--policy", ops, "--operator-token-file", tok, "a=http://127.0.0.1:1"}, true},
		{[]string{"--policy", ops, "a=http://127.0.0.1:1"}, false},
		{[]string{"--operator-token-file", tok, "a=http://127.0.0.1:1"}, false},
	} {
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		var stderr strings.Builder
		done := make(chan error, 1)
		go func() {
			done <- run(context.Background(), tc.args, inR, outW, &stderr, nil)
			outW.Close()
		}()
		sc := bufio.NewScanner(outR)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`+"\n")
		sc.Scan()
		io.WriteString(inW, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
		io.WriteString(inW, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`+"\n")
		if !sc.Scan() || !strings.Contains(sc.Text(), `"mhp_evidence"`) {
			t.Fatalf("%q: tools/list: %s", tc.args, sc.Text())
		}
		if got := strings.Contains(sc.Text(), `"mhp_permit"`); got != tc.want {
			t.Errorf("%q: mhp_permit listed %v, want %v", tc.args, got, tc.want)
		}
		inW.Close()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if tc.args[0] == "--operator-token-file" && !strings.Contains(stderr.String(), "operator_tools is off") {
			t.Errorf("%q: no warning that the operator token is unused: %s", tc.args, stderr.String())
		}
	}
}
