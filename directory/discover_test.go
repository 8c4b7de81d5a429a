package directory_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/directory"
	"github.com/openmhp/mhp-go/mdns/mdnstest"
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
// by the directory's own browse on the host network, with its TXT and its
// host named in .local (before: "vm."). (On a host whose name does not
// resolve, Advertise falls back to the addresses of the interfaces that are
// up; before, it failed: "could not determine host IP addresses".) It binds
// the mDNS port, so it holds the zeroconf peers' lock.
func TestAdvertiseAndBrowse(t *testing.T) {
	conformance.Peer(t, "MDNS", "1 (mDNS uses multicast on the host network)")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mdnstest.LockZeroconf(t, ctx)
	stop, err := directory.Advertise(mhp.DeviceInfo{ID: "tc-mdns", Class: "thermocycler"}, 18921)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	found, err := directory.BrowseWith(ctx, directory.BrowseOptions{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	for _, a := range found {
		if a.ID == "tc-mdns" && a.Class == "thermocycler" && a.Path == "/mhp.json" && strings.HasSuffix(a.Target, ":18921") {
			if want := strings.TrimSuffix(directory.MDNSHostName(host), "."); a.Host != want {
				t.Fatalf("announced host %q, want %q", a.Host, want)
			}
			return
		}
	}
	t.Fatalf("browse: %+v, want tc-mdns on port 18921", found)
}

// TestZeroconfResolvesTheAdvertisement: the real python-zeroconf (0.47.3
// when this was written), resolving the advertised instance as a Python
// client does (SRV, TXT, A, AAAA), gets the host in .local, the port, the
// TXT and an address: loopback's, as it listens there only. Before, the
// SRV target was "vm.", not a .local name. Set MHP_PEER_ZEROCONF to a
// python3 that imports zeroconf; it uses the host network's mDNS port.
func TestZeroconfResolvesTheAdvertisement(t *testing.T) {
	python := conformance.Peer(t, "ZEROCONF", "a python3 with zeroconf (apt-get install python3-zeroconf; /usr/bin/python3)")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	mdnstest.LockZeroconf(t, ctx)
	stop, err := directory.Advertise(mhp.DeviceInfo{ID: "tc-zc-adv", Class: "thermocycler"}, 18923)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	// The advertiser answers on the host network's mDNS group: where this
	// machine has no multicast, neither browse nor zeroconf can hear it.
	heard, err := directory.BrowseWith(ctx, directory.BrowseOptions{Timeout: 2 * time.Second})
	if err != nil || !slices.ContainsFunc(heard, func(a directory.Announced) bool { return a.ID == "tc-zc-adv" }) {
		t.Skipf("the advertisement is not heard on this host network (no multicast?): %v %+v", err, heard)
	}
	got := mdnstest.ZeroconfResolve(t, ctx, python, directory.MDNSService, "tc-zc-adv", 20*time.Second)
	host, _ := os.Hostname()
	if want := directory.MDNSHostName(host); got.Server != want || !strings.HasSuffix(got.Server, ".local.") {
		t.Fatalf("zeroconf resolved the server %q (%+v), want %q", got.Server, got, want)
	}
	if got.Port != 18923 || got.Properties["id"] != "tc-zc-adv" || got.Properties["path"] != "/mhp.json" || !slices.Contains(got.Addresses, "127.0.0.1") {
		t.Fatalf("zeroconf resolved %+v, want port 18923, id tc-zc-adv, path /mhp.json and 127.0.0.1 among the addresses", got)
	}
}
