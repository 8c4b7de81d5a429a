package directory_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/directory"
)

func TestProbeFindsServersOnGivenPorts(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/mhp.json" {
			http.NotFound(w, r)
			return
		}
		d := &mhp.Description{Detail: mhp.DetailFull, Descriptor: mhp.Descriptor{DeviceInfo: mhp.DeviceInfo{ID: "tc-9", Class: "thermocycler"},
			Signals: []mhp.Signal{{Name: "block_temperature"}}}}
		_ = json.NewEncoder(w).Encode(d)
	}))
	defer srv.Close()
	_, portText, _ := net.SplitHostPort(srv.Listener.Addr().String())
	port, _ := strconv.Atoi(portText)
	// A closed port next to it answers nothing and is skipped.
	cards := directory.Probe(context.Background(), []string{"127.0.0.1"}, []int{port, 1}, time.Second)
	if len(cards) != 1 || cards[0].ID != "tc-9" || cards[0].Target != srv.URL || cards[0].Signals[0] != "block_temperature" {
		t.Fatalf("probe: %+v", cards)
	}
	if n := len(directory.Ports()); n != 40 {
		t.Fatalf("conventional ports: %d", n)
	}
}

// TestAdvertiseAndBrowse: hashicorp/mdns's responder (Advertise) is found
// by the directory's own browse on the host network, with its TXT. (On a
// host whose name does not resolve, Advertise falls back to the addresses
// of the interfaces that are up; before, it failed: "could not determine
// host IP addresses".)
func TestAdvertiseAndBrowse(t *testing.T) {
	conformance.Peer(t, "MDNS", "1 (mDNS uses multicast on the host network)")
	stop, err := directory.Advertise(mhp.DeviceInfo{ID: "tc-mdns", Class: "thermocycler"}, 18921)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	found, err := directory.BrowseWith(context.Background(), directory.BrowseOptions{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range found {
		if a.ID == "tc-mdns" && a.Class == "thermocycler" && a.Path == "/mhp.json" && strings.HasSuffix(a.Target, ":18921") {
			return
		}
	}
	t.Fatalf("browse: %+v, want tc-mdns on port 18921", found)
}
