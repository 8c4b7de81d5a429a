package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/openmhp/mhp-go/auth"
	"github.com/openmhp/mhp-go/client"
)

// trustFlags are the TLS and credential flags of every server command
// (serve, serve-directory, demo).
var trustFlags = flagSpec{"tls-cert": true, "tls-key": true, "client-ca": true, "credentials": true, "insecure": false}

// serverTrust is a server command's TLS configuration and authenticator,
// built once from its flags.
type serverTrust struct {
	tls  *auth.ServerTLS     // nil: plain HTTP
	auth *auth.Authenticator // nil: no credentials (loopback behaviour)
}

// serverTrustOf reads --tls-cert, --tls-key, --client-ca and --credentials,
// with the legacy token and operator token (--token-file,
// --operator-token-file) as one agent and one operator identity.
func serverTrustOf(p parsed, token, opToken string, log *slog.Logger) (serverTrust, error) {
	var t serverTrust
	tc := auth.ServerTLSConfig{CertFile: p.flags["tls-cert"], KeyFile: p.flags["tls-key"], ClientCAFile: p.flags["client-ca"], Logger: log}
	if err := tc.Validate(); err != nil {
		return t, err
	}
	if tc.Enabled() {
		st, err := auth.NewServerTLS(tc)
		if err != nil {
			return t, err
		}
		t.tls = st
	}
	ac := auth.Config{CredentialsFile: p.flags["credentials"], Token: token, OperatorToken: opToken, ClientCerts: t.tls.MutualTLS(), Logger: log}
	if ac.CredentialsFile != "" || ac.Token != "" || ac.OperatorToken != "" || ac.ClientCerts {
		a, err := auth.New(ac)
		if err != nil {
			return t, err
		}
		t.auth = a
	}
	return t, nil
}

// tlsConfig is the server's tls.Config, nil for plain HTTP.
func (t serverTrust) tlsConfig() *tls.Config {
	if t.tls == nil {
		return nil
	}
	return t.tls.Config()
}

// scheme is "https" or "http".
func (t serverTrust) scheme() string {
	if t.tls != nil {
		return "https"
	}
	return "http"
}

// check applies the exposure rule (auth.CheckExposure) to addr.
func (t serverTrust) check(command, addr string, insecure bool, log *slog.Logger) error {
	if err := auth.CheckExposure(command, addr, t.tls != nil, t.auth.Required(), insecure); err != nil {
		return err
	}
	if auth.BeyondLoopback(addr) && (t.tls == nil || !t.auth.Required()) {
		log.Warn("serving beyond this machine without TLS and credentials (--insecure): anyone who can reach it can see or drive what it serves", "addr", addr)
	}
	return nil
}

// reloadOnHangup re-reads the certificate and the credentials file on each
// SIGHUP until ctx ends (they are also re-read when their files change).
func (t serverTrust) reloadOnHangup(ctx context.Context, log *slog.Logger) {
	auth.ReloadOnHangup(ctx, log, t.tls, t.auth)
}

// clientTLS reads the client side's flags and environment: --ca FILE
// (MHP_CA), --pin sha256:HEX, --client-cert F and --client-key F
// (MHP_CLIENT_CERT, MHP_CLIENT_KEY).
func (a *app) clientTLS(p parsed) (auth.ClientTLS, error) {
	env := func(k string) string {
		if a.getenv == nil {
			return ""
		}
		return a.getenv(k)
	}
	pick := func(flag, key string) string {
		if v, ok := p.flags[flag]; ok {
			return v
		}
		return env(key)
	}
	c := auth.ClientTLS{CAFile: pick("ca", "MHP_CA"), Pin: p.flags["pin"], CertFile: pick("client-cert", "MHP_CLIENT_CERT"),
		KeyFile: pick("client-key", "MHP_CLIENT_KEY")}
	if _, err := c.Config(); err != nil { // refuse a bad file or pin before dialling
		return c, fmt.Errorf("client TLS: %w", err)
	}
	return c, nil
}

// tlsHTTPClient is the HTTP client of the client TLS flags for the raw wire
// peer (rpc, conformance); nil (its default) when none is given.
func (a *app) tlsHTTPClient(p parsed) (*http.Client, error) {
	c, err := a.clientTLS(p)
	if err != nil || c.IsZero() {
		return nil, err
	}
	return client.HTTPClient(c, 0)
}
