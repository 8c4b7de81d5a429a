// Package authtest makes a throwaway lab CA, certificates and credentials
// files for tests of servers and clients that use package auth.
package authtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go/auth"
)

// Lab is a test CA with its files in a temporary folder.
type Lab struct {
	// Dir holds the files written.
	Dir string
	// CA is the lab CA.
	CA *auth.KeyPair
	// CAFile is its PEM certificate.
	CAFile string
}

// NewLab makes a lab CA valid for a day.
func NewLab(t testing.TB) *Lab {
	t.Helper()
	ca, err := auth.NewCA("test lab CA", 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	l := &Lab{Dir: t.TempDir(), CA: ca}
	l.CAFile = l.Write(t, "ca.pem", ca.CertPEM)
	return l
}

// Write writes b to a file of the lab folder and returns its path.
func (l *Lab) Write(t testing.TB, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(l.Dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Issue makes a certificate for name valid for an hour (a client
// certificate with client, else a server certificate for hosts).
func (l *Lab) Issue(t testing.TB, name string, hosts []string, client bool) *auth.KeyPair {
	t.Helper()
	kp, err := l.CA.Issue(name, hosts, client, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

// Files issues a certificate and writes it: its certificate and key paths.
func (l *Lab) Files(t testing.TB, name string, hosts []string, client bool) (cert, key string) {
	t.Helper()
	kp := l.Issue(t, name, hosts, client)
	return l.Write(t, name+".pem", kp.CertPEM), l.Write(t, name+"-key.pem", kp.KeyPEM)
}

// Server issues a server certificate for 127.0.0.1 and localhost and loads
// it (with clientCA, mutual TLS against the lab CA).
func (l *Lab) Server(t testing.TB, mutual bool) *auth.ServerTLS {
	t.Helper()
	cert, key := l.Files(t, "server", []string{"127.0.0.1", "localhost"}, false)
	cfg := auth.ServerTLSConfig{CertFile: cert, KeyFile: key}
	if mutual {
		cfg.ClientCAFile = l.CAFile
	}
	st, err := auth.NewServerTLS(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// Client is the client TLS of a client that trusts the lab CA and, when
// name is not empty, shows a client certificate for name.
func (l *Lab) Client(t testing.TB, name string) auth.ClientTLS {
	t.Helper()
	c := auth.ClientTLS{CAFile: l.CAFile}
	if name != "" {
		kp := l.Issue(t, name, nil, true)
		c.CertFile, c.KeyFile = l.Write(t, "client-"+name+".pem", kp.CertPEM), l.Write(t, "client-"+name+"-key.pem", kp.KeyPEM)
	}
	return c
}

// Credentials writes a credentials file of name=role:token entries (token
// identities; the file stores their hashes) and cert entries given as
// name=role:cn=CN, and returns its path.
func Credentials(t testing.TB, dir string, entries ...string) string {
	t.Helper()
	var b strings.Builder
	for _, e := range entries {
		name, rest, _ := strings.Cut(e, "=")
		role, cred, _ := strings.Cut(rest, ":")
		if cn, ok := strings.CutPrefix(cred, "cn="); ok {
			b.WriteString("- {name: " + name + ", role: " + role + ", client_cert: {cn: " + cn + "}}\n")
			continue
		}
		b.WriteString("- {name: " + name + ", role: " + role + ", token_sha256: " + auth.HashToken(cred) + "}\n")
	}
	p := filepath.Join(dir, "credentials.yaml")
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
