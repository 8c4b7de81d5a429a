package mdns

import (
	"context"
	"net"
	"net/netip"
	"testing"

	"github.com/openmhp/mhp-go/mdns/mdnstest"
)

// loopbackName is the name of the machine's loopback interface (lo, lo0).
func loopbackName(t *testing.T) string {
	t.Helper()
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range ifs {
		if it.Flags&net.FlagLoopback != 0 && it.Flags&net.FlagUp != 0 {
			return it.Name
		}
	}
	t.Skip("no loopback interface that is up")
	return ""
}

// TestLinkLocalAnswerCarriesItsInterface: a link-local AAAA that comes in
// an IPv4 packet (responders such as avahi and Bonjour put a host's AAAA
// records in their IPv4 answers too) carries the zone of the interface
// the packet came in on, here loopback, so that the address can be dialled;
// a global IPv6 and an IPv4 address carry none. Before, the zone came from
// the packet's source address only, and an IPv4 source has none: the
// link-local address was kept without a zone, which no connection can use.
func TestLinkLocalAnswerCarriesItsInterface(t *testing.T) {
	lo := loopbackName(t)
	answer := mdnstest.Answer("_mhp._tcp.local", "tc-ll", "box.local", 18921,
		[]net.IP{net.ParseIP("fe80::1234"), net.ParseIP("fd00::7"), net.IPv4(192, 0, 2, 7)}, "id=tc-ll")
	resp := mdnstest.StartResponder(t, "_mhp._tcp.local", 0, answer)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	got, err := Browse(ctx, "_mhp._tcp", Options{Timeout: 10 * testTimeout, Max: 1, Conn: mdnstest.Client(t), To: resp.Addr()})
	if err != nil || len(got) != 1 {
		t.Fatalf("instances %+v, err %v", got, err)
	}
	want := []netip.Addr{netip.MustParseAddr("192.0.2.7"), netip.MustParseAddr("fd00::7"), netip.MustParseAddr("fe80::1234%" + lo)}
	if len(got[0].Addrs) != len(want) {
		t.Fatalf("addresses %v, want %v", got[0].Addrs, want)
	}
	for i := range want {
		if got[0].Addrs[i] != want[i] {
			t.Fatalf("addresses %v, want %v", got[0].Addrs, want)
		}
	}
}

// TestZoneOfAPacket: the interface a packet came in on names the zone; the
// source's zone is used when the socket cannot tell the interface, then
// the browse's own interface; an interface index without a name is used as
// the zone (Go dials fe80::1%4).
func TestZoneOfAPacket(t *testing.T) {
	lo := loopbackName(t)
	ifi, err := net.InterfaceByName(lo)
	if err != nil {
		t.Fatal(err)
	}
	z := &zones{fallback: "eth9"}
	for _, c := range []struct {
		name    string
		ifIndex int
		from    net.Addr
		want    string
	}{
		{"interface", ifi.Index, &net.UDPAddr{IP: net.ParseIP("fe80::1"), Zone: "wlan0"}, lo},
		{"source zone", 0, &net.UDPAddr{IP: net.ParseIP("fe80::1"), Zone: "wlan0"}, "wlan0"},
		{"browse interface", 0, &net.UDPAddr{IP: net.IPv4(192, 0, 2, 1)}, "eth9"},
		{"no source", 0, nil, "eth9"},
		{"unknown index", 1 << 20, nil, "1048576"},
	} {
		if got := z.of(c.ifIndex, c.from); got != c.want {
			t.Errorf("%s: zone %q, want %q", c.name, got, c.want)
		}
	}
	for i := 0; i < 2*maxZoneNames; i++ {
		z.of(1<<20+i, nil)
	}
	if len(z.names) > maxZoneNames {
		t.Fatalf("%d interface names remembered, bound %d", len(z.names), maxZoneNames)
	}
}
