package mcpbridge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/client"
	"github.com/openmhp/mhp-go/directory"
	"github.com/openmhp/mhp-go/mcpbridge"
)

// lidDevice has a confirm-gated action and counts how often it really ran.
func lidDevice(t *testing.T, id string, opened *atomic.Int32) *binding.Driver {
	t.Helper()
	drv, err := binding.New(binding.Config{
		Device: mhp.DeviceInfo{ID: id, Class: "thermocycler", Location: "bay 3", Tags: []string{"simulated"}},
		Signals: []binding.Signal{{Spec: mhp.Signal{Name: "lid_closed", Type: mhp.TypeBoolean},
			Read: func(context.Context) (binding.Sample, error) { return binding.Sample{Value: true}, nil }}},
		Actions: []binding.Action{{Spec: mhp.Action{Name: "open_lid", Duration: mhp.DurationShort, Approval: mhp.ApprovalConfirm,
			Notes: "Lid may be hot; a human should be present."},
			Run: func(context.Context, *binding.Job) (any, error) {
				opened.Add(1)
				return map[string]any{"lid_closed": false}, nil
			}}},
		EStop: func(context.Context) error { return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drv.Close() })
	return drv
}

type lab struct {
	bridge  *mcpbridge.Bridge
	devices map[string]mhp.Device
}

func newLab(t *testing.T, n int, opened *atomic.Int32) *lab {
	t.Helper()
	devs := map[string]mhp.Device{}
	var cards []directory.Card
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("tc-%04d", i)
		devs[id] = lidDevice(t, id, opened)
		cards = append(cards, directory.Card{DeviceInfo: mhp.DeviceInfo{ID: id, Class: "thermocycler"}, Actions: []string{"open_lid"}, Target: "mem:" + id})
	}
	dir, err := directory.New(directory.Config{Index: directory.NewIndex(cards),
		Pinger: directory.PingerFunc(func(ctx context.Context, target string) (mhp.DeviceState, error) {
			p, err := devs[strings.TrimPrefix(target, "mem:")].Ping(ctx)
			if err != nil {
				return "", err
			}
			return p.State, nil
		})})
	if err != nil {
		t.Fatal(err)
	}
	b, err := mcpbridge.New(mcpbridge.Config{Finder: dir, Simulated: func(string) bool { return true }, Dial: func(ctx context.Context, target string) (*client.Device, error) {
		return client.Connect(devs[strings.TrimPrefix(target, "mem:")], client.Options{}), nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return &lab{bridge: b, devices: devs}
}

// connect runs the bridge and an SDK client over in-memory transports;
// elicit, when non-nil, is the person answering confirmations.
func connect(t *testing.T, l *lab, elicit func(*mcp.ElicitRequest) (*mcp.ElicitResult, error)) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := l.bridge.Server().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	opts := &mcp.ClientOptions{}
	if elicit != nil {
		opts.ElicitationHandler = func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) { return elicit(r) }
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-host", Version: "1"}, opts).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func call(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) (*mcp.CallToolResult, map[string]any) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	var body map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &body)
	return res, body
}

func errCode(body map[string]any) float64 {
	e, _ := body["mhpError"].(map[string]any)
	c, _ := e["code"].(float64)
	return c
}

func TestToolSurfaceIsConstant(t *testing.T) {
	var names [2][]string
	for i, n := range []int{2, 2000} {
		cs := connect(t, newLab(t, n, new(atomic.Int32)), nil)
		res, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tool := range res.Tools {
			names[i] = append(names[i], tool.Name)
			if tool.Meta["input_examples"] == nil && strings.Contains("mhp_find mhp_describe mhp_invoke mhp_run", tool.Name) {
				t.Errorf("tool %s has no input examples", tool.Name)
			}
		}
	}
	if !reflect.DeepEqual(names[0], names[1]) || len(names[0]) != len(mcpbridge.ToolNames()) {
		t.Fatalf("tools differ between 2 and 2,000 devices:\n%v\n%v", names[0], names[1])
	}
}

func TestConfirmNeedsAPerson(t *testing.T) {
	ctx := context.Background()
	_ = ctx
	for _, tc := range []struct {
		name     string
		elicit   func(*mcp.ElicitRequest) (*mcp.ElicitResult, error)
		modelArg bool
		wantRun  int32
	}{
		{name: "no elicitation: unavailable", elicit: nil},
		{name: "model approval ignored", elicit: nil, modelArg: true},
		{name: "person says yes", wantRun: 1, elicit: func(r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			if !strings.Contains(r.Params.Message, "Lid may be hot") {
				return nil, fmt.Errorf("the person was not shown the notes: %q", r.Params.Message)
			}
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
		}},
		{name: "person says no", elicit: func(*mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "decline"}, nil
		}},
		{name: "accept without yes", elicit: func(*mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": false}}, nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opened := new(atomic.Int32)
			l := newLab(t, 2, opened)
			cs := connect(t, l, tc.elicit)
			args := map[string]any{"device": "tc-0001", "action": "open_lid", "wait_s": 5}
			if tc.modelArg {
				args["approved"] = true
			}
			res, body := call(t, cs, "mhp_invoke", args)
			if tc.wantRun == 1 {
				job, _ := body["job"].(map[string]any)
				if res.IsError || job["state"] != "done" || opened.Load() != 1 {
					t.Fatalf("confirmed invoke: isError %v body %v opened %d", res.IsError, body, opened.Load())
				}
				return
			}
			if !res.IsError || errCode(body) != float64(mhp.CodeApprovalRequired) || opened.Load() != 0 {
				t.Fatalf("isError %v code %v opened %d: %v", res.IsError, errCode(body), opened.Load(), body)
			}
		})
	}
}

func TestToolsOperateADevice(t *testing.T) {
	l := newLab(t, 3, new(atomic.Int32))
	cs := connect(t, l, nil)
	_, found := call(t, cs, "mhp_find", map[string]any{"query": "thermocycler", "state": "idle", "limit": 2})
	if rs, _ := found["results"].([]any); len(rs) != 2 {
		t.Fatalf("find: %v", found)
	}
	res, body := call(t, cs, "mhp_read", map[string]any{"device": "tc-0002", "names": []string{"lid_closed"}})
	if res.IsError || body["values"].(map[string]any)["lid_closed"] != true {
		t.Fatalf("read: %v", body)
	}
	res, body = call(t, cs, "mhp_read", map[string]any{"device": "tc-0002", "names": []string{"nope"}})
	if !res.IsError || errCode(body) != float64(mhp.CodeUnknownName) {
		t.Fatalf("unknown signal: %v", body)
	}
	res, body = call(t, cs, "mhp_describe", map[string]any{"device": "tc-0002", "select": map[string]any{"actions": []string{"open_lid"}}})
	if res.IsError || body["detail"] != "select" {
		t.Fatalf("describe select: %v", body)
	}
	res, body = call(t, cs, "mhp_run", map[string]any{"script": "rs = [lab['tc-0000'].read('lid_closed') for _ in range(500)]\nprint(len(rs), all(rs))"})
	if res.IsError || body["output"] != "500 True\n" {
		t.Fatalf("run: %v", body)
	}
	res, body = call(t, cs, "mhp_estop", map[string]any{"reason": "test"})
	if res.IsError {
		t.Fatalf("estop all: %v", body)
	}
	if st := l.devices["tc-0002"].(*binding.Driver).State(); st != mhp.StateEStop {
		t.Fatalf("tc-0002 state after estop-all: %s", st)
	}
	_, body = call(t, cs, "mhp_lab", map[string]any{"op": "updates"})
	if ups, _ := body["updates"].([]any); len(ups) == 0 {
		t.Fatalf("no updates after estop: %v", body)
	}
}

func TestHTTPGuards(t *testing.T) {
	l := newLab(t, 1, new(atomic.Int32))
	srv := httptest.NewServer(l.bridge.HTTPHandler(mcpbridge.HTTPOptions{Token: "s3cret", AllowedOrigins: []string{"http://ok.example"}}))
	defer srv.Close()
	post := func(token, origin string) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
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
	if c := post("", ""); c != http.StatusUnauthorized {
		t.Errorf("no token: %d", c)
	}
	if c := post("wrong", ""); c != http.StatusUnauthorized {
		t.Errorf("bad token: %d", c)
	}
	if c := post("s3cret", "http://evil.example"); c != http.StatusForbidden {
		t.Errorf("bad origin: %d", c)
	}
	if c := post("s3cret", "http://ok.example"); c == http.StatusUnauthorized || c == http.StatusForbidden {
		t.Errorf("good token and origin refused: %d", c)
	}
}

func TestConfirmationCannotBeReplayedOrMoved(t *testing.T) {
	opened := new(atomic.Int32)
	l := newLab(t, 2, opened)
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := l.bridge.Server().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	// A host that handles the round trips itself.
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "manual-host", Version: "1"}, &mcp.ClientOptions{
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
		}}).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	args := map[string]any{"device": "tc-0000", "action": "open_lid"}
	first, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mhp_invoke", Arguments: args})
	if err != nil || !first.NeedsInput() || first.InputRequests["confirm"] == nil {
		t.Fatalf("first round: %+v %v", first, err)
	}
	yes := mcp.InputResponseMap{"confirm": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}}
	// Moved to another device: refused.
	moved, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mhp_invoke", Arguments: map[string]any{"device": "tc-0001", "action": "open_lid"},
		InputResponses: yes, RequestState: first.RequestState})
	if err != nil || !moved.IsError || opened.Load() != 0 {
		t.Fatalf("confirmation moved to another device ran: %+v %v (opened %d)", moved, err, opened.Load())
	}
	// A forged state never validates.
	forged, _ := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mhp_invoke", Arguments: args, InputResponses: yes, RequestState: "abc.def"})
	if !forged.IsError || opened.Load() != 0 {
		t.Fatal("forged request state accepted")
	}
	// A fresh state, answered once, runs once; replaying it is refused.
	second, _ := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mhp_invoke", Arguments: args})
	ok, _ := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mhp_invoke", Arguments: args, InputResponses: yes, RequestState: second.RequestState})
	if ok.IsError || opened.Load() > 1 {
		t.Fatalf("answered confirmation refused: %+v", ok)
	}
	replay, _ := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mhp_invoke", Arguments: args, InputResponses: yes, RequestState: second.RequestState})
	if !replay.IsError {
		t.Fatal("replayed confirmation accepted")
	}
}
