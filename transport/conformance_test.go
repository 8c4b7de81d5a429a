package transport_test

import (
	"testing"

	"github.com/openmhp/mhp-go/client"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/transport"
)

// wireHarness builds the conformance fixture over a wire: the MemoryDriver
// served by a transport.Server, Device and Other two client connections (two
// server-issued sessions). The clients are Plain so that the suite sees the
// server's answers as they are (no lease on first use, no heartbeat).
func wireHarness(dial func(t *testing.T, srv *transport.Server) (a, b *client.Device)) conformance.Harness {
	return func(t *testing.T, opt conformance.Options) *conformance.Fixture {
		m := newMemory(t, opt)
		srv := newServer(t, m.drv, transport.Options{})
		a, b := dial(t, srv)
		return &conformance.Fixture{Device: a, Other: b, Backend: m.in, Advance: m.clk.Advance}
	}
}

func TestConformanceHTTP(t *testing.T) {
	conformance.Run(t, wireHarness(func(t *testing.T, srv *transport.Server) (a, b *client.Device) {
		hs := serveHTTP(t, srv)
		return dialHTTP(t, hs.URL, client.Options{Plain: true, ClientName: "suite-a"}),
			dialHTTP(t, hs.URL, client.Options{Plain: true, ClientName: "suite-b"})
	}))
}

func TestConformanceStdio(t *testing.T) {
	conformance.Run(t, wireHarness(func(t *testing.T, srv *transport.Server) (a, b *client.Device) {
		return dialPipe(t, srv, client.Options{Plain: true, ClientName: "suite-a"}),
			dialPipe(t, srv, client.Options{Plain: true, ClientName: "suite-b"})
	}))
}

// TestConformanceInProcess runs the suite through client.Connect, the
// in-process handle.
func TestConformanceInProcess(t *testing.T) {
	conformance.Run(t, func(t *testing.T, opt conformance.Options) *conformance.Fixture {
		m := newMemory(t, opt)
		a := client.Connect(m.drv, client.Options{Plain: true})
		b := client.Connect(m.drv, client.Options{Plain: true})
		t.Cleanup(func() { a.Close(); b.Close() })
		return &conformance.Fixture{Device: a, Other: b, Backend: m.in, Advance: m.clk.Advance}
	})
}
