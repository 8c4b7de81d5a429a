package directory_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/directory"
	"github.com/openmhp/mhp-go/mdns/mdnstest"
)

// browseTimeout bounds the browse tests (10x headroom on a loaded machine).
const browseTimeout = 30 * time.Second

// mhpPTR is the PTR name the directory browses.
const mhpPTR = "_mhp._tcp.local"

// zeroconfMHP is a response python-zeroconf 0.47.3 sent for an MHP device
// (mdns/testdata/zeroconf-0.47-mhp.txtar: response.hex multicast,
// legacy-unicast.hex to the browse's own query), with its malformed NSEC.
func zeroconfMHP(t testing.TB, name string) []byte {
	return mdnstest.Packet(t, "zeroconf-0.47-mhp.txtar", name)
}

// withPort is pkt with its SRV port (18921 in the capture) set to port.
func withPort(t testing.TB, pkt []byte, port int) []byte {
	t.Helper()
	srv := []byte{0, 0, 0, 0, 0x49, 0xe9} // priority 0, weight 0, port 18921
	i := bytes.Index(pkt, srv)
	if i < 0 || bytes.Count(pkt, srv) != 1 {
		t.Fatal("no single SRV port 18921 in the golden packet")
	}
	out := append([]byte(nil), pkt...)
	out[i+4], out[i+5] = byte(port>>8), byte(port)
	return out
}

// browse runs BrowseWith against a fake responder answering with answer.
func browse(t *testing.T, logs *mdnstest.Log, answer ...[]byte) []directory.Announced {
	t.Helper()
	resp := mdnstest.StartResponder(t, mhpPTR, 0, answer...)
	ctx, cancel := context.WithTimeout(context.Background(), browseTimeout)
	defer cancel()
	o := directory.BrowseOptions{Timeout: 200 * time.Millisecond, Conn: mdnstest.Client(t), To: resp.Addr()}
	if logs != nil {
		o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	}
	found, err := directory.BrowseWith(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if c := <-resp.Classes; c != 0x8001 {
		t.Errorf("first query class 0x%04x, want PTR _mhp._tcp.local IN with the QU bit", c)
	}
	return found
}

// TestBrowseReadsZeroconfAnnouncement: both answers python-zeroconf 0.47
// gave for an MHP device read as the device's id, class, path and endpoint,
// the malformed NSEC skipped and logged. (The old browse, hashicorp/mdns
// over miekg/dns, rejected each whole packet: "empty NSEC(3) block in type
// bitmap", and found nothing.)
func TestBrowseReadsZeroconfAnnouncement(t *testing.T) {
	want := directory.Announced{Instance: "tc-zc-01", ID: "tc-zc-01", Class: "thermocycler", Path: "/mhp.json", Host: "mhp-box.local",
		Endpoint: "127.0.0.1:18921", Target: "http://127.0.0.1:18921"}
	for _, file := range []string{"legacy-unicast.hex", "response.hex"} {
		t.Run(file, func(t *testing.T) {
			logs := &mdnstest.Log{}
			found := browse(t, logs, zeroconfMHP(t, file))
			if len(found) != 1 || found[0] != want {
				t.Fatalf("found %+v, want %+v", found, want)
			}
			if l := logs.String(); !strings.Contains(l, "type=NSEC") || !strings.Contains(l, "empty block (window 0, length 0)") {
				t.Errorf("the skipped NSEC is not logged: %s", l)
			}
		})
	}
}

// cardServer serves GET /mhp.json with a device of id, or 404 when id is
// empty, on loopback; it returns the port.
func cardServer(t *testing.T, id string) int {
	t.Helper()
	srv := httptest.NewServer(cardHandler(id))
	t.Cleanup(srv.Close)
	_, p, _ := net.SplitHostPort(srv.Listener.Addr().String())
	port, _ := strconv.Atoi(p)
	return port
}

// cardHandler serves the card of a thermocycler id at /mhp.json (id "":
// none).
func cardHandler(id string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/mhp.json" || id == "" {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(&mhp.Description{Detail: mhp.DetailFull,
			Descriptor: mhp.Descriptor{DeviceInfo: mhp.DeviceInfo{ID: id, Class: "thermocycler"}}})
	})
}

// probeAll probes what a browse found, as host scan and serve-directory do.
func probeAll(t *testing.T, found []directory.Announced) []directory.Card {
	t.Helper()
	var cards []directory.Card
	for _, a := range found {
		h, p, err := net.SplitHostPort(a.Endpoint)
		if err != nil {
			t.Fatal(err)
		}
		port, _ := strconv.Atoi(p)
		cards = append(cards, directory.Probe(context.Background(), []string{h}, []int{port}, browseTimeout)...)
	}
	return cards
}

// TestBrowseThenProbeBelievesOnlyTheCard: end to end over UDP and HTTP, a
// device announced as zeroconf 0.47 announces it is found and probed; the
// card it serves, not its TXT, is what is believed (the TXT says tc-zc-01,
// the card tc-9). A second announced instance whose port serves no card
// yields no card.
func TestBrowseThenProbeBelievesOnlyTheCard(t *testing.T) {
	real := cardServer(t, "tc-9")
	liar := cardServer(t, "")
	found := browse(t, nil, withPort(t, zeroconfMHP(t, "legacy-unicast.hex"), real),
		mdnstest.Answer(mhpPTR, "ghost", "ghost.local", uint16(liar), []net.IP{net.IPv4(127, 0, 0, 1)}, "id=tc-9", "class=thermocycler"))
	if len(found) != 2 || found[1].Instance != "tc-zc-01" || found[1].ID != "tc-zc-01" || found[0].ID != "tc-9" {
		t.Fatalf("found %+v, want ghost and tc-zc-01", found)
	}
	cards := probeAll(t, found)
	if len(cards) != 1 || cards[0].ID != "tc-9" || cards[0].Target != "http://127.0.0.1:"+strconv.Itoa(real) {
		t.Fatalf("cards %+v, want only tc-9's, from its own /mhp.json", cards)
	}
}

