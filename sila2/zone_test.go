package sila2_test

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/openmhp/mhp-go/internal/testnet"
	"github.com/openmhp/mhp-go/sila2"
	"github.com/openmhp/mhp-go/sila2/silatest"
)

// TestDialALinkLocalServer: a SiLA 2 server on an IPv6 link-local address,
// the endpoint a browse gives for it ([fe80::…%eth0]:port), is dialled and
// answers over TLS with a pin. Before, gRPC refused the endpoint at Dial
// ("invalid URL escape"). Skipped when no interface has a link-local
// address (lo usually has none: ip -6 addr).
func TestDialALinkLocalServer(t *testing.T) {
	ip, zone, ok := testnet.LinkLocal()
	if !ok {
		t.Skip("no interface that is up has an IPv6 link-local address (lo has none: ip -6 addr)")
	}
	srv, err := silatest.New(silatest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := silatest.SelfSigned(srv.UUID())
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", net.JoinHostPort(ip.String()+"%"+zone, "0"))
	if err != nil {
		t.Skipf("cannot listen on %s%%%s: %v", ip, zone, err)
	}
	srv.Serve(lis, &cert.TLS)
	t.Cleanup(srv.Stop)
	endpoint := net.JoinHostPort(ip.String()+"%"+zone, strconv.Itoa(lis.Addr().(*net.TCPAddr).Port))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := sila2.Dial(ctx, sila2.ClientConfig{Endpoint: endpoint, TLS: sila2.TLSConfig{PinSHA256: cert.PinSHA256}, CallTimeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("dial %s: %v", endpoint, err)
	}
	defer c.Close()
	info, err := c.ServerInfo(ctx)
	if err != nil || info.UUID != srv.UUID() {
		t.Fatalf("server info over %s: %+v %v", endpoint, info, err)
	}
}
