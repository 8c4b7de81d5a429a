// Package mdns browses a DNS-SD service type over multicast DNS (RFC 6762,
// RFC 6763) for the protocol packages of this module: sila2 (_sila._tcp)
// and directory (_mhp._tcp). One [Browse] sends its own PTR query and
// gathers the instances answered, each with its host, port, addresses and
// TXT strings; what the TXT strings mean is the caller's business.
//
// The decoder is tolerant: it walks each resource record by its RDLENGTH,
// so a record it cannot read costs that record only, not the packet.
// python-zeroconf 0.47, which the Python SiLA 2 library and the Python MHP
// reference announce through, sends an NSEC whose type bitmap has an empty
// block (window 0, length 0); strict decoders such as miekg/dns (under
// hashicorp/mdns) reject every such packet, so those devices are never
// found. Everything is bounded by the packet and by fixed caps on what a
// browse keeps; nothing read from the network is trusted: callers treat an
// instance as a hint to verify (sila2 connects, directory probes GET
// /mhp.json).
package mdns

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/clock"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// Instance is one service instance a browse found.
type Instance struct {
	// Name is the instance label (the part before the service type),
	// unescaped: any bytes the responder chose.
	Name string
	// Host is the SRV target, e.g. box.local.
	Host string
	// Port is the SRV port; never 0.
	Port uint16
	// Addrs are the A and AAAA addresses of Host, IPv4 first, then global
	// IPv6, then link-local IPv6 with the zone of the interface their
	// packet came in on, an IPv4 packet's too (when the socket cannot
	// tell: the packet source's zone, else Options.Interface, else none).
	// Empty when no address record arrived.
	Addrs []netip.Addr
	// Text holds the TXT strings, at most [MaxTXT] of them, as sent.
	Text []string
}

// Endpoint is host:port on the first of Addrs, or on Host when there is no
// address.
func (in Instance) Endpoint() string {
	host := in.Host
	if len(in.Addrs) > 0 {
		host = in.Addrs[0].String()
	}
	return net.JoinHostPort(host, strconv.Itoa(int(in.Port)))
}

// TXT returns the value of the first TXT string key=value whose key is
// key (ASCII case-insensitive, RFC 6763 section 6.4), and whether there
// was one.
func (in Instance) TXT(key string) (string, bool) {
	for _, f := range in.Text {
		k, v, ok := strings.Cut(f, "=")
		if ok && strings.EqualFold(strings.TrimSpace(k), key) {
			return v, true
		}
	}
	return "", false
}

// Options say how to browse: for how long, where, and what to report.
// sila2.BrowseOptions and directory.BrowseOptions are this type.
type Options struct {
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
	// Max, when above zero, ends the browse as soon as that many instances
	// are known with port and address, before Timeout.
	Max int
	// Conn, when set, replaces the network: the queries are written to To
	// on it and every packet read from it is decoded as an answer. The
	// caller keeps it open or closes it; the browse leaves its read
	// deadline in the past and, on a UDP socket, its packet-info option on
	// (to learn the interface each answer came in on). For tests, and for
	// sockets set up elsewhere.
	Conn net.PacketConn
	// To is where queries on Conn go (a responder's address).
	To net.Addr
	// Clock times the repeated queries and the end of the browse; default
	// the real clock.
	Clock clock.Clock
}

