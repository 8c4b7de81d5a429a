package mdns

import (
	"log/slog"
	"net"
	"net/netip"
	"sort"
	"strings"
	"sync"
)

// Bounds of what one browse keeps, whatever the network sends.
const (
	maxInstances = 256
	maxHosts     = 256
	maxAddrs     = 16
	// MaxTXT is the most TXT strings kept of one instance (each is at most
	// 255 bytes, as on the wire).
	MaxTXT = 512
)

// cache gathers the records of a browse's answers across packets: the SRV
// and TXT of each instance of the service and the addresses of each host.
type cache struct {
	log     *slog.Logger
	service string // the PTR name browsed, e.g. _mhp._tcp.local

	mu        sync.Mutex
	instances map[string]*entry     // lower-case instance name
	hosts     map[string][]hostAddr // lower-case host name
	full      bool                  // the full warning was logged
}

type entry struct {
	name string // e.g. tc-9._mhp._tcp.local
	host string
	port uint16
	text []string
}

type hostAddr struct {
	ip   net.IP
	zone string // of the interface the record came in on (IPv6 link-local)
}

// newCache gathers the instances of service (e.g. _mhp._tcp.local).
func newCache(service string, log *slog.Logger) *cache {
	return &cache{log: log, service: service, instances: map[string]*entry{}, hosts: map[string][]hostAddr{}}
}

// isInstance says whether name is <instance>.<service>.
func (m *cache) isInstance(name string) bool {
	label, rest := firstLabel(name)
	return label != "" && strings.EqualFold(rest, m.service)
}

// add takes one packet's records (zone: of the interface it came in on)
// and returns how many instances are complete (port and address known).
// A record with TTL 0 (a goodbye) removes what it announced.
func (m *cache) add(recs []dnsRecord, zone string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range recs {
		switch r.Type {
		case dnsTypePTR:
			if !strings.EqualFold(r.Name, m.service) || !m.isInstance(r.Target) {
				continue
			}
			if r.TTL == 0 {
				delete(m.instances, strings.ToLower(r.Target))
				continue
			}
			m.instance(r.Target)
		case dnsTypeSRV:
			if !m.isInstance(r.Name) {
				continue
			}
			if r.TTL == 0 {
				delete(m.instances, strings.ToLower(r.Name))
				continue
			}
			if in := m.instance(r.Name); in != nil {
				in.host, in.port = r.Target, r.Port
			}
		case dnsTypeTXT:
			if !m.isInstance(r.Name) || r.TTL == 0 {
				continue
			}
			if in := m.instance(r.Name); in != nil {
				in.text = r.Text[:min(len(r.Text), MaxTXT)]
			}
		case dnsTypeA, dnsTypeAAAA:
			m.addr(r, zone)
		}
	}
	n := 0
	for _, in := range m.instances {
		if in.port != 0 && len(m.hosts[strings.ToLower(in.host)]) > 0 {
			n++
		}
	}
	return n
}

// instance returns the instance named name, made if there is room.
func (m *cache) instance(name string) *entry {
	k := strings.ToLower(name)
	if in, ok := m.instances[k]; ok {
		return in
	}
	if len(m.instances) >= maxInstances {
		m.warnFull("instances", maxInstances)
		return nil
	}
	in := &entry{name: name}
	m.instances[k] = in
	return in
}

func (m *cache) addr(r dnsRecord, zone string) {
	k := strings.ToLower(r.Name)
	have, ok := m.hosts[k]
	if r.TTL == 0 {
		for i, a := range have {
			if a.ip.Equal(r.IP) {
				m.hosts[k] = append(have[:i:i], have[i+1:]...)
				break
			}
		}
		return
	}
	for _, a := range have {
		if a.ip.Equal(r.IP) {
			return
		}
	}
	switch {
	case !ok && len(m.hosts) >= maxHosts:
		m.warnFull("host names", maxHosts)
	case len(have) >= maxAddrs:
		m.warnFull("addresses of "+r.Name, maxAddrs)
	default:
		if !r.IP.IsLinkLocalUnicast() {
			zone = ""
		}
		m.hosts[k] = append(have, hostAddr{ip: r.IP, zone: zone})
	}
}

func (m *cache) warnFull(what string, n int) {
	if !m.full {
		m.full = true
		m.log.Warn("mdns: too many answers; the rest are dropped", "service", m.service, "what", what, "limit", n)
	}
}

// list returns the instances with a port and a host, sorted by name.
func (m *cache) list() []Instance {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Instance, 0, len(m.instances))
	for _, in := range m.instances {
		if in.port == 0 || in.host == "" {
			continue
		}
		label, _ := firstLabel(in.name)
		out = append(out, Instance{Name: unescapeLabel(label), Host: in.host, Port: in.port,
			Addrs: preferred(m.hosts[strings.ToLower(in.host)]), Text: append([]string(nil), in.text...)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// preferred orders a host's addresses as an endpoint should pick them: IPv4
// first, then global IPv6, then link-local IPv6 with its zone, each in the
// order they came.
func preferred(addrs []hostAddr) []netip.Addr {
	out := make([]netip.Addr, 0, len(addrs))
	for _, pass := range []func(net.IP) bool{
		func(ip net.IP) bool { return ip.To4() != nil },
		func(ip net.IP) bool { return ip.To4() == nil && !ip.IsLinkLocalUnicast() },
		func(ip net.IP) bool { return ip.To4() == nil && ip.IsLinkLocalUnicast() },
	} {
		for _, a := range addrs {
			if !pass(a.ip) {
				continue
			}
			ip, ok := netip.AddrFromSlice(a.ip)
			if !ok {
				continue
			}
			ip = ip.Unmap()
			if a.zone != "" {
				ip = ip.WithZone(a.zone)
			}
			out = append(out, ip)
		}
	}
	return out
}
