package transport_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/transport"
)

// ---- 12.6: safe defaults and strict input ----

func TestHostHeaderChecked(t *testing.T) {
	m := newMemory(t, conformance.Options{})
	cases := []struct {
		name  string
		opts  transport.Options
		host  string
		token string
		want  int
	}{
		{"ip literal", transport.Options{}, "127.0.0.1:18900", "", http.StatusOK},
		{"ipv6 literal", transport.Options{}, "[::1]:18900", "", http.StatusOK},
		{"localhost", transport.Options{}, "localhost:18900", "", http.StatusOK},
		{"sub.localhost", transport.Options{}, "mhp.localhost", "", http.StatusOK},
		{"foreign name", transport.Options{}, "attacker.example:18900", "", http.StatusForbidden},
		{"foreign name without port", transport.Options{}, "attacker.example", "", http.StatusForbidden},
		{"allowed name", transport.Options{AllowedHosts: []string{"lab-pc.local"}}, "lab-pc.local:18900", "", http.StatusOK},
		{"allowed name and port", transport.Options{AllowedHosts: []string{"lab-pc.local:18900"}}, "LAB-PC.local:18900", "", http.StatusOK},
		{"allowed name, other name", transport.Options{AllowedHosts: []string{"lab-pc.local"}}, "lab-pc.local.attacker.example", "", http.StatusForbidden},
		{"any name with the token", transport.Options{Token: "t0k"}, "lab-pc.local:18900", "t0k", http.StatusOK},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := newServer(t, m.drv, c.opts)
			hs := serveHTTP(t, srv)
			req, _ := http.NewRequest(http.MethodPost, hs.URL+"/rpc", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
			req.Host = c.host
			if c.token != "" {
				req.Header.Set("Authorization", "Bearer "+c.token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.want {
				t.Fatalf("Host %q: %d %s, want %d", c.host, resp.StatusCode, b, c.want)
			}
			if c.want == http.StatusForbidden && !strings.Contains(string(b), "host_forbidden") {
				t.Fatalf("refusal does not say why: %s", b)
			}
		})
	}
}

// Duplicate members anywhere in a request are refused (-32600) and nothing
// reaches the backend; an estop is served anyway.
func TestDuplicateMembersRefused(t *testing.T) {
	m := newMemory(t, conformance.Options{})
	m.in.SetSignal(conformance.SignalDoorClosed, true)
	srv := newServer(t, m.drv, transport.Options{})
	hs := serveHTTP(t, srv)
	sid := initHTTP(t, hs.URL, nil)
	h := map[string]string{mhp.HeaderSession: sid}
	cases := []struct{ name, body, field string }{
		{"dryRun twice", `{"jsonrpc":"2.0","id":1,"method":"settings/write","params":{"name":"setpoint","value":30,"dryRun":true,"dryRun":false}}`, "params.dryRun"},
		{"dryRun in two cases", `{"jsonrpc":"2.0","id":1,"method":"settings/write","params":{"name":"setpoint","value":30,"dryRun":true,"dryrun":false}}`, "params.dryrun"},
		{"method twice", `{"jsonrpc":"2.0","id":1,"method":"signals/read","method":"settings/write","params":{"name":"setpoint","value":30}}`, "method"},
		{"params twice", `{"jsonrpc":"2.0","id":1,"method":"settings/write","params":{"name":"setpoint","value":30,"dryRun":true},"params":{"name":"setpoint","value":30}}`, "params"},
		{"inside a value", `{"jsonrpc":"2.0","id":1,"method":"settings/write","params":{"name":"setpoint","value":{"a":1,"a":2}}}`, "params.value.a"},
		{"inside action params", `{"jsonrpc":"2.0","id":1,"method":"actions/invoke","params":{"name":"run","params":{"duration_s":1,"duration_s":3000}}}`, "params.params.duration_s"},
		{"escaped spelling", `{"jsonrpc":"2.0","id":1,"method":"settings/write","params":{"name":"setpoint","value":30,"dryRun":true,"dry\u0052un":false}}`, "params.dryRun"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, r := post(t, hs.URL, c.body, h)
			if code(r) != mhp.CodeInvalidRequest || r.Error.Data["field"] != c.field || r.Error.Data["reason"] != "duplicate_member" {
				t.Fatalf("%s: %+v, want -32600 naming %s", c.body, r.Error, c.field)
			}
		})
	}
	if n := m.in.Calls(conformance.SettingSetpoint); n != 0 {
		t.Fatalf("the backend got %d writes from refused frames", n)
	}
	// Different members, same value, different objects: fine.
	if _, r := post(t, hs.URL, `{"jsonrpc":"2.0","id":1,"method":"actions/invoke","params":{"name":"profile","params":{"steps":[{"temp":10,"hold_s":1},{"temp":20,"hold_s":1}],"cycles":1},"dryRun":true}}`, h); r.Error != nil {
		t.Fatalf("repeated names in different objects refused: %v", r.Error)
	}
	_, r := post(t, hs.URL, `{"jsonrpc":"2.0","id":9,"method":"safety/estop","params":{"reason":"a","reason":"b"}}`, nil)
	if r.Error != nil || m.drv.State() != mhp.StateEStop {
		t.Fatalf("estop with a duplicate in its params: %+v (state %s)", r.Error, m.drv.State())
	}
}

