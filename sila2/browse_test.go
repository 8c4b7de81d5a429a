package sila2_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go/clock"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/mdns/mdnstest"
	"github.com/openmhp/mhp-go/sila2"
)

// silaPTR is the PTR name a SiLA 2 browse asks for.
const silaPTR = "_sila._tcp.local"

// zeroconfPacket is a response python-zeroconf 0.47.3 sent for a SiLA 2
// server (response.hex: multicast; legacy-unicast.hex: to the browse's own
// query), with its malformed NSEC; kept in mdns/testdata.
func zeroconfPacket(t testing.TB, name string) []byte {
	return mdnstest.Packet(t, "zeroconf-0.47.txtar", name)
}

// TestBrowseFindsZeroconfServer: end to end over UDP, the browse sends its
// PTR query (QU bit on the first), and a responder answering as
// python-zeroconf 0.47 does — after another querier's question and a
// packet cut short — yields the server, its TXT read as SiLA's (name,
// description, version, the CA lines joined into a PEM), with the NSEC skip
// logged by type and reason. Both golden responses make the same server.
func TestBrowseFindsZeroconfServer(t *testing.T) {
	want := sila2.DiscoveredServer{UUID: "4c1f2a6e-9b1d-4f7e-8a42-0d6f3c2b1a90", Name: "Incubator", Description: "Shaker", Version: "1.1",
		Host: "sila-server.local", Endpoint: "127.0.0.1:50052",
		CAPEM: "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----\n"}
	for _, file := range []string{"legacy-unicast.hex", "response.hex"} {
		t.Run(file, func(t *testing.T) {
			golden := zeroconfPacket(t, file)
			resp := mdnstest.StartResponder(t, silaPTR, 0, mdnstest.Query(silaPTR), golden[:100], golden)
			logs := &mdnstest.Log{}
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			found, err := sila2.BrowseWith(ctx, sila2.BrowseOptions{Timeout: testTimeout, Max: 1, Conn: mdnstest.Client(t), To: resp.Addr(),
				Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
			if err != nil {
				t.Fatal(err)
			}
			if len(found) != 1 || found[0] != want {
				t.Fatalf("found %+v, want %+v", found, want)
			}
			if c := <-resp.Classes; c != 0x8001 {
				t.Errorf("first query class 0x%04x, want 0x8001 (IN with the QU bit)", c)
			}
			log := logs.String()
			for _, w := range []string{"skipped a record it cannot read", "type=NSEC", "name=sila-server.local", "empty block (window 0, length 0)",
				"stopped reading a packet"} {
				if !strings.Contains(log, w) {
					t.Errorf("log lacks %q:\n%s", w, log)
				}
			}
		})
	}
}

// TestBrowseQuietNetworkEndsAtTimeout: nobody answers; the browse ends at
// its timeout with nothing found, and a cancelled context ends it early.
func TestBrowseQuietNetworkEndsAtTimeout(t *testing.T) {
	resp := mdnstest.StartResponder(t, silaPTR, 0) // reads the queries, answers nothing
	conn := mdnstest.Client(t)
	found, err := sila2.BrowseWith(context.Background(), sila2.BrowseOptions{Timeout: 50 * time.Millisecond, Conn: conn, To: resp.Addr()})
	if err != nil || len(found) != 0 {
		t.Fatalf("found %+v, err %v", found, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		sila2.BrowseWith(ctx, sila2.BrowseOptions{Timeout: time.Hour, Conn: conn, To: resp.Addr()})
	}()
	select {
	case <-done:
	case <-time.After(testTimeout):
		t.Fatal("a cancelled browse did not end")
	}
	if _, err := sila2.BrowseWith(context.Background(), sila2.BrowseOptions{Conn: conn}); err == nil || !strings.Contains(err.Error(), "needs To") {
		t.Fatalf("Conn without To: %v", err)
	}
}

// TestBrowseRepeatsTheQuery: the first query (QU) is lost; the browse asks
// again 1 s later on its clock (QM), and the answer to that one counts.
func TestBrowseRepeatsTheQuery(t *testing.T) {
	resp := mdnstest.StartResponder(t, silaPTR, 1, zeroconfPacket(t, "legacy-unicast.hex"))
	clk := clock.NewManual(time.Unix(1_800_000_000, 0))
	type result struct {
		found []sila2.DiscoveredServer
		err   error
	}
	done := make(chan result, 1)
	conn := mdnstest.Client(t)
	go func() {
		found, err := sila2.BrowseWith(context.Background(), sila2.BrowseOptions{Timeout: time.Hour, Max: 1, Conn: conn, To: resp.Addr(), Clock: clk})
		done <- result{found, err}
	}()
	if c := <-resp.Classes; c != 0x8001 {
		t.Fatalf("first query class 0x%04x, want IN with the QU bit", c)
	}
	// The window's end and the repeat are both armed once the first query is out.
	conformance.Eventually(t, "the repeat armed", func() bool { return clk.Pending() == 2 })
	clk.Advance(999 * time.Millisecond)
	select {
	case c := <-resp.Classes:
		t.Fatalf("a query (class 0x%04x) before 1 s", c)
	default:
	}
	clk.Advance(time.Millisecond)
	select {
	case c := <-resp.Classes:
		if c != 0x0001 {
			t.Fatalf("repeat query class 0x%04x, want IN without the QU bit", c)
		}
	case <-time.After(testTimeout):
		t.Fatal("no repeat query after 1 s")
	}
	select {
	case r := <-done:
		if r.err != nil || len(r.found) != 1 || r.found[0].Name != "Incubator" {
			t.Fatalf("found %+v, err %v", r.found, r.err)
		}
	case <-time.After(testTimeout):
		t.Fatal("the answer to the repeat did not end the browse")
	}
}
