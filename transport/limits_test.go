package transport_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/transport"
)

// ---- 12.5: bounded memory and connections ----

// listenServe serves srv with ServeHTTP on 127.0.0.1:0 until the test ends.
func listenServe(t testing.TB, srv *transport.Server) string {
	t.Helper()
	ln, err := transport.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- transport.ServeHTTP(ctx, ln, srv) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(testTimeout):
			t.Error("ServeHTTP did not return")
		}
	})
	return ln.Addr().String()
}

// closedWithin reports whether the server closes c (a read ends) within d.
func closedWithin(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

func TestEStopReasonCapped(t *testing.T) {
	m := newMemory(t, conformance.Options{})
	srv := newServer(t, m.drv, transport.Options{})
	hs := serveHTTP(t, srv)
	sid := initHTTP(t, hs.URL, nil)
	tap := tapEvents(t, hs.URL, map[string]string{mhp.HeaderSession: sid})
	huge := strings.Repeat("x", 2<<20)
	_, b := postRaw(t, hs.URL, `{"jsonrpc":"2.0","id":1,"method":"safety/estop","params":{"reason":"`+huge+`"}}`, nil)
	if r := rpcAnswer(t, b); r.Error != nil {
		t.Fatalf("estop: %v", r.Error)
	}
	conformance.EventuallyWithin(t, "the estop event", testTimeout, func() bool { return strings.Contains(string(tap.bytes()), mhp.NotifySafetyEStop) })
	if n := len(tap.bytes()); n > 4*transport.MaxReason {
		t.Fatalf("the event stream carried %d bytes for one estop; the reason is not capped", n)
	}
	if !strings.Contains(string(tap.bytes()), "bytes]") {
		t.Fatalf("the cut reason has no marker: %s", tap.bytes())
	}
}

// Idle connections at the cap give way to a newcomer: an estop on a new
// connection is answered while the cap's worth of idle connections is open,
// and the oldest idle ones are closed.
func TestIdleConnectionsGiveWay(t *testing.T) {
	m := newMemory(t, conformance.Options{})
	const limit = 8
	srv := newServer(t, m.drv, transport.Options{MaxConns: limit})
	addr := listenServe(t, srv)
	var idle []net.Conn
	for i := 0; i < 4*limit; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		idle = append(idle, c)
	}
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	cl := &http.Client{Transport: tr, Timeout: testTimeout}
	start := time.Now()
	resp, err := cl.Post("http://"+addr+"/rpc", "application/json", strings.NewReader(estopBody(1)))
	if err != nil {
		t.Fatalf("estop with %d idle connections open: %v", len(idle), err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if r := rpcAnswer(t, b); r.Error != nil || m.drv.State() != mhp.StateEStop {
		t.Fatalf("estop: %s (state %s)", b, m.drv.State())
	}
	t.Logf("estop answered in %v with %d idle connections dialled (limit %d)", time.Since(start), len(idle), limit)
	// The first dialled are gone; at most `limit` stay open.
	closed := 0
	for _, c := range idle {
		if closedWithin(c, 50*time.Millisecond) {
			closed++
		}
	}
	if open := len(idle) - closed; open > limit {
		t.Fatalf("%d idle connections still open, limit %d", open, limit)
	}
}

// A body trickling in is cut off by ReadTimeout.
func TestTricklingBodyCutOff(t *testing.T) {
	m := newMemory(t, conformance.Options{})
	srv := newServer(t, m.drv, transport.Options{ReadTimeout: 200 * time.Millisecond})
	addr := listenServe(t, srv)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /rpc HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n", addr)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if _, err := c.Write([]byte("{")); err != nil {
				return
			}
		}
	}()
	start := time.Now()
	if !closedWithin(c, testTimeout) {
		t.Fatal("a trickling body was never cut off")
	}
	if d := time.Since(start); d > 20*200*time.Millisecond {
		t.Fatalf("cut off after %v (ReadTimeout 200ms)", d)
	}
}

