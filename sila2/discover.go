package sila2

import (
	"context"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/openmhp/mhp-go/mdns"
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

// BrowseOptions narrow a browse: timeout (default 2s), interface, logger
// of what could not be read, Max servers, an injected Conn and To, clock
// ([mdns.Options]).
type BrowseOptions = mdns.Options

// Browse browses mDNS for _sila._tcp for the given time and returns the
// servers found, sorted by name then UUID. (Discover reads one server's
// features into a config: discoverconfig.go.)
func Browse(ctx context.Context, timeout time.Duration) ([]DiscoveredServer, error) {
	return BrowseWith(ctx, BrowseOptions{Timeout: timeout})
}

// Interface returns the named network interface, or an error listing the
// ones there are.
func Interface(name string) (*net.Interface, error) { return mdns.Interface(name) }

// BrowseWith is Browse on one interface (o.Interface) or all, or on the
// packet connection o.Conn.
//
// It sends its own query (PTR _sila._tcp.local, the first with the QU bit,
// repeats at 1 s, 3 s, 7 s ... as QM) from an ephemeral port, so that
// responders answer it by unicast (RFC 6762 section 6.7), and also listens
// on the mDNS group for multicast answers and announcements. Answers are
// decoded record by record (package mdns, shared with the
// directory's _mhp._tcp browse): a record that cannot be read (such as the
// malformed NSEC python-zeroconf 0.47 sends) is skipped and logged to
// o.Logger, naming its type and why, and the rest of the packet still
// counts. A server's UUID is its instance name, its endpoint the SRV port
// on an IPv4 address of the SRV host (else a global IPv6 one, else a
// link-local one with its zone, else the host name); the TXT strings fill
// the rest ([DiscoveredServer]).
func BrowseWith(ctx context.Context, o BrowseOptions) ([]DiscoveredServer, error) {
	found, err := mdns.Browse(ctx, MDNSService, o)
	if err != nil {
		return nil, err
	}
	out := make([]DiscoveredServer, 0, len(found))
	for _, in := range found {
		s := DiscoveredServer{UUID: in.Name, Host: in.Host, Endpoint: in.Endpoint()}
		readTXT(&s, in.Text)
		out = append(out, s)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name }) // found is sorted by UUID
	return out, nil
}

// readTXT fills s from the TXT fields of a SiLA server's announcement:
// version=, server_name=, description=, ca0=, ca1=... (the CA lines, from
// ca0 on while they follow without a gap, are joined into a PEM).
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
			if n, err := strconv.Atoi(k[2:]); err == nil && n >= 0 && n < mdns.MaxTXT {
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
