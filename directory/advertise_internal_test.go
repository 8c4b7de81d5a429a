package directory

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/mdns"
	"github.com/openmhp/mhp-go/mdns/mdnstest"
)

// TestMDNSHostName: the host is announced in the mDNS domain as avahi and
// Bonjour do. Before, Advertise announced the OS name with a dot, "vm.",
// a name no mDNS resolver asks for.
func TestMDNSHostName(t *testing.T) {
	long := strings.Repeat("a", 62) + "é" // 64 bytes; the cut must not split é
	for _, c := range []struct{ os, want string }{
		{"vm", "vm.local."},
		{"vm.", "vm.local."},
		{"vm.local", "vm.local."},
		{"vm.local.", "vm.local."},
		{"VM.LOCAL", "VM.LOCAL."},
		{"box.lab.example.com", "box.local."},
		{"box.lab.example.com.", "box.local."},
		{"box.lab.local", "box.lab.local."},
		{"a..local", "a.local."},
		{".local", fallbackHost + ".local."},
		{"", fallbackHost + ".local."},
		{".example.com", fallbackHost + ".local."},
		{long, strings.Repeat("a", 62) + ".local."},
		{long + ".local", strings.Repeat("a", 62) + ".local."},
		{"été.lab", "été.local."},
	} {
		if got := mdnsHostName(c.os); got != c.want {
			t.Errorf("host %q announced as %q, want %q", c.os, got, c.want)
		}
	}
}

// TestAdvertisedRecordsNameTheLocalHost: the responder's answer to a
// browse (the PTR question), packed as hashicorp/mdns packs it and read by
// package mdns's decoder through BrowseWith, names the host in .local as
// its SRV target, and the A and AAAA records are that name's, so the
// browse resolves it to the announced addresses; a resolver's A and AAAA
// questions for the .local name are answered. Before, the SRV target and
// the address records were "vm." and an A question for vm.local. got
// nothing.
func TestAdvertisedRecordsNameTheLocalHost(t *testing.T) {
	ips := []net.IP{net.ParseIP("192.0.2.7"), net.ParseIP("fd00::7")}
	for _, c := range []struct{ os, want string }{
		{"vm", "vm.local."},
		{"vm.local", "vm.local."},
		{"box.lab.example.com", "box.local."},
	} {
		t.Run(c.os, func(t *testing.T) {
			zone, err := advertZone(mhp.DeviceInfo{ID: "tc-adv", Class: "thermocycler"}, 18921, mdnsHostName(c.os), ips)
			if err != nil {
				t.Fatal(err)
			}
			answer := &dns.Msg{MsgHdr: dns.MsgHdr{Response: true, Authoritative: true},
				Answer: zone.Records(dns.Question{Name: MDNSService + ".local.", Qtype: dns.TypePTR, Qclass: dns.ClassINET})}
			pkt, err := answer.Pack()
			if err != nil {
				t.Fatal(err)
			}
			resp := mdnstest.StartResponder(t, MDNSService+".local", 0, pkt)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			found, err := BrowseWith(ctx, BrowseOptions{Timeout: 10 * time.Second, Max: 1, Conn: mdnstest.Client(t), To: resp.Addr()})
			if err != nil {
				t.Fatal(err)
			}
			want := Announced{Instance: "tc-adv", ID: "tc-adv", Class: "thermocycler", Path: "/mhp.json", Host: strings.TrimSuffix(c.want, "."),
				Endpoint: "192.0.2.7:18921", Target: "http://192.0.2.7:18921"}
			if len(found) != 1 || found[0] != want {
				t.Fatalf("browsed %+v, want %+v", found, want)
			}
			for _, q := range []struct {
				qtype uint16
				want  string
			}{{dns.TypeA, "192.0.2.7"}, {dns.TypeAAAA, "fd00::7"}} {
				recs := zone.Records(dns.Question{Name: c.want, Qtype: q.qtype, Qclass: dns.ClassINET})
				if len(recs) != 1 || recs[0].Header().Name != c.want || !strings.HasSuffix(recs[0].String(), "\t"+q.want) {
					t.Errorf("%s question for %s answered %v, want %s", dns.TypeToString[q.qtype], c.want, recs, q.want)
				}
			}
		})
	}
}

// TestAdvertisedAddresses: the addresses announced are the host name's,
// unless it does not resolve or resolves to loopback only (Debian's
// 127.0.1.1, this machine's 127.0.0.1), then the interfaces'; with none at
// all Advertise is refused with a server error naming the host.
func TestAdvertisedAddresses(t *testing.T) {
	ip := net.ParseIP
	noName := &net.DNSError{Err: "no such host", Name: "vm", IsNotFound: true}
	for _, c := range []struct {
		name     string
		resolved []net.IP
		lookup   error
		up       []net.IP
		want     string // the addresses, or the error
	}{
		{"resolves", []net.IP{ip("192.0.2.7"), ip("127.0.1.1")}, nil, []net.IP{ip("198.51.100.1")}, "[192.0.2.7]"},
		{"loopback only", []net.IP{ip("127.0.1.1")}, nil, []net.IP{ip("198.51.100.1"), ip("127.0.0.1")}, "[198.51.100.1 127.0.0.1]"},
		{"does not resolve", nil, noName, []net.IP{ip("198.51.100.1")}, "[198.51.100.1]"},
		{"loopback and no interface", []net.IP{ip("::1")}, nil, nil, "[::1]"},
		{"nothing", nil, noName, nil, `host name "vm" does not resolve (lookup vm: no such host) and no interface is up with an address`},
	} {
		t.Run(c.name, func(t *testing.T) {
			lookup := func(_ context.Context, network, host string) ([]net.IP, error) {
				if network != "ip" || host != "vm" {
					t.Errorf("looked up %s %q, want ip vm", network, host)
				}
				return c.resolved, c.lookup
			}
			got, err := advertAddrs(context.Background(), "vm", lookup, func() []net.IP { return c.up })
			if err != nil {
				var me *mhp.Error
				if !errors.As(err, &me) || me.Code != mhp.CodeServerError || me.Message != c.want {
					t.Fatalf("refused with %#v, want server error %q", err, c.want)
				}
				return
			}
			if s := fmt.Sprint(got); s != c.want {
				t.Fatalf("announces %s, want %s", s, c.want)
			}
		})
	}
}

// TestAnnouncedSkipsUnreachableAddresses: an announced link-local IPv6
// address without a zone (the interface it came in on unknown) is no
// endpoint, as unspecified and multicast ones are not; the next usable
// address is, and an instance with none is not announced.
func TestAnnouncedSkipsUnreachableAddresses(t *testing.T) {
	for _, c := range []struct {
		addrs []string
		want  string // the target; "" = not announced
	}{
		{[]string{"fe80::1"}, ""},
		{[]string{"::", "ff02::fb", "fe80::1"}, ""},
		{[]string{"fe80::1", "fe80::2%eth0"}, "http://[fe80::2%25eth0]:18921"},
		{[]string{"0.0.0.0", "2001:db8::5"}, "http://[2001:db8::5]:18921"},
		{[]string{"169.254.7.7"}, "http://169.254.7.7:18921"},
	} {
		in := mdns.Instance{Name: "tc-9", Host: "box.local", Port: 18921}
		for _, a := range c.addrs {
			in.Addrs = append(in.Addrs, netip.MustParseAddr(a))
		}
		a, ok := announced(in)
		if ok != (c.want != "") || a.Target != c.want {
			t.Errorf("addresses %v: announced %v %+v, want target %q", c.addrs, ok, a, c.want)
		}
	}
}
