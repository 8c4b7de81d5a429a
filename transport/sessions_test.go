package transport_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/clock"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/transport"
)

// ---- helpers ----

// postRaw sends one body to /rpc and returns the answer (its body already
// read and closed) and the body's bytes.
func postRaw(t testing.TB, url, body string, headers map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/rpc", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST /rpc: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	return resp, b
}

// sseTap collects every byte of one GET /events stream.
type sseTap struct {
	mu   sync.Mutex
	buf  []byte
	done chan struct{}
	body io.Closer
}

func tapEvents(t testing.TB, url string, headers map[string]string) *sseTap {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url+"/events", nil)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET /events: %d %s", resp.StatusCode, b)
	}
	tap := &sseTap{done: make(chan struct{}), body: resp.Body}
	go func() {
		defer close(tap.done)
		br := bufio.NewReader(resp.Body)
		for {
			line, err := br.ReadBytes('\n')
			tap.mu.Lock()
			tap.buf = append(tap.buf, line...)
			tap.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { resp.Body.Close(); <-tap.done })
	return tap
}

func (tp *sseTap) bytes() []byte {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return append([]byte(nil), tp.buf...)
}

// ended reports whether the stream ended.
func (tp *sseTap) ended() bool {
	select {
	case <-tp.done:
		return true
	default:
		return false
	}
}

// rpcAnswer decodes a JSON-RPC answer body.
func rpcAnswer(t testing.TB, b []byte) rawResp {
	t.Helper()
	var r rawResp
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("answer %q: %v", b, err)
	}
	return r
}

// ---- 12.2: sessions cannot be taken over ----

// peer is one client of the leak test: it calls methods and reports every
// byte the server sent it except the initialize answer.
type peer interface {
	call(method, params string) []byte
	transcript() []byte
}

type httpPeer struct {
	t      testing.TB
	url    string
	secret string
	seen   bytes.Buffer
	events *sseTap
	id     int
}

func (p *httpPeer) call(method, params string) []byte {
	p.id++
	h, b := postRaw(p.t, p.url, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, p.id, method, params),
		map[string]string{mhp.HeaderSession: p.secret, mhp.HeaderClient: "leaktest"})
	for k, v := range h.Header {
		fmt.Fprintf(&p.seen, "%s: %s\n", k, strings.Join(v, ","))
	}
	p.seen.Write(b)
	return b
}

func (p *httpPeer) transcript() []byte {
	return append(append([]byte(nil), p.seen.Bytes()...), p.events.bytes()...)
}

type streamPeer struct {
	rs   *rawStream
	id   int
	skip int // bytes of the transcript up to the initialize answer
}

func (p *streamPeer) call(method, params string) []byte {
	p.id++
	p.rs.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, p.id, method, params))
	return p.rs.awaitRaw(strconv.Itoa(p.id))
}

func (p *streamPeer) transcript() []byte { return p.rs.transcript()[p.skip:] }

// leakSteps drives every method, in an order that gives each a chance to
// name the other session: A takes the lease first, so B's refusals name
// A; A's job carries its owner.
var leakSteps = []struct{ method, params string }{
	{"ping", `{}`},
	{"device/describe", `{"detail":"full"}`},
	{"signals/read", `{}`},
	{"signals/subscribe", `{"names":["temperature"]}`},
	{"session/acquire", `{"ttl":60}`},
	{"session/renew", `{}`},
	{"settings/write", `{"name":"setpoint","value":20}`},
	{"settings/write", `{"name":"setpoint","value":21,"dryRun":true}`},
	{"actions/invoke", `{"name":"monitor"}`},
	{"jobs/status", `{"id":"$job"}`},
	{"jobs/list", `{}`},
	{"jobs/pause", `{"id":"$job"}`},
	{"jobs/resume", `{"id":"$job"}`},
	{"jobs/cancel", `{"id":"$job"}`},
	{"safety/limits", `{}`},
	{"methods/list", `{}`},
	{"methods/find", `{}`},
	{"methods/get", `{}`},
	{"methods/diff", `{}`},
	{"methods/save", `{}`},
	{"methods/delete", `{}`},
	{"resources/list", `{}`},
	{"resources/read", `{"path":"x"}`},
	{"signals/unsubscribe", `{"names":["temperature"]}`},
	{"safety/estop", `{"reason":"leak test"}`},
	{"safety/reset", `{}`},
	{"session/release", `{}`},
}

