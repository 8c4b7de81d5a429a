package mdns

import (
	"log/slog"
	"net"
	"strconv"
	"sync"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// conn is one socket of a browse: to is where queries go (nil: listen
// only); p4 or p6, when set, read c with the index of the interface each
// packet came in on (IP_PKTINFO, IPV6_RECVPKTINFO).
type conn struct {
	c  net.PacketConn
	to net.Addr
	p4 *ipv4.PacketConn
	p6 *ipv6.PacketConn
}

// withInterfaces is c (queries to to) read with the interface of each
// packet when c is a UDP socket that can tell it; otherwise packets are
// read without (their zone is then the source address's, if any). This
// sets the packet-info option on c, an injected socket too.
func withInterfaces(c net.PacketConn, to net.Addr, log *slog.Logger) conn {
	out := conn{c: c, to: to}
	u, ok := c.(*net.UDPConn)
	if !ok {
		return out
	}
	local, _ := u.LocalAddr().(*net.UDPAddr)
	var err error
	if local != nil && local.IP.To4() != nil {
		p := ipv4.NewPacketConn(u)
		if err = p.SetControlMessage(ipv4.FlagInterface, true); err == nil {
			out.p4 = p
		}
	} else {
		p := ipv6.NewPacketConn(u)
		if err = p.SetControlMessage(ipv6.FlagInterface, true); err == nil {
			out.p6 = p
		}
	}
	if err != nil {
		log.Debug("mdns: cannot learn which interface answers come in on; link-local addresses take the source's zone", "socket", u.LocalAddr().String(), "err", err)
	}
	return out
}

// readFrom reads one packet: its length, source, and the index of the
// interface it came in on (0: unknown).
func (c conn) readFrom(buf []byte) (n int, from net.Addr, ifIndex int, err error) {
	switch {
	case c.p4 != nil:
		var cm *ipv4.ControlMessage
		n, cm, from, err = c.p4.ReadFrom(buf)
		if cm != nil {
			ifIndex = cm.IfIndex
		}
	case c.p6 != nil:
		var cm *ipv6.ControlMessage
		n, cm, from, err = c.p6.ReadFrom(buf)
		if cm != nil {
			ifIndex = cm.IfIndex
		}
	default:
		n, from, err = c.c.ReadFrom(buf)
	}
	return n, from, ifIndex, err
}

// maxZoneNames bounds the interface names a browse remembers.
const maxZoneNames = 64

// zones names the interface a packet came in on, the zone its link-local
// IPv6 addresses are reached through.
type zones struct {
	fallback string // the browse's interface, when it was given one

	mu    sync.Mutex
	names map[int]string
}

// of is the zone of a packet from from that came in on interface ifIndex
// (0: unknown): the interface's name (its index when it has no name
// anymore); else the source address's zone; else the browse's interface.
func (z *zones) of(ifIndex int, from net.Addr) string {
	if ifIndex > 0 {
		return z.name(ifIndex)
	}
	if u, ok := from.(*net.UDPAddr); ok && u.Zone != "" {
		return u.Zone
	}
	return z.fallback
}

func (z *zones) name(i int) string {
	z.mu.Lock()
	defer z.mu.Unlock()
	if n, ok := z.names[i]; ok {
		return n
	}
	n := strconv.Itoa(i) // a zone Go dials by index
	if ifi, err := net.InterfaceByIndex(i); err == nil && ifi.Name != "" {
		n = ifi.Name
	}
	if z.names == nil {
		z.names = map[int]string{}
	}
	if len(z.names) < maxZoneNames {
		z.names[i] = n
	}
	return n
}
