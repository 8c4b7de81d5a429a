package mcpbridge_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/client"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/directory"
	"github.com/openmhp/mhp-go/mcpbridge"
	"github.com/openmhp/mhp-go/script"
)

// rig is a device with a job that runs until released, cancelled or
// stopped, reporting progress as it goes.
type rig struct {
	drv       *binding.Driver
	release   chan struct{}
	progress  chan float64 // the test feeds progress fractions to the running hold job
	homed     atomic.Int32
	cancelled atomic.Int32
	dials     atomic.Int32
	sim       bool // the host lists it as simulated
}

func newRig(t *testing.T, id string, simulated bool, instructions string) *rig {
	t.Helper()
	r := &rig{release: make(chan struct{}), progress: make(chan float64), sim: simulated}
	info := mhp.DeviceInfo{ID: id, Class: "incubator"}
	if simulated {
		info.Tags = []string{"simulated"}
	}
	drv, err := binding.New(binding.Config{
		Device: info, Instructions: instructions,
		Signals: []binding.Signal{{Spec: mhp.Signal{Name: "temp", Type: mhp.TypeNumber},
			Read: func(context.Context) (binding.Sample, error) { return binding.Sample{Value: 37.0}, nil }}},
		Actions: []binding.Action{
			{Spec: mhp.Action{Name: "home", Duration: mhp.DurationShort},
				Run: func(context.Context, *binding.Job) (any, error) { r.homed.Add(1); return "homed", nil }},
			{Spec: mhp.Action{Name: "hold", Duration: mhp.DurationLong, Cancellable: true},
				Run: func(ctx context.Context, j *binding.Job) (any, error) {
					for {
						select {
						case <-ctx.Done():
							r.cancelled.Add(1)
							return nil, binding.ErrCancelled
						case <-r.release:
							return "held", nil
						case p := <-r.progress:
							j.Progress(p, map[string]any{"message": "holding"})
						}
					}
				}},
		},
		EStop: func(context.Context) error { return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drv.Close() })
	r.drv = drv
	return r
}

// rigBridge is a bridge over one rig named "rig".
func rigBridge(t *testing.T, r *rig, cfg mcpbridge.Config) *mcpbridge.Bridge {
	t.Helper()
	dir, err := directory.New(directory.Config{Index: directory.NewIndex([]directory.Card{{
		DeviceInfo: mhp.DeviceInfo{ID: "rig", Class: "incubator"}, Target: "mem:rig"}}),
		Pinger: directory.PingerFunc(func(context.Context, string) (mhp.DeviceState, error) { return mhp.StateIdle, nil })})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Finder = dir
	if cfg.Simulated == nil {
		cfg.Simulated = func(string) bool { return r.sim } // the host's word, not the rig's tags
	}
	cfg.Dial = func(ctx context.Context, target string) (*client.Device, error) {
		r.dials.Add(1)
		return client.Connect(r.drv, client.Options{}), nil
	}
	cfg.DialWith = func(ctx context.Context, target string, opts client.Options) (*client.Device, error) {
		r.dials.Add(1) // an MCP caller's connection: its role gate and name (roles.go)
		return client.Connect(r.drv, opts), nil
	}
	b, err := mcpbridge.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// session connects an SDK client to b in memory.
func session(t *testing.T, b *mcpbridge.Bridge, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := b.Server().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "sdk-test", Version: "1"}, opts).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func decode(res *mcp.CallToolResult) map[string]any {
	var body map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &body)
	return body
}

func text(res *mcp.CallToolResult) string {
	var sb strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			sb.WriteString(tc.Text)
		}
	}
	return sb.String()
}

func mustCall(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) (*mcp.CallToolResult, map[string]any) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s %v: %v", tool, args, err)
	}
	return res, decode(res)
}

// httpClient connects an SDK client over Streamable HTTP with a bearer token.
func httpClient(t *testing.T, url, token string) *mcp.ClientSession {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "http-test", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearerRT{token}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

type bearerRT struct{ token string }

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "bearer "+b.token) // lowercase scheme on purpose (item 9)
	return http.DefaultTransport.RoundTrip(r)
}

