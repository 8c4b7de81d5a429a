// Package console serves the operator console: a device page for `mhp
// serve` and a lab page for `mhp serve-directory`, plain HTML, CSS and a
// small script embedded in the binary (no CDN, no build step) that talk to
// the server's own /rpc and /events like any other client, so every write,
// invoke and reset goes through the same gates (lease, approval, limits).
//
//	h, err := console.Device(console.Config{Server: srv, Metrics: m.Handler(token)})
//	h, err := console.Lab(console.LabConfig{Directory: dir.Handler(), EStopAll: pool.EStopAll, Token: token})
//
// Same origin: the transport refuses any request carrying an Origin header
// it was not told about (a web page must not drive a device on localhost).
// The console's own page does carry one, so the console lets through a
// request whose Origin is exactly the server it was sent to AND whose Host
// is an IP address, "localhost" or a name in Config.Hosts. A DNS rebinding
// page has a Host of the attacker's name, which is none of these, so it is
// still refused by the transport.
//
// The page holds no secret: GET / and the assets are public; every call it
// makes needs a credential when the server requires one: the browser's
// client certificate (mutual TLS), or a bearer token the page asks for only
// when GET /whoami says nobody is signed in (kept in sessionStorage, never
// in a URL). Every route, the page and /metrics included, is behind the
// server's guard (Config.Guard): the Host check, then authentication.
package console

import (
	"embed"
	"errors"
	"io/fs"
	"net/http"

	"github.com/openmhp/mhp-go/auth"
)

//go:embed web
var webFS embed.FS

// Server is what the console needs of the device's MHP server
// (*transport.Server): its HTTP handler and its front door.
type Server interface {
	Handler() http.Handler
	Guard(public func(*http.Request) bool) auth.Guard
}

// Config configures the device console.
type Config struct {
	// Server is the device's MHP server (*transport.Server). When set, the
	// console serves its handler (unless Transport is set too, e.g. the
	// handler wrapped in metrics) behind its guard (unless Guard is set):
	// the one way to mount a console that cannot lose the server's
	// credentials and roles.
	Server Server
	// Transport is the MHP HTTP handler (transport.Server.Handler): POST
	// /rpc, GET /events, DELETE /session, GET /mhp.json. Required unless
	// Server is set.
	Transport http.Handler
	// Metrics, when set, serves GET /metrics (it checks the token itself).
	Metrics http.Handler
	// Hosts lists host names, besides IP addresses and "localhost", under
	// which the console's page may call the server (e.g. the name a lab PC
	// is reached by on the LAN when serving on 0.0.0.0).
	Hosts []string
	// Guard is the server's front door (transport.Server.Guard): every
	// route, the page and /metrics included, is behind its Host check and
	// authentication; the page and its assets are public. Zero with
	// Server set: the server's guard. Zero without Server: the Host check
	// with Hosts and no credentials, and /whoami then names nobody even
	// when the transport behind requires credentials (its own guard still
	// checks every request, but the page shows no write controls): set
	// Server, or Guard to the transport's.
	Guard auth.Guard
}

// Validate reports a missing transport.
func (c Config) Validate() error {
	if c.Transport == nil && c.Server == nil {
		return errors.New("console: Config.Server (or Config.Transport) is required")
	}
	return nil
}

// resolved fills Transport and Guard from Server where they are unset.
func (c Config) resolved() Config {
	if c.Server == nil {
		return c
	}
	if c.Transport == nil {
		c.Transport = c.Server.Handler()
	}
	if c.Guard.Auth == nil && c.Guard.Hosts == nil && c.Guard.Public == nil && c.Guard.Refuse == nil {
		c.Guard = c.Server.Guard(nil)
	}
	return c
}

// Device returns the device console: GET / (the page), GET /console/* (its
// assets), GET /metrics when configured, and everything else to the
// transport, with the page's same-origin requests let through.
func Device(cfg Config) (http.Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.resolved()
	mux := http.NewServeMux()
	mountPages(mux, "device.html")
	if cfg.Metrics != nil {
		mux.Handle("GET /metrics", cfg.Metrics)
	}
	mux.Handle("/", sameOrigin(cfg.Hosts, cfg.Transport))
	return guarded(cfg.Guard, cfg.Hosts, mux), nil
}

// guarded puts the whole console behind g (the page and assets public,
// /whoami answered to whoever signed in).
func guarded(g auth.Guard, hosts []string, next http.Handler) http.Handler {
	if g.Auth == nil && g.Hosts == nil {
		g.Hosts = hosts
	}
	g.Public = isPage
	mux := http.NewServeMux()
	mux.HandleFunc("GET /whoami", whoami)
	mux.Handle("/", next)
	return g.Wrap(mux)
}

// isPage reports the console's public routes: the page and its assets, and
// /whoami (which says "nobody" to a request without a credential).
func isPage(r *http.Request) bool {
	p := r.URL.Path
	return r.Method == http.MethodGet && (p == "/" || p == "/whoami" || len(p) > len("/console/") && p[:len("/console/")] == "/console/")
}

// mountPages serves page at GET / (exactly) and the assets under /console/.
func mountPages(mux *http.ServeMux, page string) {
	sub, _ := fs.Sub(webFS, "web")
	assets := http.StripPrefix("/console/", http.FileServerFS(sub))
	mux.Handle("GET /console/", secure(assets))
	mux.Handle("GET /{$}", secure(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := fs.ReadFile(sub, page)
		if err != nil {
			http.Error(w, "page missing from the binary", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(b)
	})))
}

// secure sets the headers every console response carries: scripts and
// styles from this origin only, no framing (clickjacking of the estop or an
// approval), no MIME sniffing, no referrer.
func secure(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		next.ServeHTTP(w, r)
	})
}

// sameOrigin strips the Origin header of the console's own requests (see
// the package doc) before next sees them; any other Origin is left for
// next to judge.
func sameOrigin(hosts []string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if SameOrigin(r, hosts) {
			r = r.Clone(r.Context())
			r.Header.Del("Origin")
		}
		next.ServeHTTP(w, r)
	})
}

// SameOrigin reports whether r carries an Origin that is exactly the server
// it was sent to, under a trusted host: an IP address, "localhost", or one
// of hosts (compared case-insensitively).
func SameOrigin(r *http.Request, hosts []string) bool {
	origin := r.Header.Get("Origin")
	if origin == "" || r.Host == "" {
		return false
	}
	scheme := "http://"
	if r.TLS != nil {
		scheme = "https://"
	}
	if origin != scheme+r.Host {
		return false
	}
	return TrustedHost(r.Host, hosts)
}

// TrustedHost reports whether a Host header is an IP address, localhost, or
// one of hosts: a name a rebinding attacker cannot have chosen.
// It is auth.HostAllowed, the one rule every server applies, except that an
// empty Host is not trusted here.
func TrustedHost(hostport string, hosts []string) bool {
	return hostport != "" && auth.HostAllowed(hostport, hosts)
}
