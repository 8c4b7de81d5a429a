package transport_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/client"
	"github.com/openmhp/mhp-go/clock"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/transport"
)

func TestInitializeFirst(t *testing.T) {
	m := newMemory(t, conformance.Options{})
	srv := newServer(t, m.drv, transport.Options{})

	t.Run("stdio", func(t *testing.T) {
		rs := newRawStream(t, srv)
		for i, method := range []string{"signals/read", "settings/write", "session/acquire"} {
			id := strconv.Itoa(i + 1)
			rs.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":%q}`, id, method))
			r := rs.await(id)
			if code(r) != mhp.CodeServerError || !strings.Contains(r.Error.Message, "initialize must come first") {
				t.Fatalf("%s before initialize: %+v, want -32000 initialize must come first", method, r.Error)
			}
		}
		rs.send(`{"jsonrpc":"2.0","id":"u","method":"no/such"}`)
		if r := rs.await(`"u"`); code(r) != mhp.CodeMethodNotFound {
			t.Fatalf("unknown method before initialize: %+v, want -32601", r.Error)
		}
		// ping needs no session.
		rs.send(`{"jsonrpc":"2.0","id":"p","method":"ping"}`)
		if r := rs.await(`"p"`); r.Error != nil {
			t.Fatalf("ping before initialize: %v", r.Error)
		}
		rs.send(`{"jsonrpc":"2.0","id":9,"method":"initialize","params":{"protocolVersion":"2026-09-12"}}`)
		if r := rs.await("9"); r.Error != nil {
			t.Fatalf("initialize: %v", r.Error)
		}
		rs.send(`{"jsonrpc":"2.0","id":10,"method":"ping"}`)
		if r := rs.await("10"); r.Error != nil {
			t.Fatalf("ping after initialize: %v", r.Error)
		}
		if st := m.drv.State(); st != mhp.StateIdle {
			t.Fatalf("a refused request before initialize reached the device: state %s", st)
		}
	})

	t.Run("http", func(t *testing.T) {
		hs := serveHTTP(t, srv)
		_, r := post(t, hs.URL, `{"jsonrpc":"2.0","id":1,"method":"signals/read"}`, nil)
		if code(r) != mhp.CodeServerError || r.Error.Data["reason"] != "not_initialized" {
			t.Fatalf("read without session: %+v", r.Error)
		}
		_, r = post(t, hs.URL, `{"jsonrpc":"2.0","id":2,"method":"signals/read"}`, map[string]string{mhp.HeaderSession: "s_made_up"})
		if code(r) != mhp.CodeServerError || r.Error.Data["reason"] != "session_unknown" {
			t.Fatalf("read with a made-up session: %+v", r.Error)
		}
		sid := initHTTP(t, hs.URL, nil)
		_, r = post(t, hs.URL, `{"jsonrpc":"2.0","id":3,"method":"signals/read"}`, map[string]string{mhp.HeaderSession: sid})
		if r.Error != nil {
			t.Fatalf("read after initialize: %v", r.Error)
		}
	})
}

