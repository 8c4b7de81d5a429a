package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/client"
	"github.com/openmhp/mhp-go/directory"
	"github.com/openmhp/mhp-go/metrics"
	"github.com/openmhp/mhp-go/transport"
)

// DefaultDirectoryAddr is where `mhp serve-directory` listens without --http.
const DefaultDirectoryAddr = "127.0.0.1:18900"

var directoryFlags = mergeFlags(flagSpec{"http": true, "probe": true, "browse": false, "log-format": true, "allow-host": true}, trustFlags)

// serveDirectoryCmd runs `mhp serve-directory MANIFEST [--http ADDR] [--probe HOST,...] [--browse]`.
func (a *app) serveDirectoryCmd(ctx context.Context, args []string) int {
	p, err := parseArgs(args, directoryFlags)
	if err != nil {
		return a.usageError("serve-directory: %v", err)
	}
	if len(p.args) > 1 || (len(p.args) == 0 && !p.has("probe") && !p.has("browse")) {
		return a.usageError("serve-directory: usage: mhp serve-directory [MANIFEST] [--http ADDR] [--probe HOST,...] [--browse]")
	}
	token, err := a.token(p)
	if err != nil {
		return a.usageError("serve-directory: %v", err)
	}
	log, err := newLogger(a.stderr, p, slog.LevelInfo)
	if err != nil {
		return a.usageError("serve-directory: %v", err)
	}
	trust, err := serverTrustOf(p, token, "", log)
	if err != nil {
		return a.usageError("serve-directory: %v", err)
	}
	addr := DefaultDirectoryAddr
	if v := p.flags["http"]; v != "" {
		addr = v
	}
	// The same rule as serve: estop-all stops every device the directory knows.
	if err := trust.check("serve-directory --http", addr, p.has("insecure"), log); err != nil {
		return a.usageError("%v", err)
	}
	ctls, err := a.clientTLS(p) // how the directory reaches the devices it indexes, pings and stops
	if err != nil {
		return a.usageError("serve-directory: %v", err)
	}
	pool := &connPool{opts: client.Options{ClientName: "mhp-directory", Token: token, TLS: ctls, Logger: a.quietLogger()}, conns: map[string]*client.Device{}}
	defer pool.close()
	idx := directory.NewIndex(nil)
	var targets []string
	if len(p.args) == 1 {
		m, err := directory.LoadManifest(p.args[0])
		if err != nil {
			fmt.Fprintf(a.stderr, "mhp serve-directory: %v\n", err)
			return exitRefused
		}
		for _, c := range m.Devices {
			idx.Add(c)
		}
		targets = append(targets, m.Targets...)
	}
	// Probing, browsing and crawling run in the background, so the directory
	// listens at once; cards appear as devices answer (a slow target delays
	// only its own card). Targets from a manifest, probes or mDNS are never
	// started as commands (directory.Crawl refuses stdio:).
	var crawl sync.WaitGroup
	defer crawl.Wait()
	cctx, stopCrawl := context.WithCancel(ctx)
	defer stopCrawl()
	pending := len(targets)
	crawl.Add(1)
	go func() {
		defer crawl.Done()
		if hosts := p.flags["probe"]; hosts != "" {
			for _, c := range directory.Probe(cctx, strings.Split(hosts, ","), directory.Ports(), time.Second) {
				idx.Add(c)
			}
		}
		if p.has("browse") {
			found, err := directory.BrowseWith(cctx, directory.BrowseOptions{Timeout: 2 * time.Second, Logger: a.quietLogger()})
			if err != nil {
				fmt.Fprintf(a.stderr, "mhp serve-directory: mDNS browse: %v\n", err)
			}
			for _, f := range found {
				targets = append(targets, f.Target)
			}
		}
		for _, r := range directory.Crawl(cctx, idx, pool, targets) {
			if r.Err != nil {
				fmt.Fprintf(a.stderr, "mhp serve-directory: %s: not indexed: %v\n", mhp.Truncate(r.Target, 200), r.Err)
			}
		}
	}()
	dir, err := directory.New(directory.Config{Index: idx, Pinger: pool})
	if err != nil {
		fmt.Fprintf(a.stderr, "mhp serve-directory: %v\n", err)
		return exitUsage
	}
	ln, err := transport.Listen(addr)
	if err != nil {
		fmt.Fprintf(a.stderr, "mhp serve-directory: %v\n", err)
		return exitNoPeer
	}
	trust.reloadOnHangup(ctx, log)
	url := trust.scheme() + "://" + ln.Addr().String()
	fmt.Fprintf(a.stderr, "mhp: directory of %d devices on %s (POST /rpc: directory/search, directory/get); %d manifest targets being crawled\n", idx.Len(), url, pending)
	if a.ready != nil {
		a.ready([]string{url})
	}
	h, err := labHandler(dir, pool, metrics.New(metrics.Config{}), trust.auth, addr, p.flags["allow-host"], log)
	if err != nil {
		fmt.Fprintf(a.stderr, "mhp serve-directory: %v\n", err)
		return exitUsage
	}
	if err := transport.Serve(ctx, ln, h, transport.ServeOptions{TLS: trust.tlsConfig(), Logger: log}); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(a.stderr, "mhp serve-directory: %v\n", err)
		return exitNoPeer
	}
	return exitOK
}

// connPool keeps one client connection per device target for the
// directory's cards and pings; a connection that fails is dropped and
// redialled on the next ping.
type connPool struct {
	opts  client.Options
	mu    sync.Mutex
	conns map[string]*client.Device
}

func (p *connPool) get(ctx context.Context, target string) (*client.Device, error) {
	p.mu.Lock()
	d, ok := p.conns[target]
	p.mu.Unlock()
	if ok {
		return d, nil
	}
	d, err := client.Dial(ctx, target, p.opts)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if prev, ok := p.conns[target]; ok {
		d.Close()
		return prev, nil
	}
	p.conns[target] = d
	return d, nil
}

func (p *connPool) drop(target string, d *client.Device) {
	p.mu.Lock()
	if p.conns[target] == d {
		delete(p.conns, target)
	}
	p.mu.Unlock()
	d.Close()
}

// DescribeCard implements directory.Describer.
func (p *connPool) DescribeCard(ctx context.Context, target string) (*mhp.Description, error) {
	d, err := p.get(ctx, target)
	if err != nil {
		return nil, err
	}
	desc, err := d.Describe(ctx, mhp.DescribeRequest{Detail: mhp.DetailCard})
	if err != nil {
		p.drop(target, d)
	}
	return desc, err
}

// Ping implements directory.Pinger.
func (p *connPool) Ping(ctx context.Context, target string) (mhp.DeviceState, error) {
	d, err := p.get(ctx, target)
	if err != nil {
		return "", err
	}
	res, err := d.Ping(ctx)
	if err != nil {
		p.drop(target, d)
		return "", err
	}
	return res.State, nil
}

func (p *connPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for t, d := range p.conns {
		d.Close()
		delete(p.conns, t)
	}
}
