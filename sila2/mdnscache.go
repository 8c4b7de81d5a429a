package sila2

import (
	"log/slog"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Bounds of what one browse keeps, whatever the network sends.
const (
	mdnsMaxInstances = 256
	mdnsMaxHosts     = 256
	mdnsMaxAddrs     = 16
	mdnsMaxTXT       = 64
)

// mdnsServiceName is the browsed service's PTR name, in the decoder's
// presentation form.
const mdnsServiceName = MDNSService + ".local"

// mdnsCache gathers the records of a browse's answers across packets: the
// SRV and TXT of each _sila._tcp instance and the addresses of each host.
type mdnsCache struct {
	log *slog.Logger

	mu        sync.Mutex
	instances map[string]*mdnsInstance // lower-case instance name
	hosts     map[string][]mdnsAddr    // lower-case host name
	full      bool                     // the full warning was logged
}

type mdnsInstance struct {
	name string // e.g. 4c1f...90._sila._tcp.local
	host string
	port uint16
	text []string
}

type mdnsAddr struct {
	ip   net.IP
	zone string // of the interface the record came in on (IPv6 link-local)
}

func newMDNSCache(log *slog.Logger) *mdnsCache {
	return &mdnsCache{log: log, instances: map[string]*mdnsInstance{}, hosts: map[string][]mdnsAddr{}}
}

// isSiLAInstance says whether name is <instance>._sila._tcp.local.
func isSiLAInstance(name string) bool {
	label, rest := firstLabel(name)
	return label != "" && strings.EqualFold(rest, mdnsServiceName)
}

// add takes one packet's records (zone: of the interface it came in on)
// and returns how many servers are complete (port and address known).
// A record with TTL 0 (a goodbye) removes what it announced.
func (m *mdnsCache) add(recs []dnsRecord, zone string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range recs {
		switch r.Type {
		case dnsTypePTR:
			if !strings.EqualFold(r.Name, mdnsServiceName) || !isSiLAInstance(r.Target) {
				continue
			}
			if r.TTL == 0 {
				delete(m.instances, strings.ToLower(r.Target))
				continue
			}
			m.instance(r.Target)
		case dnsTypeSRV:
			if !isSiLAInstance(r.Name) {
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
			if !isSiLAInstance(r.Name) || r.TTL == 0 {
				continue
			}
			if in := m.instance(r.Name); in != nil {
				in.text = r.Text[:min(len(r.Text), mdnsMaxTXT)]
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
func (m *mdnsCache) instance(name string) *mdnsInstance {
	k := strings.ToLower(name)
	if in, ok := m.instances[k]; ok {
		return in
	}
	if len(m.instances) >= mdnsMaxInstances {
		m.warnFull("instances", mdnsMaxInstances)
		return nil
	}
	in := &mdnsInstance{name: name}
	m.instances[k] = in
	return in
}

func (m *mdnsCache) addr(r dnsRecord, zone string) {
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
	case !ok && len(m.hosts) >= mdnsMaxHosts:
		m.warnFull("host names", mdnsMaxHosts)
	case len(have) >= mdnsMaxAddrs:
		m.warnFull("addresses of "+r.Name, mdnsMaxAddrs)
	default:
		if !r.IP.IsLinkLocalUnicast() {
			zone = ""
		}
		m.hosts[k] = append(have, mdnsAddr{ip: r.IP, zone: zone})
	}
}

func (m *mdnsCache) warnFull(what string, n int) {
	if !m.full {
		m.full = true
		m.log.Warn("sila2: mDNS: too many answers; the rest are dropped", "what", what, "limit", n)
	}
}

// servers returns the instances with a port, sorted by name then UUID.
func (m *mdnsCache) servers() []DiscoveredServer {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]DiscoveredServer, 0, len(m.instances))
	for _, in := range m.instances {
		if s, ok := m.server(in); ok {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].UUID < out[j].UUID
	})
	return out
}

// server reads an instance as a SiLA server: the instance label is the
// UUID, the endpoint the SRV port on an IPv4 address of the SRV host (else
// a global IPv6 one, else a link-local one with its zone, else the host
// name); TXT version=, server_name=, description=, ca0=, ca1=... hold the
// rest (the CA lines are joined into a PEM).
func (m *mdnsCache) server(in *mdnsInstance) (DiscoveredServer, bool) {
	if in.port == 0 || in.host == "" {
		return DiscoveredServer{}, false
	}
	label, _ := firstLabel(in.name)
	s := DiscoveredServer{UUID: unescapeLabel(label), Host: in.host}
	host := in.host
	addrs := m.hosts[strings.ToLower(in.host)]
	for _, prefer := range []func(net.IP) bool{
		func(ip net.IP) bool { return ip.To4() != nil },
		func(ip net.IP) bool { return !ip.IsLinkLocalUnicast() },
		func(net.IP) bool { return true },
	} {
		i := slices.IndexFunc(addrs, func(a mdnsAddr) bool { return prefer(a.ip) })
		if i < 0 {
			continue
		}
		host = addrs[i].ip.String()
		if addrs[i].zone != "" {
			host += "%" + addrs[i].zone
		}
		break
	}
	s.Endpoint = net.JoinHostPort(host, strconv.Itoa(int(in.port)))
	readTXT(&s, in.text)
	return s, true
}

// readTXT fills s from the TXT fields of a SiLA server's announcement.
func readTXT(s *DiscoveredServer, fields []string) {
	ca := map[int]string{}
	for _, f := range fields {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			continue
		}
		switch k = strings.ToLower(strings.TrimSpace(k)); {
		case k == "version":
			s.Version = v
		case k == "server_name":
			s.Name = v
		case k == "description":
			s.Description = v
		case strings.HasPrefix(k, "ca"):
			if n, err := strconv.Atoi(k[2:]); err == nil && n >= 0 && n < mdnsMaxTXT {
				ca[n] = v
			}
		}
	}
	if len(ca) == 0 {
		return
	}
	lines := make([]string, 0, len(ca))
	for i := 0; i < len(ca); i++ {
		l, ok := ca[i]
		if !ok {
			break
		}
		lines = append(lines, l)
	}
	s.CAPEM = strings.Join(lines, "\n") + "\n"
}