// Browse browses service (a DNS-SD type such as "_mhp._tcp", in the domain
// local) until o.Timeout, ctx's end or o.Max instances,
// on one interface (o.Interface) or all, or on the packet connection
// o.Conn, and returns the instances found, sorted by name.
//
// It sends its own query (the service's PTR, the first with the QU bit,
// repeats at 1 s, 3 s, 7 s ... as QM) from an ephemeral port, so that
// responders answer it by unicast (RFC 6762 section 6.7), and also listens
// on the mDNS group for multicast answers and announcements. Answers are
// gathered across packets; a record with TTL 0 (a goodbye) withdraws what
// it announced. A record that cannot be read is skipped and logged to
// o.Logger, naming its type and why, and the rest of the packet still
// counts. Errors are *mhp.Error: invalid params for the options, server
// error when no query could be sent.
func Browse(ctx context.Context, service string, o Options) ([]Instance, error) {
	if err := checkService(service); err != nil {
		return nil, err
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var conns []conn
	if o.Conn != nil {
		if o.To == nil {
			return nil, mhp.Errorf(mhp.CodeInvalidParams, "mdns: browse %s: Options.Conn needs To, the address to query", service).
				With(mhp.DataField, "To")
		}
		conns = []conn{withInterfaces(o.Conn, o.To, log)}
	} else {
		var ifi *net.Interface
		if o.Interface != "" {
			var err error
			if ifi, err = Interface(o.Interface); err != nil {
				return nil, err
			}
		}
		var err error
		if conns, err = open(ifi, log); err != nil {
			return nil, err
		}
		defer func() {
			for _, c := range conns {
				c.c.Close()
			}
		}()
	}
	clk := o.Clock
	if clk == nil {
		clk = clock.Real{}
	}
	ptr := service + ".local"
	b := &browse{service: ptr, cache: newCache(ptr, log), log: log, max: o.Max, stop: make(chan struct{}), conns: conns, clock: clk,
		zones: zones{fallback: o.Interface}}
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.read(c)
		}()
	}
	window := clk.AfterFunc(timeout, b.halt)
	defer window.Stop()
	go func() {
		select {
		case <-ctx.Done():
			b.halt()
		case <-b.stop:
		}
	}()
	err := b.query()
	b.halt()
	wg.Wait()
	if err != nil {
		return nil, err
	}
	return b.cache.list(), nil
}

// checkService accepts a DNS-SD service type: _name._tcp or _name._udp,
// the name 1 to 15 letters, digits and hyphens (RFC 6335 section 5.1).
func checkService(s string) error {
	name, proto, ok := strings.Cut(s, ".")
	valid := ok && (proto == "_tcp" || proto == "_udp") && len(name) >= 2 && len(name) <= 16 && name[0] == '_'
	for i := 1; valid && i < len(name); i++ {
		c := name[i]
		valid = c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
	}
	if !valid {
		return mhp.Errorf(mhp.CodeInvalidParams, "mdns: service type %q is not _name._tcp or _name._udp (name of 1 to 15 letters, digits, hyphens)",
			mhp.Truncate(s, 64)).With(mhp.DataField, "service")
	}
	return nil
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
		return nil, mhp.Errorf(mhp.CodeInvalidParams, "mdns: no network interface %q (have: %s; %s)", name, strings.Join(names, ", "), use).
			With(mhp.DataField, "interface")
	case found.Flags&net.FlagUp == 0:
		return nil, mhp.Errorf(mhp.CodeInvalidParams, "mdns: interface %s is down (%s)", name, use).With(mhp.DataField, "interface")
	case found.Flags&net.FlagMulticast == 0:
		return nil, mhp.Errorf(mhp.CodeInvalidParams, "mdns: interface %s does not support multicast, which mDNS needs (%s)", name, use).
			With(mhp.DataField, "interface")
	}
	return found, nil
}

var (
	groupV4 = &net.UDPAddr{IP: net.IPv4(224, 0, 0, 251), Port: 5353}
	groupV6 = &net.UDPAddr{IP: net.ParseIP("ff02::fb"), Port: 5353}
)

