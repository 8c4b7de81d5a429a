package sila2_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go/sila2"
	"github.com/openmhp/mhp-go/sila2/silatest"
)

// testCert is a certificate made for a test, with its key (to sign others).
type testCert struct {
	cert *x509.Certificate
	der  []byte
	key  *ecdsa.PrivateKey
}

func (c *testCert) pem() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.der})
}

func (c *testCert) pin() string {
	sum := sha256.Sum256(c.der)
	return hex.EncodeToString(sum[:])
}

// makeCert makes a server certificate with the given CN and SANs, signed by
// issuer (nil: self-signed, then it is its own CA, as SiLA servers' are).
func makeCert(t *testing.T, cn string, dns []string, ips []net.IP, issuer *testCert) *testCert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	tpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true,
		IsCA: issuer == nil, DNSNames: dns, IPAddresses: ips,
	}
	parent, signer := tpl, key
	if issuer != nil {
		parent, signer = issuer.cert, issuer.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, parent, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCert{cert: c, der: der, key: key}
}

// TestServerNameMatchesCNOnlyCertificates: tls.server_name against the
// certificates SiLA 2 servers really have. A certificate with only a CN
// (no DNS or IP SAN) is matched by its CN, after the chain (or pin) is
// verified; a certificate with SANs is matched by its SANs only; an unknown
// CA is still refused. Before the fix every CN-only case was refused ("x509:
// certificate relies on legacy Common Name field") and a pin ignored
// server_name.
func TestServerNameMatchesCNOnlyCertificates(t *testing.T) {
	ca := makeCert(t, "Lab CA", nil, nil, nil)
	loop := []net.IP{net.IPv4(127, 0, 0, 1)}
	for _, c := range []struct {
		name       string
		leaf       func() *testCert
		trust      func(leaf *testCert) sila2.TLSConfig // CA or pin
		serverName string
		refused    []string // nil: the call goes through
	}{
		{"cn only, same name other case", func() *testCert { return makeCert(t, "SiLA2", nil, nil, nil) }, byCA, "sila2", nil},
		{"cn only, other name", func() *testCert { return makeCert(t, "SiLA2", nil, nil, nil) }, byCA, "incubator.lab",
			[]string{"server_name incubator.lab does not match", "(CN SiLA2; no SANs)", "matched by its CN"}},
		{"cn only, issued by the lab CA, trailing dot", func() *testCert { return makeCert(t, "incubator.lab", nil, nil, ca) },
			func(*testCert) sila2.TLSConfig { return sila2.TLSConfig{CAPEM: ca.pem()} }, "Incubator.Lab.", nil},
		{"cn only, no wildcard", func() *testCert { return makeCert(t, "*.lab", nil, nil, nil) }, byCA, "incubator.lab",
			[]string{"(CN *.lab; no SANs)"}},
		{"cn only, IP literal", func() *testCert { return makeCert(t, "127.0.0.1", nil, nil, nil) }, byCA, "127.0.0.1", nil},
		{"cn only, other IP", func() *testCert { return makeCert(t, "127.0.0.1", nil, nil, nil) }, byCA, "127.0.0.2",
			[]string{"(CN 127.0.0.1; no SANs)"}},
		{"cn only, pinned", func() *testCert { return makeCert(t, "SiLA2", nil, nil, nil) }, byPin, "SiLA2", nil},
		{"cn only, pinned, other name", func() *testCert { return makeCert(t, "SiLA2", nil, nil, nil) }, byPin, "incubator.lab",
			[]string{"server_name incubator.lab does not match"}},
		{"cn matches but SANs do not", func() *testCert { return makeCert(t, "incubator.lab", []string{"other.lab"}, nil, nil) }, byCA,
			"incubator.lab", []string{"(CN incubator.lab; DNS SANs other.lab)", "checked by its SANs only"}},
		{"SAN IP", func() *testCert { return makeCert(t, "SiLA2", nil, loop, nil) }, byCA, "127.0.0.1", nil},
		{"SAN IP, other IP", func() *testCert { return makeCert(t, "SiLA2", nil, loop, nil) }, byCA, "127.0.0.2",
			[]string{"(CN SiLA2; IP SANs 127.0.0.1)"}},
		{"SAN IP, CN as server_name", func() *testCert { return makeCert(t, "SiLA2", nil, loop, nil) }, byCA, "SiLA2",
			[]string{"checked by its SANs only"}},
		{"SAN DNS wildcard", func() *testCert { return makeCert(t, "SiLA2", []string{"*.lab"}, nil, nil) }, byCA, "incubator.lab", nil},
		{"unknown CA", func() *testCert { return makeCert(t, "SiLA2", nil, nil, nil) },
			func(*testCert) sila2.TLSConfig { return sila2.TLSConfig{CAPEM: ca.pem()} }, "SiLA2", []string{"not trusted"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			leaf := c.leaf()
			srv, err := silatest.New(silatest.Options{Name: "TLS names"})
			if err != nil {
				t.Fatal(err)
			}
			addr, err := srv.Start(&tls.Certificate{Certificate: [][]byte{leaf.der}, PrivateKey: leaf.key})
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Stop()
			cfg := c.trust(leaf)
			cfg.ServerName = c.serverName
			cl, err := sila2.Dial(ctxT(t), sila2.ClientConfig{Endpoint: addr, TLS: cfg, CallTimeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			info, err := cl.ServerInfo(ctxT(t))
			if c.refused == nil {
				if err != nil || info.Name != "TLS names" {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("server_name %q accepted against %s, want a refusal", c.serverName, leaf.cert.Subject)
			}
			for _, w := range c.refused {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("refusal %q lacks %q", err, w)
				}
			}
		})
	}
}

func byCA(leaf *testCert) sila2.TLSConfig  { return sila2.TLSConfig{CAPEM: leaf.pem()} }
func byPin(leaf *testCert) sila2.TLSConfig { return sila2.TLSConfig{PinSHA256: leaf.pin()} }
