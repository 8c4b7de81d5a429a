package mdns

import (
	"bytes"
	"encoding/binary"
	"log/slog"
	"net"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go/mdns/mdnstest"
)

// testTimeout bounds the browse tests (10x headroom on a loaded machine).
const testTimeout = 30 * time.Second

// silaService is the PTR name the SiLA 2 golden packets answer.
const silaService = "_sila._tcp.local"

// zeroconfPacket is the file name (response.hex, legacy-unicast.hex) of
// testdata/zeroconf-0.47.txtar: a response python-zeroconf 0.47.3 sent for
// a SiLA 2 server, with its malformed NSEC.
func zeroconfPacket(t testing.TB, name string) []byte {
	return mdnstest.Packet(t, "zeroconf-0.47.txtar", name)
}

// TestDecodeZeroconfResponse: the PTR, SRV, TXT and A records of the
// responses python-zeroconf 0.47.3 sent (multicast, and unicast to a query
// from an ephemeral port) are read and make the server; only the malformed
// NSEC is skipped, naming why. (miekg/dns v1.1.72, under the old
// hashicorp/mdns browse, rejects each whole packet: "empty NSEC(3) block in
// type bitmap".)
func TestDecodeZeroconfResponse(t *testing.T) {
	want := Instance{Name: "4c1f2a6e-9b1d-4f7e-8a42-0d6f3c2b1a90", Host: "sila-server.local", Port: 50052,
		Addrs: []netip.Addr{netip.MustParseAddr("127.0.0.1")},
		Text: []string{"version=1.1", "server_name=Incubator", "description=Shaker", "ca0=-----BEGIN CERTIFICATE-----",
			"ca1=MIIBszCCAVmgAwIBAgIU", "ca2=-----END CERTIFICATE-----"}}
	for _, c := range []struct {
		file  string
		size  int
		types string
	}{
		{"response.hex", 301, "PTR,SRV,A,TXT"},
		{"legacy-unicast.hex", 307, "PTR,SRV,A,TXT"},
	} {
		t.Run(c.file, func(t *testing.T) {
			pkt := zeroconfPacket(t, c.file)
			if len(pkt) != c.size {
				t.Fatalf("golden packet is %d bytes, want %d", len(pkt), c.size)
			}
			msg, err := decodeDNS(pkt)
			if err != nil {
				t.Fatal(err)
			}
			var types []string
			for _, r := range msg.Records {
				types = append(types, dnsTypeName(r.Type))
			}
			if !msg.Response || strings.Join(types, ",") != c.types {
				t.Fatalf("response %v, records %v, want %s", msg.Response, types, c.types)
			}
			if len(msg.Skipped) != 1 || msg.Skipped[0].Type != dnsTypeNSEC || msg.Skipped[0].Name != "sila-server.local" ||
				!strings.Contains(msg.Skipped[0].Reason, "empty block (window 0, length 0)") {
				t.Fatalf("skipped %+v, want the NSEC with its empty block", msg.Skipped)
			}
			m := newCache(silaService, slog.New(slog.DiscardHandler))
			if n := m.add(msg.Records, ""); n != 1 {
				t.Fatalf("%d complete instances, want 1", n)
			}
			got := m.list()
			if len(got) != 1 || !reflect.DeepEqual(got[0], want) || got[0].Endpoint() != "127.0.0.1:50052" {
				t.Fatalf("instances %+v, want %+v", got, want)
			}
			if v, ok := got[0].TXT("Server_Name"); !ok || v != "Incubator" {
				t.Fatalf("TXT server_name: %q %v", v, ok)
			}
		})
	}
}

// rr builds one resource record: owner (wire form), type, class, TTL, data.
func rr(owner []byte, typ uint16, data []byte) []byte {
	b := append([]byte(nil), owner...)
	b = binary.BigEndian.AppendUint16(b, typ)
	b = binary.BigEndian.AppendUint16(b, 0x8001)
	b = binary.BigEndian.AppendUint32(b, 120)
	b = binary.BigEndian.AppendUint16(b, uint16(len(data)))
	return append(b, data...)
}

// wireName is a name in wire form without compression.
func wireName(labels ...string) []byte {
	var b []byte
	for _, l := range labels {
		b = append(append(b, byte(len(l))), l...)
	}
	return append(b, 0)
}

// response is a response header with counts qd, an followed by body.
func response(qd, an uint16, body ...[]byte) []byte {
	b := []byte{0, 0, 0x84, 0}
	b = binary.BigEndian.AppendUint16(b, qd)
	b = binary.BigEndian.AppendUint16(b, an)
	b = append(b, 0, 0, 0, 0)
	for _, p := range body {
		b = append(b, p...)
	}
	return b
}

