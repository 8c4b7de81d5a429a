// Package mdnstest holds the test peers of package mdns and its users
// (sila2, directory): captured answers of python-zeroconf kept as
// annotated hex (testdata/*.txtar of package mdns), a fake responder that
// answers a browse's query over loopback UDP as a responder does to a
// query from an ephemeral port, and the real python-zeroconf announcing on
// loopback (MHP_PEER_ZEROCONF).
package mdnstest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"net"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/tools/txtar"
)

// Testdata is the directory of package mdns's testdata (the captured
// packets and the zeroconf announcer), wherever the test runs from.
func Testdata() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata")
}

// Packet returns the packet stored as file name of the txtar archive
// (a file name of Testdata, such as "zeroconf-0.47.txtar"): hex bytes,
// any spacing, "#" starting a comment to the end of the line.
func Packet(t testing.TB, archive, name string) []byte {
	t.Helper()
	a, err := txtar.ParseFile(filepath.Join(Testdata(), archive))
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
			t.Fatalf("%s in %s: %v", name, archive, err)
		}
		return b
	}
	t.Fatalf("no %s in %s", name, archive)
	return nil
}

// Responder is a fake mDNS responder on loopback.
type Responder struct {
	// Conn is its socket; queries go to Conn.LocalAddr().
	Conn *net.UDPConn
	// Classes receives the question class of each query it got (0x8001:
	// IN with the QU bit), up to 16 unread.
	Classes chan uint16
}

// Addr is where a browse sends its queries.
func (r *Responder) Addr() net.Addr { return r.Conn.LocalAddr() }

// StartResponder answers the queries for the PTR records of service (e.g.
// "_mhp._tcp.local") it gets on loopback, after the first skip (lost), with
// the packets of answer, by unicast to the querier, as a responder does for
// a query from a port other than 5353 (RFC 6762 section 6.7). Other packets
// are ignored. It stops with the test.
func StartResponder(t testing.TB, service string, skip int, answer ...[]byte) *Responder {
	t.Helper()
	return StartResponderOn(t, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}, service, skip, answer...)
}

// StartResponderOn is StartResponder on the local address at (an IPv6
// link-local address with its zone, say), port 0 for any.
func StartResponderOn(t testing.TB, at *net.UDPAddr, service string, skip int, answer ...[]byte) *Responder {
	t.Helper()
	conn := ClientOn(t, at)
	r := &Responder{Conn: conn, Classes: make(chan uint16, 16)}
	question := Query(service)[12:]
	question = question[:len(question)-2] // without the class
	go func() {
		buf := make([]byte, 9000)
		for {
			n, from, err := conn.ReadFromUDP(buf)
			if err != nil {
				return
			}
			q := buf[:n]
			if n != 12+len(question)+2 || q[2]&0x80 != 0 || q[5] != 1 || !bytes.EqualFold(q[12:n-2], question) {
				continue // not the one PTR question for service
			}
			select {
			case r.Classes <- binary.BigEndian.Uint16(q[n-2:]):
			default:
			}
			if skip > 0 {
				skip--
				continue
			}
			for _, a := range answer {
				conn.WriteToUDP(a, from)
			}
		}
	}()
	return r
}

// Query is the query another querier sends for the PTR records of
// service (e.g. "_sila._tcp.local"): one question, class IN, no QU bit.
func Query(service string) []byte {
	b := []byte{0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0}
	for _, l := range strings.Split(service, ".") {
		b = append(append(b, byte(len(l))), l...)
	}
	return append(b, 0, 0, 12, 0, 1) // root, type PTR, class IN
}

// Answer is a response announcing one instance of service (e.g.
// "_mhp._tcp.local") as a responder sends it, without name compression: the
// PTR, then the SRV (host, port), the TXT strings and an A or AAAA record
// per address of host. A TXT string longer than 255 bytes is cut there.
func Answer(service, instance, host string, port uint16, addrs []net.IP, txt ...string) []byte {
	name := func(n string) []byte {
		var b []byte
		for _, l := range strings.Split(n, ".") {
			b = append(append(b, byte(len(l))), l...)
		}
		return append(b, 0)
	}
	rr := func(owner []byte, typ uint16, data []byte) []byte {
		b := binary.BigEndian.AppendUint16(append([]byte(nil), owner...), typ)
		b = binary.BigEndian.AppendUint16(b, 0x8001) // IN, cache-flush
		b = binary.BigEndian.AppendUint32(b, 120)
		b = binary.BigEndian.AppendUint16(b, uint16(len(data)))
		return append(b, data...)
	}
	inst := append(append([]byte{byte(len(instance))}, instance...), name(service)...)
	srv := binary.BigEndian.AppendUint16(make([]byte, 4), port)
	var text []byte
	for _, t := range txt {
		t = t[:min(len(t), 255)]
		text = append(append(text, byte(len(t))), t...)
	}
	recs := [][]byte{rr(name(service), 12, inst), rr(inst, 33, append(srv, name(host)...)), rr(inst, 16, text)}
	for _, a := range addrs {
		if v4 := a.To4(); v4 != nil {
			recs = append(recs, rr(name(host), 1, v4))
		} else {
			recs = append(recs, rr(name(host), 28, a.To16()))
		}
	}
	b := []byte{0, 0, 0x84, 0, 0, 0, 0, 1, 0, 0}
	b = binary.BigEndian.AppendUint16(b, uint16(len(recs)-1))
	for _, r := range recs {
		b = append(b, r...)
	}
	return b
}

