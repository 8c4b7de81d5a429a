package sila2

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/tools/txtar"
)

// mdnsTestTimeout bounds the browse tests (10x headroom on a loaded machine).
const mdnsTestTimeout = 30 * time.Second

// zeroconfPacket is the file name (response.hex, legacy-unicast.hex) of
// testdata/zeroconf-0.47.txtar: a response python-zeroconf 0.47.3 sent,
// with its malformed NSEC.
func zeroconfPacket(t testing.TB, name string) []byte {
	t.Helper()
	a, err := txtar.ParseFile("testdata/zeroconf-0.47.txtar")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range a.Files {
		if f.Name != name {
			continue
		}
		var h strings.Builder
		for _, l := range strings.Split(string(f.Data), "\n") {
			l, _, _ = strings.Cut(l, "#")
			h.WriteString(strings.Join(strings.Fields(l), ""))
		}
		b, err := hex.DecodeString(h.String())
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	t.Fatalf("no %s in the txtar", name)
	return nil
}

// TestDecodeZeroconfResponse: the PTR, SRV, TXT and A records of the
// responses python-zeroconf 0.47.3 sent (multicast, and unicast to a query
// from an ephemeral port) are read and make the server; only the malformed
// NSEC is skipped, naming why. (miekg/dns v1.1.72, under the old
// hashicorp/mdns browse, rejects each whole packet: "empty NSEC(3) block in
// type bitmap".)
func TestDecodeZeroconfResponse(t *testing.T) {
	want := DiscoveredServer{UUID: "4c1f2a6e-9b1d-4f7e-8a42-0d6f3c2b1a90", Name: "Incubator", Description: "Shaker", Version: "1.1",
		Host: "sila-server.local", Endpoint: "127.0.0.1:50052",
		CAPEM: "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----\n"}
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
			m := newMDNSCache(slog.New(slog.DiscardHandler))
			if n := m.add(msg.Records, ""); n != 1 {
				t.Fatalf("%d complete servers, want 1", n)
			}
			if got := m.servers(); len(got) != 1 || got[0] != want {
				t.Fatalf("servers %+v, want %+v", got, want)
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
	c := newMDNSCache(slog.New(slog.NewTextHandler(&logs, nil)))
	msg, err := decodeDNS(zeroconfPacket(t, "response.hex"))
	if err != nil {
		t.Fatal(err)
	}
	c.add(msg.Records, "")
	bye := msg.Records[0]
	bye.TTL = 0
	if n := c.add([]dnsRecord{bye}, ""); n != 0 || len(c.servers()) != 0 {
		t.Fatalf("after the goodbye: %d complete, servers %+v", n, c.servers())
	}
	for i := range mdnsMaxInstances + 50 {
		c.add([]dnsRecord{{Name: mdnsServiceName, Type: dnsTypePTR, Class: dnsClassIN, TTL: 1, Target: "x" + string(rune('a'+i%26)) + strings.Repeat("y", i/26) + "." + mdnsServiceName}}, "")
	}
	if len(c.instances) != mdnsMaxInstances || !strings.Contains(logs.String(), "too many answers") {
		t.Fatalf("%d instances kept, log %q", len(c.instances), logs.String())
	}
}

// FuzzDecodeDNS: no input panics the decoder or the cache, and what is
// decoded stays within the packet's bounds.
func FuzzDecodeDNS(f *testing.F) {
	f.Add(zeroconfPacket(f, "response.hex"))
	f.Add(zeroconfPacket(f, "legacy-unicast.hex"))
	f.Add(mdnsQuery(true))
	f.Add(response(0, 1, []byte{0xc0, 12}))
	f.Add(response(1, 1, append(wireName("_sila", "_tcp", "local"), 0, 12, 0, 1), rr(wireName("h", "local"), dnsTypeA, []byte{10, 0, 0, 1})))
	c := newMDNSCache(slog.New(slog.DiscardHandler))
	f.Fuzz(func(t *testing.T, pkt []byte) {
		msg, _ := decodeDNS(pkt)
		if len(msg.Records)+len(msg.Skipped) > mdnsMaxRecords || len(msg.Records)+len(msg.Skipped) > len(pkt)/11 {
			t.Fatalf("%d records and %d skips from %d bytes", len(msg.Records), len(msg.Skipped), len(pkt))
		}
		for _, r := range msg.Records {
			if len(r.Name) > 4*dnsMaxName || len(r.Target) > 4*dnsMaxName {
				t.Fatalf("name of %d bytes", max(len(r.Name), len(r.Target)))
			}
		}
		c.add(msg.Records, "")
		_ = c.servers()
	})
}

// fakeResponder answers every mDNS query for _sila._tcp.local it gets on
// loopback with the packets of answer, by unicast to the querier, as a
// responder does for a query from a port other than 5353 (RFC 6762 section
// 6.7). It records the queries' question class.
type fakeResponder struct {
	conn    *net.UDPConn
	classes chan uint16
}

func startResponder(t *testing.T, answer ...[]byte) *fakeResponder {
	t.Helper()
	conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	r := &fakeResponder{conn: conn, classes: make(chan uint16, 16)}
	t.Cleanup(func() { conn.Close() })
	question := append(wireName("_sila", "_tcp", "local"), 0, 12)
	go func() {
		buf := make([]byte, mdnsMaxPacket)
		for {
			n, from, err := conn.ReadFromUDP(buf)
			if err != nil {
				return
			}
			q := buf[:n]
			if n != dnsHeaderLen+len(question)+2 || q[2]&0x80 != 0 || q[5] != 1 || !bytes.Equal(q[dnsHeaderLen:n-2], question) {
				continue // not the PTR question for _sila._tcp.local
			}
			select {
			case r.classes <- binary.BigEndian.Uint16(q[n-2:]):
			default:
			}
			for _, a := range answer {
				conn.WriteToUDP(a, from)
			}
		}
	}()
	return r
}

// lockedBuffer is a log sink safe for the browse's reader goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestBrowseFindsZeroconfServer: end to end over UDP, the browse sends its
// PTR query (QU bit on the first), and a responder answering as
// python-zeroconf 0.47 does — after another querier's question and a
// packet cut short — yields the server, with the NSEC skip logged by type
// and reason.
func TestBrowseFindsZeroconfServer(t *testing.T) {
	golden := zeroconfPacket(t, "legacy-unicast.hex")
	otherQuery := mdnsQuery(false)
	resp := startResponder(t, otherQuery, golden[:100], golden)
	conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	logs := &lockedBuffer{}
	ctx, cancel := context.WithTimeout(context.Background(), mdnsTestTimeout)
	defer cancel()
	found, err := BrowseWith(ctx, BrowseOptions{Timeout: mdnsTestTimeout, Max: 1, Conn: conn, To: resp.conn.LocalAddr(),
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 || found[0].UUID != "4c1f2a6e-9b1d-4f7e-8a42-0d6f3c2b1a90" || found[0].Endpoint != "127.0.0.1:50052" ||
		found[0].Name != "Incubator" || found[0].Version != "1.1" || found[0].Host != "sila-server.local" {
		t.Fatalf("found %+v", found)
	}
	if c := <-resp.classes; c != 0x8001 {
		t.Errorf("first query class 0x%04x, want 0x8001 (IN with the QU bit)", c)
	}
	log := logs.String()
	for _, w := range []string{"skipped a record it cannot read", "type=NSEC", "name=sila-server.local", "empty block (window 0, length 0)",
		"stopped reading a packet"} {
		if !strings.Contains(log, w) {
			t.Errorf("log lacks %q:\n%s", w, log)
		}
	}
}

// TestBrowseQuietNetworkEndsAtTimeout: nobody answers; the browse ends at
// its timeout with nothing found, and a cancelled context ends it early.
func TestBrowseQuietNetworkEndsAtTimeout(t *testing.T) {
	resp := startResponder(t) // reads the queries, answers nothing
	conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	found, err := BrowseWith(context.Background(), BrowseOptions{Timeout: 50 * time.Millisecond, Conn: conn, To: resp.conn.LocalAddr()})
	if err != nil || len(found) != 0 {
		t.Fatalf("found %+v, err %v", found, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		BrowseWith(ctx, BrowseOptions{Timeout: time.Hour, Conn: conn, To: resp.conn.LocalAddr()})
	}()
	select {
	case <-done:
	case <-time.After(mdnsTestTimeout):
		t.Fatal("a cancelled browse did not end")
	}
	if _, err := BrowseWith(context.Background(), BrowseOptions{Conn: conn}); err == nil || !strings.Contains(err.Error(), "needs To") {
		t.Fatalf("Conn without To: %v", err)
	}
}
