package host

import (
	"context"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/openmhp/mhp-go/directory"
)

// ScanOptions say where a scan looks.
type ScanOptions struct {
	// Hosts are probed on Ports (GET /mhp.json); default 127.0.0.1. Give
	// only hosts you own.
	Hosts []string
	// Ports default to the conventional range 18900-18939.
	Ports []int
	// Browse also browses mDNS (_mhp._tcp) for BrowseFor.
	Browse bool
	// BrowseFor bounds the mDNS browse; default 2s.
	BrowseFor time.Duration
	// Timeout bounds each probe; default 400ms.
	Timeout time.Duration
	// Logger receives what the mDNS browse skipped (a record it could not
	// decode, named with its type and why); nil: discarded.
	Logger *slog.Logger
}

// MaxScanHosts bounds the hosts of one scan.
const MaxScanHosts = 256

// Scan finds MHP servers that are not yet in the fleet: the port probe of
// the hosts given and, with Browse, an mDNS browse. Fleet members are
// dropped by normalized target (localhost and 127.0.0.1 are one host).
func (f *Fleet) Scan(ctx context.Context, opt ScanOptions) ([]directory.Card, error) {
	hosts := opt.Hosts
	if len(hosts) == 0 {
		hosts = []string{"127.0.0.1"}
	}
	if len(hosts) > MaxScanHosts {
		hosts = hosts[:MaxScanHosts]
	}
	ports := opt.Ports
	if len(ports) == 0 {
		ports = directory.Ports()
	}
	if opt.Timeout <= 0 {
		opt.Timeout = 400 * time.Millisecond
	}
	found := directory.Probe(ctx, hosts, ports, opt.Timeout)
	if opt.Browse {
		wait := opt.BrowseFor
		if wait <= 0 {
			wait = 2 * time.Second
		}
		announced, _ := directory.BrowseWith(ctx, directory.BrowseOptions{Timeout: wait, Logger: opt.Logger}) // a network without multicast still has the probe's answers
		for _, a := range announced {
			u, err := url.Parse(a.Target)
			if err != nil {
				continue
			}
			h, p, err := net.SplitHostPort(u.Host)
			if err != nil {
				continue
			}
			port, err := strconv.Atoi(p)
			if err != nil {
				continue
			}
			found = append(found, directory.Probe(ctx, []string{h}, []int{port}, opt.Timeout)...)
		}
	}
	members, err := f.List()
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []directory.Card
	for _, c := range found {
		n := NormalizeTarget(c.Target)
		if seen[n] || inFleet(members, c.Target) {
			continue
		}
		seen[n] = true
		out = append(out, c)
	}
	return out, nil
}
