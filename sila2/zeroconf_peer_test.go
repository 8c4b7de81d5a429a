package sila2_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/mdns/mdnstest"
	"github.com/openmhp/mhp-go/sila2"
)

// TestBrowseRealZeroconf browses a server announced by the real
// python-zeroconf (0.47.3 when this was written), on loopback only: the
// browse's query goes by unicast to 127.0.0.1:5353 and zeroconf answers it
// with its malformed NSEC. Set MHP_PEER_ZEROCONF to a python3 that imports
// zeroconf (Debian 12: apt-get install python3-zeroconf; /usr/bin/python3).
func TestBrowseRealZeroconf(t *testing.T) {
	python := conformance.Peer(t, "ZEROCONF", "a python3 with zeroconf (apt-get install python3-zeroconf; /usr/bin/python3)")
	const uuid = "7d0c4f1e-2b3a-4c5d-9e8f-0a1b2c3d4e5f"
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	mdnstest.Zeroconf(t, ctx, python, sila2.MDNSService, uuid, 50052, "sila-server.local",
		"version=1.1", "server_name=Zeroconf peer", "description=python-zeroconf")
	var logs mdnstest.Log
	found, err := sila2.BrowseWith(ctx, sila2.BrowseOptions{Timeout: testTimeout / 3, Max: 1, Conn: mdnstest.Client(t),
		To: mdnstest.ZeroconfAddr, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 || found[0].UUID != uuid || found[0].Endpoint != "127.0.0.1:50052" || found[0].Name != "Zeroconf peer" ||
		found[0].Version != "1.1" {
		t.Fatalf("found %+v (log: %s)", found, logs.String())
	}
	if !strings.Contains(logs.String(), "type=NSEC") {
		t.Errorf("the skipped NSEC is not logged: %s", logs.String())
	}
}
