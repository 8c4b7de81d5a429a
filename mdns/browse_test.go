package mdns

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/mdns/mdnstest"
)

// TestQueryAsksForTheService: the query is one PTR question for the
// browsed service, QU on the first, as RFC 6762 section 5.4 frames it.
func TestQueryAsksForTheService(t *testing.T) {
	for _, c := range []struct {
		service string
		unicast bool
		class   uint16
	}{
		{"_mhp._tcp.local", true, 0x8001},
		{"_sila._tcp.local", false, 0x0001},
	} {
		q := query(c.service, c.unicast)
		msg, err := decodeDNS(q)
		if err != nil || msg.Response {
			t.Fatalf("%s: %v response=%v", c.service, err, msg.Response)
		}
		want := append(wireName(strings.Split(c.service, ".")...), 0, byte(dnsTypePTR), byte(c.class>>8), byte(c.class))
		if string(q[4:6]) != "\x00\x01" || string(q[dnsHeaderLen:]) != string(want) {
			t.Fatalf("%s: query % x, want one question % x", c.service, q, want)
		}
	}
}

// TestBrowseRefusesBadOptions: a service type that is no DNS-SD type and
// a Conn without To are invalid params, named, before anything is sent.
func TestBrowseRefusesBadOptions(t *testing.T) {
	resp := mdnstest.StartResponder(t, "_mhp._tcp.local", 0)
	conn := mdnstest.Client(t)
	for _, c := range []struct {
		name    string
		service string
		o       Options
		words   string
	}{
		{"no service", "", Options{Conn: conn, To: resp.Addr()}, `service type ""`},
		{"no protocol", "_mhp", Options{Conn: conn, To: resp.Addr()}, "not _name._tcp"},
		{"no underscore", "mhp._tcp", Options{Conn: conn, To: resp.Addr()}, "not _name._tcp"},
		{"name too long", "_abcdefghijklmnop._tcp", Options{Conn: conn, To: resp.Addr()}, "1 to 15"},
		{"dot in the name", "_a.b._tcp", Options{Conn: conn, To: resp.Addr()}, "not _name._tcp"},
		{"conn without to", "_mhp._tcp", Options{Conn: conn}, "needs To"},
		{"no such interface", "_mhp._tcp", Options{Interface: "nosuch0"}, `no network interface "nosuch0"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Browse(context.Background(), c.service, c.o)
			var me *mhp.Error
			if !errors.As(err, &me) || me.Code != mhp.CodeInvalidParams || !strings.Contains(err.Error(), c.words) {
				t.Fatalf("error %v, want invalid params with %q", err, c.words)
			}
		})
	}
	select {
	case cl := <-resp.Classes:
		t.Fatalf("a refused browse sent a query (class 0x%04x)", cl)
	default:
	}
}

// TestBrowseGathersAcrossPackets: the PTR, the SRV and TXT, and the
// address come in three packets (as announcements and known-answer
// suppression split them); the instance is complete only with all three,
// and a goodbye (TTL 0 PTR) in a later packet withdraws it.
func TestBrowseGathersAcrossPackets(t *testing.T) {
	svc := wireName("_mhp", "_tcp", "local")
	inst := wireName("tc-9", "_mhp", "_tcp", "local")
	host := wireName("box", "local")
	ptr := response(0, 1, rr(svc, dnsTypePTR, inst))
	srv := response(0, 2, rr(inst, dnsTypeSRV, append([]byte{0, 0, 0, 0, 0x49, 0xe4}, host...)),
		rr(inst, dnsTypeTXT, []byte("\x07id=tc-9\x12class=thermocycler")))
	addr := response(0, 1, rr(host, dnsTypeA, []byte{192, 0, 2, 7}))
	bye := rr(svc, dnsTypePTR, inst)
	bye[len(svc)+4+3] = 0 // TTL 120 -> 0
	for _, c := range []struct {
		name    string
		packets [][]byte
		want    string // endpoint; "" = nothing found
	}{
		{"all three", [][]byte{ptr, srv, addr}, "192.0.2.7:18916"},
		{"address first", [][]byte{addr, srv, ptr}, "192.0.2.7:18916"},
		{"then goodbye", [][]byte{ptr, srv, addr, response(0, 1, bye)}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := newCache("_mhp._tcp.local", discard)
			for _, p := range c.packets {
				msg, err := decodeDNS(p)
				if err != nil {
					t.Fatal(err)
				}
				m.add(msg.Records, "")
			}
			got := m.list()
			switch {
			case c.want == "" && len(got) != 0:
				t.Fatalf("instances %+v, want none", got)
			case c.want != "" && (len(got) != 1 || got[0].Endpoint() != c.want || got[0].Name != "tc-9"):
				t.Fatalf("instances %+v, want tc-9 at %s", got, c.want)
			case c.want != "":
				if v, _ := got[0].TXT("class"); v != "thermocycler" {
					t.Fatalf("TXT %q", got[0].Text)
				}
			}
		})
	}
	// Another service's instance in the same packets is not this browse's.
	m := newCache("_sila._tcp.local", discard)
	for _, p := range [][]byte{ptr, srv, addr} {
		msg, _ := decodeDNS(p)
		m.add(msg.Records, "")
	}
	if got := m.list(); len(got) != 0 {
		t.Fatalf("a _sila._tcp browse kept %+v", got)
	}
}

// TestBrowseEndsWithMax: over an injected conn the browse ends as soon as
// Max instances are complete, long before its timeout.
func TestBrowseEndsWithMax(t *testing.T) {
	resp := mdnstest.StartResponder(t, silaService, 0, zeroconfPacket(t, "legacy-unicast.hex"))
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	got, err := Browse(ctx, "_sila._tcp", Options{Timeout: 10 * testTimeout, Max: 1, Conn: mdnstest.Client(t), To: resp.Addr()})
	if err != nil || len(got) != 1 || got[0].Name != "4c1f2a6e-9b1d-4f7e-8a42-0d6f3c2b1a90" || ctx.Err() != nil {
		t.Fatalf("instances %+v, err %v, ctx %v", got, err, ctx.Err())
	}
}

// discard is a logger that drops everything.
var discard = slog.New(slog.DiscardHandler)
