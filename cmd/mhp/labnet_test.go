package main

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go/auth"
)

// labCerts runs the three commands of the README: a lab CA, a server
// certificate for 127.0.0.1 and localhost, a client certificate for alice.
func labCerts(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "lab-ca")
	for _, args := range [][]string{{"certs", "init", dir}, {"certs", "issue", dir, "bench-pc", "--host", "127.0.0.1,localhost"},
		{"certs", "issue", dir, "alice", "--client"}} {
		if r := runCLI(t, args...); r.code != exitOK {
			t.Fatalf("mhp %v: %d %s", args, r.code, r.stderr)
		}
	}
	return dir
}

func TestCertsCommands(t *testing.T) {
	dir := labCerts(t)
	for _, key := range []string{"ca-key.pem", "bench-pc-key.pem", "alice-key.pem"} {
		st, err := os.Stat(filepath.Join(dir, key))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v mode %v, want 0600", key, err, st.Mode())
		}
	}
	b, _ := os.ReadFile(filepath.Join(dir, "bench-pc.pem"))
	blk, _ := pem.Decode(b)
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if len(cert.IPAddresses) != 1 || !cert.IPAddresses[0].Equal(net.ParseIP("127.0.0.1")) || len(cert.DNSNames) != 1 || cert.DNSNames[0] != "localhost" ||
		cert.NotAfter.Sub(cert.NotBefore) > 400*24*time.Hour || cert.ExtKeyUsage[0] != x509.ExtKeyUsageServerAuth {
		t.Fatalf("server certificate: IPs %v names %v valid %v..%v usage %v", cert.IPAddresses, cert.DNSNames, cert.NotBefore, cert.NotAfter, cert.ExtKeyUsage)
	}
	if r := runCLI(t, "certs", "init", dir); r.code == exitOK || !strings.Contains(r.stderr, "not overwritten") {
		t.Fatalf("init over an existing CA: %d %s", r.code, r.stderr)
	}
	if r := runCLI(t, "certs", "issue", dir, "nohost"); r.code != exitUsage || !strings.Contains(r.stderr, "--host") {
		t.Fatalf("a server certificate without --host: %d %s", r.code, r.stderr)
	}
}

// TestServeBeyondLoopbackWithMutualTLS: serve on 0.0.0.0 starts with TLS and
// client certificates; the CLI with the lab CA and alice's certificate
// reaches it, and without either the handshake refusal says which side and why.
func TestServeBeyondLoopbackWithMutualTLS(t *testing.T) {
	dir := labCerts(t)
	f := func(n string) string { return filepath.Join(dir, n) }
	creds := filepath.Join(t.TempDir(), "credentials.yaml")
	os.WriteFile(creds, []byte("- {name: alice, role: operator, client_cert: {cn: alice}}\n"), 0o600)
	u := serveAsync(t, "serve", "sim:thermocycler", "--http", "0.0.0.0:0", "--tls-cert", f("bench-pc.pem"), "--tls-key", f("bench-pc-key.pem"),
		"--client-ca", f("ca.pem"), "--credentials", creds)[0]
	pu, _ := url.Parse(u)
	_, port, _ := net.SplitHostPort(pu.Host)
	target := "https://127.0.0.1:" + port
	ok := runCLI(t, target, "describe", "--ca", f("ca.pem"), "--client-cert", f("alice.pem"), "--client-key", f("alice-key.pem"))
	if ok.code != exitOK || !strings.Contains(ok.stdout, "thermocycler") {
		t.Fatalf("describe over mutual TLS: %d %s %s", ok.code, ok.stdout, ok.stderr)
	}
	if r := runCLI(t, target, "describe", "--ca", f("ca.pem")); r.code == exitOK || !strings.Contains(r.stderr, "refused by the server") ||
		!strings.Contains(r.stderr, "client certificate") {
		t.Fatalf("describe without a client certificate: %d %s", r.code, r.stderr)
	}
	if r := runCLI(t, target, "describe"); r.code == exitOK || !strings.Contains(r.stderr, "refused by the client") || !strings.Contains(r.stderr, "--ca") {
		t.Fatalf("describe without the lab CA: %d %s", r.code, r.stderr)
	}
}

// TestServeDirectoryBeyondLoopback: serve-directory follows serve's rule:
// beyond loopback it needs TLS and credentials (or --insecure), and
// /lab/estop-all then needs an identity.
func TestServeDirectoryBeyondLoopback(t *testing.T) {
	manifest := filepath.Join(t.TempDir(), "lab.yaml")
	os.WriteFile(manifest, []byte("devices: []\n"), 0o600)
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte("lab-token-123456\n"), 0o600)
	for _, extra := range [][]string{nil, {"--token-file", tokenFile}} {
		r := runCLI(t, append([]string{"serve-directory", manifest, "--http", "0.0.0.0:0"}, extra...)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "without TLS") || !strings.Contains(r.stderr, "mhp certs") || !strings.Contains(r.stderr, "--insecure") {
			t.Fatalf("serve-directory on 0.0.0.0 %v: %d %s", extra, r.code, r.stderr)
		}
	}
	dir := labCerts(t)
	u := serveAsync(t, "serve-directory", manifest, "--http", "0.0.0.0:0", "--tls-cert", filepath.Join(dir, "bench-pc.pem"),
		"--tls-key", filepath.Join(dir, "bench-pc-key.pem"), "--token-file", tokenFile)[0]
	if !strings.HasPrefix(u, "https://") {
		t.Fatalf("directory URL %s", u)
	}
	pu, _ := url.Parse(u)
	_, port, _ := net.SplitHostPort(pu.Host)
	tc, err := auth.ClientTLS{CAFile: filepath.Join(dir, "ca.pem")}.Config()
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
	defer hc.CloseIdleConnections()
	estopAll := func(token string) int {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, "https://127.0.0.1:"+port+"/lab/estop-all", strings.NewReader(`{"reason":"t"}`))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := estopAll(""); code != http.StatusUnauthorized {
		t.Fatalf("estop-all without a credential: %d, want 401", code)
	}
	if code := estopAll("lab-token-123456"); code != http.StatusOK {
		t.Fatalf("estop-all with the token: %d", code)
	}
}