func TestInitializeResult(t *testing.T) {
	m := newMemory(t, conformance.Options{})
	srv := newServer(t, m.drv, transport.Options{})
	hs := serveHTTP(t, srv)
	cases := []struct {
		asked, want string
		code        mhp.Code
	}{
		{"2026-09-12", mhp.ProtocolVersion, 0},
		{"2099-01-01", mhp.ProtocolVersion, 0},
		{"2026-09-10", mhp.ProtocolVersionMinimum, 0},
		{"", mhp.ProtocolVersion, 0},
		{"2020-01-01", "", mhp.CodeInvalidParams},
	}
	for _, c := range cases {
		_, r := post(t, hs.URL, fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":%q}}`, c.asked), nil)
		if code(r) != c.code {
			t.Fatalf("version %q: code %d, want %d", c.asked, code(r), c.code)
		}
		if c.code != 0 {
			continue
		}
		var res mhp.InitializeResult
		if err := json.Unmarshal(r.Result, &res); err != nil {
			t.Fatal(err)
		}
		if res.ProtocolVersion != c.want {
			t.Fatalf("asked %q, answered %q, want %q", c.asked, res.ProtocolVersion, c.want)
		}
		want := mhp.Capabilities{Signals: true, Settings: true, Actions: true, Subscribe: true, Lease: true, EStop: true}
		if res.Capabilities != want || res.Device.ID != "conformance-01" || !strings.HasPrefix(res.Session, "s_") {
			t.Fatalf("initialize result %+v", res)
		}
	}
}

func TestParseErrorThenConnectionWorks(t *testing.T) {
	m := newMemory(t, conformance.Options{})
	srv := newServer(t, m.drv, transport.Options{})
	t.Run("stdio", func(t *testing.T) {
		rs := newRawStream(t, srv)
		rs.send(`{"jsonrpc":"2.0","id":1,"method":"initialize"}`)
		rs.await("1")
		for _, bad := range []string{`{"jsonrpc":"2.0","id":2,"method":`, `not json at all`, `{"a":1}}`} {
			rs.send(bad)
			if r := rs.await("null"); code(r) != mhp.CodeParseError {
				t.Fatalf("%q: %+v, want -32700", bad, r.Error)
			}
		}
		rs.send(`[{"jsonrpc":"2.0","id":3,"method":"ping"}]`)
		if r := rs.await("null"); code(r) != mhp.CodeInvalidRequest {
			t.Fatalf("batch: %+v, want -32600", r.Error)
		}
		rs.send(`{"jsonrpc":"2.0","id":4,"method":"ping"}`)
		if r := rs.await("4"); r.Error != nil {
			t.Fatalf("ping after parse errors: %v", r.Error)
		}
	})
	t.Run("http", func(t *testing.T) {
		hs := serveHTTP(t, srv)
		sid := initHTTP(t, hs.URL, nil)
		h := map[string]string{mhp.HeaderSession: sid}
		if _, r := post(t, hs.URL, `{"jsonrpc":"2.0","id":2,"method":`, h); code(r) != mhp.CodeParseError {
			t.Fatalf("malformed body: %+v", r.Error)
		}
		if _, r := post(t, hs.URL, `{"jsonrpc":"2.0","id":3,"method":"ping"}`, h); r.Error != nil {
			t.Fatalf("ping after a parse error: %v", r.Error)
		}
	})
}

func TestOversizeFrameRefused(t *testing.T) {
	m := newMemory(t, conformance.Options{})
	srv := newServer(t, m.drv, transport.Options{})
	big := `{"jsonrpc":"2.0","id":2,"method":"settings/write","params":{"name":"mode","value":"` +
		strings.Repeat("x", transport.DefaultMaxFrame) + `"}}`
	t.Run("stdio", func(t *testing.T) {
		rs := newRawStream(t, srv)
		rs.send(`{"jsonrpc":"2.0","id":1,"method":"initialize"}`)
		rs.await("1")
		rs.send(big)
		r := rs.await("null")
		if code(r) != mhp.CodeInvalidRequest || !strings.Contains(r.Error.Message, "refused") {
			t.Fatalf("oversize frame: %+v, want -32600 refused", r.Error)
		}
		rs.send(`{"jsonrpc":"2.0","id":3,"method":"ping"}`)
		if r := rs.await("3"); r.Error != nil {
			t.Fatalf("ping after an oversize frame: %v", r.Error)
		}
		if m.in.Calls(conformance.SettingMode) != 0 {
			t.Fatal("the oversize write reached the backend")
		}
	})
	t.Run("http", func(t *testing.T) {
		hs := serveHTTP(t, srv)
		sid := initHTTP(t, hs.URL, nil)
		h := map[string]string{mhp.HeaderSession: sid}
		resp, r := post(t, hs.URL, big, h)
		if resp.StatusCode != http.StatusRequestEntityTooLarge || code(r) != mhp.CodeInvalidRequest {
			t.Fatalf("oversize body: HTTP %d %+v", resp.StatusCode, r.Error)
		}
		if _, r := post(t, hs.URL, `{"jsonrpc":"2.0","id":3,"method":"ping"}`, h); r.Error != nil {
			t.Fatalf("ping after an oversize body: %v", r.Error)
		}
	})
}

func TestParamsDecoding(t *testing.T) {
	m := newMemory(t, conformance.Options{})
	srv := newServer(t, m.drv, transport.Options{})
	rs := newRawStream(t, srv)
	rs.send(`{"jsonrpc":"2.0","id":0,"method":"initialize"}`)
	rs.await("0")
	cases := []struct {
		params string
		method string
		field  string
	}{
		{`{"name":"setpoint","value":5,"dry_run":true}`, "settings/write", "dry_run"},
		{`{"value":5}`, "settings/write", "name"},
		{`{"name":"setpoint"}`, "settings/write", "value"},
		{`{"name":5,"value":5}`, "settings/write", "name"},
		{`{"names":"temperature"}`, "signals/read", "names"},
		{`{}`, "jobs/status", "id"},
		{`{"ttl":"long"}`, "session/acquire", "ttl"},
		{`{"ttl":-1}`, "session/acquire", "ttl"},
		{`[1,2]`, "ping", "params"},
		{`{"detail":7}`, "device/describe", "detail"},
	}
	for i, c := range cases {
		id := strconv.Itoa(i + 1)
		rs.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":%q,"params":%s}`, id, c.method, c.params))
		r := rs.await(id)
		if code(r) != mhp.CodeInvalidParams || r.Error.Data["field"] != c.field {
			t.Errorf("%s %s: %+v, want -32602 naming %q", c.method, c.params, r.Error, c.field)
		}
		if r.Error != nil && r.Error.TS == 0 {
			t.Errorf("%s: the refusal carries no ts", c.method)
		}
	}
	if n := m.in.Calls(conformance.SettingSetpoint); n != 0 {
		t.Fatalf("refused writes reached the backend %d times", n)
	}
}

// blockedWrite starts a write of setpoint that blocks in the backend and
// returns once the backend has it; the returned channel gets its error.
func blockedWrite(t *testing.T, m *memory, d *client.Device) <-chan error {
	t.Helper()
	m.in.Script(conformance.SettingSetpoint, conformance.Block)
	done := make(chan error, 1)
	go func() {
		_, err := d.Write(context.Background(), mhp.WriteRequest{Name: conformance.SettingSetpoint, Value: 42.0})
		done <- err
	}()
	conformance.EventuallyWithin(t, "the write to reach the backend", testTimeout, func() bool { return m.in.Calls(conformance.SettingSetpoint) == 1 })
	return done
}

func TestEStopWhileWriteBlocked(t *testing.T) {
	for _, tr := range []string{"stdio", "http"} {
		t.Run(tr, func(t *testing.T) {
			m := newMemory(t, conformance.Options{})
			srv := newServer(t, m.drv, transport.Options{})
			var d *client.Device
			if tr == "stdio" {
				d = dialPipe(t, srv, client.Options{})
			} else {
				d = dialHTTP(t, serveHTTP(t, srv).URL, client.Options{})
			}
			done := blockedWrite(t, m, d)

			// Same connection: ping and estop are answered while the write blocks.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			start := time.Now()
			if _, err := d.Ping(ctx); err != nil {
				t.Fatalf("ping while a write blocks: %v", err)
			}
			res, err := d.EStop(ctx, "test")
			if err != nil {
				t.Fatalf("estop while a write blocks: %v", err)
			}
			if took := time.Since(start); took > time.Second {
				t.Fatalf("estop took %v behind a blocked write", took)
			}
			if res.State != mhp.StateEStop || m.in.StopCalls() < 1 {
				t.Fatalf("estop result %+v, stop calls %d", res, m.in.StopCalls())
			}
			// The driver may cut the write off (outcome unknown) or let it
			// finish once released; either way it ends.
			m.in.Release(conformance.SettingSetpoint)
			select {
			case <-done:
			case <-time.After(testTimeout):
				t.Fatal("the write never returned after release")
			}
		})
	}
}

func TestLeaseCannotBeStolen(t *testing.T) {
	m := newMemory(t, conformance.Options{})
	srv := newServer(t, m.drv, transport.Options{})
	hs := serveHTTP(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	a := dialHTTP(t, hs.URL, client.Options{ClientName: "alice"})
	lease, err := a.Acquire(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// Bob claims to be alice by display name: he gets his own session.
	b := dialHTTP(t, hs.URL, client.Options{ClientName: "alice"})
	if b.Session() == a.Session() {
		t.Fatal("two clients with the same display name share a session")
	}
	_, err = b.Write(ctx, mhp.WriteRequest{Name: conformance.SettingSetpoint, Value: 10.0})
	if mhp.CodeOf(err) != mhp.CodeNotLeased {
		t.Fatalf("write under another's lease: %v, want NotLeased", err)
	}
	if _, err := b.Renew(ctx); mhp.CodeOf(err) != mhp.CodeNotLeased {
		t.Fatalf("renewing another's lease: %v, want NotLeased", err)
	}
	_ = b.Release(ctx) // must not release alice's lease
	if _, err := b.Acquire(ctx, time.Minute); mhp.CodeOf(err) != mhp.CodeNotLeased {
		t.Fatalf("acquiring a held lease: %v, want NotLeased", err)
	}
	// Raw requests with alice's display name and no session, or a guessed one.
	for _, h := range []map[string]string{
		{mhp.HeaderClient: "alice"},
		{mhp.HeaderClient: "alice", mhp.HeaderSession: "alice"},
		{mhp.HeaderClient: "alice", mhp.HeaderSession: lease.Holder + "x"},
	} {
		// X-MHP-Client alone is served in the header session "alice" (alice's
		// client greeted with that header): a different session from
		// alice's issued one, so the lease refuses it.
		_, r := post(t, hs.URL, `{"jsonrpc":"2.0","id":1,"method":"settings/write","params":{"name":"setpoint","value":11}}`, h)
		if c := code(r); c != mhp.CodeServerError && c != mhp.CodeNotLeased {
			t.Fatalf("write with headers %v: %+v, want -32000 or -32030", h, r.Error)
		}
	}
	if n := m.in.Calls(conformance.SettingSetpoint); n != 0 {
		t.Fatalf("the backend got %d writes from the intruder", n)
	}
	if _, err := a.Write(ctx, mhp.WriteRequest{Name: conformance.SettingSetpoint, Value: 12.0}); err != nil {
		t.Fatalf("the holder's write: %v", err)
	}
	if l, _ := m.drv.Limits(ctx); l == nil {
		t.Fatal("limits")
	}
	if r, err := a.Renew(ctx); err != nil || r.Holder != lease.Holder {
		t.Fatalf("the holder's lease after the intruder: %+v %v", r, err)
	}
}

// renewCounter counts the session/renew calls that reach the device.
type renewCounter struct {
	mhp.Device
	renews atomic.Int64
}

func (r *renewCounter) Renew(ctx context.Context) (*mhp.Lease, error) {
	r.renews.Add(1)
	return r.Device.Renew(ctx)
}

// TestLeaseOnFirstUseAndHeartbeat runs in a synctest bubble (the client
// over in-process pipes): the heartbeat's interval passes on the bubble's
// clock, so the renewals are counted, not polled for.
func TestLeaseOnFirstUseAndHeartbeat(t *testing.T) { synctest.Test(t, testLeaseOnFirstUseAndHeartbeat) }

func testLeaseOnFirstUseAndHeartbeat(t *testing.T) {
	m := newMemory(t, conformance.Options{WatchdogS: 0.3})
	dev := &renewCounter{Device: m.drv}
	srv := newServer(t, dev, transport.Options{})
	d := dialPipe(t, srv, client.Options{HeartbeatEvery: 5 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	res, err := d.Set(ctx, conformance.SettingSetpoint, 30.0)
	if err != nil || !res.OK {
		t.Fatalf("write on a watchdog device: %+v %v", res, err)
	}
	if !d.HoldsLease() {
		t.Fatal("no lease held after a lease-required write")
	}
	plain := dialPipe(t, srv, client.Options{Plain: true})
	_, err = plain.Write(ctx, mhp.WriteRequest{Name: conformance.SettingSetpoint, Value: 31.0})
	if e, _ := mhp.AsError(err); e == nil || e.Code != mhp.CodeNotLeased || e.Data["reason"] == "lease_required" {
		t.Fatalf("second session's write: %v, want NotLeased (held by another)", err)
	}
	time.Sleep(16 * time.Millisecond) // three heartbeat intervals
	synctest.Wait()
	if n := dev.renews.Load(); n < 3 {
		t.Fatalf("%d heartbeat renewals in three intervals, want 3", n)
	}
	if err := d.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if d.HoldsLease() {
		t.Fatal("heartbeat still running after release")
	}
	after := dev.renews.Load()
	release, err := plain.Scope(ctx, time.Minute)
	if err != nil {
		t.Fatalf("scope after release: %v", err)
	}
	if _, err := plain.Set(ctx, conformance.SettingSetpoint, 33.0); err != nil {
		t.Fatalf("write inside the scope: %v", err)
	}
	release()
	release() // twice is harmless
	if _, err := d.Set(ctx, conformance.SettingSetpoint, 34.0); err != nil {
		t.Fatalf("write after the scope released: %v", err)
	}
	if dev.renews.Load() < after {
		t.Fatal("renew count went backwards")
	}
}

func TestSessionExpiry(t *testing.T) {
	m := newMemory(t, conformance.Options{})
	clk := clock.NewManual(time.Unix(1_800_000_000, 0))
	srv := newServer(t, m.drv, transport.Options{Clock: clk, SessionTTL: time.Minute})
	hs := serveHTTP(t, srv)
	sid := initHTTP(t, hs.URL, nil)
	h := map[string]string{mhp.HeaderSession: sid}
	if _, r := post(t, hs.URL, `{"jsonrpc":"2.0","id":1,"method":"session/acquire","params":{"ttl":600}}`, h); r.Error != nil {
		t.Fatal(r.Error)
	}
	clk.Advance(30 * time.Second)
	if _, r := post(t, hs.URL, `{"jsonrpc":"2.0","id":2,"method":"ping"}`, h); r.Error != nil {
		t.Fatalf("ping within the ttl: %v", r.Error)
	}
	clk.Advance(45 * time.Second) // 45s idle: still alive
	conformance.EventuallyWithin(t, "the sweep to run", testTimeout, func() bool { return clk.Pending() == 1 })
	if srv.Sessions() != 1 {
		t.Fatalf("session forgotten after 45s idle with a 1m ttl")
	}
	conformance.EventuallyWithin(t, "the idle session to be forgotten", testTimeout, func() bool {
		clk.Advance(5 * time.Second)
		return srv.Sessions() == 0
	})
	_, r := post(t, hs.URL, `{"jsonrpc":"2.0","id":3,"method":"ping"}`, h)
	if code(r) != mhp.CodeServerError || r.Error.Data["reason"] != "session_unknown" {
		t.Fatalf("ping on an expired session: %+v", r.Error)
	}
	// The expired session's lease is gone: another session may acquire.
	other := initHTTP(t, hs.URL, nil)
	if _, r := post(t, hs.URL, `{"jsonrpc":"2.0","id":4,"method":"session/acquire"}`, map[string]string{mhp.HeaderSession: other}); r.Error != nil {
		t.Fatalf("acquire after the holder's session expired: %v", r.Error)
	}
}

func TestClientReinitializesAfterExpiry(t *testing.T) {
	m := newMemory(t, conformance.Options{})
	clk := clock.NewManual(time.Unix(1_800_000_000, 0))
	srv := newServer(t, m.drv, transport.Options{Clock: clk, SessionTTL: time.Minute})
	hs := serveHTTP(t, srv)
	d := dialHTTP(t, hs.URL, client.Options{})
	old := d.Session()
	// Close the events stream's hold on the session by ending it server-side.
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	d.EndSession(ctx)
	if _, err := d.Ping(ctx); err != nil {
		t.Fatalf("ping after the session ended: %v", err)
	}
	if d.Session() == old || d.Session() == "" {
		t.Fatalf("session %q after re-initialize (old %q)", d.Session(), old)
	}
}

func TestBearerToken(t *testing.T) {
	m := newMemory(t, conformance.Options{})
	srv := newServer(t, m.drv, transport.Options{Token: "s3cret"})
	hs := serveHTTP(t, srv)
	get := func(path, token string) int {
		req, _ := http.NewRequest(http.MethodGet, hs.URL+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if c := get("/mhp.json", ""); c != http.StatusUnauthorized {
		t.Fatalf("/mhp.json without token: %d", c)
	}
	if c := get("/mhp.json", "wrong"); c != http.StatusUnauthorized {
		t.Fatalf("/mhp.json with a wrong token: %d", c)
	}
	if c := get("/mhp.json", "s3cret"); c != http.StatusOK {
		t.Fatalf("/mhp.json with the token: %d", c)
	}
	resp, _ := post(t, hs.URL, `{"jsonrpc":"2.0","id":1,"method":"initialize"}`, nil)
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
		t.Fatalf("initialize without token: %d", resp.StatusCode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := client.Dial(ctx, hs.URL, client.Options{Token: "nope"}); mhp.CodeOf(err) != mhp.CodeServerError {
		t.Fatalf("dial with a wrong token: %v", err)
	}
	d := dialHTTP(t, hs.URL, client.Options{Token: "s3cret"})
	if _, err := d.Read(ctx, nil); err != nil {
		t.Fatalf("read with the token: %v", err)
	}

	pub := newServer(t, m.drv, transport.Options{Token: "s3cret", PublicDescriptor: true})
	phs := serveHTTP(t, pub)
	resp2, err := http.Get(phs.URL + "/mhp.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp2.Body.Close()
	var desc map[string]any
	if err := json.NewDecoder(resp2.Body).Decode(&desc); err != nil || resp2.StatusCode != http.StatusOK {
		t.Fatalf("public /mhp.json: %d %v", resp2.StatusCode, err)
	}
	if desc["id"] != "conformance-01" || desc["detail"] != "full" || desc["settings"] == nil {
		t.Fatalf("/mhp.json is not the full descriptor: %v", desc)
	}
	if _, r := post(t, phs.URL, `{"jsonrpc":"2.0","id":1,"method":"initialize"}`, nil); code(r) != mhp.CodeServerError {
		t.Fatalf("PublicDescriptor opened /rpc: %+v", r.Error)
	}
}

func TestLoopbackDefault(t *testing.T) {
	for in, want := range map[string]string{
		":18900":          "127.0.0.1:18900",
		"18900":           "127.0.0.1:18900",
		"0.0.0.0:18900":   "0.0.0.0:18900",
		"[::]:1":          "[::]:1",
		"lab.local:18900": "lab.local:18900",
	} {
		if got := transport.LoopbackDefault(in); got != want {
			t.Errorf("LoopbackDefault(%q) = %q, want %q", in, got, want)
		}
	}
	ln, err := transport.Listen(":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if !strings.HasPrefix(ln.Addr().String(), "127.0.0.1:") {
		t.Fatalf("Listen(:0) bound %s", ln.Addr())
	}
}

func TestListenHTTPServesAndStops(t *testing.T) {
	m := newMemory(t, conformance.Options{})
	srv := newServer(t, m.drv, transport.Options{})
	ln, err := transport.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- transport.ServeHTTP(ctx, ln, srv) }()
	d := dialHTTP(t, "http://"+ln.Addr().String(), client.Options{})
	if _, err := d.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ServeHTTP: %v", err)
		}
	case <-time.After(testTimeout):
		t.Fatal("ServeHTTP did not stop with an open events stream")
	}
}

func TestSignalUpdatesOnlyToSubscribers(t *testing.T) {
	m := newMemory(t, conformance.Options{})
	srv := newServer(t, m.drv, transport.Options{})
	a := dialPipe(t, srv, client.Options{})
	b := dialPipe(t, srv, client.Options{})
	got := func(d *client.Device) chan mhp.Notification {
		ch := make(chan mhp.Notification, 64)
		stop := d.Listen(func(n mhp.Notification) {
			select {
			case ch <- n:
			default:
			}
		})
		t.Cleanup(stop)
		return ch
	}
	ca, cb := got(a), got(b)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := a.Subscribe(ctx, []string{conformance.SignalTemperature}); err != nil {
		t.Fatal(err)
	}
	m.in.SetSignal(conformance.SignalTemperature, 55.5)
	deadline := time.After(testTimeout)
	for {
		m.clk.Advance(50 * time.Millisecond) // the driver polls on its clock
		select {
		case n := <-ca:
			if n.Method != mhp.NotifySignalsUpdate || n.Signal() != conformance.SignalTemperature {
				continue
			}
			// b must have seen nothing of it; a settings change reaches both.
			if _, err := a.Set(ctx, conformance.SettingMode, "heat"); err != nil {
				t.Fatal(err)
			}
			for {
				select {
				case n := <-cb:
					if n.Method == mhp.NotifySignalsUpdate {
						t.Fatalf("an unsubscribed session got %v", n)
					}
					if n.Method == mhp.NotifySettingsChanged {
						return
					}
				case <-deadline:
					t.Fatal("settings/changed did not reach the other session")
				}
			}
		case <-deadline:
			t.Fatal("no signals/update for the subscriber")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// sseReader reads one events stream.
type sseReader struct {
	resp *http.Response
	br   *bufio.Reader
}

func openEvents(t *testing.T, url, sid, lastID string) *sseReader {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url+"/events", nil)
	req.Header.Set(mhp.HeaderSession, sid)
	if lastID != "" {
		req.Header.Set(mhp.HeaderLastEventID, lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET /events: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return &sseReader{resp: resp, br: bufio.NewReader(resp.Body)}
}

type sseEvent struct {
	id      uint64
	method  string
	comment string
}

// next returns the next event or comment block.
func (s *sseReader) next(t *testing.T) sseEvent {
	t.Helper()
	type res struct {
		ev  sseEvent
		err error
	}
	ch := make(chan res, 1)
	go func() {
		var ev sseEvent
		for {
			line, err := s.br.ReadString('\n')
			if err != nil {
				ch <- res{err: err}
				return
			}
			line = strings.TrimRight(line, "\n")
			switch {
			case line == "":
				if ev.method != "" || ev.comment != "" {
					ch <- res{ev: ev}
					return
				}
			case strings.HasPrefix(line, ":"):
				ev.comment = strings.TrimSpace(line[1:])
			case strings.HasPrefix(line, "id: "):
				ev.id, _ = strconv.ParseUint(line[4:], 10, 64)
			case strings.HasPrefix(line, "data: "):
				var f struct {
					Method string `json:"method"`
				}
				if err := json.Unmarshal([]byte(line[6:]), &f); err != nil {
					ch <- res{err: err}
					return
				}
				ev.method = f.Method
			}
		}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("reading events: %v", r.err)
		}
		return r.ev
	case <-time.After(testTimeout):
		t.Fatal("no event")
	}
	return sseEvent{}
}

func TestSSEResumeLosesNothing(t *testing.T) {
	m := newMemory(t, conformance.Options{})
	srv := newServer(t, m.drv, transport.Options{SSEBuffer: 16, KeepAlive: time.Hour})
	hs := serveHTTP(t, srv)
	sid := initHTTP(t, hs.URL, nil)
	h := map[string]string{mhp.HeaderSession: sid}
	write := func(i int) {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"settings/write","params":{"name":"setpoint","value":%d}}`, i+10, i)
		if _, r := post(t, hs.URL, body, h); r.Error != nil {
			t.Fatalf("write %d: %v", i, r.Error)
		}
	}
	s := openEvents(t, hs.URL, sid, "")
	if ev := s.next(t); !strings.HasPrefix(ev.comment, "mhp events") {
		t.Fatalf("first block %+v", ev)
	}
	for i := 0; i < 3; i++ {
		write(i)
	}
	var last uint64
	for i := 0; i < 3; i++ {
		ev := s.next(t)
		if ev.method != mhp.NotifySettingsChanged || ev.id != last+1 {
			t.Fatalf("event %d: %+v (last id %d)", i, ev, last)
		}
		last = ev.id
	}
	// Drop the stream; events published meanwhile wait in the buffer.
	s.resp.Body.Close()
	for i := 3; i < 13; i++ {
		write(i)
	}
	s = openEvents(t, hs.URL, sid, strconv.FormatUint(last, 10))
	defer s.resp.Body.Close()
	s.next(t) // the opening comment
	for i := 3; i < 13; i++ {
		ev := s.next(t)
		if ev.method != mhp.NotifySettingsChanged || ev.id != last+1 {
			t.Fatalf("resumed event %d: %+v, want id %d", i, ev, last+1)
		}
		last = ev.id
	}
	s.resp.Body.Close()

	// Beyond the buffer the stream says how many were lost, then goes on.
	for i := 13; i < 13+20; i++ {
		write(i)
	}
	s = openEvents(t, hs.URL, sid, strconv.FormatUint(last, 10))
	defer s.resp.Body.Close()
	s.next(t)
	ev := s.next(t)
	if ev.comment != "lost 4 events (buffer 16)" {
		t.Fatalf("after overflow: %+v, want the lost comment", ev)
	}
	ev = s.next(t)
	if ev.id != last+5 {
		t.Fatalf("first event after the loss has id %d, want %d", ev.id, last+5)
	}
}

func TestDeleteSessionReleasesLease(t *testing.T) {
	m := newMemory(t, conformance.Options{})
	srv := newServer(t, m.drv, transport.Options{})
	hs := serveHTTP(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	a, err := client.Dial(ctx, hs.URL, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Acquire(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	b := dialHTTP(t, hs.URL, client.Options{})
	if _, err := b.Acquire(ctx, time.Minute); err != nil {
		t.Fatalf("acquire after the holder closed: %v", err)
	}
	if srv.Sessions() != 1 {
		t.Fatalf("%d sessions live, want 1", srv.Sessions())
	}
}

func TestStreamSessionEndsOnEOF(t *testing.T) {
	m := newMemory(t, conformance.Options{})
	srv := newServer(t, m.drv, transport.Options{})
	pc := servePipe(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	a, err := client.DialStream(ctx, pc.r, pc.w, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Acquire(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	a.Close() // closes the server's input: EOF
	select {
	case err := <-pc.done:
		pc.done <- err
	case <-time.After(testTimeout):
		t.Fatal("ServeStdio did not return at EOF")
	}
	b := dialPipe(t, srv, client.Options{})
	if _, err := b.Acquire(ctx, time.Minute); err != nil {
		t.Fatalf("acquire after the stream ended: %v", err)
	}
}

func TestNotSupportedMethods(t *testing.T) {
	m := newMemory(t, conformance.Options{})
	srv := newServer(t, m.drv, transport.Options{})
	rs := newRawStream(t, srv)
	rs.send(`{"jsonrpc":"2.0","id":0,"method":"initialize"}`)
	rs.await("0")
	cases := []struct {
		method, params string
		code           mhp.Code
		result         string
	}{
		{"methods/list", `{}`, 0, `{"methods":[]}`},
		{"methods/find", `{"query":"pcr"}`, 0, `{"methods":[]}`},
		{"methods/save", `{"name":"x"}`, mhp.CodeNotSupported, ""},
		{"resources/list", `{}`, mhp.CodeNotSupported, ""},
		{"actions/invoke", `{"method":"pcr"}`, mhp.CodeNotSupported, ""},
		{"rpc_secret", `{}`, mhp.CodeMethodNotFound, ""},
	}
	for i, c := range cases {
		id := strconv.Itoa(i + 1)
		rs.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":%q,"params":%s}`, id, c.method, c.params))
		r := rs.await(id)
		if code(r) != c.code || (c.result != "" && string(r.Result) != c.result) {
			t.Errorf("%s: %s %+v, want code %d result %s", c.method, r.Result, r.Error, c.code, c.result)
		}
	}
}

func TestTransportErrorsAreMHPErrors(t *testing.T) {
	m := newMemory(t, conformance.Options{})
	srv := newServer(t, m.drv, transport.Options{})
	hs := serveHTTP(t, srv)
	d := dialHTTP(t, hs.URL, client.Options{Timeout: 200 * time.Millisecond})
	m.in.Script(conformance.SettingSetpoint, conformance.Block)
	ctx := context.Background()
	_, err := d.Write(ctx, mhp.WriteRequest{Name: conformance.SettingSetpoint, Value: 1.0})
	e, ok := mhp.AsError(err)
	if !ok || !client.IsTransportError(err) || !e.OutcomeUnknown() {
		t.Fatalf("timed-out write: %v, want a transport *mhp.Error with outcome unknown", err)
	}
	m.in.Release(conformance.SettingSetpoint)
	hs.Listener.Close()
	hs.CloseClientConnections()
	_, err = d.Ping(ctx)
	if !client.IsTransportError(err) || errors.Is(err, context.Canceled) {
		t.Fatalf("ping to a closed server: %v", err)
	}
}

// withResources is a device that serves package files.
type withResources struct {
	mhp.Device
}

func (withResources) ListResources(context.Context) ([]string, error) {
	return []string{"DEVICE.md", "references/manual.md"}, nil
}

func (withResources) ReadResource(_ context.Context, path string) (*mhp.Resource, error) {
	if path != "DEVICE.md" {
		return nil, mhp.Errorf(mhp.CodeUnknownName, "no resource %q", path).With("name", path)
	}
	return &mhp.Resource{Path: path, Text: "# Fixture"}, nil
}

func TestResources(t *testing.T) {
	m := newMemory(t, conformance.Options{})
	srv := newServer(t, withResources{m.drv}, transport.Options{})
	d := dialPipe(t, srv, client.Options{})
	if !d.Info().Capabilities.Resources {
		t.Fatal("capability resources is false for a ResourceProvider")
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	list, err := d.ListResources(ctx)
	if err != nil || len(list) != 2 || list[0] != "DEVICE.md" {
		t.Fatalf("resources/list: %v %v", list, err)
	}
	r, err := d.ReadResource(ctx, "DEVICE.md")
	if err != nil || r.Text != "# Fixture" {
		t.Fatalf("resources/read: %+v %v", r, err)
	}
	if _, err := d.ReadResource(ctx, "../etc/passwd"); mhp.CodeOf(err) != mhp.CodeUnknownName {
		t.Fatalf("resources/read outside: %v", err)
	}
	plain := dialPipe(t, newServer(t, m.drv, transport.Options{}), client.Options{})
	if _, err := plain.ListResources(ctx); mhp.CodeOf(err) != mhp.CodeNotSupported {
		t.Fatalf("resources/list on a device without resources: %v", err)
	}
}

func TestStreamInFlightLimitSparesPriority(t *testing.T) {
	m := newMemory(t, conformance.Options{})
	srv := newServer(t, m.drv, transport.Options{MaxInFlight: 1})
	rs := newRawStream(t, srv)
	rs.send(`{"jsonrpc":"2.0","id":0,"method":"initialize"}`)
	rs.await("0")
	m.in.Script(conformance.SettingSetpoint, conformance.Block)
	rs.send(`{"jsonrpc":"2.0","id":1,"method":"settings/write","params":{"name":"setpoint","value":5}}`)
	conformance.EventuallyWithin(t, "the write to block in the backend", testTimeout, func() bool { return m.in.Calls(conformance.SettingSetpoint) == 1 })
	rs.send(`{"jsonrpc":"2.0","id":2,"method":"signals/read"}`)
	if r := rs.await("2"); code(r) != mhp.CodeServerError || r.Error.Data["reason"] != "too_many_requests" {
		t.Fatalf("read over the in-flight limit: %+v", r.Error)
	}
	rs.send(`{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	if r := rs.await("3"); r.Error != nil {
		t.Fatalf("ping over the in-flight limit: %v", r.Error)
	}
	rs.send(`{"jsonrpc":"2.0","id":4,"method":"safety/estop","params":{"reason":"limit"}}`)
	if r := rs.await("4"); r.Error != nil {
		t.Fatalf("estop over the in-flight limit: %v", r.Error)
	}
	m.in.Release(conformance.SettingSetpoint)
	rs.await("1")
	rs.send(`{"jsonrpc":"2.0","id":5,"method":"signals/read"}`)
	if r := rs.await("5"); r.Error != nil {
		t.Fatalf("read after the write ended: %v", r.Error)
	}
}

func TestServerCloseEndsStreams(t *testing.T) {
	m := newMemory(t, conformance.Options{})
	srv := transport.NewServer(m.drv, transport.Options{Logger: quietLogger()})
	pc := servePipe(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	d, err := client.DialStream(ctx, pc.r, pc.w, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.Acquire(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-pc.done:
		pc.done <- err
		if err != nil {
			t.Fatalf("ServeStdio after Close: %v", err)
		}
	case <-time.After(testTimeout):
		t.Fatal("ServeStdio still running after the server closed")
	}
	if srv.Sessions() != 0 {
		t.Fatalf("%d sessions after Close", srv.Sessions())
	}
	other := client.Connect(m.drv, client.Options{})
	defer other.Close()
	if _, err := other.Acquire(ctx, time.Minute); err != nil {
		t.Fatalf("the closed server's session still holds the lease: %v", err)
	}
}

func TestForeignOriginRefused(t *testing.T) {
	m := newMemory(t, conformance.Options{})
	srv := newServer(t, m.drv, transport.Options{AllowedOrigins: []string{"https://lab.example.org"}})
	hs := serveHTTP(t, srv)
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize"}`
	resp, r := post(t, hs.URL, body, map[string]string{"Origin": "http://evil.example"})
	if resp.StatusCode != http.StatusForbidden || r.Error == nil || r.Error.Data["reason"] != "origin_forbidden" {
		t.Fatalf("foreign origin: HTTP %d %+v", resp.StatusCode, r.Error)
	}
	if resp, r := post(t, hs.URL, body, map[string]string{"Origin": "https://lab.example.org"}); resp.StatusCode != http.StatusOK || r.Error != nil {
		t.Fatalf("allowed origin: HTTP %d %+v", resp.StatusCode, r.Error)
	}
	if resp, r := post(t, hs.URL, body, nil); resp.StatusCode != http.StatusOK || r.Error != nil {
		t.Fatalf("no origin: HTTP %d %+v", resp.StatusCode, r.Error)
	}
}

// TestClientResumesEventsAfterDrop drops every connection of an HTTP
// client (its event stream included) while notifications keep coming: the
// client reconnects with Last-Event-ID and its listener sees every one, in
// order, once.
func TestClientResumesEventsAfterDrop(t *testing.T) {
	m := newMemory(t, conformance.Options{})
	srv := newServer(t, m.drv, transport.Options{})
	hs := serveHTTP(t, srv)
	a := dialHTTP(t, hs.URL, client.Options{ClientName: "listener"})
	writer := client.Connect(m.drv, client.Options{})
	defer writer.Close()
	var mu sync.Mutex
	var got []float64
	stop := a.Listen(func(n mhp.Notification) {
		if n.Method == mhp.NotifySettingsChanged && n.Params["name"] == conformance.SettingSetpoint {
			v, _ := n.Params["value"].(float64)
			mu.Lock()
			got = append(got, v)
			mu.Unlock()
		}
	})
	defer stop()
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	const n = 30
	for i := 1; i <= n; i++ {
		if _, err := writer.Set(ctx, conformance.SettingSetpoint, float64(i)); err != nil {
			t.Fatal(err)
		}
		if i == 5 {
			conformance.EventuallyWithin(t, "the first notifications", testTimeout, func() bool { return count() == 5 })
		}
		if i%10 == 5 {
			hs.CloseClientConnections() // the event stream drops mid-sequence
		}
	}
	conformance.EventuallyWithin(t, "every notification after the drops", testTimeout, func() bool { return count() >= n })
	mu.Lock()
	defer mu.Unlock()
	for i, v := range got {
		if v != float64(i+1) {
			t.Fatalf("notifications %v: position %d is %v", got, i, v)
		}
	}
	if len(got) != n {
		t.Fatalf("%d notifications, want %d (duplicates?)", len(got), n)
	}
}
