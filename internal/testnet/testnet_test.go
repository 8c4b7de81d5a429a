package testnet

import (
	"net"
	"testing"
)

func TestListenBelowTheEphemeralRange(t *testing.T) {
	top := ephemeralLow()
	if top-lowest < 1000 {
		t.Skipf("the ephemeral range starts at %d: no room below it", top)
	}
	for range 20 {
		l, err := Listen("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if p < lowest || p >= top {
			t.Fatalf("port %d is outside %d..%d", p, lowest, top-1)
		}
	}
}