// Client is a loopback UDP socket for a browse's Options.Conn, closed with
// the test.
func Client(t testing.TB) *net.UDPConn {
	t.Helper()
	return ClientOn(t, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
}

// ClientOn is a UDP socket on the local address at (port 0 for any),
// closed with the test.
func ClientOn(t testing.TB, at *net.UDPAddr) *net.UDPConn {
	t.Helper()
	network := "udp6"
	if at.IP.To4() != nil {
		network = "udp4"
	}
	conn, err := net.ListenUDP(network, at)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// Log is a log sink safe for a browse's reader goroutines.
type Log struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is everything written so far.
func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// ZeroconfAddr is where the real zeroconf answers queries: its loopback
// socket on the mDNS port.
var ZeroconfAddr = &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5353}

// Zeroconf runs the real python-zeroconf (python: a python3 that imports
// zeroconf) announcing one service on loopback until the test ends:
// service type kind (e.g. "_mhp._tcp"), instance, port and server host
// name, TXT strings props ("key=value"). Only one announcer runs at a time
// on the machine (a lock file, across test binaries): two zeroconf
// processes share 127.0.0.1:5353, and the kernel hands a unicast query to
// one of them only.
func Zeroconf(t testing.TB, ctx context.Context, python, kind, instance string, port int, server string, props ...string) {
	t.Helper()
	unlock := lockZeroconf(t, ctx)
	args := append([]string{filepath.Join(Testdata(), "zeroconf_announce.py"), kind, instance, strconv.Itoa(port), server}, props...)
	cmd := exec.CommandContext(ctx, python, args...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &Log{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		unlock()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Wait()
		unlock()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if strings.TrimSpace(line) != "registered" {
		t.Fatalf("zeroconf announcer: %q %v; stderr: %s", line, err, stderr.String())
	}
}

// LockZeroconf takes the machine-wide lock that Zeroconf takes (a lock
// file, across test binaries) for a test that binds the mDNS port itself,
// such as a responder on the host network (directory.Advertise) or
// ZeroconfResolve; it is released when the test ends. Do not call Zeroconf
// while holding it: the lock is not reentrant.
func LockZeroconf(t testing.TB, ctx context.Context) {
	t.Helper()
	t.Cleanup(lockZeroconf(t, ctx))
}

// Resolved is what the real python-zeroconf resolved for a service
// instance (ServiceInfo.request): the SRV target and port, the addresses
// of the target, the TXT properties; or Error when nothing with an address
// answered in time.
type Resolved struct {
	Server     string            `json:"server"`
	Port       int               `json:"port"`
	Addresses  []string          `json:"addresses"`
	Properties map[string]string `json:"properties"`
	Error      string            `json:"error"`
}

// ZeroconfResolve runs the real python-zeroconf (python: a python3 that
// imports zeroconf) on loopback to resolve instance of service type kind
// (e.g. "_mhp._tcp") within timeout, as a Python client does: SRV, TXT, A
// and AAAA questions, the first QU, then QM, to the mDNS group. It binds
// the mDNS port: hold LockZeroconf.
func ZeroconfResolve(t testing.TB, ctx context.Context, python, kind, instance string, timeout time.Duration) Resolved {
	t.Helper()
	cmd := exec.CommandContext(ctx, python, filepath.Join(Testdata(), "zeroconf_resolve.py"), kind, instance,
		strconv.Itoa(int(timeout/time.Millisecond)))
	stderr := &Log{}
	cmd.Stderr = stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("zeroconf resolver: %v; stderr: %s", err, stderr.String())
	}
	var r Resolved
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("zeroconf resolver printed %q: %v; stderr: %s", out, err, stderr.String())
	}
	return r
}

// lockPoll is how often a waiting announcer retries the lock.
const lockPoll = 20 * time.Millisecond
