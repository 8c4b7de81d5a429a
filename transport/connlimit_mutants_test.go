package transport_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/transport"
)

// dialSilent opens a connection that sends nothing (closed at the end of the test).
func dialSilent(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// rawCall sends one JSON-RPC body on c (with the session header when sid is
// set) and reads the HTTP answer and its body.
func rawCall(c net.Conn, addr, sid, body string) (*http.Response, []byte, error) {
	hdr := ""
	if sid != "" {
		hdr = mhp.HeaderSession + ": " + sid + "\r\n"
	}
	if _, err := fmt.Fprintf(c, "POST /rpc HTTP/1.1\r\nHost: %s\r\n%sContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		addr, hdr, len(body), body); err != nil {
		return nil, nil, err
	}
	_ = c.SetReadDeadline(time.Now().Add(testTimeout))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

// rawPing sends one ping on c and reads the HTTP answer.
func rawPing(c net.Conn, addr string) (*http.Response, error) {
	resp, _, err := rawCall(c, addr, "", `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	return resp, err
}

// TestConnectionLimitIsExact: with MaxConns connections open, the next one
// is admitted only by closing one (the oldest idle): never MaxConns+1 open.
// Catches the limit admitting one too many (issue 29, item 12). No timeout
// can close the silent connections meanwhile (all are a minute).
func TestConnectionLimitIsExact(t *testing.T) {
	m := newMemory(t, conformance.Options{})
	const limit = 4
	srv := newServer(t, m.drv, transport.Options{MaxConns: limit, ReadHeaderTimeout: time.Minute,
		IdleTimeout: time.Minute, ReadTimeout: time.Minute})
	addr := listenServe(t, srv)
	var conns []net.Conn
	for range limit {
		conns = append(conns, dialSilent(t, addr))
	}
	newcomer := dialSilent(t, addr)
	// The newcomer is served: it was admitted.
	if resp, err := rawPing(newcomer, addr); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the connection over the cap was not served: %v %v", resp, err)
	}
	// Admitting it closed the oldest idle connection, and only that one.
	if !closedWithin(conns[0], testTimeout) {
		t.Fatalf("%d connections open with MaxConns %d: the oldest idle one was not closed", limit+1, limit)
	}
	for i, c := range conns[1:] {
		if closedWithin(c, 50*time.Millisecond) { // a hold: nothing else may close
			t.Fatalf("connection %d of %d was closed too; only the oldest had to go", i+2, limit)
		}
	}
}

// TestServedConnectionsAreNeverEvicted: at the cap with every connection
// serving a request (a write blocked in the device), a newcomer is not
// served; it is closed, and the served request's answer arrives once the
// device lets go. Catches the limit evicting a connection whose request is
// being served when nothing else is left (issue 29, item 13).
func TestServedConnectionsAreNeverEvicted(t *testing.T) {
	m, addr, wrote := writeBlockedAtTheCap(t)

	newcomer := dialSilent(t, addr)
	// The newcomer may only be refused: closed, or (on an estop reserve
	// slot) answered busy.
	if resp, err := rawPing(newcomer, addr); err == nil && resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a newcomer was served (%s) while the only slot serves a write: the served connection was evicted", resp.Status)
	}
	m.in.Release(conformance.SettingSetpoint)
	if wb := <-wrote; wb == nil {
		t.Fatal("the served write's connection was cut")
	} else if r := rpcAnswer(t, wb); r.Error != nil {
		t.Fatalf("the served write answered %s, want ok", wb)
	}
}

// TestEStopOnANewConnectionAtTheCap: at the cap with every connection
// serving (a write blocked in the device), an estop on a new connection is
// admitted on a reserve slot and served at once (not left to wait for a
// close and then shut out), the blocked write is cut off, and the reserve
// connection closes after its answer; any other request on a reserve slot
// is refused busy, nothing done. On the limiter without a reserve the
// estop's connection is closed unanswered.
func TestEStopOnANewConnectionAtTheCap(t *testing.T) {
	m, addr, wrote := writeBlockedAtTheCap(t)
	for _, c := range []struct {
		name, body string
		status     int
		estop      bool
	}{
		{"a read", `{"jsonrpc":"2.0","id":3,"method":"signals/read","params":{"names":["temperature"]}}`, http.StatusServiceUnavailable, false},
		{"a frame that looks like an estop", `{"jsonrpc":"2.0","id":4,"params":{"method":"safety/estop"},"method":"signals/read"}`,
			http.StatusServiceUnavailable, false},
		{"the estop", `{"jsonrpc":"2.0","id":5,"method":"safety/estop","params":{"reason":"at the cap"}}`, http.StatusOK, true},
	} {
		nc := dialSilent(t, addr)
		resp, b, err := rawCall(nc, addr, "", c.body)
		if err != nil {
			t.Fatalf("%s on a new connection at the cap: not answered: %v", c.name, err)
		}
		r := rpcAnswer(t, b)
		switch {
		case resp.StatusCode != c.status:
			t.Fatalf("%s: status %s, want %d (%s)", c.name, resp.Status, c.status, b)
		case c.estop && r.Error != nil:
			t.Fatalf("the estop at the cap: %s", b)
		case !c.estop && (r.Error == nil || r.Error.Data[mhp.DataReason] != transport.ReasonServerBusy || resp.Header.Get("Retry-After") == ""):
			t.Fatalf("%s on a reserve slot: %s, want busy with Retry-After", c.name, b)
		}
		if !closedWithin(nc, testTimeout) {
			t.Fatalf("%s: the reserve connection stays open after its answer", c.name)
		}
	}
	wb := <-wrote
	if wb == nil {
		t.Fatal("the served write's connection was cut")
	}
	if r := rpcAnswer(t, wb); r.Error == nil || r.Error.Code != mhp.CodeEStopActive {
		t.Fatalf("the write blocked when the estop landed: %+v, want EStopActive", r.Error)
	}
	if m.in.Calls(conformance.SettingSetpoint) != 1 {
		t.Fatalf("a refused request reached the backend")
	}
}

// writeBlockedAtTheCap serves a memory driver with MaxConns 1 and fills the
// one connection: initialize, then a write blocked in the device (it has
// reached the backend). The write's answer arrives on the channel (nil when
// its connection was cut).
func writeBlockedAtTheCap(t *testing.T) (*memory, string, <-chan []byte) {
	t.Helper()
	m := newMemory(t, conformance.Options{})
	m.in.Script(conformance.SettingSetpoint, conformance.Block)
	srv := newServer(t, m.drv, transport.Options{MaxConns: 1, ReadHeaderTimeout: time.Minute,
		IdleTimeout: time.Minute, ReadTimeout: time.Minute})
	addr := listenServe(t, srv)
	wc := dialSilent(t, addr)
	resp, _, err := rawCall(wc, addr, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2026-09-12"}}`)
	if err != nil || resp.Header.Get(mhp.HeaderSession) == "" {
		t.Fatalf("initialize: %v %v", resp, err)
	}
	sid := resp.Header.Get(mhp.HeaderSession)
	wrote := make(chan []byte, 1)
	go func() {
		_, b, err := rawCall(wc, addr, sid, `{"jsonrpc":"2.0","id":2,"method":"settings/write","params":{"name":"setpoint","value":30}}`)
		if err != nil {
			b = nil
		}
		wrote <- b
	}()
	conformance.EventuallyWithin(t, "the write to reach the backend", testTimeout, func() bool {
		return m.in.Calls(conformance.SettingSetpoint) == 1
	})
	return m, addr, wrote
}
