package directory

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"strings"
	"time"
	"unicode/utf8"

	hashimdns "github.com/hashicorp/mdns"

	"github.com/openmhp/mhp-go"
)

// Advertise announces an MHP server by mDNS as _mhp._tcp with TXT id, class
// and path=/mhp.json (with hashicorp/mdns's responder; browsing is
// BrowseWith's own, in browse.go). The SRV target and the address records
// name the host in the mDNS domain, as avahi and Bonjour do: the OS host
// name's first label + ".local." (one already ending in .local is kept as
// it is). The addresses announced are the host name's; when the name does
// not resolve (a lab machine without DNS for itself), or resolves to
// loopback only (Debian's 127.0.1.1), they are those of the interfaces that
// are up (loopback last). Stop it with the returned function.
func Advertise(info mhp.DeviceInfo, port int) (stop func() error, err error) {
	host, _ := osHostname()
	ctx, cancel := context.WithTimeout(context.Background(), lookupTimeout)
	defer cancel()
	ips, err := advertAddrs(ctx, host, net.DefaultResolver.LookupIP, upAddresses)
	if err != nil {
		return nil, mhp.Errorf(mhp.CodeServerError, "mdns: advertise %s: %v", mhp.Truncate(info.ID, 64), err)
	}
	svc, err := advertZone(info, port, mdnsHostName(host), ips)
	if err != nil {
		return nil, err
	}
	srv, err := hashimdns.NewServer(&hashimdns.Config{Zone: svc, Logger: log.New(io.Discard, "", 0)})
	if err != nil {
		return nil, mhp.Errorf(mhp.CodeServerError, "mdns: advertise %s: %v", mhp.Truncate(info.ID, 64), err)
	}
	return srv.Shutdown, nil
}

// advertZone is the responder's zone for info on port: the PTR of
// _mhp._tcp.local., the instance's SRV (target host, an mDNS host name
// ending in a dot) and TXT, and host's A and AAAA records of ips.
func advertZone(info mhp.DeviceInfo, port int, host string, ips []net.IP) (*hashimdns.MDNSService, error) {
	svc, err := hashimdns.NewMDNSService(info.ID, MDNSService, "", host, port, ips,
		[]string{"id=" + info.ID, "class=" + info.Class, "path=/mhp.json"})
	if err != nil {
		return nil, mhp.Errorf(mhp.CodeServerError, "mdns: advertise %s: %v", mhp.Truncate(info.ID, 64), err)
	}
	return svc, nil
}

// lookupTimeout bounds the host name lookup of Advertise.
const lookupTimeout = 2 * time.Second

// advertAddrs are the addresses to announce for the OS host name host: what
// lookup resolves it to (loopback, unspecified and multicast left out),
// unless that fails or leaves nothing, then the interfaces' (up); the
// loopback ones it resolved to when the interfaces have none. At most 16.
// It fails when there are none at all.
func advertAddrs(ctx context.Context, host string, lookup func(ctx context.Context, network, host string) ([]net.IP, error),
	up func() []net.IP) ([]net.IP, error) {
	resolved, lerr := lookup(ctx, "ip", host)
	var ips []net.IP
	for _, ip := range resolved {
		if !ip.IsLoopback() && !ip.IsUnspecified() && !ip.IsMulticast() {
			ips = append(ips, ip)
		}
	}
	if len(ips) > 0 {
		return ips[:min(len(ips), 16)], nil
	}
	if ips = up(); len(ips) > 0 {
		return ips, nil
	}
	if len(resolved) > 0 { // loopback only, and no interface has another address
		return resolved[:min(len(resolved), 16)], nil
	}
	if lerr == nil {
		lerr = errors.New("no address")
	}
	return nil, mhp.Errorf(mhp.CodeServerError, "host name %q does not resolve (%v) and no interface is up with an address", host, lerr)
}

// fallbackHost is the mDNS host label when the OS names none usable.
const fallbackHost = "mhp-host"

// mdnsHostName is the name announced by mDNS for the OS host name h, fully
// qualified: h itself when it already ends in .local (any case; kept once,
// with a final dot), else h's first label + ".local." — what avahi and
// Bonjour announce for a host named by an FQDN (box.lab.example.com is
// box.local.). A label is cut to the 63 bytes DNS allows (at a UTF-8
// boundary); an empty first label is fallbackHost.
func mdnsHostName(h string) string {
	h = strings.TrimRight(h, ".")
	if stem, ok := cutLocal(h); ok && stem != "" {
		labels := strings.Split(stem, ".")
		fits := true
		for _, l := range labels {
			fits = fits && l != "" && len(l) <= 63
		}
		if fits {
			return h + "."
		}
	}
	label, _, _ := strings.Cut(h, ".")
	if label = cutLabel(label); label == "" {
		label = fallbackHost
	}
	return label + ".local."
}

// cutLocal is h without a final ".local" (ASCII case-insensitive), and
// whether it had one.
func cutLocal(h string) (string, bool) {
	const local = ".local"
	if len(h) > len(local) && strings.EqualFold(h[len(h)-len(local):], local) {
		return h[:len(h)-len(local)], true
	}
	return h, false
}

// cutLabel cuts l to at most 63 bytes, not inside a UTF-8 sequence.
func cutLabel(l string) string {
	if len(l) <= 63 {
		return l
	}
	i := 63
	for i > 0 && !utf8.RuneStart(l[i]) {
		i--
	}
	return l[:i]
}

// upAddresses are the unicast addresses of the interfaces that are up
// (loopback last), at most 16.
func upAddresses() []net.IP {
	ifs, _ := net.Interfaces()
	var out, loop []net.IP
	for _, it := range ifs {
		if it.Flags&net.FlagUp == 0 {
			continue
		}
		addrs, _ := it.Addrs()
		for _, a := range addrs {
			n, ok := a.(*net.IPNet)
			if !ok || n.IP.IsLinkLocalUnicast() || n.IP.IsMulticast() {
				continue
			}
			if it.Flags&net.FlagLoopback != 0 {
				loop = append(loop, n.IP)
			} else {
				out = append(out, n.IP)
			}
		}
	}
	out = append(out, loop...)
	return out[:min(len(out), 16)]
}