// Bytes that are not UTF-8 anywhere in a request are refused, and never
// echoed: the answer is valid UTF-8 with id null.
func TestNonUTF8Refused(t *testing.T) {
	m := newMemory(t, conformance.Options{})
	srv := newServer(t, m.drv, transport.Options{})
	hs := serveHTTP(t, srv)
	sid := initHTTP(t, hs.URL, nil)
	bodies := map[string]string{
		"id":     "{\"jsonrpc\":\"2.0\",\"id\":\"\xff\xfe\",\"method\":\"ping\"}",
		"value":  "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"settings/write\",\"params\":{\"name\":\"mode\",\"value\":\"he\xc0at\"}}",
		"member": "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"signals/read\",\"params\":{\"n\xe9\":1}}",
	}
	for name, body := range bodies {
		t.Run(name+"/http", func(t *testing.T) {
			_, b := postRaw(t, hs.URL, body, map[string]string{mhp.HeaderSession: sid})
			if !utf8.Valid(b) {
				t.Fatalf("answer is not UTF-8: %q", b)
			}
			r := rpcAnswer(t, b)
			if code(r) != mhp.CodeParseError || string(r.ID) != "null" || r.Error.Data["reason"] != "invalid_utf8" {
				t.Fatalf("answer %s, want -32700 with id null", b)
			}
		})
		t.Run(name+"/stdio", func(t *testing.T) {
			rs := newRawStream(t, srv)
			rs.send(body)
			r := rs.await("null")
			if code(r) != mhp.CodeParseError {
				t.Fatalf("answer %+v, want -32700", r.Error)
			}
			if !utf8.Valid(rs.transcript()) {
				t.Fatalf("the stream carried bytes that are not UTF-8: %q", rs.transcript())
			}
		})
	}
	if n := m.in.Calls(conformance.SettingMode); n != 0 {
		t.Fatalf("the backend got %d writes", n)
	}
}