func TestLeakStepsCoverEveryMethod(t *testing.T) {
	m := newMemory(t, conformance.Options{})
	srv := newServer(t, m.drv, transport.Options{})
	for _, name := range srv.Methods() {
		if !slices.ContainsFunc(leakSteps, func(s struct{ method, params string }) bool { return s.method == name }) {
			t.Errorf("method %s is not driven by the session leak test", name)
		}
	}
}

// runLeakSteps drives both peers through every method and checks that no
// byte either received carries the other's secret or (after initialize) its
// own, and that refusals name the holder by its label.
func runLeakSteps(t *testing.T, a, b peer, secretA, secretB, labelA, labelB string, wait func(func() bool)) {
	t.Helper()
	job := ""
	for _, st := range leakSteps {
		params := strings.ReplaceAll(st.params, "$job", job)
		for i, p := range []peer{a, b} {
			ans := p.call(st.method, params)
			if i == 0 && st.method == "actions/invoke" {
				var r struct {
					Result struct {
						Job mhp.Job `json:"job"`
					} `json:"result"`
				}
				if json.Unmarshal(ans, &r) != nil || r.Result.Job.ID == "" {
					t.Fatalf("A's invoke: %s", ans)
				}
				job = r.Result.Job.ID
			}
			if i == 1 && st.method == "settings/write" && !strings.Contains(st.params, "dryRun") {
				r := rpcAnswer(t, ans)
				if code(r) != mhp.CodeNotLeased || r.Error.Data["holder"] != labelA {
					t.Fatalf("B's write under A's lease: %s, want NotLeased naming holder %q", ans, labelA)
				}
			}
		}
	}
	// Every session saw the estop notification (and so the notifications before it).
	for _, p := range []peer{a, b} {
		wait(func() bool { return bytes.Contains(p.transcript(), []byte(mhp.NotifySafetyEStop)) })
	}
	ta, tb := a.transcript(), b.transcript()
	for _, c := range []struct {
		who    string
		seen   []byte
		secret string
		what   string
	}{
		{"A", ta, secretB, "B's secret"}, {"B", tb, secretA, "A's secret"},
		{"A", ta, secretA, "its own secret after initialize"}, {"B", tb, secretB, "its own secret after initialize"},
	} {
		if i := bytes.Index(c.seen, []byte(c.secret)); i >= 0 {
			lo := max(0, i-200)
			t.Errorf("%s received %s: ...%s...", c.who, c.what, c.seen[lo:min(len(c.seen), i+100)])
		}
	}
	// The labels are what the others see: B's refusals and A's job owner name A.
	if !bytes.Contains(tb, []byte(labelA)) {
		t.Errorf("B never saw A's label %q", labelA)
	}
	if !bytes.Contains(ta, []byte(`"by":"`+labelB+`"`)) && !bytes.Contains(ta, []byte(`"by":"`+labelA+`"`)) {
		t.Errorf("no notification names a session by label")
	}
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestSecretsNeverLeakHTTP(t *testing.T) {
	m := newMemory(t, conformance.Options{})
	m.in.SetSignal(conformance.SignalDoorClosed, true)
	logs := &syncBuffer{}
	srv := newServer(t, m.drv, transport.Options{Clock: m.clk,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	hs := serveHTTP(t, srv)
	open := func(name string) (*httpPeer, string, string) {
		h, b := postRaw(t, hs.URL, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2026-09-12","clientInfo":{"name":"`+name+`"}}}`, nil)
		var r struct {
			Result mhp.InitializeResult `json:"result"`
		}
		if err := json.Unmarshal(b, &r); err != nil || r.Result.Session == "" || h.Header.Get(mhp.HeaderSession) != r.Result.Session {
			t.Fatalf("initialize: %s", b)
		}
		if !strings.HasPrefix(r.Result.Label, name+"#") || strings.Contains(r.Result.Label, r.Result.Session) {
			t.Fatalf("label %q for client %q (secret %q)", r.Result.Label, name, r.Result.Session)
		}
		p := &httpPeer{t: t, url: hs.URL, secret: r.Result.Session}
		p.events = tapEvents(t, hs.URL, map[string]string{mhp.HeaderSession: p.secret})
		return p, r.Result.Session, r.Result.Label
	}
	a, sa, la := open("alice")
	b, sb, lb := open("alice") // the same name: a different label
	if la == lb {
		t.Fatalf("two sessions share the label %q", la)
	}
	runLeakSteps(t, a, b, sa, sb, la, lb, func(cond func() bool) { conformance.EventuallyWithin(t, "the estop event", testTimeout, cond) })
	for _, secret := range []string{sa, sb} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the server log carries a session secret")
		}
	}
	if !strings.Contains(logs.String(), la) {
		t.Errorf("the server log never names session %s", la)
	}
}

func TestSecretsNeverLeakStdio(t *testing.T) {
	m := newMemory(t, conformance.Options{})
	m.in.SetSignal(conformance.SignalDoorClosed, true)
	srv := newServer(t, m.drv, transport.Options{Clock: m.clk})
	open := func() (*streamPeer, string, string) {
		rs := newRawStream(t, srv)
		rs.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2026-09-12","clientInfo":{"name":"bob"}}}`)
		var r struct {
			Result mhp.InitializeResult `json:"result"`
		}
		if err := json.Unmarshal(rs.awaitRaw("0"), &r); err != nil || r.Result.Session == "" {
			t.Fatalf("initialize: %v", err)
		}
		return &streamPeer{rs: rs, skip: len(rs.transcript())}, r.Result.Session, r.Result.Label
	}
	a, sa, la := open()
	b, sb, lb := open()
	runLeakSteps(t, a, b, sa, sb, la, lb, func(cond func() bool) { conformance.EventuallyWithin(t, "the estop event", testTimeout, cond) })
}

// A label is never accepted as a credential, nor is a header session's.
func TestLabelIsNoCredential(t *testing.T) {
	m := newMemory(t, conformance.Options{})
	srv := newServer(t, m.drv, transport.Options{})
	hs := serveHTTP(t, srv)
	_, b := postRaw(t, hs.URL, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2026-09-12","clientInfo":{"name":"owner"}}}`, nil)
	var r struct {
		Result mhp.InitializeResult `json:"result"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	own := map[string]string{mhp.HeaderSession: r.Result.Session}
	if _, b := postRaw(t, hs.URL, `{"jsonrpc":"2.0","id":1,"method":"session/acquire"}`, own); rpcAnswer(t, b).Error != nil {
		t.Fatalf("acquire: %s", b)
	}
	for _, h := range []map[string]string{
		{mhp.HeaderSession: r.Result.Label},
		{mhp.HeaderClient: r.Result.Label},
		{mhp.HeaderClient: "owner"},
		{mhp.HeaderSession: r.Result.Label, mhp.HeaderClient: r.Result.Label},
	} {
		_, b := postRaw(t, hs.URL, `{"jsonrpc":"2.0","id":2,"method":"settings/write","params":{"name":"setpoint","value":5}}`, h)
		if rpcAnswer(t, b).Error == nil {
			t.Fatalf("write with %v was accepted: %s", h, b)
		}
		_, b = postRaw(t, hs.URL, `{"jsonrpc":"2.0","id":3,"method":"session/release"}`, h)
	}
	if n := m.in.Calls(conformance.SettingSetpoint); n != 0 {
		t.Fatalf("the backend got %d writes", n)
	}
	if _, b := postRaw(t, hs.URL, `{"jsonrpc":"2.0","id":4,"method":"session/renew"}`, own); rpcAnswer(t, b).Error != nil {
		t.Fatalf("the owner lost its lease to a label: %s", b)
	}
}

// ---- 12.3: estop is always answered ----

func estopBody(id int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"safety/estop","params":{"reason":"any caller"}}`, id)
}

// resetDevice clears an estop in process (any session may reset an unleased device).
func resetDevice(t *testing.T, m *memory) {
	t.Helper()
	m.in.SetSignal(conformance.SignalTemperature, 20.0)
	if _, err := mhp.AsSession(m.drv, "tester").Reset(t.Context()); err != nil {
		t.Fatalf("reset: %v", err)
	}
}

func TestEStopServedToAnyCallerHTTP(t *testing.T) {
	m := newMemory(t, conformance.Options{})
	clk := clock.NewManual(time.Unix(1_800_000_000, 0))
	srv := newServer(t, m.drv, transport.Options{Clock: clk, SessionTTL: time.Minute, MaxSessions: 2})
	hs := serveHTTP(t, srv)
	expired := initHTTP(t, hs.URL, nil)
	conformance.EventuallyWithin(t, "the expired session to go", testTimeout, func() bool {
		clk.Advance(20 * time.Second)
		return srv.Sessions() == 0
	})
	// Fill the table; each holder pings so it is live.
	full := []string{initHTTP(t, hs.URL, nil), initHTTP(t, hs.URL, nil)}
	if srv.Sessions() != 2 {
		t.Fatalf("%d sessions, want the table full at 2", srv.Sessions())
	}
	cases := []struct {
		name    string
		headers map[string]string
	}{
		{"no session", nil},
		{"unknown session", map[string]string{mhp.HeaderSession: "s_00000000000000000000000000000000"}},
		{"expired session", map[string]string{mhp.HeaderSession: expired}},
		{"unknown X-MHP-Client", map[string]string{mhp.HeaderClient: "never-initialized"}},
		{"full table, no session", map[string]string{mhp.HeaderClient: "newcomer"}},
		{"a live session", map[string]string{mhp.HeaderSession: full[0]}},
		{"an oversized X-MHP-Client", map[string]string{mhp.HeaderClient: strings.Repeat("x", 4096)}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, b := postRaw(t, hs.URL, estopBody(i), c.headers)
			r := rpcAnswer(t, b)
			if r.Error != nil {
				t.Fatalf("estop refused: %v", r.Error)
			}
			if st := m.drv.State(); st != mhp.StateEStop {
				t.Fatalf("state %s after the estop answer", st)
			}
			resetDevice(t, m)
		})
	}
	// ping and /mhp.json need no session either.
	if _, b := postRaw(t, hs.URL, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, nil); rpcAnswer(t, b).Error != nil {
		t.Fatalf("ping without a session: %s", b)
	}
	resp, err := http.Get(hs.URL + "/mhp.json")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/mhp.json: %v %v", resp, err)
	}
	resp.Body.Close()
	// Everything else still needs one.
	if _, b := postRaw(t, hs.URL, `{"jsonrpc":"2.0","id":1,"method":"signals/read"}`, nil); code(rpcAnswer(t, b)) != mhp.CodeServerError {
		t.Fatalf("read without a session: %s", b)
	}
	if srv.Sessions() != 2 {
		t.Fatalf("estops and pings opened sessions: %d live", srv.Sessions())
	}
}

// A full table evicts the least recently used session without a lease.
func TestFullTableEvictsIdleWithoutLease(t *testing.T) {
	m := newMemory(t, conformance.Options{})
	clk := clock.NewManual(time.Unix(1_800_000_000, 0))
	srv := newServer(t, m.drv, transport.Options{Clock: clk, MaxSessions: 3})
	hs := serveHTTP(t, srv)
	holder := initHTTP(t, hs.URL, nil)
	if _, r := post(t, hs.URL, `{"jsonrpc":"2.0","id":1,"method":"session/acquire","params":{"ttl":600}}`, map[string]string{mhp.HeaderSession: holder}); r.Error != nil {
		t.Fatal(r.Error)
	}
	clk.Advance(time.Second)
	older := initHTTP(t, hs.URL, nil)
	clk.Advance(time.Second)
	newer := initHTTP(t, hs.URL, nil)
	clk.Advance(time.Second)
	tap := tapEvents(t, hs.URL, map[string]string{mhp.HeaderSession: older})
	clk.Advance(time.Second)
	if _, r := post(t, hs.URL, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, map[string]string{mhp.HeaderSession: newer}); r.Error != nil {
		t.Fatal(r.Error)
	}
	clk.Advance(time.Second)
	newcomer := initHTTP(t, hs.URL, nil) // evicts `older`: the holder is older but leased
	if srv.Sessions() != 3 {
		t.Fatalf("%d sessions after eviction, want 3", srv.Sessions())
	}
	for sid, live := range map[string]bool{holder: true, older: false, newer: true, newcomer: true} {
		_, r := post(t, hs.URL, `{"jsonrpc":"2.0","id":2,"method":"signals/read"}`, map[string]string{mhp.HeaderSession: sid})
		if got := r.Error == nil; got != live {
			t.Errorf("session live=%v after eviction, want %v (%+v)", got, live, r.Error)
		}
	}
	conformance.EventuallyWithin(t, "the evicted session's stream to end", testTimeout, tap.ended)
}

// An open event stream does not keep a silent session alive.
func TestStreamOnlySessionExpires(t *testing.T) {
	m := newMemory(t, conformance.Options{})
	clk := clock.NewManual(time.Unix(1_800_000_000, 0))
	srv := newServer(t, m.drv, transport.Options{Clock: clk, SessionTTL: time.Minute})
	hs := serveHTTP(t, srv)
	sid := initHTTP(t, hs.URL, nil)
	tap := tapEvents(t, hs.URL, map[string]string{mhp.HeaderSession: sid})
	conformance.EventuallyWithin(t, "the silent session to expire", testTimeout, func() bool {
		clk.Advance(10 * time.Second)
		return srv.Sessions() == 0
	})
	conformance.EventuallyWithin(t, "its stream to end", testTimeout, tap.ended)
}

// On a stream, requests pipelined after initialize wait for it: none is
// refused not_initialized, and an estop right behind it is served.
func TestStdioPipelinedAfterInitialize(t *testing.T) {
	m := newMemory(t, conformance.Options{})
	srv := newServer(t, m.drv, transport.Options{})
	for i := 0; i < 30; i++ {
		rs := newRawStream(t, srv)
		rs.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2026-09-12"}}` + "\n" +
			`{"jsonrpc":"2.0","id":2,"method":"safety/estop","params":{"reason":"pipelined"}}` + "\n" +
			`{"jsonrpc":"2.0","id":3,"method":"signals/read"}` + "\n" +
			`{"jsonrpc":"2.0","id":4,"method":"jobs/list"}`)
		for _, id := range []string{"1", "2", "3", "4"} {
			if r := rs.await(id); r.Error != nil {
				t.Fatalf("round %d: request %s: %v", i, id, r.Error)
			}
		}
		if st := m.drv.State(); st != mhp.StateEStop {
			t.Fatalf("state %s after a pipelined estop", st)
		}
		resetDevice(t, m)
	}
	// Before any initialize, estop is served too (anonymously).
	rs := newRawStream(t, srv)
	rs.send(estopBody(7))
	if r := rs.await("7"); r.Error != nil {
		t.Fatalf("estop before initialize: %v", r.Error)
	}
	if st := m.drv.State(); st != mhp.StateEStop {
		t.Fatalf("state %s after an estop before initialize", st)
	}
}

