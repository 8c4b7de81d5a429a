package client

import (
	"crypto/tls"
	"net/http"
	"time"

	"github.com/openmhp/mhp-go/auth"
)

// newTransport is the HTTP transport of every client connection: keep-alive
// connections pooled per host (so a TLS handshake is paid once per
// connection, not per request), tls as given (nil: the system's roots).
func newTransport(tc *tls.Config) *http.Transport {
	return &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		TLSClientConfig:     tc,
		TLSHandshakeTimeout: 10 * time.Second,
	}
}

// tlsHTTPClient builds the HTTP client of [Options.TLS].
func tlsHTTPClient(c auth.ClientTLS) (*http.Client, error) {
	tc, err := c.Config()
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: newTransport(tc)}, nil
}

// HTTPClient returns an HTTP client that checks servers and shows this
// client as c says (for callers outside this package that speak HTTP to the
// same servers: directory pings, metrics scrapes).
func HTTPClient(c auth.ClientTLS, timeout time.Duration) (*http.Client, error) {
	hc, err := tlsHTTPClient(c)
	if err != nil {
		return nil, err
	}
	hc.Timeout = timeout
	return hc, nil
}
