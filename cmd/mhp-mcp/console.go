package main

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/auth"
	"github.com/openmhp/mhp-go/client"
	"github.com/openmhp/mhp-go/console"
	"github.com/openmhp/mhp-go/directory"
	"github.com/openmhp/mhp-go/host"
	"github.com/openmhp/mhp-go/transport"
)

// The fleet console (--console ADDR): the lab page of the devices this
// process hosts, and under /devices/ID/ each one's device console (state,
// signals, settings, jobs with the operator's prompts and answers, estop)
// over a transport.Server around the very device the agent drives: the
// same lease, jobs and operator prompts, not a second instance. Who a
// request is is decided by the same authenticator as --http (token,
// credentials, client certificates); the transport's role rules apply as
// on `mhp serve` (operator/answer needs the operator role).

// consoleSweep is how often the console drops the device consoles of
// devices removed from the fleet or rebuilt (their streams end).
const consoleSweep = 2 * time.Second

// consoleEStopAll bounds the lab page's estop-all.
const consoleEStopAll = 10 * time.Second

// consoleListening, when set (tests), is told the console's URL once it listens.
var consoleListening func(url string)

// consoleConfig is what the fleet console is built from.
type consoleConfig struct {
	Fleet *host.Fleet
	// Auth is mhp-mcp's authenticator (nil: no credentials required).
	Auth *auth.Authenticator
	// TLS serves HTTPS when set.
	TLS *tls.Config
	// Hosts are host names trusted besides IP addresses and localhost.
	Hosts []string
	Log   *slog.Logger
	// Sweep overrides consoleSweep (tests).
	Sweep time.Duration
}

// fleetConsole serves the lab page and the hosted devices' consoles.
type fleetConsole struct {
	cfg   consoleConfig
	guard auth.Guard
	pages http.Handler // the device page for a request without a credential
	lab   http.Handler

	mu     sync.Mutex
	devs   map[string]*deviceConsole // by fleet id: at most one per hosted entry
	closed bool
}

// deviceConsole is the console of one run of a hosted device.
type deviceConsole struct {
	target string
	inst   host.Instance
	srv    *transport.Server
	h      http.Handler
}

// startConsole listens on addr and serves the fleet console until ctx ends
// or the returned stop is called (which waits for the server to end).
func startConsole(ctx context.Context, addr string, cfg consoleConfig) (stop func(), err error) {
	c, err := newFleetConsole(cfg)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		c.close()
		return nil, err
	}
	scheme := "http"
	if cfg.TLS != nil {
		scheme = "https"
	}
	url := scheme + "://" + ln.Addr().String() + "/"
	if !cfg.Auth.Required() {
		cfg.Log.Warn("mhp-mcp console without credentials: anyone who reaches the address can drive the hosted devices", "url", url)
	}
	cfg.Log.Info("mhp-mcp console serving", "url", url, "credentials", cfg.Auth.Required(), "tls", cfg.TLS != nil)
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	swept := make(chan struct{})
	go func() { defer close(swept); c.sweep(cctx) }()
	go func() {
		defer close(done)
		err := transport.Serve(cctx, ln, c.handler(), transport.ServeOptions{TLS: cfg.TLS, Logger: cfg.Log})
		if err != nil && !errors.Is(err, context.Canceled) {
			cfg.Log.Error("mhp-mcp console stopped", "err", err)
		}
		cancel()
		<-swept
		c.close()
	}()
	if consoleListening != nil {
		consoleListening(url)
	}
	return func() { cancel(); <-done }, nil
}

func newFleetConsole(cfg consoleConfig) (*fleetConsole, error) {
	if cfg.Fleet == nil {
		return nil, errors.New("--console serves the fleet's hosted devices: give no targets and no --directory")
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Sweep <= 0 {
		cfg.Sweep = consoleSweep
	}
	c := &fleetConsole{cfg: cfg, devs: map[string]*deviceConsole{}}
	c.guard = auth.Guard{Auth: cfg.Auth, Hosts: cfg.Hosts, Logger: cfg.Log, Public: isDevicePage}
	// The page alone, for a browser that has not signed in yet: it learns
	// who it is from whoami (nobody) and asks for the token, and no device
	// is looked up for it (an id's existence is not told to strangers).
	pages, err := console.Device(console.Config{Transport: http.NotFoundHandler(), Guard: c.guard, Hosts: cfg.Hosts})
	if err != nil {
		return nil, err
	}
	c.pages = pages
	lab, err := console.Lab(console.LabConfig{
		Directory:    http.HandlerFunc(c.serveDirectory),
		EStopAll:     c.estopAll,
		Guard:        auth.Guard{Auth: cfg.Auth, Hosts: cfg.Hosts, Logger: cfg.Log},
		Hosts:        cfg.Hosts,
		EStopTimeout: consoleEStopAll,
	})
	if err != nil {
		return nil, err
	}
	c.lab = lab
	return c, nil
}

// handler routes /devices/ID/… to the device's console and the rest to the lab page.
func (c *fleetConsole) handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/devices/{id}/", c.guard.Wrap(http.HandlerFunc(c.serveDevice)))
	mux.HandleFunc("GET /devices/{id}", func(w http.ResponseWriter, r *http.Request) {
		if host.ValidID(r.PathValue("id")) != nil {
			http.NotFound(w, r)
			return
		}
		http.Redirect(w, r, "/devices/"+r.PathValue("id")+"/", http.StatusMovedPermanently) // the page's paths are relative
	})
	mux.Handle("/", c.lab)
	return mux
}