// ---- 12.4: the reference client's exchange ----

// refClient plays the Python OpenMHP client: it initializes with
// X-MHP-Client, ignores the session it is given and sends every later
// request with X-MHP-Client only.
type refClient struct {
	t    *testing.T
	url  string
	name string
	id   int
}

func (c *refClient) call(method, params string) rawResp {
	c.t.Helper()
	c.id++
	_, b := postRaw(c.t, c.url, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, c.id, method, params),
		map[string]string{mhp.HeaderClient: c.name})
	return rpcAnswer(c.t, b)
}

func (c *refClient) must(method, params string) json.RawMessage {
	c.t.Helper()
	r := c.call(method, params)
	if r.Error != nil {
		c.t.Fatalf("%s %s: %v", method, params, r.Error)
	}
	return r.Result
}

func TestReferenceClientExchange(t *testing.T) {
	m := newMemory(t, conformance.Options{})
	m.in.SetSignal(conformance.SignalDoorClosed, true)
	srv := newServer(t, m.drv, transport.Options{})
	hs := serveHTTP(t, srv)
	c := &refClient{t: t, url: hs.URL, name: "openmhp-python/0.9"}
	var init mhp.InitializeResult
	if err := json.Unmarshal(c.must("initialize", `{"protocolVersion":"2026-09-12","clientInfo":{"name":"openmhp","version":"0.9"}}`), &init); err != nil {
		t.Fatal(err)
	}
	c.must("device/describe", `{"detail":"summary"}`)
	c.must("signals/read", `{"names":["temperature"]}`)
	var lease mhp.Lease
	if err := json.Unmarshal(c.must("session/acquire", `{"ttl":60}`), &lease); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(lease.Holder, "openmhp-python_0.9#") {
		t.Fatalf("lease holder %q, want the header session's label", lease.Holder)
	}
	c.must("settings/write", `{"name":"setpoint","value":42}`)
	var inv struct {
		Job mhp.Job `json:"job"`
	}
	if err := json.Unmarshal(c.must("actions/invoke", `{"name":"quick","params":{}}`), &inv); err != nil || inv.Job.ID == "" {
		t.Fatalf("invoke: %v %+v", err, inv)
	}
	conformance.EventuallyWithin(t, "the job to finish", testTimeout, func() bool {
		var st struct {
			Job mhp.Job `json:"job"`
		}
		_ = json.Unmarshal(c.must("jobs/status", `{"id":"`+inv.Job.ID+`"}`), &st)
		return st.Job.State == mhp.JobDone
	})
	c.must("safety/estop", `{"reason":"reference client"}`)
	if st := m.drv.State(); st != mhp.StateEStop {
		t.Fatalf("state %s after the reference client's estop", st)
	}
	c.must("safety/reset", `{}`)
	c.must("session/release", `{}`)

	// The header session can never act as the server-issued session the
	// same initialize returned, nor the other way round.
	if _, r := post(t, hs.URL, `{"jsonrpc":"2.0","id":1,"method":"session/acquire"}`, map[string]string{mhp.HeaderSession: init.Session}); r.Error != nil {
		t.Fatalf("the issued session's acquire: %v", r.Error)
	}
	r := c.call("settings/write", `{"name":"setpoint","value":43}`)
	if code(r) != mhp.CodeNotLeased || r.Error.Data["holder"] != init.Label {
		t.Fatalf("header session's write under the issued session's lease: %+v", r.Error)
	}
	// Another name is another session (and one that never initialized is refused).
	other := &refClient{t: t, url: hs.URL, name: "someone-else"}
	if r := other.call("signals/read", `{}`); code(r) != mhp.CodeServerError || r.Error.Data["reason"] != "not_initialized" {
		t.Fatalf("header never initialized: %+v", r.Error)
	}
	if n := m.in.Calls(conformance.SettingSetpoint); n != 1 {
		t.Fatalf("the backend got %d setpoint writes, want 1", n)
	}
}

