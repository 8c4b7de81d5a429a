package host

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"testing"

	"github.com/openmhp/mhp-go/internal/testnet"
	"github.com/openmhp/mhp-go/transport"
)

// TestAddAndScanALinkLocalServer: a server on an IPv6 link-local address,
// typed as [fe80::…%eth0]:port, is added with its zone in the URL as %25
// (RFC 6874), and a scan of that host finds it. Before, the typed address
// became http://[fe80::…%eth0]:port, which no URL parser reads ("invalid
// URL escape"), and the scan's probe found nothing. Skipped when no
// interface has a link-local address (lo usually has none).
func TestAddAndScanALinkLocalServer(t *testing.T) {
	ip, zone := linkLocalAddr(t)
	host := ip.String() + "%" + zone
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Skipf("cannot listen on %s: %v", host, err)
	}
	srv := transport.NewServer(simDevice(t, "tc-ll"), transport.Options{})
	hs := &http.Server{Handler: srv.Handler()}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close(); srv.Close() })
	port := ln.Addr().(*net.TCPAddr).Port
	want := "http://[" + ip.String() + "%25" + zone + "]:" + strconv.Itoa(port)

	f := openFleet(t, t.TempDir())
	ctx := context.Background()
	found, err := f.Scan(ctx, ScanOptions{Hosts: []string{host}, Ports: []int{port}})
	if err != nil || len(found) != 1 || found[0].ID != "tc-ll" || found[0].Target != want {
		t.Fatalf("scan: %+v %v, want tc-ll at %s", found, err, want)
	}
	e, err := f.Prepare(ctx, net.JoinHostPort(host, strconv.Itoa(port)), AddOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if e.ID != "tc-ll" || e.Target != want {
		t.Fatalf("prepared %+v, want tc-ll at %s", e, want)
	}
}

// linkLocalAddr is an IPv6 link-local address with its zone, or the test
// is skipped saying there is none.
func linkLocalAddr(t *testing.T) (net.IP, string) {
	t.Helper()
	ip, zone, ok := testnet.LinkLocal()
	if !ok {
		t.Skip("no interface that is up has an IPv6 link-local address (lo has none: ip -6 addr)")
	}
	return ip, zone
}
