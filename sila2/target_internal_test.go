package sila2

import "testing"

// TestGRPCTarget: only an IPv6 endpoint with a zone is rewritten (gRPC
// cannot parse it), to a passthrough target with the zone as %25; every
// other endpoint is gRPC's to read, as before.
func TestGRPCTarget(t *testing.T) {
	for _, c := range []struct{ endpoint, want string }{
		{"127.0.0.1:50052", "127.0.0.1:50052"},
		{"[::1]:50052", "[::1]:50052"},
		{"[2001:db8::5]:50052", "[2001:db8::5]:50052"},
		{"box.local:50052", "box.local:50052"},
		{"dns:///box.local:50052", "dns:///box.local:50052"},
		{"[fe80::1%eth0]:50052", "passthrough:///[fe80::1%25eth0]:50052"},
		{"[fe80::1%4]:50052", "passthrough:///[fe80::1%254]:50052"},
		{"no-port", "no-port"},
	} {
		if got := grpcTarget(c.endpoint); got != c.want {
			t.Errorf("endpoint %s: target %s, want %s", c.endpoint, got, c.want)
		}
	}
}
