package testnet

import "net"

// LinkLocal is an IPv6 link-local address of an interface that is up and
// that a TCP listener can take, with that interface's name (its zone), for
// tests of targets that carry a zone (fe80::1%eth0); ok is false when the
// machine has none (loopback usually has no link-local address: ip -6
// addr).
func LinkLocal() (ip net.IP, zone string, ok bool) {
	ifs, _ := net.Interfaces()
	for _, it := range ifs {
		if it.Flags&net.FlagUp == 0 {
			continue
		}
		addrs, _ := it.Addrs()
		for _, a := range addrs {
			n, isNet := a.(*net.IPNet)
			if !isNet || n.IP.To4() != nil || !n.IP.IsLinkLocalUnicast() {
				continue
			}
			if l, err := net.Listen("tcp", net.JoinHostPort(n.IP.String()+"%"+it.Name, "0")); err == nil {
				l.Close()
				return n.IP, it.Name, true
			}
		}
	}
	return nil, "", false
}
