package bench

import (
	"context"
	"net"
	"strings"
	"testing"
)

// A serve child's first line names its HTTP address and, for sim-echo,
// the echo's; the echo answers what it is sent.
func TestServeAddrsAndEcho(t *testing.T) {
	cases := []struct{ line, http, echo string }{
		{"addr 127.0.0.1:1234", "127.0.0.1:1234", ""},
		{"addr 127.0.0.1:1234 echo 127.0.0.1:99", "127.0.0.1:1234", "127.0.0.1:99"},
		{"addr", "", ""},
		{"oops 1 echo 2", "", "2"},
	}
	for _, c := range cases {
		if h, e := parseServeAddrs(c.line); h != c.http || e != c.echo {
			t.Errorf("%q: %q %q, want %q %q", c.line, h, e, c.http, c.echo)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go serveEcho(ctx, ln)
	ec, err := dialEcho(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer ec.close()
	for i := 0; i < 3; i++ {
		if _, err := ec.roundTrip(); err != nil {
			t.Fatal(err)
		}
		if string(ec.buf) != string(echoMsg) {
			t.Fatalf("echoed %q", ec.buf)
		}
	}
}

// The estop row runs end to end at a tiny scale (three estops a phase; its
// figures mean nothing): the serve child with its echo, both loads, the
// floor and the notes.
func TestEStopRowRunsAtTinyScale(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three child processes and 64 clients")
	}
	r, err := measureEStop(context.Background(), Options{Rounds: 1, Scale: 100})
	if err != nil {
		t.Fatal(err)
	}
	if r.Met == nil || len(r.Notes) != 2 || !strings.Contains(r.Notes[0], "TCP echo") || !strings.Contains(r.Notes[1], "nice 19") {
		t.Fatalf("row %+v", r)
	}
	t.Log(r.Now, r.Notes)
}
