package directory_test

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/openmhp/mhp-go/directory"
	"github.com/openmhp/mhp-go/internal/testnet"
	"github.com/openmhp/mhp-go/mdns/mdnstest"
)

// TestTargetURL: a target URL carries an IPv6 address in brackets and a
// zone as %25 (RFC 6874), and url.Parse reads it back to the host the
// system dials. Before, Probe wrote http://[fe80::1%eth0]:18900, which
// url.Parse refuses ("invalid URL escape"), so no link-local target was
// ever reached.
func TestTargetURL(t *testing.T) {
	for _, c := range []struct{ host, want, dial string }{
		{"127.0.0.1", "http://127.0.0.1:18900", "127.0.0.1"},
		{"box.local", "http://box.local:18900", "box.local"},
		{"::1", "http://[::1]:18900", "::1"},
		{"[::1]", "http://[::1]:18900", "::1"},
		{"2001:db8::5", "http://[2001:db8::5]:18900", "2001:db8::5"},
		{"fe80::1%eth0", "http://[fe80::1%25eth0]:18900", "fe80::1%eth0"},
		{"[fe80::1%eth0]", "http://[fe80::1%25eth0]:18900", "fe80::1%eth0"},
		{"fe80::1%4", "http://[fe80::1%254]:18900", "fe80::1%4"},
	} {
		got := directory.TargetURL(c.host, 18900)
		if got != c.want {
			t.Errorf("host %q: %s, want %s", c.host, got, c.want)
			continue
		}
		u, err := url.Parse(got)
		if err != nil || u.Hostname() != c.dial || u.Port() != "18900" {
			t.Errorf("%s reads back as %v %v, want host %s port 18900", got, u, err, c.dial)
		}
	}
}

// cardOn serves a card for id on the TCP address at ("[::1]:0"), or skips
// the test with why when the machine cannot listen there.
func cardOn(t *testing.T, at, why string, id string) int {
	t.Helper()
	ln, err := net.Listen("tcp", at)
	if err != nil {
		t.Skipf("%s: cannot listen on %s: %v", why, at, err)
	}
	srv := &http.Server{Handler: cardHandler(id)}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().(*net.TCPAddr).Port
}

// linkLocal is an IPv6 link-local address with its zone, or the test is
// skipped saying there is none.
func linkLocal(t *testing.T) (net.IP, string) {
	t.Helper()
	ip, zone, ok := testnet.LinkLocal()
	if !ok {
		t.Skip("no interface that is up has an IPv6 link-local address this test can listen on (lo has none: ip -6 addr)")
	}
	return ip, zone
}

// TestProbeOverIPv6 probes a card server over the IPv6 loopback and over a
// link-local address with its zone: each answers with its card, and the
// card's target is the URL the prober reached (zone as %25), which reads
// back to that address. Before, the link-local probe found nothing: its URL
// did not parse.
func TestProbeOverIPv6(t *testing.T) {
	t.Run("loopback", func(t *testing.T) {
		port := cardOn(t, "[::1]:0", "no IPv6 loopback on this machine", "tc-v6")
		cards := directory.Probe(context.Background(), []string{"::1"}, []int{port}, browseTimeout)
		if want := "http://[::1]:" + strconv.Itoa(port); len(cards) != 1 || cards[0].ID != "tc-v6" || cards[0].Target != want {
			t.Fatalf("cards %+v, want tc-v6 at %s", cards, want)
		}
	})
	t.Run("link-local with zone", func(t *testing.T) {
		ip, zone := linkLocal(t)
		host := ip.String() + "%" + zone
		port := cardOn(t, net.JoinHostPort(host, "0"), "link-local", "tc-ll")
		cards := directory.Probe(context.Background(), []string{host}, []int{port}, browseTimeout)
		want := "http://[" + ip.String() + "%25" + zone + "]:" + strconv.Itoa(port)
		if len(cards) != 1 || cards[0].ID != "tc-ll" || cards[0].Target != want {
			t.Fatalf("cards %+v, want tc-ll at %s", cards, want)
		}
	})
}

// TestBrowseThenProbeALinkLocalDevice: end to end, a responder on a
// link-local address announces a device whose only address is that
// link-local one; the browse gives it the zone of the interface the answer
// came in on, and a probe of what was found, as host scan and
// serve-directory do, reads the device's card there. Before, the probe
// found nothing (the zone broke its URL).
func TestBrowseThenProbeALinkLocalDevice(t *testing.T) {
	ip, zone := linkLocal(t)
	port := cardOn(t, net.JoinHostPort(ip.String()+"%"+zone, "0"), "link-local", "tc-ll")
	at := &net.UDPAddr{IP: ip, Zone: zone}
	resp := mdnstest.StartResponderOn(t, at, mhpPTR, 0,
		mdnstest.Answer(mhpPTR, "tc-ll", "ll-box.local", uint16(port), []net.IP{ip}, "id=tc-ll", "class=thermocycler", "path=/mhp.json"))
	ctx, cancel := context.WithTimeout(context.Background(), browseTimeout)
	defer cancel()
	found, err := directory.BrowseWith(ctx, directory.BrowseOptions{Timeout: browseTimeout / 3, Max: 1, Conn: mdnstest.ClientOn(t, at), To: resp.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "[" + ip.String() + "%" + zone + "]:" + strconv.Itoa(port)
	target := "http://[" + ip.String() + "%25" + zone + "]:" + strconv.Itoa(port)
	if len(found) != 1 || found[0].Endpoint != endpoint || found[0].Target != target {
		t.Fatalf("found %+v, want endpoint %s, target %s", found, endpoint, target)
	}
	if cards := probeAll(t, found); len(cards) != 1 || cards[0].ID != "tc-ll" || cards[0].Target != target {
		t.Fatalf("cards %+v, want tc-ll at %s", cards, target)
	}
}