// open opens the browse's sockets: an ephemeral-port socket per IP version
// to query from (answers come back to it by unicast) and, where the system
// lets it, a listener on the mDNS group. It fails only when no query socket
// could be opened.
func open(ifi *net.Interface, log *slog.Logger) ([]conn, error) {
	var conns []conn
	var errs []string
	if c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4zero}); err != nil {
		errs = append(errs, "IPv4: "+err.Error())
	} else {
		if ifi != nil {
			if err := ipv4.NewPacketConn(c).SetMulticastInterface(ifi); err != nil {
				log.Debug("mdns: cannot choose the IPv4 multicast interface", "interface", ifi.Name, "err", err)
			}
		}
		conns = append(conns, withInterfaces(c, groupV4, log))
	}
	if c, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6unspecified}); err != nil {
		errs = append(errs, "IPv6: "+err.Error())
	} else {
		to := *groupV6
		if ifi != nil {
			to.Zone = ifi.Name
			if err := ipv6.NewPacketConn(c).SetMulticastInterface(ifi); err != nil {
				log.Debug("mdns: cannot choose the IPv6 multicast interface", "interface", ifi.Name, "err", err)
			}
		}
		conns = append(conns, withInterfaces(c, &to, log))
	}
	if len(conns) == 0 {
		return nil, mhp.Errorf(mhp.CodeServerError, "mdns: browse: no UDP socket to query from (%s)", strings.Join(errs, "; "))
	}
	for _, g := range []struct {
		network string
		group   *net.UDPAddr
	}{{"udp4", groupV4}, {"udp6", groupV6}} {
		c, err := net.ListenMulticastUDP(g.network, ifi, g.group)
		if err != nil {
			log.Debug("mdns: not listening on the group; unicast answers only", "group", g.group.String(), "err", err)
			continue
		}
		conns = append(conns, withInterfaces(c, nil, log))
	}
	return conns, nil
}

// browse is one Browse in flight.
type browse struct {
	service string
	cache   *cache
	log     *slog.Logger
	max     int
	conns   []conn
	clock   clock.Clock
	zones   zones
	stop    chan struct{}
	once    sync.Once
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

// query sends the queries until the halt, at 0, 1 s, 3 s, 7 s ... of the
// clock; it fails when the first query went out on no socket.
func (b *browse) query() error {
	wait := time.Second
	for n := 0; ; n++ {
		pkt := query(b.service, n == 0)
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
			return mhp.Errorf(mhp.CodeServerError, "mdns: browse %s: the query could not be sent (%s)", b.service, strings.Join(errs, "; "))
		}
		if len(errs) > 0 {
			b.log.Debug("mdns: query not sent everywhere", "service", b.service, "errors", strings.Join(errs, "; "))
		}
		due := make(chan struct{})
		t := b.clock.AfterFunc(wait, func() { close(due) })
		select {
		case <-b.stop:
			t.Stop()
			return nil
		case <-due:
		}
		wait = min(2*wait, time.Minute)
	}
}

// read decodes every packet c receives until the halt.
func (b *browse) read(c conn) {
	c.c.SetReadDeadline(time.Time{})
	select {
	case <-b.stop:
		return
	default:
	}
	buf := make([]byte, maxPacket)
	for {
		n, from, ifIndex, err := c.readFrom(buf)
		if err != nil {
			return
		}
		msg, err := decodeDNS(buf[:n])
		src := ""
		if from != nil {
			src = from.String()
		}
		if !msg.Response { // another querier's question, or not even a header
			if err != nil {
				b.log.Debug("mdns: unreadable packet that is no response", "from", src, "reason", err.Error())
			}
			continue
		}
		if err != nil {
			b.log.Warn("mdns: stopped reading a packet; its remaining records are lost", "from", src, "reason", err.Error(),
				"records_read", len(msg.Records))
		}
		zone := b.zones.of(ifIndex, from)
		for _, s := range msg.Skipped {
			level := slog.LevelInfo
			if s.Type == dnsTypePTR || s.Type == dnsTypeSRV || s.Type == dnsTypeTXT || s.Type == dnsTypeA || s.Type == dnsTypeAAAA {
				level = slog.LevelWarn
			}
			b.log.Log(context.Background(), level, "mdns: skipped a record it cannot read", "type", dnsTypeName(s.Type),
				"name", s.Name, "reason", s.Reason, "from", src)
		}
		if complete := b.cache.add(msg.Records, zone); b.max > 0 && complete >= b.max {
			b.halt()
			return
		}
	}
}
