package mcpbridge_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/clock"
	"github.com/openmhp/mhp-go/directory"
	"github.com/openmhp/mhp-go/mcpbridge"
	"github.com/openmhp/mhp-go/transport"
)

// Item 2: bad lines on stdio are answered and the session goes on.
func TestStdioSurvivesBadLines(t *testing.T) {
	r := newRig(t, "rig", true, "")
	b := rigBridge(t, r, mcpbridge.Config{})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Server().Run(ctx, &mcpbridge.LineTransport{In: inR, Out: outW}) }()
	lines := bufio.NewScanner(outR)
	lines.Buffer(nil, 1<<20)
	next := func() map[string]any {
		t.Helper()
		got := make(chan map[string]any, 1)
		go func() {
			var m map[string]any
			if lines.Scan() {
				_ = json.Unmarshal(lines.Bytes(), &m)
			}
			got <- m
		}()
		select {
		case m := <-got:
			return m
		case <-time.After(20 * time.Second):
			t.Fatal("no answer on stdout")
			return nil
		}
	}
	send := func(s string) {
		t.Helper()
		if _, err := io.WriteString(inW, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	errOf := func(m map[string]any) (float64, any) {
		e, _ := m["error"].(map[string]any)
		c, _ := e["code"].(float64)
		return c, m["id"]
	}
	for _, tc := range []struct {
		line string
		code float64
		id   any
	}{
		{"this is not json", -32700, nil},
		{`{"jsonrpc":"2.0","id":7,"method":`, -32700, nil},
		{`[{"jsonrpc":"2.0","id":8,"method":"ping"}]`, -32600, nil},
		{`{"jsonrpc":"2.0","id":9}`, -32600, 9.0},
		{`"just a string"`, -32600, nil},
		{strings.Repeat("x", mcpbridge.MaxLine+10), -32600, nil},
	} {
		send(tc.line)
		if code, id := errOf(next()); code != tc.code || id != tc.id {
			t.Fatalf("line %.40q: code %v id %v, want %v %v", tc.line, code, id, tc.code, tc.id)
		}
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if m := next(); m["result"] == nil {
		t.Fatalf("initialize after bad lines: %v", m)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`not json again`)
	if code, _ := errOf(next()); code != -32700 {
		t.Fatal("second bad line not answered")
	}
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"mhp_read","arguments":{"device":"rig","names":["temp"]}}}`)
	m := next()
	res, _ := m["result"].(map[string]any)
	if m["id"] != 2.0 || res == nil || res["isError"] == true || !strings.Contains(jsonOf(res), "37") {
		t.Fatalf("tool call after bad lines: %v", m)
	}
	inW.Close() // end of input ends the session
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the server did not end at end of input")
	}
	cancel()
}

func jsonOf(v any) string { b, _ := json.Marshal(v); return string(b) }

// Item 7: a named device down at the first search is found once it is up.
func TestNamedFindsADeviceThatComesUp(t *testing.T) {
	cfgDrv, err := binding.New(binding.Config{Device: mhp.DeviceInfo{ID: "inc", Class: "incubator", Tags: []string{"simulated"}},
		Signals: []binding.Signal{{Spec: mhp.Signal{Name: "temp", Type: mhp.TypeNumber},
			Read: func(context.Context) (binding.Sample, error) { return binding.Sample{Value: 37.0}, nil }}}})
	if err != nil {
		t.Fatal(err)
	}
	defer cfgDrv.Close()
	srv := transport.NewServer(cfgDrv, transport.Options{})
	defer srv.Close()
	var up atomic.Bool
	var hits atomic.Int32
	h := srv.Handler()
	dev := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			hits.Add(1)
			http.Error(w, "down", http.StatusBadGateway)
			return
		}
		h.ServeHTTP(w, r)
	}))
	defer dev.Close()
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	named := &mcpbridge.Named{Targets: map[string]string{"inc": dev.URL}, Clock: clk}
	defer named.Close()
	ctx := context.Background()
	find := func() int {
		t.Helper()
		rs, err := named.Search(ctx, directory.Query{Query: "incubator", Class: "incubator"})
		if err != nil {
			t.Fatal(err)
		}
		return len(rs)
	}
	if n := find(); n != 0 {
		t.Fatalf("found %d while down", n)
	}
	tried := hits.Load()
	if find(); hits.Load() != tried {
		t.Fatal("the card was fetched again before the backoff passed")
	}
	// Still down after the first retry: the backoff doubles.
	clk.Advance(mcpbridge.CardRetryMin)
	find()
	if hits.Load() == tried {
		t.Fatal("the card was not retried after the backoff")
	}
	up.Store(true)
	clk.Advance(mcpbridge.CardRetryMin) // 1s of the now 2s backoff: not yet
	if n := find(); n != 0 {
		t.Fatalf("found %d before the doubled backoff passed", n)
	}
	clk.Advance(mcpbridge.CardRetryMin)
	if n := find(); n != 1 {
		t.Fatalf("the device that came up is not found (%d results)", n)
	}
}

// Item 9: the bearer scheme in any case; origins with a trailing slash;
// a non-loopback address needs a token unless insecure.
func TestHTTPAuthRules(t *testing.T) {
	r := newRig(t, "rig", true, "")
	b := rigBridge(t, r, mcpbridge.Config{})
	srv := httptest.NewServer(b.HTTPHandler(mcpbridge.HTTPOptions{Token: "s3cret", AllowedOrigins: []string{"https://lab.example/"}}))
	t.Cleanup(srv.Close)
	post := func(auth, origin string) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		auth, origin string
		refused      int
	}{
		{"bearer s3cret", "", 0},
		{"BEARER s3cret", "", 0},
		{"Bearer  s3cret", "", 0},
		{"Bearer s3cret", "https://lab.example", 0},
		{"Bearer s3cret", "https://lab.example/", 0},
		{"Bearer s3cret", "https://LAB.example", 0},
		{"Bearer s3cret", "https://evil.example", http.StatusForbidden},
		{"Bearer s3cret", "https://lab.example.evil", http.StatusForbidden},
		{"Basic s3cret", "", http.StatusUnauthorized},
		{"s3cret", "", http.StatusUnauthorized},
		{"bearer wrong", "", http.StatusUnauthorized},
		{"", "", http.StatusUnauthorized},
	} {
		code := post(tc.auth, tc.origin)
		if tc.refused != 0 && code != tc.refused || tc.refused == 0 && (code == http.StatusUnauthorized || code == http.StatusForbidden) {
			t.Errorf("auth %q origin %q: %d", tc.auth, tc.origin, code)
		}
	}
	// The exposure rule (loopback, TLS, credentials, --insecure) is auth.CheckExposure's, tested there.
}

// Item 10: the host policy document and its safe defaults.
func TestPolicy(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		want mcpbridge.Policy
		bad  bool
	}{
		{`{}`, mcpbridge.Policy{}, false},
		{`{"enabled": true}`, mcpbridge.Policy{Enabled: true}, false},
		{`{"enabled": "true", "allow_hardware": 1, "operator_tools": null}`, mcpbridge.Policy{}, false},
		{`{"enabled": true, "allow_hardware": true, "operator_tools": true, "allow_external_sessions": true}`,
			mcpbridge.Policy{Enabled: true, AllowHardware: true, OperatorTools: true, AllowExternalSessions: true}, false},
		{`{"enabeld": true}`, mcpbridge.Policy{}, true},
		{`[true]`, mcpbridge.Policy{}, true},
	} {
		p, err := mcpbridge.ParsePolicy([]byte(tc.doc))
		if (err != nil) != tc.bad || p != tc.want {
			t.Errorf("ParsePolicy(%s) = %+v, %v", tc.doc, p, err)
		}
	}
	if d := mcpbridge.DefaultPolicy(); d != (mcpbridge.Policy{Enabled: true}) {
		t.Fatalf("default policy %+v", d)
	}

	t.Run("disabled", func(t *testing.T) {
		r := newRig(t, "rig", true, "")
		cs := session(t, rigBridge(t, r, mcpbridge.Config{Policy: &mcpbridge.Policy{}}), nil)
		tools, err := cs.ListTools(context.Background(), nil)
		if err != nil || len(tools.Tools) != 0 {
			t.Fatalf("disabled bridge lists %d tools (%v)", len(tools.Tools), err)
		}
		for _, name := range []string{"mhp_read", "mhp_estop"} {
			res, body := mustCall(t, cs, name, map[string]any{"device": "rig", "reason": "x"})
			if !res.IsError || errCode(body) != float64(mhp.CodeForbidden) || !strings.Contains(text(res), "enabled=false") {
				t.Fatalf("%s on a disabled bridge: %s", name, text(res))
			}
		}
		if r.dials.Load() != 0 {
			t.Fatal("a disabled bridge contacted the device")
		}
	})

	t.Run("hardware", func(t *testing.T) {
		r := newRig(t, "rig", false, "") // not tagged simulated
		cs := session(t, rigBridge(t, r, mcpbridge.Config{}), nil)
		for _, c := range []struct {
			tool string
			args map[string]any
		}{
			{"mhp_read", map[string]any{"device": "rig"}},
			{"mhp_invoke", map[string]any{"device": "rig", "action": "home"}},
			{"mhp_lab", map[string]any{"op": "acquire", "device": "rig"}},
			{"mhp_run", map[string]any{"script": "lab['rig'].invoke('home')"}},
		} {
			res, _ := mustCall(t, cs, c.tool, c.args)
			if !res.IsError || !strings.Contains(text(res), "allow_hardware=false") {
				t.Errorf("%s on hardware: %s", c.tool, text(res))
			}
		}
		if r.homed.Load() != 0 {
			t.Fatal("hardware actuated against the policy")
		}
		if _, body := mustCall(t, cs, "mhp_lab", map[string]any{"op": "list"}); jsonOf(body["policy"]) != `{"allow_external_sessions":false,"allow_hardware":false,"enabled":true,"operator_tools":false}` {
			t.Fatalf("mhp_lab op=list does not show the policy: %v", body)
		}
		if res, _ := mustCall(t, cs, "mhp_describe", map[string]any{"device": "rig", "detail": "card"}); res.IsError {
			t.Fatalf("describe (discovery) refused: %s", text(res))
		}
		if res, _ := mustCall(t, cs, "mhp_estop", map[string]any{"device": "rig", "reason": "drill"}); res.IsError || r.drv.State() != mhp.StateEStop {
			t.Fatalf("estop refused on hardware: %s", text(res))
		}
		cs2 := session(t, rigBridge(t, newRig(t, "rig", false, ""), mcpbridge.Config{Policy: &mcpbridge.Policy{Enabled: true, AllowHardware: true}}), nil)
		if res, _ := mustCall(t, cs2, "mhp_read", map[string]any{"device": "rig"}); res.IsError {
			t.Fatalf("allow_hardware=true still refuses: %s", text(res))
		}
	})

	t.Run("operator tools", func(t *testing.T) {
		for _, on := range []bool{false, true} {
			r := newRig(t, "rig", true, "")
			cs := session(t, rigBridge(t, r, mcpbridge.Config{Policy: &mcpbridge.Policy{Enabled: true, OperatorTools: on}}), nil)
			mustCall(t, cs, "mhp_estop", map[string]any{"device": "rig", "reason": "drill"})
			res, _ := mustCall(t, cs, "mhp_run", map[string]any{"script": "lab['rig'].reset()"})
			if res.IsError == on || !on && !strings.Contains(text(res), "operator_tools=false") {
				t.Fatalf("operator_tools=%v: reset from a script isError %v: %s", on, res.IsError, text(res))
			}
			if !on && r.drv.State() != mhp.StateEStop {
				t.Fatal("a script reset the estop against the policy")
			}
			if on {
				mustCall(t, cs, "mhp_estop", map[string]any{"device": "rig", "reason": "drill"})
			}
			res, _ = mustCall(t, cs, "mhp_lab", map[string]any{"op": "reset", "device": "rig"})
			if res.IsError == on {
				t.Fatalf("operator_tools=%v: reset isError %v: %s", on, res.IsError, text(res))
			}
			tools, _ := cs.ListTools(context.Background(), nil)
			listed := false
			for _, tl := range tools.Tools {
				if tl.Name == "mhp_lab" {
					listed = strings.Contains(jsonOf(tl.InputSchema), `"reset"`)
				}
			}
			if listed != on {
				t.Fatalf("operator_tools=%v: reset listed %v", on, listed)
			}
		}
	})
}

// Item 11: tools/list stays small with every tool, argument and example:
// 3,902 bytes with the default policy (3,941 before the second trim, 4,049
// before issue 30's first), 4,932 with the operator tools (4,972; 5,076).
func TestToolsListSize(t *testing.T) {
	for _, tc := range []struct {
		p     mcpbridge.Policy
		token string
		limit int
		tools int
	}{
		{mcpbridge.Policy{Enabled: true}, "", 3910, len(mcpbridge.ToolNames())},
		{mcpbridge.Policy{Enabled: true}, "op-tok", 3910, len(mcpbridge.ToolNames())},                                          // a token alone lists nothing more
		{mcpbridge.Policy{Enabled: true, OperatorTools: true, AllowHardware: true}, "", 3910 + 34, len(mcpbridge.ToolNames())}, // reset
		// An operator's host also lists mhp_permit and mhp_operator: a person
		// reads them, not a model on every turn, so they get a little more room.
		{mcpbridge.Policy{Enabled: true, OperatorTools: true}, "op-tok", 4940, len(mcpbridge.ToolNames()) + len(mcpbridge.OperatorToolNames())},
	} {
		p := tc.p
		cs := session(t, rigBridge(t, newRig(t, "rig", true, ""), mcpbridge.Config{Policy: &p, OperatorToken: tc.token}), nil)
		res, err := cs.ListTools(context.Background(), &mcp.ListToolsParams{})
		if err != nil {
			t.Fatal(err)
		}
		size := len(jsonOf(res))
		t.Logf("tools/list result: %d bytes (%+v)", size, p)
		if size > tc.limit {
			t.Errorf("tools/list is %d bytes, over %d", size, tc.limit)
		}
		examples := map[string]bool{"mhp_find": true, "mhp_describe": true, "mhp_invoke": true, "mhp_run": true}
		for _, tl := range res.Tools {
			if examples[tl.Name] && tl.Meta["input_examples"] == nil || tl.Description == "" {
				t.Errorf("%s lost its examples or description", tl.Name)
			}
		}
		if len(res.Tools) != tc.tools {
			t.Errorf("%d tools listed, want %d", len(res.Tools), tc.tools)
		}
	}
}
