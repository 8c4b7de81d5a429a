package client

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
)

// scripted is an HTTP server answering each method with a canned raw
// result (or error object), to feed the client every shape.
type scripted struct {
	mu      sync.Mutex
	results map[string]string // method -> raw result JSON
	errors  map[string]string // method -> raw error JSON
	clients []string
}

func (s *scripted) set(method, result string) {
	s.mu.Lock()
	s.results[method] = result
	delete(s.errors, method)
	s.mu.Unlock()
}

func (s *scripted) fail(method, errObj string) {
	s.mu.Lock()
	s.errors[method] = errObj
	s.mu.Unlock()
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/rpc" {
		http.NotFound(w, r)
		return
	}
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	b, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(b, &req)
	s.mu.Lock()
	if req.Method == "initialize" {
		s.clients = append(s.clients, r.Header.Get("X-MHP-Client"))
	}
	res, ok := s.results[req.Method]
	e, failed := s.errors[req.Method]
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case req.Method == "initialize":
		res = `{"protocolVersion":"2026-09-12","device":{"id":"odd","class":"x"},"capabilities":{"signals":true,"estop":true,"watchdog_s":null},"session":"c1"}`
	case failed:
		io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(req.ID)+`,"error":`+e+`}`)
		return
	case !ok:
		io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(req.ID)+`,"error":{"code":-32601,"message":"no"}}`)
		return
	}
	io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(req.ID)+`,"result":`+res+`}`)
}