func TestStrictSessionsRefuseHeaderActuation(t *testing.T) {
	m := newMemory(t, conformance.Options{})
	m.in.SetSignal(conformance.SignalDoorClosed, true)
	srv := newServer(t, m.drv, transport.Options{StrictSessions: true})
	hs := serveHTTP(t, srv)
	c := &refClient{t: t, url: hs.URL, name: "openmhp-python"}
	c.must("initialize", `{"protocolVersion":"2026-09-12"}`)
	c.must("device/describe", `{}`)
	c.must("signals/read", `{}`)
	for _, st := range []struct{ method, params string }{
		{"session/acquire", `{"ttl":60}`},
		{"settings/write", `{"name":"setpoint","value":42}`},
		{"actions/invoke", `{"name":"quick"}`},
		{"jobs/cancel", `{"id":"job_00000000"}`},
		{"safety/reset", `{}`},
		{"session/release", `{}`},
	} {
		r := c.call(st.method, st.params)
		if code(r) != mhp.CodeServerError || r.Error.Data["reason"] != "session_required" ||
			!strings.Contains(r.Error.Message, mhp.HeaderSession) {
			t.Errorf("%s from a header session under strict sessions: %+v", st.method, r.Error)
		}
	}
	if n := m.in.Calls(conformance.SettingSetpoint); n != 0 {
		t.Fatalf("the backend got %d writes", n)
	}
	c.must("safety/estop", `{"reason":"strict"}`) // estop stays open to anyone
	if st := m.drv.State(); st != mhp.StateEStop {
		t.Fatalf("state %s", st)
	}
	// A server-issued session actuates as usual.
	sid := initHTTP(t, hs.URL, nil)
	if _, r := post(t, hs.URL, `{"jsonrpc":"2.0","id":1,"method":"safety/reset"}`, map[string]string{mhp.HeaderSession: sid}); r.Error != nil {
		t.Fatalf("reset from an issued session: %v", r.Error)
	}
}