// isDevicePage reports a device console's public routes: its page and
// whoami (the assets are the lab's, under /console/).
func isDevicePage(r *http.Request) bool {
	if r.Method != http.MethodGet {
		return false
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/devices/")
	if !ok {
		return false
	}
	_, sub, ok := strings.Cut(rest, "/")
	return ok && (sub == "" || sub == "whoami")
}

func (c *fleetConsole) serveDevice(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	prefix := "/devices/" + id
	if _, ok := auth.FromContext(r.Context()); !ok { // a public route, no credential
		http.StripPrefix(prefix, c.pages).ServeHTTP(w, r)
		return
	}
	dc, status, e := c.device(r.Context(), id)
	if e != nil {
		auth.WriteRefusal(w, r, status, e)
		return
	}
	http.StripPrefix(prefix, dc.h).ServeHTTP(w, r)
}

// device returns the console of the fleet's hosted device id, building it
// (and starting the device, as the agent's first call would) when the
// device is not yet served or was rebuilt since.
func (c *fleetConsole) device(ctx context.Context, id string) (*deviceConsole, int, *mhp.Error) {
	c.mu.Lock()
	dc := c.devs[id]
	c.mu.Unlock()
	if dc != nil {
		if _, inst := c.cfg.Fleet.Running(dc.target); inst == dc.inst {
			return dc, 0, nil
		}
	}
	if err := host.ValidID(id); err != nil {
		return nil, http.StatusNotFound, mhp.Errorf(mhp.CodeUnknownName, "no device %q in this host's fleet", mhp.Truncate(id, 80))
	}
	e, err := c.cfg.Fleet.Entry(id)
	if err != nil {
		c.drop(id, nil)
		return nil, http.StatusNotFound, mhp.Errorf(mhp.CodeUnknownName, "no device %q in this host's fleet (mhp_lab list names them)", id).
			With(mhp.DataField, "id")
	}
	if !host.IsHosted(e.Target) {
		c.drop(id, nil)
		return nil, http.StatusNotFound, mhp.Errorf(mhp.CodeUnknownName, "%s is not hosted by this process: its own server (%s) serves its console",
			id, mhp.Truncate(e.Target, 200)).With(mhp.DataField, "id")
	}
	if _, err := c.cfg.Fleet.Hosted(ctx, e.Target); err != nil {
		me, ok := mhp.AsError(err)
		if !ok {
			me = mhp.Errorf(mhp.CodeServerError, "hosting %s: %v", id, err).With(mhp.DataReason, "unreachable")
		}
		return nil, http.StatusServiceUnavailable, me
	}
	dev, inst := c.cfg.Fleet.Running(e.Target)
	if dev == nil {
		return nil, http.StatusServiceUnavailable, mhp.Errorf(mhp.CodeServerError, "%s stopped while its console was opened (removed or reloaded); try again", id).
			With(mhp.DataReason, "unreachable")
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, http.StatusServiceUnavailable, mhp.Errorf(mhp.CodeServerError, "the console is closing")
	}
	old := c.devs[id]
	if old != nil && old.inst == inst && old.target == e.Target { // another request built it meanwhile
		c.mu.Unlock()
		return old, 0, nil
	}
	srv := transport.NewServer(dev, transport.Options{Auth: c.cfg.Auth, AllowedHosts: c.cfg.Hosts, Logger: c.cfg.Log})
	h, err := console.Device(console.Config{Server: srv, Hosts: c.cfg.Hosts})
	if err != nil {
		c.mu.Unlock()
		srv.Close()
		return nil, http.StatusInternalServerError, mhp.Errorf(mhp.CodeInternal, "console of %s: %v", id, err)
	}
	dc = &deviceConsole{target: e.Target, inst: inst, srv: srv, h: h}
	c.devs[id] = dc
	c.mu.Unlock()
	if old != nil {
		old.srv.Close() // the earlier run's streams end; its page reconnects to this one
	}
	return dc, 0, nil
}

// drop closes and forgets the console of id (when it is still was, or any
// console of id when was is nil).
func (c *fleetConsole) drop(id string, was *deviceConsole) {
	c.mu.Lock()
	dc := c.devs[id]
	if dc == nil || (was != nil && dc != was) {
		c.mu.Unlock()
		return
	}
	delete(c.devs, id)
	c.mu.Unlock()
	dc.srv.Close()
}

// sweep drops, every Sweep until ctx ends, the consoles of devices that are
// no longer the fleet's (removed, by this process or another) or no longer
// run as the console knows them (rebuilt, stopped), so their streams end
// and nothing is kept for a device that is gone.
func (c *fleetConsole) sweep(ctx context.Context) {
	t := time.NewTicker(c.cfg.Sweep)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.sweepOnce()
	}
}

