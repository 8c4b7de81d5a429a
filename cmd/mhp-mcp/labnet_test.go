package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openmhp/mhp-go/auth"
	"github.com/openmhp/mhp-go/auth/authtest"
)

// TestHTTPBeyondLoopbackNeedsTLSAndCredentials: the same exposure rule as
// mhp serve; with TLS and a credentials file the bridge starts beyond
// loopback, an MCP client with a named token connects over HTTPS, and a
// client without one is refused.
func TestHTTPBeyondLoopbackNeedsTLSAndCredentials(t *testing.T) {
	_, dev := simDevice(t)
	err := run(context.Background(), []string{"--http", "0.0.0.0:0", "thermo=" + dev.URL}, nil, io.Discard, io.Discard, nil)
	if err == nil || !strings.Contains(err.Error(), "without TLS") || !strings.Contains(err.Error(), "--insecure") {
		t.Fatalf("--http 0.0.0.0 without TLS: %v", err)
	}
	lab := authtest.NewLab(t)
	cert, key := lab.Files(t, "bridge", []string{"127.0.0.1"}, false)
	creds := authtest.Credentials(t, t.TempDir(), "claude=agent:claude-token-1")
	u := serveHTTP(t, "--http", "0.0.0.0:0", "--tls-cert", cert, "--tls-key", key, "--credentials", creds, "thermo="+dev.URL)
	if !strings.HasPrefix(u, "https://") {
		t.Fatalf("bridge URL %s", u)
	}
	u = "https://127.0.0.1:" + u[strings.LastIndex(u, ":")+1:]
	tc, err := auth.ClientTLS{CAFile: lab.CAFile}.Config()
	if err != nil {
		t.Fatal(err)
	}
	hc := func(token string) *http.Client {
		return &http.Client{Transport: bearerTLS{token, &http.Transport{TLSClientConfig: tc}}}
	}
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: u, HTTPClient: hc("claude-token-1")}, nil)
	if err != nil {
		t.Fatalf("connect with a named token over HTTPS: %v", err)
	}
	cs.Close()
	resp, err := hc("").Post(u, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no credential: HTTP %d, want 401", resp.StatusCode)
	}
	metrics := strings.TrimSuffix(u, "/mcp") + "/metrics"
	if resp, err := hc("").Get(metrics); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("/metrics without a credential: %v %v", resp, err)
	}
}

// TestHostCheckOnBridgeRoutes: without credentials (loopback) both routes
// refuse a foreign Host.
func TestHostCheckOnBridgeRoutes(t *testing.T) {
	_, dev := simDevice(t)
	u := serveHTTP(t, "--http", "127.0.0.1:0", "thermo="+dev.URL)
	for _, path := range []string{"/mcp", "/metrics"} {
		req, _ := http.NewRequest(http.MethodGet, strings.TrimSuffix(u, "/mcp")+path, nil)
		req.Host = "evil.example"
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s with Host evil.example: %d, want 403", path, resp.StatusCode)
		}
	}
}

// bearerTLS adds a bearer token (when not empty) over its transport.
type bearerTLS struct {
	token string
	rt    http.RoundTripper
}

func (b bearerTLS) RoundTrip(r *http.Request) (*http.Response, error) {
	if b.token != "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return b.rt.RoundTrip(r)
}