// Item 1: each MCP session over Streamable HTTP has its own MHP session and
// lease; B cannot act under A's lease, and A's lease ends with A's session.
func TestHTTPSessionsHaveTheirOwnLease(t *testing.T) {
	r := newRig(t, "rig", true, "")
	b := rigBridge(t, r, mcpbridge.Config{})
	srv := httptest.NewServer(b.HTTPHandler(mcpbridge.HTTPOptions{Token: "tok"}))
	t.Cleanup(srv.Close) // after the clients (cleanups run last first)
	a, c := httpClient(t, srv.URL, "tok"), httpClient(t, srv.URL, "tok")

	if res, body := mustCall(t, a, "mhp_lab", map[string]any{"op": "acquire", "device": "rig", "ttl_s": 60}); res.IsError {
		t.Fatalf("A acquire: %v", body)
	}
	if res, body := mustCall(t, a, "mhp_invoke", map[string]any{"device": "rig", "action": "home", "wait_s": 10}); res.IsError {
		t.Fatalf("A home: %v", body)
	}
	res, body := mustCall(t, c, "mhp_invoke", map[string]any{"device": "rig", "action": "home", "wait_s": 10})
	if !res.IsError || errCode(body) != float64(mhp.CodeNotLeased) || r.homed.Load() != 1 {
		t.Fatalf("B ran home under A's lease: isError %v %v (homed %d)", res.IsError, body, r.homed.Load())
	}
	if r.dials.Load() != 2 {
		t.Fatalf("two MCP sessions made %d device connections, want 2", r.dials.Load())
	}
	// A's session ends: its lease goes with it and B can act.
	a.Close()
	conformance.Eventually(t, "B acts once A's session closed", func() bool {
		res, _ := c.CallTool(context.Background(), &mcp.CallToolParams{Name: "mhp_invoke",
			Arguments: map[string]any{"device": "rig", "action": "home", "wait_s": 10}})
		return res != nil && !res.IsError
	})
}

// Item 3: every result is bounded, structured content included; updates page.
func TestResultsAreBounded(t *testing.T) {
	huge := strings.Repeat("Lorem ipsum dolor sit amet. ", 300_000) // ~8 MB DEVICE.md body
	r := newRig(t, "rig", true, huge)
	b := rigBridge(t, r, mcpbridge.Config{Updates: 1000})
	cs := session(t, b, nil)
	for _, detail := range []string{"summary", "full"} {
		res, body := mustCall(t, cs, "mhp_describe", map[string]any{"device": "rig", "detail": detail})
		sc, _ := json.Marshal(res.StructuredContent)
		if res.IsError || len(text(res)) > mcpbridge.ResultBudget || len(sc) > mcpbridge.ResultBudget {
			t.Fatalf("describe %s: isError %v, text %d bytes, structured %d bytes", detail, res.IsError, len(text(res)), len(sc))
		}
		tr, _ := body["truncated"].(map[string]any)
		if tr == nil || tr["bytes"].(float64) < float64(len(huge)) || tr["hint"] == "" {
			t.Fatalf("describe %s: no truncation note: %v", detail, body["truncated"])
		}
	}
	// 300 notifications: read back over pages, none lost, each page bounded.
	for i := 0; i < 300; i++ {
		if res, body := mustCall(t, cs, "mhp_invoke", map[string]any{"device": "rig", "action": "home", "wait_s": 10}); res.IsError {
			t.Fatalf("home %d: %v", i, body)
		}
	}
	var got, pages int
	for more := true; more; pages++ {
		res, body := mustCall(t, cs, "mhp_lab", map[string]any{"op": "updates"})
		sc, _ := json.Marshal(res.StructuredContent)
		if len(sc) > mcpbridge.ResultBudget || len(text(res)) > mcpbridge.ResultBudget {
			t.Fatalf("updates page %d: %d bytes", pages, len(sc))
		}
		ups, _ := body["updates"].([]any)
		got += len(ups)
		more = body["more"].(float64) > 0
		if pages > 1000 {
			t.Fatal("updates never drained")
		}
	}
	if pages < 2 || got < 300 {
		t.Fatalf("%d updates over %d pages, want >= 300 over several", got, pages)
	}
}