func (c *fleetConsole) sweepOnce() {
	c.mu.Lock()
	none := len(c.devs) == 0
	c.mu.Unlock()
	if none { // nothing open: the fleet file is not read
		return
	}
	list, err := c.cfg.Fleet.List()
	if err != nil {
		c.cfg.Log.Warn("console: the fleet file does not read; keeping the open consoles", "err", err)
		return
	}
	targets := make(map[string]string, len(list))
	for _, e := range list {
		targets[e.ID] = e.Target
	}
	c.mu.Lock()
	open := make(map[string]*deviceConsole, len(c.devs))
	for id, dc := range c.devs {
		open[id] = dc
	}
	c.mu.Unlock()
	for id, dc := range open {
		_, inst := c.cfg.Fleet.Running(dc.target)
		if targets[id] != dc.target || inst != dc.inst {
			c.drop(id, dc)
		}
	}
}

// close ends every device console.
func (c *fleetConsole) close() {
	c.mu.Lock()
	devs := c.devs
	c.devs, c.closed = map[string]*deviceConsole{}, true
	c.mu.Unlock()
	for _, dc := range devs {
		dc.srv.Close()
	}
}

// hostedEntries are the fleet's entries this process hosts.
func (c *fleetConsole) hostedEntries() ([]host.Entry, error) {
	list, err := c.cfg.Fleet.List()
	if err != nil {
		return nil, err
	}
	out := list[:0]
	for _, e := range list {
		if host.IsHosted(e.Target) {
			out = append(out, e)
		}
	}
	return out, nil
}

// serveDirectory answers the lab page's directory/search over the hosted
// devices as the fleet file holds them now (a device the agent added a
// moment ago is listed, a removed one is not), each card's target the URL
// of its console on this server, its state from a ping of the hosted device.
func (c *fleetConsole) serveDirectory(w http.ResponseWriter, r *http.Request) {
	list, err := c.hostedEntries()
	if err != nil {
		auth.WriteRefusal(w, r, http.StatusServiceUnavailable, mhp.Errorf(mhp.CodeServerError, "the fleet file does not read: %v", err))
		return
	}
	scheme := "http://"
	if r.TLS != nil {
		scheme = "https://"
	}
	fleetTarget := make(map[string]string, len(list))
	cards := make([]directory.Card, 0, len(list))
	for _, e := range list {
		card := e.DirectoryCard()
		card.Target = scheme + r.Host + "/devices/" + e.ID + "/"
		fleetTarget[card.Target] = e.Target
		cards = append(cards, card)
	}
	ping := func(ctx context.Context, target string) (mhp.DeviceState, error) {
		return c.cfg.Fleet.Ping(ctx, fleetTarget[target])
	}
	n := max(len(cards), 1)
	d, err := directory.New(directory.Config{Index: directory.NewIndex(cards), Pinger: directory.PingerFunc(ping),
		DefaultLimit: n, MaxLimit: max(n, 200), MaxPings: max(n, 256)})
	if err != nil {
		auth.WriteRefusal(w, r, http.StatusInternalServerError, mhp.Errorf(mhp.CodeInternal, "lab directory: %v", err))
		return
	}
	d.Handler().ServeHTTP(w, r)
}

// estopAll stops every hosted device that runs, in parallel (at most 32 at
// once); a device not started holds nothing to stop and is not listed.
func (c *fleetConsole) estopAll(ctx context.Context, reason string) []console.EStopAnswer {
	list, err := c.hostedEntries()
	if err != nil {
		return []console.EStopAnswer{{Target: "fleet", Error: "the fleet file does not read: " + err.Error()}}
	}
	type running struct {
		e   host.Entry
		dev mhp.Device
	}
	var devs []running
	for _, e := range list {
		if dev, _ := c.cfg.Fleet.Running(e.Target); dev != nil {
			devs = append(devs, running{e, dev})
		}
	}
	out := make([]console.EStopAnswer, len(devs))
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for i, d := range devs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			start := time.Now()
			a := console.EStopAnswer{Target: "/devices/" + d.e.ID + "/", ID: d.e.ID}
			res, err := d.dev.EStop(mhp.WithSession(ctx, "lab-console"), reason)
			if err != nil {
				a.Error = err.Error()
			} else {
				a.State, a.Stopped, a.Pending, a.Cancel, a.Error = string(res.State), res.Stopped, res.StopPending, client.EStopJobs(res), res.StopError
			}
			a.Seconds = time.Since(start).Seconds()
			out[i] = a
			c.cfg.Log.Warn("console estop-all", "device", d.e.ID, "state", a.State, "stopped", a.Stopped, "err", a.Error, "took", time.Since(start))
		}()
	}
	wg.Wait()
	return out
}

// consoleHosts are the host names besides IP addresses and localhost the
// console is served under while no credential is required: the listen
// host when it names one (DNS rebinding guard, auth.HostAllowed).
func consoleHosts(addr string) []string {
	h, _, err := net.SplitHostPort(transport.LoopbackDefault(addr))
	if err != nil || h == "" || net.ParseIP(h) != nil {
		return nil
	}
	return []string{h}
}