func dialScripted(t *testing.T) (*Device, *scripted) {
	t.Helper()
	s := &scripted{results: map[string]string{}, errors: map[string]string{}}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	d, err := Dial(context.Background(), hs.URL, Options{Plain: true, Timeout: 5 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, s
}

// TestOpenShapes: the client reads every shape the spec leaves open.
func TestOpenShapes(t *testing.T) {
	d, s := dialScripted(t)
	ctx := context.Background()

	for _, k := range []struct {
		raw     string
		stopped bool
		jobs    []string
	}{
		{`{"state":"estop","stopped":true,"cancelled":["job_1"]}`, true, []string{"job_1"}},
		{`{"state":"estop","stopped":true,"cancelling":["job_2"],"stop_pending":false}`, true, []string{"job_2"}},
		{`{"state":"estop","stop_error":null}`, false, nil}, // stopped missing
		{`{"state":"estop","stopped":"true","cancelled":"job_3"}`, true, []string{"job_3"}},
	} {
		s.set("safety/estop", k.raw)
		r, err := d.EStop(ctx, "t")
		if err != nil || r.Stopped != k.stopped || strings.Join(EStopJobs(r), ",") != strings.Join(k.jobs, ",") {
			t.Errorf("estop %s: %+v %v jobs %v", k.raw, r, err, EStopJobs(r))
		}
	}

	for raw, want := range map[string]bool{
		`true`: true, `false`: false, `"true"`: true, `"false"`: false, `"all signals readable"`: true, `""`: false, `1`: true,
	} {
		s.set("safety/reset", `{"state":"idle","verified":`+raw+`}`)
		r, err := d.Reset(ctx)
		if err != nil || r.Verified != want || r.State != mhp.StateIdle {
			t.Errorf("reset verified %s: %+v %v", raw, r, err)
		}
	}

	s.set("ping", `{"ok":true,"state":"warming_up","fault_reason":null,"lease":null,"ts":12}`)
	if p, err := d.Ping(ctx); err != nil || p.State != "warming_up" || p.TS != 12 {
		t.Errorf("ping with an unknown state: %+v %v", p, err)
	}

	s.set("signals/read", `{"values":{"a":1,"b":2.5,"c":"x"},"ts":"1788991266.5"}`)
	if r, err := d.Read(ctx, nil); err != nil || r.Values["a"] != 1.0 || r.TS != 1788991266.5 {
		t.Errorf("read: %+v %v", r, err)
	}

	s.set("session/acquire", `{"holder":"me","ttl":60,"watchdog_s":null,"expires":"17"}`)
	if l, err := d.Acquire(ctx, time.Minute); err != nil || l.TTL != 60 || l.Expires != 17 || l.Holder != "me" {
		t.Errorf("acquire: %+v %v", l, err)
	}

	s.set("safety/limits", `{"settings":{"t":{"min":4,"max":105},"m":{"enum":["a","b"]},"f":{}},
		"actions":{"run":{"cycles":[1,99]},"open":{}},"interlocks":["lid"],
		"approval":{"t":"auto","m":"confirm","f":"forbid","run":"auto","open":"confirm"},"watchdog_s":null}`)
	if l, err := d.Limits(ctx); err != nil {
		t.Errorf("limits: %v", err)
	} else {
		tl := l.Settings["t"]
		if tl.Limits == nil || tl.Limits.Min == nil || *tl.Limits.Max != 105 || tl.Approval != "auto" ||
			l.Settings["m"].Approval != "confirm" || len(l.Settings["m"].Limits.Enum) != 2 ||
			l.Settings["f"].Approval != "forbid" || !l.Settings["f"].Limits.Empty() ||
			l.Actions["run"].Limits["cycles"] == nil || *l.Actions["run"].Limits["cycles"].Max != 99 ||
			l.Actions["open"].Approval != "confirm" || l.Interlocks[0] != "lid" {
			t.Errorf("limits in the reference shape misread: %+v", l)
		}
	}
	s.set("safety/limits", `{"settings":{"t":{"limits":{"min":4,"max":105},"approval":"auto","unit":"degC"}},"actions":{},"estop":true}`)
	if l, err := d.Limits(ctx); err != nil || *l.Settings["t"].Limits.Min != 4 || l.Settings["t"].Unit != "degC" || !l.EStop {
		t.Errorf("limits in our shape: %+v %v", l, err)
	}

	s.set("device/describe", `{"device":{"id":"odd","class":"x","make":"M"},"signals":[{"name":"a","type":"number"}],"mhp":"2026-09-12","state":"idle"}`)
	if desc, err := d.Describe(ctx, mhp.DescribeRequest{Detail: "full"}); err != nil || desc.ID != "odd" || desc.Make != "M" || len(desc.Signals) != 1 {
		t.Errorf("describe with identity under device: %+v %v", desc, err)
	}

	s.set("jobs/status", `{"job":{"id":"job_1","action":"run","state":"failed","progress":1,"error":"RuntimeError: boom","started":"10","outcome":null,"paused":"false"}}`)
	if j, err := d.Job(ctx, "job_1"); err != nil || j.Error == nil || !strings.Contains(j.Error.Message, "boom") || j.Progress != 1 || j.Started != 10 {
		t.Errorf("job: %+v %v", j, err)
	}
	s.set("jobs/status", `{"job":{"id":"job_1","state":"waiting_operator","progress":0.5}}`)
	if j, err := d.Job(ctx, "job_1"); err != nil || j.State != "waiting_operator" || j.State.Terminal() {
		t.Errorf("job in an unknown state: %+v %v", j, err)
	}

	s.set("settings/write", `{"ok":true,"dryRun":true,"wouldWrite":{"t":50},"needsApproval":true,"leaseHeldBy":"other"}`)
	if r, err := d.Write(ctx, mhp.WriteRequest{Name: "t", Value: 50, DryRun: true}); err != nil || r.Name != "t" || r.WouldWrite != 50.0 ||
		r.Notes == nil || !r.Notes.NeedsApproval || r.Notes.LeaseHeldBy != "other" {
		t.Errorf("dry-run write in the reference shape: %+v %v", r, err)
	}

	s.set("actions/invoke", `{"job":{"id":"job_2","action":"run","state":"dryRun","progress":0.0},"busyNow":"a job is running"}`)
	if r, err := d.Invoke(ctx, mhp.InvokeRequest{Name: "run", DryRun: true}); err != nil || !r.DryRun || r.Notes == nil || !r.Notes.BusyNow {
		t.Errorf("dry-run invoke in the reference shape: %+v %v", r, err)
	}

	s.set("signals/subscribe", `{"subscribed":"all"}`)
	if r, err := d.Subscribe(ctx, nil); err != nil || len(r.Subscribed) != 1 || r.Subscribed[0] != "all" {
		t.Errorf("subscribe: %+v %v", r, err)
	}

	s.fail("signals/read", `{"code":-32040,"message":"unknown signal 'x'","ts":1788991266.5}`)
	_, err := d.Read(ctx, []string{"x"})
	if e, ok := mhp.AsError(err); !ok || e.Code != mhp.CodeUnknownName || e.TS != 1788991266.5 {
		t.Errorf("error with ts in the error object: %#v", err)
	}
	s.fail("signals/read", `{"code":-32010.0,"message":"m","data":[1,2]}`)
	_, err = d.Read(ctx, []string{"x"})
	if e, ok := mhp.AsError(err); !ok || e.Code != mhp.CodeLimitViolation || e.Data["data"] == nil {
		t.Errorf("error with a float code and list data: %#v", err)
	}
}

// TestOddShapesNeverPanic feeds every method answers of every wrong shape:
// each call returns a result or an error, never panics.
func TestOddShapesNeverPanic(t *testing.T) {
	d, s := dialScripted(t)
	ctx := context.Background()
	odd := []string{`null`, `[]`, `"x"`, `1`, `{}`, `true`, `{"job":"x"}`, `{"job":[1]}`, `{"values":5,"ts":{}}`,
		`{"settings":[1],"actions":"x","approval":3}`, `{"state":{},"stopped":[],"cancelled":{"a":1},"cancelling":7}`,
		`{"verified":{},"state":1}`, `{"device":"x","signals":{"a":1}}`, `{"signals":[1,null,{"name":2}]}`,
		`{"jobs":[null,"x",{"error":5}]}`, `{"holder":{},"ttl":"soon"}`, `{"wouldWrite":{"a":1,"b":2},"notes":5}`,
		`{"job":{"id":1,"state":null,"progress":"half","error":{"code":"x"}}}`,
		`{"a":` + strings.Repeat(`[`, 200) + strings.Repeat(`]`, 200) + `}`}
	calls := map[string]func() error{
		"safety/estop":      func() error { _, err := d.EStop(ctx, "x"); return err },
		"safety/reset":      func() error { _, err := d.Reset(ctx); return err },
		"ping":              func() error { _, err := d.Ping(ctx); return err },
		"signals/read":      func() error { _, err := d.Read(ctx, nil); return err },
		"session/acquire":   func() error { _, err := d.Acquire(ctx, time.Minute); return err },
		"safety/limits":     func() error { _, err := d.Limits(ctx); return err },
		"device/describe":   func() error { _, err := d.Describe(ctx, mhp.DescribeRequest{}); return err },
		"jobs/status":       func() error { _, err := d.Job(ctx, "j"); return err },
		"jobs/list":         func() error { _, err := d.Jobs(ctx, mhp.JobsRequest{}); return err },
		"settings/write":    func() error { _, err := d.Write(ctx, mhp.WriteRequest{Name: "a", Value: 1}); return err },
		"actions/invoke":    func() error { _, err := d.Run(ctx, "a", nil); return err },
		"signals/subscribe": func() error { _, err := d.Subscribe(ctx, nil); return err },
	}
	for method, call := range calls {
		for _, raw := range odd {
			s.set(method, raw)
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Errorf("%s answering %.60s: panic %v", method, raw, p)
					}
				}()
				if err := call(); err != nil {
					if _, ok := mhp.AsError(err); !ok {
						t.Errorf("%s answering %.60s: a non-MHP error %v", method, raw, err)
					}
				}
			}()
		}
	}
}

// TestClientIDUnique: each Dial sends its own X-MHP-Client unless told one.
func TestClientIDUnique(t *testing.T) {
	s := &scripted{results: map[string]string{}, errors: map[string]string{}}
	hs := httptest.NewServer(s)
	defer hs.Close()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, opts := range []Options{{ClientName: "app"}, {ClientName: "app"}, {ClientName: "app", ClientID: "fixed"}} {
		opts.Logger = log
		d, err := Dial(context.Background(), hs.URL, opts)
		if err != nil {
			t.Fatal(err)
		}
		d.Close()
	}
	s.mu.Lock()
	ids := append([]string(nil), s.clients...)
	s.mu.Unlock()
	if len(ids) != 3 || ids[0] == ids[1] || !strings.HasPrefix(ids[0], "app/") || ids[2] != "fixed" {
		t.Fatalf("client ids %v", ids)
	}
	if id := NewClientID("a b\x00c"); strings.ContainsAny(id, " \x00") {
		t.Fatalf("unsafe header value %q", id)
	}
}