// Item 4: a wait longer than the call timeout answers "still running".
func TestLongWaitAnswersStillRunning(t *testing.T) {
	r := newRig(t, "rig", true, "")
	b := rigBridge(t, r, mcpbridge.Config{CallTimeout: 100 * time.Millisecond})
	cs := session(t, b, nil)
	defer close(r.release)
	res, body := mustCall(t, cs, "mhp_invoke", map[string]any{"device": "rig", "action": "hold", "wait_s": 0.5})
	job, _ := body["job"].(map[string]any)
	if res.IsError || job["state"] != "running" || !strings.Contains(body["note"].(string), "still running") {
		t.Fatalf("invoke wait_s beyond the call timeout: isError %v %v", res.IsError, body)
	}
	res, body = mustCall(t, cs, "mhp_job", map[string]any{"device": "rig", "id": job["id"], "op": "wait", "wait_s": 0.5})
	if res.IsError || !strings.Contains(body["note"].(string), "still running") {
		t.Fatalf("job wait beyond the call timeout: %v", body)
	}
	res, body = mustCall(t, cs, "mhp_job", map[string]any{"device": "rig", "id": job["id"], "op": "wait", "wait_s": 3601})
	if !res.IsError || !strings.Contains(text(res), "wait_s") {
		t.Fatalf("wait_s above the schema's maximum accepted: %v", body)
	}
}

// Item 5: a script that stops on an error is an isError result.
func TestScriptErrorsAreErrors(t *testing.T) {
	r := newRig(t, "rig", true, "")
	b := rigBridge(t, r, mcpbridge.Config{Script: script.Options{MaxSteps: 100_000}})
	cs := session(t, b, nil)
	for _, tc := range []struct{ name, src, want string }{
		{"syntax", "def (:\n", "script stopped"},
		{"fail", "print('before')\nfail('bad plate')", "bad plate"},
		{"budget", "def f():\n  x = 0\n  for i in range(10000000):\n    x += i\n  return x\nprint(f())", "too many steps"},
		{"refused call", "lab['rig'].read('nope')", "nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, body := mustCall(t, cs, "mhp_run", map[string]any{"script": tc.src})
			if !res.IsError || !strings.Contains(text(res), tc.want) {
				t.Fatalf("isError %v: %s", res.IsError, text(res))
			}
			if tc.name == "fail" && !strings.Contains(text(res), "before") {
				t.Fatalf("the output printed before the failure is lost: %v", body)
			}
		})
	}
	res, body := mustCall(t, cs, "mhp_run", map[string]any{"script": "print(lab['rig'].read('temp'))"})
	if res.IsError || body["output"] != "37\n" {
		t.Fatalf("good script: %v", body)
	}
}

// Item 6: estop-all answers snake_case keys, milliseconds and string errors.
func TestEStopAllShape(t *testing.T) {
	r := newRig(t, "rig", true, "")
	b := rigBridge(t, r, mcpbridge.Config{})
	cs := session(t, b, nil)
	mustCall(t, cs, "mhp_read", map[string]any{"device": "rig"})
	res, body := mustCall(t, cs, "mhp_estop", map[string]any{"reason": "drill"})
	devs, _ := body["devices"].(map[string]any)
	o, _ := devs["rig"].(map[string]any)
	if res.IsError || o["status"] != client.EStopStopped || o["ok"] != true {
		t.Fatalf("estop all: %s", text(res))
	}
	if _, ok := o["took_ms"].(float64); !ok {
		t.Fatalf("no took_ms: %s", text(res))
	}
	for _, k := range []string{"Status", "OK", "Err", "Took"} {
		if strings.Contains(text(res), `"`+k+`"`) {
			t.Fatalf("Go field name %s in %s", k, text(res))
		}
	}
	if st := r.drv.State(); st != mhp.StateEStop {
		t.Fatalf("device state %s after estop-all", st)
	}
}

