package sila2

import (
	"net"
	"net/netip"
	"strings"
)

// grpcTarget is the gRPC target of an endpoint (host:port): the endpoint
// as it is, except an IPv6 address with a zone, which [Browse] gives for a
// server announced by its link-local address ([fe80::1%eth0]:50052) and
// which gRPC reads as a URL and refuses ("invalid URL escape"): that one
// becomes passthrough:///[fe80::1%25eth0]:50052, the zone's "%" written
// "%25" (RFC 6874), dialled as the address it is.
func grpcTarget(endpoint string) string {
	host, port, err := net.SplitHostPort(endpoint)
	if err != nil || !strings.Contains(host, "%") {
		return endpoint
	}
	if ip, err := netip.ParseAddr(host); err != nil || ip.Zone() == "" {
		return endpoint
	}
	return "passthrough:///" + net.JoinHostPort(strings.Replace(host, "%", "%25", 1), port)
}