// Concurrent first requests of one header client share one header session.
func TestHeaderSessionOpenedOnce(t *testing.T) {
	m := newMemory(t, conformance.Options{})
	srv := newServer(t, m.drv, transport.Options{})
	hs := serveHTTP(t, srv)
	h := map[string]string{mhp.HeaderClient: "racer"}
	post(t, hs.URL, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2026-09-12"}}`, h)
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, r := post(t, hs.URL, `{"jsonrpc":"2.0","id":2,"method":"signals/read"}`, h); r.Error != nil {
				t.Errorf("read: %v", r.Error)
			}
		}()
	}
	wg.Wait()
	if n := srv.Sessions(); n != 2 { // the issued one and one header session
		t.Fatalf("%d sessions after concurrent first requests, want 2", n)
	}
}

// A header session sees its own event stream only: the one its initialize
// returned stays out of its reach, and an overlong header keys nothing.
func TestHeaderSessionSeesOnlyItself(t *testing.T) {
	m := newMemory(t, conformance.Options{})
	srv := newServer(t, m.drv, transport.Options{})
	hs := serveHTTP(t, srv)
	h := map[string]string{mhp.HeaderClient: "viewer"}
	_, b := postRaw(t, hs.URL, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2026-09-12"}}`, h)
	var init struct {
		Result mhp.InitializeResult `json:"result"`
	}
	if err := json.Unmarshal(b, &init); err != nil {
		t.Fatal(err)
	}
	if _, r := post(t, hs.URL, `{"jsonrpc":"2.0","id":2,"method":"ping"}`, h); r.Error != nil { // opens the header session
		t.Fatal(r.Error)
	}
	tap := tapEvents(t, hs.URL, h)
	conformance.EventuallyWithin(t, "the stream's opening comment", testTimeout, func() bool { return bytes.Contains(tap.bytes(), []byte("session ")) })
	got := string(tap.bytes())
	if strings.Contains(got, init.Result.Label) || strings.Contains(got, init.Result.Session) || !strings.Contains(got, "viewer#") {
		t.Fatalf("the header session's stream: %q (issued session %s)", got, init.Result.Label)
	}
	long := map[string]string{mhp.HeaderClient: strings.Repeat("v", transport.MaxClientHeader+1)}
	if _, r := post(t, hs.URL, `{"jsonrpc":"2.0","id":3,"method":"signals/read"}`, long); code(r) != mhp.CodeInvalidRequest || r.Error.Data["field"] != mhp.HeaderClient {
		t.Fatalf("overlong X-MHP-Client: %+v", r.Error)
	}
}

// TestMethodTableCoversVocabulary checks the table against the root
// vocabulary: every core and extension method name is answered (the
// extensions by NotSupported or an empty list when no decorator serves them).
func TestMethodTableCoversVocabulary(t *testing.T) {
	m := newMemory(t, conformance.Options{})
	srv := newServer(t, m.drv, transport.Options{})
	want := []string{mhp.MethodPing, mhp.MethodDescribe, mhp.MethodSignalsRead, mhp.MethodSignalsSubscribe,
		mhp.MethodSignalsUnsubscribe, mhp.MethodSettingsWrite, mhp.MethodActionsInvoke, mhp.MethodJobsStatus,
		mhp.MethodJobsList, mhp.MethodJobsCancel, mhp.MethodJobsPause, mhp.MethodJobsResume, mhp.MethodSessionAcquire,
		mhp.MethodSessionRenew, mhp.MethodSessionRelease, mhp.MethodSafetyLimits, mhp.MethodSafetyEStop,
		mhp.MethodSafetyReset, mhp.MethodResourcesList, mhp.MethodResourcesRead, mhp.MethodMethodsList,
		mhp.MethodMethodsFind, mhp.MethodMethodsGet, mhp.MethodMethodsDiff, mhp.MethodMethodsSave, mhp.MethodMethodsDelete}
	slices.Sort(want)
	if got := srv.Methods(); !slices.Equal(got, want) {
		t.Fatalf("Methods() = %v,\nwant %v", got, want)
	}
}
