package sila2

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// MDNSService is the DNS-SD service type SiLA 2 servers announce.
const MDNSService = "_sila._tcp"

// DiscoveredServer is one SiLA 2 server found on the local network.
type DiscoveredServer struct {
	// UUID is the mDNS instance name: the server UUID.
	UUID string `json:"uuid"`
	// Name, Description and Version come from the TXT record.
	Name        string `json:"name,omitempty"`
	Description string `json:"description,omitempty"`
	Version     string `json:"version,omitempty"`
	Host        string `json:"host,omitempty"`
	// Endpoint is address:port, ready for a config file.
	Endpoint string `json:"endpoint"`
	// CAPEM is the CA certificate the server announced (TXT ca0, ca1, ...), if any.
	CAPEM string `json:"ca_pem,omitempty"`
}

// BrowseOptions narrow a browse.
type BrowseOptions struct {
	// Timeout is how long to listen for answers; default 2s.
	Timeout time.Duration
	// Interface names the network interface to multicast on ("eth0");
	// empty lets the system choose. Not used with Conn.
	Interface string
	// Logger receives what the browse could not use: records skipped
	// (type, name, reason; Warn for PTR, SRV, TXT, A and AAAA records, Info
	// for others such as python-zeroconf's malformed NSEC) and packets it
	// stopped reading (Warn). Default: discarded.
	Logger *slog.Logger
	// Max, when above zero, ends the browse as soon as that many servers
	// are known with port and address, before Timeout.
	Max int
	// Conn, when set, replaces the network: the queries are written to To
	// on it and every packet read from it is decoded as an answer. The
	// caller keeps it open or closes it; the browse leaves its read
	// deadline in the past. For tests, and for sockets set up elsewhere.
	Conn net.PacketConn
	// To is where queries on Conn go (a responder's address).
	To net.Addr
}

// Browse browses mDNS for _sila._tcp for the given time and returns the
// servers found, sorted by name then UUID. (Discover reads one server's
// features into a config: discoverconfig.go.)
func Browse(ctx context.Context, timeout time.Duration) ([]DiscoveredServer, error) {
	return BrowseWith(ctx, BrowseOptions{Timeout: timeout})
}

// Interface returns the named network interface, or an error listing the
// ones there are.
func Interface(name string) (*net.Interface, error) {
	all, _ := net.Interfaces()
	return pickInterface(name, all)
}

// pickInterface finds name among all; a refusal lists the interfaces mDNS
// can use (up, with multicast) — loopback usually has no multicast flag.
func pickInterface(name string, all []net.Interface) (*net.Interface, error) {
	var usable, names []string
	var found *net.Interface
	for i := range all {
		it := &all[i]
		names = append(names, it.Name)
		if it.Flags&net.FlagUp != 0 && it.Flags&net.FlagMulticast != 0 {
			usable = append(usable, it.Name)
		}
		if it.Name == name {
			found = it
		}
	}
	use := "none is up with multicast"
	if len(usable) > 0 {
		use = "use one of: " + strings.Join(usable, ", ")
	}
	switch {
	case found == nil:
		return nil, fmt.Errorf("sila2: no network interface %q (have: %s; %s)", name, strings.Join(names, ", "), use)
	case found.Flags&net.FlagUp == 0:
		return nil, fmt.Errorf("sila2: interface %s is down (%s)", name, use)
	case found.Flags&net.FlagMulticast == 0:
		return nil, fmt.Errorf("sila2: interface %s does not support multicast, which mDNS needs (%s)", name, use)
	}
	return found, nil
}

// BrowseWith is Browse on one interface (o.Interface) or all, or on the
// packet connection o.Conn.
//
// It sends its own query (PTR _sila._tcp.local, the first with the QU bit,
// repeats at 1 s, 3 s, 7 s ... as QM) from an ephemeral port, so that
// responders answer it by unicast (RFC 6762 section 6.7), and also listens
// on the mDNS group for multicast answers and announcements. Answers are
// decoded record by record: a record that cannot be read (such as the
// malformed NSEC python-zeroconf 0.47 sends) is skipped and logged to
// o.Logger, naming its type and why, and the rest of the packet still
// counts.
func BrowseWith(ctx context.Context, o BrowseOptions) ([]DiscoveredServer, error) {
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var conns []mdnsConn
	if o.Conn != nil {
		if o.To == nil {
			return nil, fmt.Errorf("sila2: mDNS browse: BrowseOptions.Conn needs To, the address to query")
		}
		conns = []mdnsConn{{c: o.Conn, to: o.To}}
	} else {
		var ifi *net.Interface
		if o.Interface != "" {
			var err error
			if ifi, err = Interface(o.Interface); err != nil {
				return nil, err
			}
		}
		var err error
		if conns, err = openMDNS(ifi, log); err != nil {
			return nil, err
		}
		defer func() {
			for _, c := range conns {
				c.c.Close()
			}
		}()
	}
	end := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(end) {
		end = d
	}
	b := &browse{cache: newMDNSCache(log), log: log, max: o.Max, stop: make(chan struct{}), conns: conns}
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.read(c, end)
		}()
	}
	go func() {
		select {
		case <-ctx.Done():
			b.halt()
		case <-b.stop:
		}
	}()
	err := b.query(end)
	b.halt()
	wg.Wait()
	if err != nil {
		return nil, err
	}
	return b.cache.servers(), nil
}