// TestBrowseTXTIsBoundedData: what an announcement says is kept as bounded,
// printable data (control characters and each run of invalid UTF-8 become
// U+FFFD); the target comes from the address records only, skipping
// addresses a probe cannot use; one endpoint announced twice is one server.
func TestBrowseTXTIsBoundedData(t *testing.T) {
	lo := []net.IP{net.IPv4(127, 0, 0, 1)}
	long := strings.Repeat("c", 200)
	for _, c := range []struct {
		name   string
		answer [][]byte
		want   []directory.Announced
	}{
		{"control characters", [][]byte{mdnstest.Answer(mhpPTR, "a\x1b[2J", "h.local", 18900, lo, "id=tc\x00\x07", "class=\xff\xfe", "path=/mhp.json")},
			[]directory.Announced{{Instance: "a\uFFFD[2J", ID: "tc\uFFFD\uFFFD", Class: "\uFFFD", Path: "/mhp.json", Host: "h.local",
				Endpoint: "127.0.0.1:18900", Target: "http://127.0.0.1:18900"}}},
		{"long value cut", [][]byte{mdnstest.Answer(mhpPTR, "b", "h.local", 18900, lo, "class="+long)},
			[]directory.Announced{{Instance: "b", Class: long[:directory.MaxTXTValue], Host: "h.local", Endpoint: "127.0.0.1:18900",
				Target: "http://127.0.0.1:18900"}}},
		{"path does not move the target", [][]byte{mdnstest.Answer(mhpPTR, "c", "h.local", 18900, lo, "path=@evil.example/x")},
			[]directory.Announced{{Instance: "c", Path: "@evil.example/x", Host: "h.local", Endpoint: "127.0.0.1:18900",
				Target: "http://127.0.0.1:18900"}}},
		{"no address", [][]byte{mdnstest.Answer(mhpPTR, "d", "h.local", 18900, nil, "id=x")}, []directory.Announced{}},
		{"unusable addresses skipped", [][]byte{mdnstest.Answer(mhpPTR, "e", "h.local", 18900,
			[]net.IP{net.IPv4zero, net.IPv4(224, 0, 0, 251), net.ParseIP("2001:db8::5")})},
			[]directory.Announced{{Instance: "e", Host: "h.local", Endpoint: "[2001:db8::5]:18900", Target: "http://[2001:db8::5]:18900"}}},
		{"only unusable addresses", [][]byte{mdnstest.Answer(mhpPTR, "f", "h.local", 18900, []net.IP{net.IPv4zero})}, []directory.Announced{}},
		{"one endpoint twice", [][]byte{mdnstest.Answer(mhpPTR, "g1", "h.local", 18900, lo), mdnstest.Answer(mhpPTR, "g2", "h.local", 18900, lo)},
			[]directory.Announced{{Instance: "g1", Host: "h.local", Endpoint: "127.0.0.1:18900", Target: "http://127.0.0.1:18900"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := browse(t, nil, c.answer...); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("found %+v\nwant  %+v", got, c.want)
			}
		})
	}
}

// TestBrowseRealZeroconfDevice: the real python-zeroconf (0.47.3 when this
// was written) announces an MHP device on loopback as the Python reference
// does; the browse finds it with its TXT and a probe of what it found reads
// the device's card. Set MHP_PEER_ZEROCONF to a python3 that imports
// zeroconf (Debian 12: apt-get install python3-zeroconf; /usr/bin/python3).
func TestBrowseRealZeroconfDevice(t *testing.T) {
	python := conformance.Peer(t, "ZEROCONF", "a python3 with zeroconf (apt-get install python3-zeroconf; /usr/bin/python3)")
	port := cardServer(t, "tc-zc-02")
	ctx, cancel := context.WithTimeout(context.Background(), browseTimeout)
	defer cancel()
	mdnstest.Zeroconf(t, ctx, python, directory.MDNSService, "tc-zc-02", port, "mhp-box.local", "id=tc-zc-02", "class=thermocycler", "path=/mhp.json")
	logs := &mdnstest.Log{}
	found, err := directory.BrowseWith(ctx, directory.BrowseOptions{Timeout: browseTimeout / 3, Max: 1, Conn: mdnstest.Client(t),
		To: mdnstest.ZeroconfAddr, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	target := "http://127.0.0.1:" + strconv.Itoa(port)
	want := directory.Announced{Instance: "tc-zc-02", ID: "tc-zc-02", Class: "thermocycler", Path: "/mhp.json", Host: "mhp-box.local",
		Endpoint: "127.0.0.1:" + strconv.Itoa(port), Target: target}
	if len(found) != 1 || found[0] != want {
		t.Fatalf("found %+v, want %+v (log: %s)", found, want, logs.String())
	}
	if !strings.Contains(logs.String(), "type=NSEC") {
		t.Errorf("zeroconf's malformed NSEC is not logged as skipped: %s", logs.String())
	}
	if cards := probeAll(t, found); len(cards) != 1 || cards[0].ID != "tc-zc-02" || cards[0].Target != target {
		t.Fatalf("cards %+v", cards)
	}
}