// A keep-alive connection idle longer than IdleTimeout is closed.
func TestIdleKeepAliveClosed(t *testing.T) {
	m := newMemory(t, conformance.Options{})
	srv := newServer(t, m.drv, transport.Options{IdleTimeout: 100 * time.Millisecond})
	addr := listenServe(t, srv)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	body := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	fmt.Fprintf(c, "POST /rpc HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", addr, len(body), body)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("ping: %v %v", resp, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if !closedWithin(c, testTimeout) {
		t.Fatal("an idle keep-alive connection was never closed")
	}
}

// A connection that never sends a request is closed by the header timeout.
func TestSilentConnectionClosed(t *testing.T) {
	m := newMemory(t, conformance.Options{})
	srv := newServer(t, m.drv, transport.Options{ReadHeaderTimeout: 100 * time.Millisecond, IdleTimeout: 100 * time.Millisecond})
	addr := listenServe(t, srv)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("POST /rpc HTTP/1.1\r\n")); err != nil {
		t.Fatal(err)
	}
	if !closedWithin(c, testTimeout) {
		t.Fatal("a connection stuck in its headers was never closed")
	}
}

// An event stream outlives ReadTimeout and WriteTimeout (each write gets
// its own deadline), and is served through ServeHTTP.
func TestEventStreamOutlivesTimeouts(t *testing.T) {
	m := newMemory(t, conformance.Options{})
	srv := newServer(t, m.drv, transport.Options{ReadTimeout: 100 * time.Millisecond, WriteTimeout: 100 * time.Millisecond,
		KeepAlive: 20 * time.Millisecond})
	addr := listenServe(t, srv)
	url := "http://" + addr
	sid := initHTTP(t, url, nil)
	tap := tapEvents(t, url, map[string]string{mhp.HeaderSession: sid})
	deadline := time.Now().Add(400 * time.Millisecond)
	for time.Now().Before(deadline) {
		if tap.ended() {
			t.Fatal("the event stream ended within ReadTimeout/WriteTimeout multiples")
		}
		if _, r := post(t, url, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, map[string]string{mhp.HeaderSession: sid}); r.Error != nil {
			t.Fatal(r.Error)
		}
		time.Sleep(20 * time.Millisecond) // pacing the pings, not waiting for a result
	}
	if _, r := post(t, url, `{"jsonrpc":"2.0","id":2,"method":"safety/estop"}`, map[string]string{mhp.HeaderSession: sid}); r.Error != nil {
		t.Fatal(r.Error)
	}
	conformance.EventuallyWithin(t, "the estop event on the long stream", testTimeout, func() bool { return strings.Contains(string(tap.bytes()), mhp.NotifySafetyEStop) })
}

// At the cap with no idle connection, a connection still trickling its
// request gives way to a newcomer; a connection whose request is being
// served (a write blocked in the device) does not.
func TestTricklersGiveWayServedRequestsStay(t *testing.T) {
	m := newMemory(t, conformance.Options{})
	m.in.Script(conformance.SettingSetpoint, conformance.Block)
	const limit = 4
	srv := newServer(t, m.drv, transport.Options{MaxConns: limit, ReadTimeout: time.Minute})
	addr := listenServe(t, srv)
	url := "http://" + addr
	sid := initHTTP(t, url, nil)

	// One write blocked in the device, on its own connection.
	wc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer wc.Close()
	body := `{"jsonrpc":"2.0","id":1,"method":"settings/write","params":{"name":"setpoint","value":30}}`
	fmt.Fprintf(wc, "POST /rpc HTTP/1.1\r\nHost: %s\r\nMhp-Session: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		addr, sid, len(body), body)
	conformance.EventuallyWithin(t, "the write to reach the backend", testTimeout, func() bool { return m.in.Calls(conformance.SettingSetpoint) == 1 })

	// The rest of the cap and more: requests that never finish their body.
	for i := 0; i < 2*limit; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "POST /rpc HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", addr)
	}
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	cl := &http.Client{Transport: tr, Timeout: testTimeout}
	resp, err := cl.Post(url+"/rpc", "application/json", strings.NewReader(estopBody(2)))
	if err != nil {
		t.Fatalf("estop with the cap full of tricklers: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if r := rpcAnswer(t, b); r.Error != nil || m.drv.State() != mhp.StateEStop {
		t.Fatalf("estop: %s (state %s)", b, m.drv.State())
	}
	// The blocked write's connection survived: its answer arrives once the
	// device lets go.
	m.in.Release(conformance.SettingSetpoint)
	_ = wc.SetReadDeadline(time.Now().Add(testTimeout))
	wresp, err := http.ReadResponse(bufio.NewReader(wc), nil)
	if err != nil {
		t.Fatalf("the served write's connection was cut: %v", err)
	}
	wb, _ := io.ReadAll(wresp.Body)
	wresp.Body.Close()
	if r := rpcAnswer(t, wb); r.Error == nil {
		t.Logf("write answered %s", wb) // the estop decides the outcome; the connection is what is tested
	}
}
