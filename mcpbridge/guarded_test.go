package mcpbridge_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/client"
	"github.com/openmhp/mhp-go/directory"
	"github.com/openmhp/mhp-go/evidence"
	"github.com/openmhp/mhp-go/guard"
	"github.com/openmhp/mhp-go/mcpbridge"
	"github.com/openmhp/mhp-go/methods"
	"github.com/openmhp/mhp-go/transport"
)

const (
	agentToken    = "agent-token-0123456789"
	operatorToken = "operator-token-0123456789"
)

// guarded is a thermocycler served as mhp serve serves it: binding, guard
// (evidence, permits, command ids), saved methods, over HTTP.
type guarded struct {
	url     string
	writes  atomic.Int32 // setpoint writes that reached the backend
	opened  atomic.Int32 // open_lid runs (confirm-gated)
	heated  atomic.Int32 // lid_heat writes (confirm-gated)
	mu      sync.Mutex
	runs    []map[string]any // run_protocol params as the backend saw them
	dropAt  atomic.Int32     // lose the answer of the settings/write with this number (1 is the first)
	nwrites atomic.Int32     // settings/write requests seen
	bodies  chan []byte      // settings/write request bodies as sent
}

func newGuarded(t *testing.T) *guarded {
	t.Helper()
	g := &guarded{bodies: make(chan []byte, 16)}
	var params, lid mhp.Params
	if err := lid.UnmarshalJSON([]byte(`{"speed":{"type":"number"}}`)); err != nil {
		t.Fatal(err)
	}
	if err := params.UnmarshalJSON([]byte(`{"steps":{"type":"array","items":{"type":"object","properties":{"temp":{"type":"number"},"hold_s":{"type":"number"}}}},"cycles":{"type":"integer","limits":{"min":1,"max":99}}}`)); err != nil {
		t.Fatal(err)
	}
	drv, err := binding.New(binding.Config{
		Device: mhp.DeviceInfo{ID: "tc-01", Class: "thermocycler", Tags: []string{"simulated"}},
		Settings: []binding.Setting{{Spec: mhp.Setting{Name: "setpoint", Type: mhp.TypeNumber},
			Write: func(context.Context, any) (binding.WriteStatus, error) { g.writes.Add(1); return binding.Applied, nil }},
			{Spec: mhp.Setting{Name: "lid_heat", Type: mhp.TypeNumber, Approval: mhp.ApprovalConfirm},
				Write: func(context.Context, any) (binding.WriteStatus, error) { g.heated.Add(1); return binding.Applied, nil }}},
		Actions: []binding.Action{
			{Spec: mhp.Action{Name: "run_protocol", Duration: mhp.DurationShort, Params: params},
				Run: func(_ context.Context, j *binding.Job) (any, error) {
					g.mu.Lock()
					g.runs = append(g.runs, j.Params())
					g.mu.Unlock()
					return "ran", nil
				}},
			{Spec: mhp.Action{Name: "open_lid", Duration: mhp.DurationShort, Approval: mhp.ApprovalConfirm,
				Params: lid},
				Run: func(context.Context, *binding.Job) (any, error) { g.opened.Add(1); return "open", nil }},
		},
		EStop: func(context.Context) error { return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drv.Close() })
	lg, err := evidence.Open(evidence.Config{Dir: t.TempDir(), Device: "tc-01"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lg.Close() })
	gd, err := guard.New(drv, guard.Config{Evidence: lg, Permits: guard.NewPermits("tc-01", nil)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gd.Close)
	pcr, err := os.ReadFile("../methods/testdata/pkg/methods/pcr-30.yaml")
	if err != nil {
		t.Fatal(err)
	}
	store, err := methods.OpenFS(fstest.MapFS{"methods/pcr-30.yaml": {Data: pcr}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := transport.NewServer(methods.Wrap(gd, store), transport.Options{Token: agentToken, OperatorToken: operatorToken})
	t.Cleanup(func() { srv.Close() })
	inner := srv.Handler()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if !bytes.Contains(body, []byte(`"settings/write"`)) {
			inner.ServeHTTP(w, r)
			return
		}
		select {
		case g.bodies <- body:
		default:
		}
		if n := g.nwrites.Add(1); n != g.dropAt.Load() {
			inner.ServeHTTP(w, r)
			return
		}
		// The request reaches the device; its answer is lost on the way back.
		inner.ServeHTTP(httptest.NewRecorder(), r)
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
	}))
	t.Cleanup(hs.Close)
	g.url = hs.URL
	return g
}

// guardedBridge is a bridge over the guarded device "tc-01".
func guardedBridge(t *testing.T, g *guarded, policy mcpbridge.Policy, opToken string) *mcpbridge.Bridge {
	t.Helper()
	dir, err := directory.New(directory.Config{Index: directory.NewIndex([]directory.Card{{
		DeviceInfo: mhp.DeviceInfo{ID: "tc-01", Class: "thermocycler"}, Target: g.url}}),
		Pinger: directory.PingerFunc(func(context.Context, string) (mhp.DeviceState, error) { return mhp.StateIdle, nil })})
	if err != nil {
		t.Fatal(err)
	}
	b, err := mcpbridge.New(mcpbridge.Config{Finder: dir, Policy: &policy, OperatorToken: opToken, Simulated: func(string) bool { return true },
		Client: client.Options{Token: agentToken}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func entries(body map[string]any) []map[string]any {
	list, _ := body["entries"].([]any)
	out := make([]map[string]any, 0, len(list))
	for _, e := range list {
		if m, ok := e.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// Item 1: mhp_evidence gives the head and bounded pages of receipts,
// filtered by command id and session label.
func TestEvidenceTool(t *testing.T) {
	g := newGuarded(t)
	cs := session(t, guardedBridge(t, g, mcpbridge.DefaultPolicy(), ""), nil)
	for i := range 20 {
		if res, body := mustCall(t, cs, "mhp_write", map[string]any{"device": "tc-01", "name": "setpoint", "value": 20 + i}); res.IsError {
			t.Fatalf("write %d: %v", i, body)
		}
	}
	// Without a cursor: the latest receipts, ending at the head.
	res, body := mustCall(t, cs, "mhp_evidence", map[string]any{"device": "tc-01"})
	latest := entries(body)
	head, _ := body["head"].(map[string]any)
	if res.IsError || len(latest) == 0 || latest[len(latest)-1]["seq"] != head["seq"] || body["next"] != nil {
		t.Fatalf("latest page: isError %v %v", res.IsError, body)
	}
	res, body = mustCall(t, cs, "mhp_evidence", map[string]any{"device": "tc-01", "after": 0})
	if res.IsError {
		t.Fatalf("evidence: %v", body)
	}
	if n := len(jsonOf(res.StructuredContent)); n > mcpbridge.ResultBudget {
		t.Fatalf("evidence result is %d bytes, over the budget", n)
	}
	head, _ = body["head"].(map[string]any)
	if seq, _ := head["seq"].(float64); seq < 20 || head["hash"] == "" {
		t.Fatalf("head %v: want seq >= 20 and a hash", head)
	}
	first := entries(body)
	next, _ := body["next"].(float64)
	if len(first) == 0 || len(first) >= 20 || next == 0 {
		t.Fatalf("first page has %d entries, next %v: want a bounded page and a cursor", len(first), next)
	}
	_, body2 := mustCall(t, cs, "mhp_evidence", map[string]any{"device": "tc-01", "after": next})
	second := entries(body2)
	if len(second) == 0 || second[0]["seq"].(float64) != next+1 {
		t.Fatalf("second page does not follow the first (after %v): %v", next, second)
	}
	// Every write carried a command id (one per intent); filter by one.
	cmd, _ := first[0]["command_id"].(string)
	label, _ := first[0]["session"].(string)
	if cmd == "" || label == "" {
		t.Fatalf("receipt without command id or session: %v", first[0])
	}
	_, byCmd := mustCall(t, cs, "mhp_evidence", map[string]any{"device": "tc-01", "command_id": cmd})
	if got := entries(byCmd); len(got) != 1 || got[0]["command_id"] != cmd {
		t.Fatalf("filter by command id %s: %v", cmd, got)
	}
	_, bySession := mustCall(t, cs, "mhp_evidence", map[string]any{"device": "tc-01", "session": label})
	for _, e := range entries(bySession) {
		if e["session"] != label {
			t.Fatalf("filter by session %s returned %v", label, e)
		}
	}
	_, none := mustCall(t, cs, "mhp_evidence", map[string]any{"device": "tc-01", "session": "nobody"})
	if len(entries(none)) != 0 {
		t.Fatalf("unknown session matched: %v", none)
	}

	// A device that keeps no evidence says so.
	plain := session(t, rigBridge(t, newRig(t, "rig", true, ""), mcpbridge.Config{}), nil)
	res, body = mustCall(t, plain, "mhp_evidence", map[string]any{"device": "rig"})
	if !res.IsError || errCode(body) != float64(mhp.CodeNotSupported) {
		t.Fatalf("device without evidence: isError %v %v", res.IsError, body)
	}
	// Bad arguments are refused before anything is asked.
	for _, args := range []map[string]any{{}, {"device": "tc-01", "after": "x"}, {"device": "tc-01", "limit": 5}} {
		if res, _ := mustCall(t, cs, "mhp_evidence", args); !res.IsError {
			t.Fatalf("%v accepted", args)
		}
	}
}

// Item 2: an operator's permit approves exactly one request, once; the model
// cannot issue one without the operator tools and the operator's token.
func TestOperatorPermit(t *testing.T) {
	g := newGuarded(t)
	op := session(t, guardedBridge(t, g, mcpbridge.Policy{Enabled: true, OperatorTools: true}, operatorToken), nil)
	issue := func(params map[string]any) string {
		t.Helper()
		res, body := mustCall(t, op, "mhp_permit", map[string]any{"device": "tc-01", "for": "invoke", "name": "open_lid",
			"params": params, "ttl_s": 60, "note": "operator at the bench"})
		p, _ := body["permit"].(map[string]any)
		id, _ := p["permitId"].(string)
		if res.IsError || id == "" {
			t.Fatalf("mhp_permit: isError %v %v", res.IsError, body)
		}
		return id
	}
	// The model's session: no elicitation, so only a permit approves.
	agent := session(t, guardedBridge(t, g, mcpbridge.DefaultPolicy(), ""), nil)
	invoke := func(args map[string]any) (*mcp.CallToolResult, map[string]any) {
		t.Helper()
		args["device"], args["action"], args["wait_s"] = "tc-01", "open_lid", 10
		return mustCall(t, agent, "mhp_invoke", args)
	}
	if res, body := invoke(map[string]any{}); !res.IsError || errCode(body) != float64(mhp.CodeApprovalRequired) {
		t.Fatalf("without a permit: isError %v %v", res.IsError, body)
	}
	id := issue(map[string]any{"speed": 1})
	for _, tc := range []struct {
		name string
		args map[string]any
	}{
		{"other params", map[string]any{"params": map[string]any{"speed": 2}, "permit_id": id}},
		{"no params", map[string]any{"permit_id": id}},
		{"forged id", map[string]any{"params": map[string]any{"speed": 1}, "permit_id": "permit_forged"}},
	} {
		res, body := invoke(tc.args)
		if !res.IsError || errCode(body) != float64(mhp.CodeApprovalRequired) || g.opened.Load() != 0 {
			t.Fatalf("%s: isError %v opened %d %v", tc.name, res.IsError, g.opened.Load(), body)
		}
		if !strings.Contains(text(res), "permit") {
			t.Fatalf("%s: the refusal does not name the permit: %s", tc.name, text(res))
		}
	}
	// The exact request, with the wire's spelling of the argument.
	if res, body := invoke(map[string]any{"params": map[string]any{"speed": 1}, "permitId": id}); res.IsError || g.opened.Load() != 1 {
		t.Fatalf("permitted invoke: isError %v opened %d %v", res.IsError, g.opened.Load(), body)
	}
	// Single use.
	if res, body := invoke(map[string]any{"params": map[string]any{"speed": 1}, "permit_id": id}); !res.IsError || g.opened.Load() != 1 {
		t.Fatalf("permit used twice: isError %v opened %d %v", res.IsError, g.opened.Load(), body)
	}
	// A write permit needs the value, an invoke permit no value.
	for _, args := range []map[string]any{
		{"device": "tc-01", "for": "write", "name": "lid_heat"},
		{"device": "tc-01", "for": "write", "name": "lid_heat", "value": 1, "params": map[string]any{}},
		{"device": "tc-01", "for": "invoke", "name": "open_lid", "value": 1},
	} {
		if res, body := mustCall(t, op, "mhp_permit", args); !res.IsError || errCode(body) != float64(mhp.CodeInvalidParams) {
			t.Fatalf("%v: isError %v %v", args, res.IsError, body)
		}
	}
	// A write permit approves that value only.
	res, body := mustCall(t, op, "mhp_permit", map[string]any{"device": "tc-01", "for": "write", "name": "lid_heat", "value": 105})
	p, _ := body["permit"].(map[string]any)
	wid, _ := p["permitId"].(string)
	if res.IsError || wid == "" {
		t.Fatalf("write permit: %v", body)
	}
	if res, body := mustCall(t, agent, "mhp_write", map[string]any{"device": "tc-01", "name": "lid_heat", "value": 110, "permit_id": wid}); !res.IsError || g.heated.Load() != 0 {
		t.Fatalf("write permit approved another value: isError %v %v", res.IsError, body)
	}
	if res, body := mustCall(t, agent, "mhp_write", map[string]any{"device": "tc-01", "name": "lid_heat", "value": 105, "permit_id": wid}); res.IsError || g.heated.Load() != 1 {
		t.Fatalf("permitted write: isError %v heated %d %v", res.IsError, g.heated.Load(), body)
	}

	// Without operator_tools, or without the operator's token, there is no
	// permit tool; with a wrong token the device refuses to issue.
	for _, tc := range []struct {
		policy mcpbridge.Policy
		token  string
	}{{mcpbridge.Policy{Enabled: true}, operatorToken}, {mcpbridge.Policy{Enabled: true, OperatorTools: true}, ""}} {
		cs := session(t, guardedBridge(t, g, tc.policy, tc.token), nil)
		tools, err := cs.ListTools(context.Background(), &mcp.ListToolsParams{})
		if err != nil {
			t.Fatal(err)
		}
		for _, tl := range tools.Tools {
			if tl.Name == "mhp_permit" {
				t.Fatalf("mhp_permit listed with %+v token %q", tc.policy, tc.token)
			}
		}
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "mhp_permit",
			Arguments: map[string]any{"device": "tc-01", "for": "invoke", "name": "open_lid"}})
		if err == nil && !res.IsError {
			t.Fatalf("mhp_permit callable with %+v token %q", tc.policy, tc.token)
		}
	}
	wrong := session(t, guardedBridge(t, g, mcpbridge.Policy{Enabled: true, OperatorTools: true}, "not-the-operator-token"), nil)
	res, body = mustCall(t, wrong, "mhp_permit", map[string]any{"device": "tc-01", "for": "invoke", "name": "open_lid"})
	if !res.IsError || !strings.Contains(text(res), "operator") {
		t.Fatalf("wrong operator token: isError %v %v", res.IsError, body)
	}
	// The model's connection never carries the operator token: a permit
	// issued by hand cannot be made through an agent's own tools either.
	if g.opened.Load() != 1 {
		t.Fatalf("opened %d times, want 1", g.opened.Load())
	}
}

// Item 3: saved methods through mhp_describe and mhp_invoke.
func TestSavedMethods(t *testing.T) {
	g := newGuarded(t)
	cs := session(t, guardedBridge(t, g, mcpbridge.DefaultPolicy(), ""), nil)
	for _, tc := range []struct {
		query string
		want  string // a substring of the result
	}{
		{"", `"name":"pcr-30"`},
		{"standard pcr", `"name":"pcr-30"`},
		{"pcr-30", `"cycles":30`}, // an exact name: the method in full
	} {
		res, body := mustCall(t, cs, "mhp_describe", map[string]any{"device": "tc-01", "methods": tc.query})
		if res.IsError || !strings.Contains(jsonOf(body), tc.want) {
			t.Fatalf("methods %q: isError %v %v", tc.query, res.IsError, body)
		}
	}
	if _, body := mustCall(t, cs, "mhp_describe", map[string]any{"device": "tc-01", "methods": "no such thing zzz"}); strings.Contains(jsonOf(body), "pcr-30") {
		t.Fatalf("unrelated query found %v", body)
	}
	res, body := mustCall(t, cs, "mhp_invoke", map[string]any{"device": "tc-01", "method": "pcr-30", "params": map[string]any{"cycles": 25}, "wait_s": 10})
	job, _ := body["job"].(map[string]any)
	if res.IsError || job["state"] != "done" {
		t.Fatalf("invoke method: isError %v %v", res.IsError, body)
	}
	g.mu.Lock()
	runs := jsonOf(g.runs)
	g.mu.Unlock()
	if !strings.Contains(runs, `"cycles":25`) || !strings.Contains(runs, `"temp":95`) {
		t.Fatalf("the backend ran %s: want the saved steps with cycles overridden to 25", runs)
	}
	for _, args := range []map[string]any{
		{"device": "tc-01"},                      // neither action nor method
		{"device": "tc-01", "method": "missing"}, // unknown method
	} {
		if res, body := mustCall(t, cs, "mhp_invoke", args); !res.IsError {
			t.Fatalf("%v accepted: %v", args, body)
		}
	}
	// A device without methods says so.
	plain := session(t, rigBridge(t, newRig(t, "rig", true, ""), mcpbridge.Config{}), nil)
	if res, body := mustCall(t, plain, "mhp_describe", map[string]any{"device": "rig", "methods": ""}); !res.IsError || errCode(body) != float64(mhp.CodeNotSupported) {
		t.Fatalf("device without methods: isError %v %v", res.IsError, body)
	}
}

// Item 4: the confirmed resend of a confirm-gated call is the same intent as
// its first attempt (one command id in the evidence).
func TestConfirmedResendKeepsTheCommandID(t *testing.T) {
	g := newGuarded(t)
	b := guardedBridge(t, g, mcpbridge.DefaultPolicy(), "")
	cs := session(t, b, &mcp.ClientOptions{ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
	}})
	res, body := mustCall(t, cs, "mhp_invoke", map[string]any{"device": "tc-01", "action": "open_lid", "params": map[string]any{"speed": 1}, "wait_s": 10})
	if res.IsError || g.opened.Load() != 1 {
		t.Fatalf("confirmed invoke: isError %v opened %d %v", res.IsError, g.opened.Load(), body)
	}
	_, ev := mustCall(t, cs, "mhp_evidence", map[string]any{"device": "tc-01"})
	ids := map[string]int{}
	outcomes := []string{}
	for _, e := range entries(ev) {
		if e["method"] == "actions/invoke" && e["name"] == "open_lid" {
			id, _ := e["command_id"].(string)
			ids[id]++
			outcomes = append(outcomes, jsonOf(e["outcome"]))
		}
	}
	if len(ids) != 1 || ids[""] != 0 || len(outcomes) < 2 {
		t.Fatalf("want the refusal and the confirmed run under one command id, got ids %v outcomes %v", ids, outcomes)
	}
}

// Item 4: a write whose first attempt reached the device but whose answer was
// lost is resent with the same command id and not executed twice.
func TestLostAnswerIsNotActedTwice(t *testing.T) {
	g := newGuarded(t)
	cs := session(t, guardedBridge(t, g, mcpbridge.DefaultPolicy(), ""), nil)
	g.dropAt.Store(1)
	res, body := mustCall(t, cs, "mhp_write", map[string]any{"device": "tc-01", "name": "setpoint", "value": 42})
	if res.IsError {
		t.Fatalf("write after a lost answer: %v", body)
	}
	if n := g.writes.Load(); n != 1 {
		t.Fatalf("the backend wrote %d times, want 1", n)
	}
	if len(g.bodies) != 2 {
		t.Fatalf("%d write requests sent, want the first and one resend", len(g.bodies))
	}
	cmd := func(b []byte) string {
		_, after, _ := strings.Cut(string(b), `"commandId":"`)
		id, _, _ := strings.Cut(after, `"`)
		return id
	}
	first, second := cmd(<-g.bodies), cmd(<-g.bodies)
	if first == "" || first != second {
		t.Fatalf("resend carried command id %q, first %q: want the same, non-empty", second, first)
	}
	// The next intent gets a new id.
	mustCall(t, cs, "mhp_write", map[string]any{"device": "tc-01", "name": "setpoint", "value": 42})
	if third := cmd(<-g.bodies); third == first || third == "" || g.writes.Load() != 2 {
		t.Fatalf("a new write reused %q (writes %d)", third, g.writes.Load())
	}
}

// Item 4, end to end: a confirm-gated write is refused, confirmed by a
// person, and the confirmed attempt's answer is lost; the client resends it
// and the device replays: all three requests carry one command id and the
// backend wrote once.
func TestConfirmedWriteWithALostAnswer(t *testing.T) {
	g := newGuarded(t)
	cs := session(t, guardedBridge(t, g, mcpbridge.DefaultPolicy(), ""), &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
		}})
	g.dropAt.Store(2) // the confirmed attempt
	res, body := mustCall(t, cs, "mhp_write", map[string]any{"device": "tc-01", "name": "lid_heat", "value": 100})
	if res.IsError || g.heated.Load() != 1 {
		t.Fatalf("confirmed write after a lost answer: isError %v heated %d %v", res.IsError, g.heated.Load(), body)
	}
	if len(g.bodies) != 3 {
		t.Fatalf("%d write requests, want the refused one, the confirmed one and its resend", len(g.bodies))
	}
	var ids []string
	for range 3 {
		b := string(<-g.bodies)
		_, after, _ := strings.Cut(b, `"commandId":"`)
		id, _, _ := strings.Cut(after, `"`)
		ids = append(ids, id)
	}
	if ids[0] == "" || ids[1] != ids[0] || ids[2] != ids[0] {
		t.Fatalf("command ids %q: want one id for the whole intent", ids)
	}
}
