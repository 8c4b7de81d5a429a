package auth

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/openmhp/mhp-go"
)

// ReasonHostForbidden is data.reason of a request whose Host header names a
// host the server was not told about (the DNS rebinding guard).
const ReasonHostForbidden = "host_forbidden"

// HostAllowed is the DNS rebinding rule every server applies to every
// route: a Host that is empty (HTTP/1.0), an IP literal, localhost (or
// *.localhost), or one of hosts (with or without its port, any case)
// passes. A rebinding page has a Host of the attacker's own name, none of
// these.
func HostAllowed(hostport string, hosts []string) bool {
	if hostport == "" {
		return true
	}
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	lower := strings.ToLower(strings.TrimSuffix(host, "."))
	if lower == "localhost" || strings.HasSuffix(lower, ".localhost") {
		return true
	}
	for _, a := range hosts {
		if a != "" && (strings.EqualFold(a, hostport) || strings.EqualFold(strings.TrimSuffix(a, "."), lower)) {
			return true
		}
	}
	return false
}

// Guard is the front door of an HTTP server, the same for every server
// (device transport, directory, console, metrics, MCP bridge): the Host
// check, then authentication, then the identity in the request's context
// for everything behind it.
type Guard struct {
	// Auth decides who a request is; nil requires nothing (every request is
	// [Anonymous]).
	Auth *Authenticator
	// Hosts are the host names served besides IP literals and localhost
	// while no credential is required (with one, any name is served: a
	// rebinding page holds no credential).
	Hosts []string
	// Public reports the routes served without a credential (a console's
	// page and assets, a public descriptor); nil: none. They still get the
	// Host check, and the identity when one was presented.
	Public func(r *http.Request) bool
	// Refuse writes a refusal; default a JSON-RPC error frame with id null.
	Refuse func(w http.ResponseWriter, r *http.Request, status int, e *mhp.Error)
	// Logger receives one line per refusal; default slog.Default().
	Logger *slog.Logger
}

// Wrap returns next behind the guard. A request an outer guard with the
// same authenticator let in is not checked again; one let in by a guard
// with another (or none) is: an open console in front of a transport with
// credentials does not open the transport.
func (g Guard) Wrap(next http.Handler) http.Handler {
	g = g.withDefaults()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, inCtx, ok := g.admit(w, r)
		if !ok {
			return
		}
		if p != nil && !inCtx {
			r = r.WithContext(context.WithValue(r.Context(), identityKey{}, p))
		}
		next.ServeHTTP(w, r)
	})
}

// Admit is the guard without a handler behind it, for a server that passes
// the identity along its own call path rather than in a copy of the
// request: ok false means r was refused (the refusal is written); else r
// is served as p, which is nil for a public route served to a request
// without a valid credential. Give p to the handlers behind with
// [WithPass].
func (g Guard) Admit(w http.ResponseWriter, r *http.Request) (p *Pass, ok bool) {
	p, _, ok = g.withDefaults().admit(w, r)
	return p, ok
}

func (g Guard) withDefaults() Guard {
	if g.Refuse == nil {
		g.Refuse = WriteRefusal
	}
	if g.Logger == nil {
		g.Logger = slog.Default()
	}
	return g
}

// openPass is the pass of every request a guard without credentials lets
// in (Anonymous, decided by no authenticator): shared, no allocation.
var openPass = &Pass{id: Anonymous, guarded: true}

// admit checks r; inCtx reports that p came from r's context (an outer
// guard with the same authenticator decided).
func (g Guard) admit(w http.ResponseWriter, r *http.Request) (p *Pass, inCtx, ok bool) {
	if p := PassFrom(r.Context()); p != nil && p.guarded && p.by == g.Auth {
		return p, true, true // an outer guard with the same authenticator decided
	}
	if !g.Auth.Required() && !HostAllowed(r.Host, g.Hosts) {
		g.Logger.Warn("http request for a foreign host refused", "host", mhp.Truncate(r.Host, 256), "path", r.URL.Path, "remote", r.RemoteAddr)
		name := r.Host
		if h, _, err := net.SplitHostPort(name); err == nil {
			name = h
		}
		g.Refuse(w, r, http.StatusForbidden, mhp.Errorf(mhp.CodeServerError,
			"host %q is not allowed: use an IP address or localhost, or list the name in the server's allowed hosts (--allow-host %s; DNS rebinding guard)",
			mhp.Truncate(r.Host, 256), mhp.Truncate(name, 256)).With(mhp.DataReason, ReasonHostForbidden))
		return nil, false, false
	}
	if g.Auth == nil {
		return openPass, false, true
	}
	id, err := g.Auth.Authenticate(r)
	if err != nil {
		if g.Public != nil && g.Public(r) {
			return nil, false, true
		}
		g.Logger.Info("http request unauthorized", "path", r.URL.Path, "remote", r.RemoteAddr, "err", err)
		w.Header().Set("WWW-Authenticate", `Bearer realm="mhp"`)
		e, _ := mhp.AsError(err)
		g.Refuse(w, r, http.StatusUnauthorized, e)
		return nil, false, false
	}
	return &Pass{id: id, by: g.Auth, guarded: true}, false, true
}

// WriteRefusal writes e as a JSON-RPC error frame with id null and status.
func WriteRefusal(w http.ResponseWriter, _ *http.Request, status int, e *mhp.Error) {
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": e})
	if err != nil {
		b = []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"refusal not serialisable"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// Require wraps next so that only a request whose context carries an
// identity (authenticated by a [Guard] in front) of at least role need is
// served: 401 without one, 403 with a role below need.
func Require(need Role, what string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := FromContext(r.Context())
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="mhp"`)
			WriteRefusal(w, r, http.StatusUnauthorized, unauthorized(what+" needs an authenticated identity"))
			return
		}
		if e := Authorize(id, what, need); e != nil {
			WriteRefusal(w, r, http.StatusForbidden, e)
			return
		}
		next.ServeHTTP(w, r)
	})
}
