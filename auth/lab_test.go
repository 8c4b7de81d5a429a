package auth_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/openmhp/mhp-go/auth"
)

// lab is a test CA with its files on disk.
type lab struct {
	dir    string
	ca     *auth.KeyPair
	caFile string
}

func newLab(t *testing.T) *lab {
	t.Helper()
	ca, err := auth.NewCA("test lab CA", time.Hour*24)
	if err != nil {
		t.Fatal(err)
	}
	l := &lab{dir: t.TempDir(), ca: ca}
	l.caFile = l.write(t, "ca.pem", ca.CertPEM)
	return l
}

func (l *lab) write(t *testing.T, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(l.dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func (l *lab) issue(t *testing.T, name string, hosts []string, client bool) *auth.KeyPair {
	t.Helper()
	kp, err := l.ca.Issue(name, hosts, client, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

// files issues a certificate and writes it: cert and key paths.
func (l *lab) files(t *testing.T, name string, hosts []string, client bool) (string, string) {
	kp := l.issue(t, name, hosts, client)
	return l.write(t, name+".pem", kp.CertPEM), l.write(t, name+"-key.pem", kp.KeyPEM)
}
