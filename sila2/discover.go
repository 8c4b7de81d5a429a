package sila2

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/mdns"
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
	// empty lets the system choose.
	Interface string
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

// BrowseWith is Browse on one interface (o.Interface) or all.
func BrowseWith(ctx context.Context, o BrowseOptions) ([]DiscoveredServer, error) {
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	var ifi *net.Interface
	if o.Interface != "" {
		var err error
		if ifi, err = Interface(o.Interface); err != nil {
			return nil, err
		}
	}
	entries := make(chan *mdns.ServiceEntry, 32)
	found := map[string]DiscoveredServer{}
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range entries {
			s, ok := ServerFromEntry(e)
			if !ok {
				continue
			}
			mu.Lock()
			found[s.UUID+"@"+s.Endpoint] = s
			mu.Unlock()
		}
	}()
	quiet := log.New(io.Discard, "", 0)
	q := func(v6 bool) error {
		return mdns.QueryContext(ctx, &mdns.QueryParam{Service: MDNSService, Domain: "local", Timeout: timeout,
			Interface: ifi, Entries: entries, DisableIPv6: !v6, Logger: quiet})
	}
	err := q(true)
	if err != nil && ctx.Err() == nil {
		// IPv6 multicast is often missing in containers: retry on IPv4 alone.
		err = q(false)
	}
	close(entries)
	<-done
	if err != nil && ctx.Err() == nil {
		return nil, fmt.Errorf("sila2: mDNS browse: %w", err)
	}
	out := make([]DiscoveredServer, 0, len(found))
	for _, s := range found {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].UUID < out[j].UUID
	})
	return out, nil
}

// ServerFromEntry reads an mDNS answer as a SiLA server: the instance is
// the UUID; TXT version=, server_name=, description=, ca0=, ca1=... hold
// the rest (the CA lines are joined into a PEM).
func ServerFromEntry(e *mdns.ServiceEntry) (DiscoveredServer, bool) {
	if e == nil || e.Port == 0 {
		return DiscoveredServer{}, false
	}
	name := e.Name
	if i := strings.Index(name, "."+MDNSService); i >= 0 {
		name = name[:i]
	}
	s := DiscoveredServer{UUID: strings.ReplaceAll(name, `\`, ""), Host: strings.TrimSuffix(e.Host, ".")}
	var ip net.IP
	switch {
	case e.AddrV4 != nil:
		ip = e.AddrV4
	case e.AddrV6IPAddr != nil:
		ip = e.AddrV6IPAddr.IP
	case e.AddrV6 != nil:
		ip = e.AddrV6
	case e.Addr != nil:
		ip = e.Addr
	}
	host := s.Host
	if ip != nil {
		host = ip.String()
	}
	if host == "" {
		return DiscoveredServer{}, false
	}
	s.Endpoint = net.JoinHostPort(host, strconv.Itoa(e.Port))
	ca := map[int]string{}
	for _, f := range e.InfoFields {
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
			if n, err := strconv.Atoi(k[2:]); err == nil && n >= 0 && n < 1000 {
				ca[n] = v
			}
		}
	}
	if len(ca) > 0 {
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
	return s, true
}