// TestDecodeHostilePackets: whatever a packet claims, decoding is bounded
// and never panics; a broken record costs that record only when its
// framing (RDLENGTH) is intact, and the walk stops, saying why, when it is not.
func TestDecodeHostilePackets(t *testing.T) {
	host := wireName("h", "local")
	good := rr(host, dnsTypeA, []byte{10, 0, 0, 1})
	long := make([]string, 0, 130)
	for range 130 {
		long = append(long, "a")
	}
	for _, c := range []struct {
		name     string
		pkt      []byte
		records  int
		skipped  int
		errWords string // "" = no error
	}{
		{"short header", []byte{0, 0, 0x84}, 0, 0, "shorter than a DNS header"},
		{"huge counts", append([]byte{0, 0, 0x84, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, good...), 0, 0, "question"},
		{"huge record counts", append([]byte{0, 0, 0x84, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, good...), 1, 0, "the packet ends after 1"},
		{"self pointer", response(0, 1, []byte{0xc0, 12}), 0, 0, "does not point backwards"},
		{"pointer loop", response(0, 2, rr(host, dnsTypeA, []byte{1, 2, 3, 4}), []byte{0x01, 'x', 0xc0, 35}), 1, 0, "does not point backwards"},
		{"forward pointer", response(0, 1, []byte{0xc0, 40}), 0, 0, "does not point backwards"},
		{"name over 255 octets", response(0, 1, rr(wireName(long...), dnsTypeA, []byte{1, 2, 3, 4})), 0, 0, "longer than 255"},
		{"extended label type", response(0, 1, []byte{0x41, 0}), 0, 0, "label type 0x40"},
		{"label past the end", response(0, 1, []byte{0x3f, 'a'}), 0, 0, "runs past the end"},
		{"rdlength past the end", response(0, 1, rr(host, dnsTypeA, []byte{1, 2, 3, 4})[:len(good)-2]), 0, 0, "RDLENGTH 4 runs 2 bytes past"},
		{"truncated fixed fields", response(0, 1, host, []byte{0, 1, 0}), 0, 0, "truncated in its type"},
		{"bad A, next record read", response(0, 2, rr(host, dnsTypeA, []byte{1, 2, 3}), good), 1, 1, ""},
		{"bad AAAA", response(0, 2, rr(host, dnsTypeAAAA, []byte{1, 2, 3, 4}), good), 1, 1, ""},
		{"TXT string overruns", response(0, 2, rr(host, dnsTypeTXT, []byte{9, 'a'}), good), 1, 1, ""},
		{"PTR name short of rdlength", response(0, 2, rr(host, dnsTypePTR, append(wireName("x"), 0)), good), 1, 1, ""},
		{"PTR name looping inside rdata", response(0, 2, rr(host, dnsTypePTR, []byte{0xc0, 29 + 10}), good), 1, 1, ""},
		{"SRV too short", response(0, 2, rr(host, dnsTypeSRV, []byte{0, 0, 0, 0, 1}), good), 1, 1, ""},
		{"NSEC window disorder", response(0, 2, rr(host, dnsTypeNSEC, append(append([]byte(nil), host...), 1, 1, 0x40, 0, 1, 0x40)), good), 1, 1, ""},
		{"unknown type passes silently", response(0, 2, rr(host, 99, []byte{1, 2, 3}), good), 1, 0, ""},
		{"question then answer", response(1, 1, append(wireName("_sila", "_tcp", "local"), 0, 12, 0, 1), good), 1, 0, ""},
		{"truncated question", response(1, 0, wireName("_sila", "_tcp", "local")), 0, 0, "question 1: truncated"},
	} {
		t.Run(c.name, func(t *testing.T) {
			msg, err := decodeDNS(c.pkt)
			if len(msg.Records) != c.records || len(msg.Skipped) != c.skipped {
				t.Errorf("records %+v skipped %+v, want %d and %d", msg.Records, msg.Skipped, c.records, c.skipped)
			}
			switch {
			case c.errWords == "" && err != nil:
				t.Errorf("error %v", err)
			case c.errWords != "" && (err == nil || !strings.Contains(err.Error(), c.errWords)):
				t.Errorf("error %v, want one with %q", err, c.errWords)
			}
		})
	}
	// Every truncation of the golden packet decodes without panic, and what
	// it reads is a prefix of the whole.
	pkt := zeroconfPacket(t, "response.hex")
	for n := range len(pkt) {
		msg, _ := decodeDNS(pkt[:n])
		if len(msg.Records) > 4 || len(msg.Skipped) > 1 {
			t.Fatalf("prefix %d: %d records, %d skipped", n, len(msg.Records), len(msg.Skipped))
		}
	}
}

// TestMDNSCacheGoodbyeAndBounds: a TTL-0 PTR (a server saying goodbye)
// removes it; a flood of instances is capped.
func TestMDNSCacheGoodbyeAndBounds(t *testing.T) {
	var logs bytes.Buffer
	c := newCache(silaService, slog.New(slog.NewTextHandler(&logs, nil)))
	msg, err := decodeDNS(zeroconfPacket(t, "response.hex"))
	if err != nil {
		t.Fatal(err)
	}
	c.add(msg.Records, "")
	bye := msg.Records[0]
	bye.TTL = 0
	if n := c.add([]dnsRecord{bye}, ""); n != 0 || len(c.list()) != 0 {
		t.Fatalf("after the goodbye: %d complete, servers %+v", n, c.list())
	}
	for i := range maxInstances + 50 {
		c.add([]dnsRecord{{Name: silaService, Type: dnsTypePTR, Class: dnsClassIN, TTL: 1, Target: "x" + string(rune('a'+i%26)) + strings.Repeat("y", i/26) + "." + silaService}}, "")
	}
	if len(c.instances) != maxInstances || !strings.Contains(logs.String(), "too many answers") {
		t.Fatalf("%d instances kept, log %q", len(c.instances), logs.String())
	}
}

// FuzzDecodeDNS: no input panics the decoder or the cache, and what is
// decoded stays within the packet's bounds.
func FuzzDecodeDNS(f *testing.F) {
	f.Add(zeroconfPacket(f, "response.hex"))
	f.Add(zeroconfPacket(f, "legacy-unicast.hex"))
	f.Add(query(silaService, true))
	f.Add(response(0, 1, []byte{0xc0, 12}))
	f.Add(response(1, 1, append(wireName("_sila", "_tcp", "local"), 0, 12, 0, 1), rr(wireName("h", "local"), dnsTypeA, []byte{10, 0, 0, 1})))
	c := newCache(silaService, slog.New(slog.DiscardHandler))
	f.Fuzz(func(t *testing.T, pkt []byte) {
		msg, _ := decodeDNS(pkt)
		if len(msg.Records)+len(msg.Skipped) > maxRecords || len(msg.Records)+len(msg.Skipped) > len(pkt)/11 {
			t.Fatalf("%d records and %d skips from %d bytes", len(msg.Records), len(msg.Skipped), len(pkt))
		}
		for _, r := range msg.Records {
			if len(r.Name) > 4*dnsMaxName || len(r.Target) > 4*dnsMaxName {
				t.Fatalf("name of %d bytes", max(len(r.Name), len(r.Target)))
			}
		}
		c.add(msg.Records, "")
		_ = c.list()
	})
}

// TestMDNSCacheEndpoint: the endpoint takes an IPv4 address of the SRV
// host, else a global IPv6 one, else a link-local one with the zone of the
// interface it came in on, else the host name.
func TestMDNSCacheEndpoint(t *testing.T) {
	const inst = "0d6f3c2b-1a90-4f7e-8a42-4c1f2a6e9b1d." + silaService
	srv := dnsRecord{Name: inst, Type: dnsTypeSRV, Class: dnsClassIN, TTL: 120, Target: "Box.local", Port: 50052}
	a := func(ip string) dnsRecord {
		typ := dnsTypeAAAA
		if net.ParseIP(ip).To4() != nil {
			typ = dnsTypeA
		}
		return dnsRecord{Name: "box.local", Type: typ, Class: dnsClassIN, TTL: 120, IP: net.ParseIP(ip)}
	}
	for _, c := range []struct {
		name  string
		addrs []dnsRecord
		want  string
	}{
		{"no address", nil, "Box.local:50052"},
		{"link-local only", []dnsRecord{a("fe80::1")}, "[fe80::1%eth0]:50052"},
		{"global v6 over link-local", []dnsRecord{a("fe80::1"), a("2001:db8::5")}, "[2001:db8::5]:50052"},
		{"v4 over v6", []dnsRecord{a("2001:db8::5"), a("192.0.2.7")}, "192.0.2.7:50052"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := newCache(silaService, slog.New(slog.DiscardHandler))
			m.add(append([]dnsRecord{srv}, c.addrs...), "eth0")
			got := m.list()
			if len(got) != 1 || got[0].Endpoint() != c.want || got[0].Name != "0d6f3c2b-1a90-4f7e-8a42-4c1f2a6e9b1d" {
				t.Fatalf("instances %+v, want endpoint %s", got, c.want)
			}
		})
	}
}

// TestInstanceLabelWithDotsAndControls: an instance label holding '.', '\'
// or a control byte stays one label through decoding, and the instance
// name is the label's bytes.
func TestInstanceLabelWithDotsAndControls(t *testing.T) {
	label := "lab.box\\1\x07"
	svc := wireName("_sila", "_tcp", "local")
	target := append(append([]byte{byte(len(label))}, label...), 0xc0, 12) // the instance, then the service name at offset 12
	pkt := response(0, 2, rr(svc, dnsTypePTR, target),
		rr([]byte{0xc0, byte(12 + len(svc) + 10)}, dnsTypeSRV, append([]byte{0, 0, 0, 0, 0x1f, 0x90}, wireName("h", "local")...)))
	msg, err := decodeDNS(pkt)
	if err != nil || len(msg.Records) != 2 {
		t.Fatalf("records %+v skipped %+v err %v", msg.Records, msg.Skipped, err)
	}
	if want := `lab\.box\\1\007._sila._tcp.local`; msg.Records[0].Target != want || msg.Records[1].Name != want {
		t.Fatalf("names %q %q, want %q", msg.Records[0].Target, msg.Records[1].Name, want)
	}
	m := newCache(silaService, slog.New(slog.DiscardHandler))
	m.add(msg.Records, "")
	if got := m.list(); len(got) != 1 || got[0].Name != label || got[0].Endpoint() != "h.local:8080" {
		t.Fatalf("instances %+v, want name %q", got, label)
	}
}
