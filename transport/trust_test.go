package transport_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/auth"
	"github.com/openmhp/mhp-go/auth/authtest"
	"github.com/openmhp/mhp-go/client"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/transport"
)

// serveListener serves srv with transport.ServeHTTP (the front door: the
// connection limit, TLS when srv has it, the smuggling check) on
// 127.0.0.1:0 and returns host:port.
func serveListener(t testing.TB, srv *transport.Server) string {
	t.Helper()
	ln, err := transport.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = transport.ServeHTTP(ctx, ln, srv) }()
	t.Cleanup(func() { cancel(); <-done })
	return ln.Addr().String()
}

// rawExchange writes raw to a new connection and reads everything the
// server sends until it closes the connection (or the deadline).
func rawExchange(t *testing.T, addr, raw string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(testTimeout))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.CloseWrite() // nothing more: the server answers what it read, then sees EOF
	}
	b, _ := io.ReadAll(c)
	return string(b)
}

func chunked(body string) string { return fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(body), body) }

func rpcHead(extra string, cl int) string {
	h := "POST /rpc HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" + extra
	if cl >= 0 {
		h += fmt.Sprintf("Content-Length: %d\r\n", cl)
	}
	return h + "\r\n"
}

func deviceState(t *testing.T, addr string) mhp.DeviceState {
	t.Helper()
	_, r := post(t, "http://"+addr, `{"jsonrpc":"2.0","id":9,"method":"ping"}`, nil)
	var p mhp.PingResult
	if r.Error != nil || json.Unmarshal(r.Result, &p) != nil {
		t.Fatalf("ping: %+v", r)
	}
	return p.State
}

// TestSmugglingPairRefused: a request with both Content-Length and
// Transfer-Encoding gets 400 and its connection is closed (RFC 9112 §6.1):
// the estop smuggled after its chunked body is never served, whether the
// pair is the connection's first request or follows an honest one. The
// control (chunked alone, then a second request) shows the second request
// would otherwise be served.
func TestSmugglingPairRefused(t *testing.T) {
	m := newMemory(t, conformance.Options{})
	addr := serveListener(t, newServer(t, m.drv, transport.Options{}))
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	estop := `{"jsonrpc":"2.0","id":2,"method":"safety/estop","params":{"reason":"smuggled"}}`
	smuggled := rpcHead("", len(estop)) + estop

	control := rawExchange(t, addr, rpcHead("Transfer-Encoding: chunked\r\n", -1)+chunked(ping)+rpcHead("", len(ping))+ping)
	if n := strings.Count(control, "HTTP/1.1 200"); n != 2 {
		t.Fatalf("control: %d answers to two pipelined requests, want 2:\n%s", n, control)
	}
	for name, raw := range map[string]string{
		"first request":        rpcHead("Transfer-Encoding: chunked\r\n", 4) + chunked(ping) + smuggled,
		"after an honest one":  rpcHead("", len(ping)) + ping + rpcHead("Transfer-Encoding: chunked\r\n", 4) + chunked(ping) + smuggled,
		"content-length first": rpcHead("", 4)[:len(rpcHead("", 4))-2] + "Transfer-Encoding: chunked\r\n\r\n" + chunked(ping) + smuggled,
	} {
		t.Run(name, func(t *testing.T) {
			got := rawExchange(t, addr, raw)
			honest := strings.Count(raw, "POST /rpc") - 2 // the pair, and the estop smuggled after it
			if strings.Count(got, "HTTP/1.1 200") != honest || strings.Count(got, "HTTP/1.1 ") != honest+1 || !strings.Contains(got, "HTTP/1.1 400") ||
				!strings.Contains(got, "Connection: close") || !strings.Contains(got, "RFC 9112") {
				t.Fatalf("answers:\n%s", got)
			}
			if st := deviceState(t, addr); st == mhp.StateEStop {
				t.Fatal("the smuggled estop was served")
			}
		})
	}
}