// Item 8: arguments are checked against the schema; nothing reaches the device.
func TestArgumentsAreValidated(t *testing.T) {
	r := newRig(t, "rig", true, "")
	b := rigBridge(t, r, mcpbridge.Config{})
	cs := session(t, b, nil)
	for _, tc := range []struct {
		tool  string
		args  map[string]any
		field string
	}{
		{"mhp_read", map[string]any{"device": "rig", "names": "temp"}, "names"},
		{"mhp_read", map[string]any{"device": "rig", "names": []any{"temp", 3}}, "names[1]"},
		{"mhp_read", map[string]any{"names": []any{"temp"}}, "device"},
		{"mhp_job", map[string]any{"device": "rig", "id": "j", "op": "wait", "wait_s": -5}, "wait_s"},
		{"mhp_job", map[string]any{"device": "rig", "op": "explode"}, "op"},
		{"mhp_find", map[string]any{"limit": "many"}, "limit"},
		{"mhp_find", map[string]any{"limit": 2.5}, "limit"},
		{"mhp_find", map[string]any{"limit": 51}, "limit"},
		{"mhp_invoke", map[string]any{"device": "rig", "action": "home", "params": []any{1}}, "params"},
		{"mhp_describe", map[string]any{"device": "rig", "select": map[string]any{"knobs": []any{"x"}}}, "select.knobs"},
		{"mhp_write", map[string]any{"device": "rig", "name": "x", "value": 1, "session_id": "s1"}, "session_id"},
	} {
		res, body := mustCall(t, cs, tc.tool, tc.args)
		e, _ := body["mhpError"].(map[string]any)
		data, _ := e["data"].(map[string]any)
		if !res.IsError || errCode(body) != float64(mhp.CodeInvalidParams) || data["field"] != tc.field ||
			!strings.Contains(text(res), "argument "+tc.field) {
			t.Errorf("%s %v: isError %v field %v: %s", tc.tool, tc.args, res.IsError, data["field"], text(res))
		}
	}
	if r.dials.Load() != 0 {
		t.Fatalf("invalid arguments reached the device (%d dials)", r.dials.Load())
	}
	// An open object (params) takes any keys; the device checks them.
	res, body := mustCall(t, cs, "mhp_invoke", map[string]any{"device": "rig", "action": "home", "params": map[string]any{"speed": 2}})
	if errCode(body) == float64(mhp.CodeInvalidParams) || r.dials.Load() != 1 {
		t.Fatalf("params keys refused by the bridge: isError %v %s", res.IsError, text(res))
	}
	// Numbers that are integers in JSON Schema's sense pass.
	if res, body := mustCall(t, cs, "mhp_find", map[string]any{"limit": 2.0}); res.IsError {
		t.Fatalf("limit 2.0 refused: %v", body)
	}
}

// Item 10: notifications/cancelled reaches the job; progress tokens get
// progress; estop and ping are served while a call is in flight.
func TestCancelProgressAndPriority(t *testing.T) {
	r := newRig(t, "rig", true, "")
	b := rigBridge(t, r, mcpbridge.Config{})
	var mu sync.Mutex
	var seen []float64
	cs := session(t, b, &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
		mu.Lock()
		seen = append(seen, req.Params.Progress)
		mu.Unlock()
	}})

	// Progress, then cancel: the job started by the call is cancelled on the device.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		p := &mcp.CallToolParams{Name: "mhp_invoke", Arguments: map[string]any{"device": "rig", "action": "hold", "wait_s": 60}}
		p.SetProgressToken("tok-1")
		_, err := cs.CallTool(ctx, p)
		done <- err
	}()
	running := func() bool {
		jobs, err := r.drv.Jobs(context.Background(), mhp.JobsRequest{})
		return err == nil && len(jobs) > 0 && jobs[0].State == mhp.JobRunning
	}
	conformance.Eventually(t, "the hold job runs", running)
	for _, p := range []float64{0.25, 0.5} {
		r.progress <- p
		conformance.Eventually(t, "progress reaches the client", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(seen) > 0 && seen[len(seen)-1] == p
		})
	}
	// Ping and estop answer while the call is in flight on this connection:
	// but first check cancel, then estop in a second round.
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: %v", err)
	}
	conformance.Eventually(t, "the job is cancelled on the device", func() bool { return r.cancelled.Load() == 1 })

	// Priority: a call in flight does not hold up ping or mhp_estop.
	go func() {
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "mhp_invoke",
			Arguments: map[string]any{"device": "rig", "action": "hold", "wait_s": 60}})
		done <- err
	}()
	conformance.Eventually(t, "the second hold job runs", func() bool {
		jobs, err := r.drv.Jobs(context.Background(), mhp.JobsRequest{})
		if err != nil {
			return false
		}
		for _, j := range jobs {
			if j.State == mhp.JobRunning {
				return true
			}
		}
		return false
	})
	pctx, pcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer pcancel()
	if err := cs.Ping(pctx, nil); err != nil {
		t.Fatalf("ping during a call: %v", err)
	}
	res, err := cs.CallTool(pctx, &mcp.CallToolParams{Name: "mhp_estop", Arguments: map[string]any{"device": "rig", "reason": "drill"}})
	if err != nil || res.IsError {
		t.Fatalf("estop during a call: %v %v", res, err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the waiting call after estop: %v", err)
	}
	if r.drv.State() != mhp.StateEStop {
		t.Fatalf("state %s after estop", r.drv.State())
	}
}

