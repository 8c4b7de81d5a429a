package directory

import (
	"context"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/openmhp/mhp-go/mdns"
)

// Announced is an MHP server an mDNS browse heard of: what it announced,
// not yet believed. Its TXT values are data from the network (bounded,
// made printable); the device's card is what GET /mhp.json on Target
// answers (Probe, Crawl), never these fields.
type Announced struct {
	// Instance is the DNS-SD instance name.
	Instance string `json:"instance"`
	// ID, Class and Path are the TXT id, class and path (spec 002:
	// path=/mhp.json); empty when absent.
	ID    string `json:"id,omitempty"`
	Class string `json:"class,omitempty"`
	Path  string `json:"path,omitempty"`
	// Host is the SRV target host name, e.g. box.local.
	Host string `json:"host"`
	// Endpoint is address:port: the SRV port on the first usable address
	// of Host (IPv4 first, then global IPv6, then link-local IPv6 with the
	// zone of the interface its answer came in on: [fe80::1%eth0]:18900).
	Endpoint string `json:"endpoint"`
	// Target is http://Endpoint (TargetURL: a zone as %25), what Probe and
	// Crawl ask for /mhp.json. It is made from the address records only: a
	// TXT path does not move the probe off /mhp.json.
	Target string `json:"target"`
}

// MaxTXTValue bounds each TXT value kept in an Announced, in bytes; the
// rest is cut (a whole TXT string is at most 255 bytes on the wire; ids,
// classes and paths are far shorter).
const MaxTXTValue = 128

// BrowseOptions narrow a directory browse: timeout (default 2s),
// interface, logger of what could not be read (such as python-zeroconf
// 0.47's malformed NSEC), Max servers, an injected Conn and To, clock
// ([mdns.Options]).
type BrowseOptions = mdns.Options

// BrowseWith browses mDNS for _mhp._tcp (spec 002) and returns the servers
// announced with a usable address, sorted by instance name, one per
// endpoint. It sends its own query and decodes the answers record by
// record, so a server announced by python-zeroconf 0.47 (the Python
// reference), whose packets carry a malformed NSEC that strict decoders
// reject whole, is found. Errors are *mhp.Error (invalid params for the
// options, server error when no query could be sent).
func BrowseWith(ctx context.Context, o BrowseOptions) ([]Announced, error) {
	found, err := mdns.Browse(ctx, MDNSService, o)
	if err != nil {
		return nil, err
	}
	out := make([]Announced, 0, len(found))
	seen := map[string]bool{}
	for _, in := range found {
		a, ok := announced(in)
		if !ok || seen[a.Endpoint] {
			continue
		}
		seen[a.Endpoint] = true
		out = append(out, a)
	}
	return out, nil
}

// Browse looks for MHP servers on the local network by mDNS for timeout and
// returns their targets (http://host:port), to be probed before they are
// believed.
func Browse(ctx context.Context, timeout time.Duration) ([]string, error) {
	found, err := BrowseWith(ctx, BrowseOptions{Timeout: timeout})
	targets := make([]string, 0, len(found))
	for _, a := range found {
		targets = append(targets, a.Target)
	}
	return targets, err
}

// announced reads an instance as an MHP server; ok is false when it has no
// address a probe could reach (none announced, or only unspecified and
// multicast ones, or link-local IPv6 ones without the zone of an
// interface).
func announced(in mdns.Instance) (Announced, bool) {
	i := 0
	for i < len(in.Addrs) && !reachable(in.Addrs[i]) {
		i++
	}
	if i == len(in.Addrs) {
		return Announced{}, false
	}
	a := Announced{Instance: txtValue(in.Name), Host: txtValue(in.Host),
		Endpoint: net.JoinHostPort(in.Addrs[i].String(), strconv.Itoa(int(in.Port))), Target: TargetURL(in.Addrs[i].String(), int(in.Port))}
	a.ID = txtField(in, "id")
	a.Class = txtField(in, "class")
	a.Path = txtField(in, "path")
	return a, true
}

// reachable says whether a probe can dial ip: not unspecified, not
// multicast, and link-local IPv6 only with a zone.
func reachable(ip netip.Addr) bool {
	return !ip.IsUnspecified() && !ip.IsMulticast() && (!ip.Is6() || !ip.IsLinkLocalUnicast() || ip.Zone() != "")
}

// txtField is the TXT value of key, as data.
func txtField(in mdns.Instance, key string) string {
	v, _ := in.TXT(key)
	return txtValue(v)
}

// txtValue bounds a value from the network and makes it printable: invalid
// UTF-8 and control characters become U+FFFD.
func txtValue(v string) string {
	if len(v) > MaxTXTValue {
		v = v[:MaxTXTValue]
	}
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return unicode.ReplacementChar
		}
		return r
	}, strings.ToValidUTF8(v, string(unicode.ReplacementChar)))
}