// mdnsConn is one socket of a browse: to is where queries go (nil: listen only).
type mdnsConn struct {
	c  net.PacketConn
	to net.Addr
}

var (
	mdnsGroupV4 = &net.UDPAddr{IP: net.IPv4(224, 0, 0, 251), Port: 5353}
	mdnsGroupV6 = &net.UDPAddr{IP: net.ParseIP("ff02::fb"), Port: 5353}
)

// openMDNS opens the browse's sockets: an ephemeral-port socket per IP
// version to query from (answers come back to it by unicast) and, where
// the system lets it, a listener on the mDNS group. It fails only when no
// query socket could be opened.
func openMDNS(ifi *net.Interface, log *slog.Logger) ([]mdnsConn, error) {
	var conns []mdnsConn
	var errs []string
	if c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4zero}); err != nil {
		errs = append(errs, "IPv4: "+err.Error())
	} else {
		if ifi != nil {
			if err := ipv4.NewPacketConn(c).SetMulticastInterface(ifi); err != nil {
				log.Debug("sila2: mDNS: cannot choose the IPv4 multicast interface", "interface", ifi.Name, "err", err)
			}
		}
		conns = append(conns, mdnsConn{c: c, to: mdnsGroupV4})
	}
	if c, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6unspecified}); err != nil {
		errs = append(errs, "IPv6: "+err.Error())
	} else {
		to := *mdnsGroupV6
		if ifi != nil {
			to.Zone = ifi.Name
			if err := ipv6.NewPacketConn(c).SetMulticastInterface(ifi); err != nil {
				log.Debug("sila2: mDNS: cannot choose the IPv6 multicast interface", "interface", ifi.Name, "err", err)
			}
		}
		conns = append(conns, mdnsConn{c: c, to: &to})
	}
	if len(conns) == 0 {
		return nil, fmt.Errorf("sila2: mDNS browse: no UDP socket to query from (%s)", strings.Join(errs, "; "))
	}
	for _, g := range []struct {
		network string
		group   *net.UDPAddr
	}{{"udp4", mdnsGroupV4}, {"udp6", mdnsGroupV6}} {
		c, err := net.ListenMulticastUDP(g.network, ifi, g.group)
		if err != nil {
			log.Debug("sila2: mDNS: not listening on the group; unicast answers only", "group", g.group.String(), "err", err)
			continue
		}
		conns = append(conns, mdnsConn{c: c})
	}
	return conns, nil
}

// browse is one BrowseWith in flight.
type browse struct {
	cache *mdnsCache
	log   *slog.Logger
	max   int
	conns []mdnsConn
	stop  chan struct{}
	once  sync.Once
}

// halt ends the browse: readers return at once.
func (b *browse) halt() {
	b.once.Do(func() {
		close(b.stop)
		now := time.Now()
		for _, c := range b.conns {
			c.c.SetReadDeadline(now)
		}
	})
}

// query sends the queries until end or the halt; it fails when the first
// query went out on no socket.
func (b *browse) query(end time.Time) error {
	wait := time.Second
	for n := 0; ; n++ {
		pkt := mdnsQuery(n == 0)
		var sent int
		var errs []string
		for _, c := range b.conns {
			if c.to == nil {
				continue
			}
			if _, err := c.c.WriteTo(pkt, c.to); err != nil {
				errs = append(errs, c.to.String()+": "+err.Error())
				continue
			}
			sent++
		}
		if sent == 0 && n == 0 {
			return fmt.Errorf("sila2: mDNS browse: the query could not be sent (%s)", strings.Join(errs, "; "))
		}
		if len(errs) > 0 {
			b.log.Debug("sila2: mDNS: query not sent everywhere", "errors", strings.Join(errs, "; "))
		}
		left := time.Until(end)
		if left <= 0 {
			return nil
		}
		t := time.NewTimer(min(wait, left))
		select {
		case <-b.stop:
			t.Stop()
			return nil
		case <-t.C:
		}
		if wait >= left {
			return nil
		}
		wait *= 2
	}
}

// read decodes every packet c receives until end or the halt.
func (b *browse) read(c mdnsConn, end time.Time) {
	c.c.SetReadDeadline(end)
	select {
	case <-b.stop:
		return
	default:
	}
	buf := make([]byte, mdnsMaxPacket)
	for {
		n, from, err := c.c.ReadFrom(buf)
		if err != nil {
			return
		}
		msg, err := decodeDNS(buf[:n])
		src := ""
		if from != nil {
			src = from.String()
		}
		if err != nil {
			b.log.Warn("sila2: mDNS: stopped reading a packet; its remaining records are lost", "from", src, "reason", err.Error(),
				"records_read", len(msg.Records))
		}
		if !msg.Response {
			continue // another querier's question
		}
		zone := ""
		if u, ok := from.(*net.UDPAddr); ok {
			zone = u.Zone
		}
		for _, s := range msg.Skipped {
			level := slog.LevelInfo
			if s.Type == dnsTypePTR || s.Type == dnsTypeSRV || s.Type == dnsTypeTXT || s.Type == dnsTypeA || s.Type == dnsTypeAAAA {
				level = slog.LevelWarn
			}
			b.log.Log(context.Background(), level, "sila2: mDNS: skipped a record it cannot read", "type", dnsTypeName(s.Type),
				"name", s.Name, "reason", s.Reason, "from", src)
		}
		if complete := b.cache.add(msg.Records, zone); b.max > 0 && complete >= b.max {
			b.halt()
			return
		}
	}
}