func TestAcquireTTLBounds(t *testing.T) {
	m := newMemory(t, conformance.Options{})
	srv := newServer(t, m.drv, transport.Options{})
	hs := serveHTTP(t, srv)
	h := map[string]string{mhp.HeaderSession: initHTTP(t, hs.URL, nil)}
	for _, ttl := range []string{"1e-12", "0", "-1", "0.05", "3600.5", "1e9"} {
		_, r := post(t, hs.URL, `{"jsonrpc":"2.0","id":1,"method":"session/acquire","params":{"ttl":`+ttl+`}}`, h)
		if code(r) != mhp.CodeInvalidParams || r.Error.Data["field"] != "ttl" ||
			r.Error.Data["min"] != transport.MinLeaseTTL.Seconds() || r.Error.Data["max"] != transport.MaxLeaseTTL.Seconds() {
			t.Errorf("ttl %s: %+v, want -32602 naming ttl and its bounds", ttl, r.Error)
		}
	}
	_, r := post(t, hs.URL, `{"jsonrpc":"2.0","id":1,"method":"session/acquire","params":{"ttl":1e400}}`, h)
	if code(r) != mhp.CodeInvalidValue || r.Error.Data["field"] != "ttl" {
		t.Errorf("ttl 1e400: %+v, want -32014 naming ttl", r.Error)
	}
	for _, ttl := range []string{"0.1", "60", "3600"} {
		if _, r := post(t, hs.URL, `{"jsonrpc":"2.0","id":1,"method":"session/acquire","params":{"ttl":`+ttl+`}}`, h); r.Error != nil {
			t.Errorf("ttl %s refused: %v", ttl, r.Error)
		}
	}
}

func TestOverflowingValueNamesItsField(t *testing.T) {
	m := newMemory(t, conformance.Options{})
	srv := newServer(t, m.drv, transport.Options{})
	rs := newRawStream(t, srv)
	rs.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2026-09-12"}}`)
	rs.await("0")
	for i, v := range []string{"1e400", "-1e400", "[1,1e400]", `{"a":1e400}`} {
		id := string(rune('1' + i))
		rs.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"settings/write","params":{"name":"setpoint","value":` + v + `}}`)
		r := rs.await(id)
		if code(r) != mhp.CodeInvalidValue || r.Error.Data["field"] != "value" {
			t.Fatalf("value %s: %+v, want -32014 naming field value", v, r.Error)
		}
	}
	rs.send(`{"jsonrpc":"2.0","id":9,"method":"actions/invoke","params":{"name":"run","params":{"duration_s":1e400}}}`)
	if r := rs.await("9"); code(r) != mhp.CodeInvalidValue || r.Error.Data["field"] != "params" {
		t.Fatalf("action param 1e400: %+v, want -32014 naming params", r.Error)
	}
	rs.send(`{"jsonrpc":"2.0","id":10,"method":"session/acquire","params":{"ttl":1e400}}`)
	if r := rs.await("10"); code(r) != mhp.CodeInvalidValue || r.Error.Data["field"] != "ttl" {
		t.Fatalf("ttl 1e400: %+v, want -32014 naming ttl", r.Error)
	}
	if n := m.in.Calls(conformance.SettingSetpoint); n != 0 {
		t.Fatalf("the backend got %d writes", n)
	}
}

// Extra routes sit behind the same gates as /rpc.
func TestExtraHandlersBehindTheGates(t *testing.T) {
	m := newMemory(t, conformance.Options{})
	srv := newServer(t, m.drv, transport.Options{Token: "t0k", Handlers: map[string]http.Handler{
		"GET /console": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "console") }),
	}})
	hs := serveHTTP(t, srv)
	get := func(token, origin string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, hs.URL+"/console", nil)
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
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if c, _ := get("", ""); c != http.StatusUnauthorized {
		t.Fatalf("no token: %d", c)
	}
	if c, _ := get("t0k", "https://evil.example"); c != http.StatusForbidden {
		t.Fatalf("foreign origin: %d", c)
	}
	if c, b := get("t0k", ""); c != http.StatusOK || b != "console" {
		t.Fatalf("with the token: %d %q", c, b)
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, o := range []transport.Options{{MaxConns: -1}, {SSEBufferBytes: -1}, {ReadTimeout: -1}, {IdleTimeout: -1}, {WriteTimeout: -1}} {
		if o.Validate() == nil {
			t.Errorf("%+v validated", o)
		}
	}
	if err := (transport.Options{}).Validate(); err != nil {
		t.Fatal(err)
	}
}