// TestHostCheckOnEveryRoute: without credentials every route of the
// transport, extra handlers included, refuses a foreign Host (DNS
// rebinding), and serves an IP literal.
func TestHostCheckOnEveryRoute(t *testing.T) {
	m := newMemory(t, conformance.Options{})
	extra := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "extra") })
	srv := newServer(t, m.drv, transport.Options{Handlers: map[string]http.Handler{"GET /extra": extra, "/static/": extra}})
	hs := serveHTTP(t, srv)
	for _, rt := range []struct{ method, path string }{{"POST", "/rpc"}, {"GET", "/events"}, {"DELETE", "/session"},
		{"GET", "/mhp.json"}, {"GET", "/extra"}, {"GET", "/static/app.js"}, {"GET", "/"}, {"GET", "/metrics"}} {
		for host, want := range map[string]int{"evil.example": http.StatusForbidden, "127.0.0.1": 0} {
			req, _ := http.NewRequest(rt.method, hs.URL+rt.path, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
			req.Host = host
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if (want != 0 && resp.StatusCode != want) || (want == 0 && resp.StatusCode == http.StatusForbidden) {
				t.Errorf("%s %s with Host %s: %d", rt.method, rt.path, host, resp.StatusCode)
			}
		}
	}
}

// identities is a server with a credentials file: viewer, agent and
// operator tokens.
func identities(t *testing.T, opts transport.Options) (*memory, string) {
	t.Helper()
	file := authtest.Credentials(t, t.TempDir(), "vera=viewer:vera-token", "alice=agent:alice-token", "olga=operator:olga-token",
		"mallory=agent:mallory-token")
	a, err := auth.New(auth.Config{CredentialsFile: file, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	m := newMemory(t, conformance.Options{})
	opts.Auth = a
	return m, serveHTTP(t, newServer(t, m.drv, opts)).URL
}

func bearer(token string, more ...string) map[string]string {
	h := map[string]string{"Authorization": "Bearer " + token}
	for i := 0; i+1 < len(more); i += 2 {
		h[more[i]] = more[i+1]
	}
	return h
}

// TestEveryRoleAgainstEveryServedMethod: each identity calls each method
// the server answers; a method above its role is refused naming the role
// and the method, before the device is called (a viewer's write does not
// happen), and every other call gets past the role check.
func TestEveryRoleAgainstEveryServedMethod(t *testing.T) {
	m, url := identities(t, transport.Options{})
	srv := transport.NewServer(m.drv, transport.Options{Logger: quietLogger()})
	methods := srv.Methods()
	srv.Close()
	for _, who := range []struct {
		token string
		role  auth.Role
	}{{"vera-token", auth.RoleViewer}, {"alice-token", auth.RoleAgent}, {"olga-token", auth.RoleOperator}} {
		sid := initHTTP(t, url, bearer(who.token))
		for _, method := range methods {
			if method == mhp.MethodSafetyEStop || method == mhp.MethodSafetyReset {
				continue // below: estop then reset, in that order
			}
			_, r := post(t, url, `{"jsonrpc":"2.0","id":2,"method":"`+method+`","params":{}}`, bearer(who.token, mhp.HeaderSession, sid))
			refused := r.Error != nil && (r.Error.Data[mhp.DataReason] == auth.ReasonRoleForbidden || r.Error.Data[mhp.DataReason] == mhp.ReasonOperatorRequired)
			if want := !who.role.Allows(auth.Need(method, false)); refused != want {
				t.Errorf("%s calling %s: refused by role %v, want %v (%+v)", who.role, method, refused, want, r.Error)
			}
			if refused && (!strings.Contains(r.Error.Message, string(who.role)) || !strings.Contains(r.Error.Message, method)) {
				t.Errorf("refusal does not name the role and the method: %v", r.Error)
			}
		}
	}
	// A viewer's write never reaches the device; the agent's does.
	write := `{"jsonrpc":"2.0","id":3,"method":"settings/write","params":{"name":"` + conformance.SettingSetpoint + `","value":42}}`
	vera := initHTTP(t, url, bearer("vera-token"))
	if _, r := post(t, url, write, bearer("vera-token", mhp.HeaderSession, vera)); r.Error == nil || r.Error.Data[mhp.DataReason] != auth.ReasonRoleForbidden {
		t.Fatalf("viewer write: %+v", r)
	}
	alice := initHTTP(t, url, bearer("alice-token"))
	if _, r := post(t, url, write, bearer("alice-token", mhp.HeaderSession, alice)); r.Error != nil {
		t.Fatalf("agent write: %v", r.Error)
	}
	// Estop is served to the viewer; reset is not.
	if _, r := post(t, url, `{"jsonrpc":"2.0","id":4,"method":"safety/estop","params":{"reason":"viewer saw smoke"}}`, bearer("vera-token", mhp.HeaderSession, vera)); r.Error != nil {
		t.Fatalf("viewer estop: %v", r.Error)
	}
	if _, r := post(t, url, `{"jsonrpc":"2.0","id":5,"method":"safety/reset"}`, bearer("vera-token", mhp.HeaderSession, vera)); r.Error == nil || r.Error.Data[mhp.DataReason] != auth.ReasonRoleForbidden {
		t.Fatalf("viewer reset: %+v", r)
	}
	// No credential: 401 on every route, estop included.
	if resp, _ := postRaw(t, url, `{"jsonrpc":"2.0","id":6,"method":"safety/estop"}`, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("estop without a credential: HTTP %d", resp.StatusCode)
	}
}

// TestSessionSecretReplayedByAnotherIdentity: a session belongs to the
// identity that opened it; its secret presented under another credential is
// unknown, and the label names the owner.
func TestSessionSecretReplayedByAnotherIdentity(t *testing.T) {
	_, url := identities(t, transport.Options{})
	resp, r := post(t, url, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2026-09-12","clientInfo":{"name":"notebook"}}}`, bearer("alice-token"))
	var init mhp.InitializeResult
	if r.Error != nil || json.Unmarshal(r.Result, &init) != nil || !strings.HasPrefix(init.Label, "alice/notebook#") {
		t.Fatalf("initialize: label %q, %+v", init.Label, r.Error)
	}
	sid := resp.Header.Get(mhp.HeaderSession)
	acquire := `{"jsonrpc":"2.0","id":2,"method":"session/acquire","params":{"ttl":30}}`
	if _, r := post(t, url, acquire, bearer("alice-token", mhp.HeaderSession, sid)); r.Error != nil {
		t.Fatalf("alice acquire: %v", r.Error)
	}
	release := `{"jsonrpc":"2.0","id":3,"method":"session/release"}`
	_, r = post(t, url, release, bearer("mallory-token", mhp.HeaderSession, sid))
	if r.Error == nil || r.Error.Data[mhp.DataReason] != mhp.ReasonSessionUnknown {
		t.Fatalf("mallory replaying alice's secret: %+v, want session_unknown", r)
	}
	req, _ := http.NewRequest(http.MethodDelete, url+"/session", nil)
	req.Header.Set("Authorization", "Bearer mallory-token")
	req.Header.Set(mhp.HeaderSession, sid)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("mallory ending alice's session: %v %v", resp, err)
	}
	// Alice still holds her session and its lease.
	if _, r := post(t, url, `{"jsonrpc":"2.0","id":4,"method":"session/renew"}`, bearer("alice-token", mhp.HeaderSession, sid)); r.Error != nil {
		t.Fatalf("alice after the replay: %v", r.Error)
	}
}

// TestHeaderSessionCopiedByAnotherIdentity: a header-keyed session is keyed
// by (identity, X-MHP-Client): another identity copying the header gets a
// session of its own, cannot release the victim's lease, and cannot write
// under it.
func TestHeaderSessionCopiedByAnotherIdentity(t *testing.T) {
	_, url := identities(t, transport.Options{})
	const header = "lab-notebook-7"
	initHTTP(t, url, bearer("alice-token", mhp.HeaderClient, header))
	victim := bearer("alice-token", mhp.HeaderClient, header)
	if _, r := post(t, url, `{"jsonrpc":"2.0","id":2,"method":"session/acquire","params":{"ttl":30}}`, victim); r.Error != nil {
		t.Fatalf("alice acquire over the header: %v", r.Error)
	}
	copier := bearer("mallory-token", mhp.HeaderClient, header)
	if _, r := post(t, url, `{"jsonrpc":"2.0","id":3,"method":"session/release"}`, copier); r.Error == nil {
		t.Fatal("mallory with a copied header released something without initializing")
	}
	initHTTP(t, url, copier)
	post(t, url, `{"jsonrpc":"2.0","id":4,"method":"session/release"}`, copier)
	write := `{"jsonrpc":"2.0","id":5,"method":"settings/write","params":{"name":"` + conformance.SettingSetpoint + `","value":41}}`
	if _, r := post(t, url, write, copier); r.Error == nil || r.Error.Code != mhp.CodeNotLeased {
		t.Fatalf("mallory writing under alice's lease with a copied header: %+v, want NotLeased", r)
	}
	if _, r := post(t, url, write, victim); r.Error != nil {
		t.Fatalf("alice's lease after the copy: %v", r.Error)
	}
}

// TestTLSAndMutualTLSThroughTheTransport: the device served over HTTPS and
// over mutual TLS, dialled by the client SDK with the lab CA and a client
// certificate; the certificate's identity names the session; a client
// without one is refused in the handshake, by the server, saying why.
func TestTLSAndMutualTLSThroughTheTransport(t *testing.T) {
	lab := authtest.NewLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	m := newMemory(t, conformance.Options{})
	addr := serveListener(t, newServer(t, m.drv, transport.Options{TLS: lab.Server(t, false).Config()}))
	d, err := client.Dial(ctx, "https://"+addr, client.Options{TLS: lab.Client(t, ""), ClientName: "tls"})
	if err != nil {
		t.Fatalf("dial over TLS: %v", err)
	}
	if _, err := d.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	d.Close()
	_, err = client.Dial(ctx, "https://"+addr, client.Options{})
	if err == nil || !strings.Contains(err.Error(), "refused by the client") || !strings.Contains(err.Error(), "--ca") {
		t.Fatalf("dial without the lab CA: %v", err)
	}
	if e, ok := mhp.AsError(err); !ok || e.Data["sent"] != false {
		t.Fatalf("a refused handshake is reported as sent: %v", err)
	}

	st := lab.Server(t, true)
	a, _ := auth.New(auth.Config{ClientCerts: true})
	m2 := newMemory(t, conformance.Options{})
	addr2 := serveListener(t, newServer(t, m2.drv, transport.Options{TLS: st.Config(), Auth: a}))
	d2, err := client.Dial(ctx, "https://"+addr2, client.Options{TLS: lab.Client(t, "bench-3"), ClientName: "robot"})
	if err != nil {
		t.Fatalf("dial over mutual TLS: %v", err)
	}
	defer d2.Close()
	if _, err := d2.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if got := d2.Info().Label; !strings.HasPrefix(got, "bench-3/robot#") {
		t.Fatalf("session label over mutual TLS %q, want bench-3/robot#...", got)
	}
	_, err = client.Dial(ctx, "https://"+addr2, client.Options{TLS: lab.Client(t, "")})
	if err == nil || !strings.Contains(err.Error(), "refused by the server") || !strings.Contains(err.Error(), "client certificate") {
		t.Fatalf("dial without a client certificate: %v", err)
	}
	// Plain HTTP to the TLS port is refused by the TLS server, not served.
	conn, err := tls.Dial("tcp", addr2, &tls.Config{InsecureSkipVerify: true})
	if err == nil {
		br := bufio.NewReader(conn)
		fmt.Fprintf(conn, "GET /mhp.json HTTP/1.1\r\nHost: x\r\n\r\n")
		if line, err := br.ReadString('\n'); err == nil && strings.Contains(line, "200") {
			t.Fatal("served a client without a certificate")
		}
		conn.Close()
	}
}