// Estop is anyone's: a session that connected nothing stops what another
// session connected.
func TestEStopAllAcrossSessions(t *testing.T) {
	r := newRig(t, "rig", true, "")
	b := rigBridge(t, r, mcpbridge.Config{})
	a, c := session(t, b, nil), session(t, b, nil)
	if res, _ := mustCall(t, a, "mhp_read", map[string]any{"device": "rig"}); res.IsError {
		t.Fatal(text(res))
	}
	res, body := mustCall(t, c, "mhp_estop", map[string]any{"reason": "drill"})
	if res.IsError || body["stopped"] != 1.0 || r.drv.State() != mhp.StateEStop {
		t.Fatalf("estop-all from another session: %s (state %s)", text(res), r.drv.State())
	}
}

// Item 10: a cancelled mhp_run stops the script (its lease is released).
func TestCancelStopsAScript(t *testing.T) {
	r := newRig(t, "rig", true, "")
	b := rigBridge(t, r, mcpbridge.Config{Script: script.Options{MaxSteps: 1 << 62}})
	a, c := session(t, b, nil), session(t, b, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		_, _ = a.CallTool(ctx, &mcp.CallToolParams{Name: "mhp_run", Arguments: map[string]any{"timeout_s": 600,
			"script": "lab['rig'].acquire(600)\nlab['rig'].invoke('home')\ndef f():\n  for i in range(2000000000):\n    pass\nf()"}})
	}()
	acquire := func() bool {
		res, _ := mustCall(t, c, "mhp_lab", map[string]any{"op": "acquire", "device": "rig", "ttl_s": 60})
		if !res.IsError {
			mustCall(t, c, "mhp_lab", map[string]any{"op": "release", "device": "rig"})
		}
		return !res.IsError
	}
	conformance.Eventually(t, "the script holds the lease", func() bool { return r.homed.Load() == 1 })
	if acquire() {
		t.Fatal("another session took the lease the running script holds")
	}
	cancel()
	conformance.Eventually(t, "the cancelled script ends and its lease is released", acquire)
}

// Sessions are bounded; a closed session frees its place (and its leases).
func TestSessionLimit(t *testing.T) {
	r := newRig(t, "rig", true, "")
	b := rigBridge(t, r, mcpbridge.Config{MaxSessions: 2})
	a, c, d := session(t, b, nil), session(t, b, nil), session(t, b, nil)
	for _, cs := range []*mcp.ClientSession{a, c} {
		if res, _ := mustCall(t, cs, "mhp_read", map[string]any{"device": "rig"}); res.IsError {
			t.Fatal(text(res))
		}
	}
	res, _ := mustCall(t, d, "mhp_read", map[string]any{"device": "rig"})
	if !res.IsError || !strings.Contains(text(res), "too many MCP sessions") {
		t.Fatalf("third session over a limit of 2: %s", text(res))
	}
	if res, _ := mustCall(t, d, "mhp_estop", map[string]any{"device": "rig", "reason": "drill"}); res.IsError || r.drv.State() != mhp.StateEStop {
		t.Fatalf("estop refused to a session over the limit: %s", text(res))
	}
	a.Close()
	conformance.Eventually(t, "a closed session frees its place", func() bool {
		res, _ := mustCall(t, d, "mhp_read", map[string]any{"device": "rig"})
		return !res.IsError
	})
}

// Calls in flight per session are bounded; estop is never refused.
func TestInFlightLimit(t *testing.T) {
	r := newRig(t, "rig", true, "")
	b := rigBridge(t, r, mcpbridge.Config{MaxInFlight: 1})
	cs := session(t, b, nil)
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, _ := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "mhp_invoke",
			Arguments: map[string]any{"device": "rig", "action": "hold", "wait_s": 60}})
		done <- res
	}()
	conformance.Eventually(t, "the hold job runs", func() bool {
		jobs, err := r.drv.Jobs(context.Background(), mhp.JobsRequest{})
		return err == nil && len(jobs) == 1 && jobs[0].State == mhp.JobRunning
	})
	res, _ := mustCall(t, cs, "mhp_read", map[string]any{"device": "rig"})
	if !res.IsError || !strings.Contains(text(res), "in flight") {
		t.Fatalf("a second call over MaxInFlight=1: %s", text(res))
	}
	if res, _ := mustCall(t, cs, "mhp_estop", map[string]any{"device": "rig", "reason": "drill"}); res.IsError {
		t.Fatalf("estop refused while a call is in flight: %s", text(res))
	}
	if res := <-done; res == nil || res.IsError {
		t.Fatalf("the held call after estop: %+v", res)
	}
	if res, _ := mustCall(t, cs, "mhp_read", map[string]any{"device": "rig"}); res.IsError {
		t.Fatalf("the slot was not given back: %s", text(res))
	}
}
