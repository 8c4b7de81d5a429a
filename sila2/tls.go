package sila2

import (
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"net"
	"strings"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// credentials is how the client trusts the server (TLSConfig): plaintext,
// or TLS with the chain or pin and then tls.server_name checked by hand.
func (t TLSConfig) credentials() (credentials.TransportCredentials, error) {
	if t.InsecurePlaintext {
		if len(t.CAPEM) > 0 || t.PinSHA256 != "" {
			return nil, fmt.Errorf("sila2: tls: insecure_plaintext excludes ca and pin_sha256")
		}
		return insecure.NewCredentials(), nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	var pin []byte
	if t.PinSHA256 != "" {
		p, err := hex.DecodeString(strings.ToLower(strings.ReplaceAll(t.PinSHA256, ":", "")))
		if err != nil || len(p) != sha256.Size {
			return nil, fmt.Errorf("sila2: tls: pin_sha256 %q is not 64 hex digits", t.PinSHA256)
		}
		pin = p
	}
	var roots *x509.CertPool
	if len(t.CAPEM) > 0 {
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM(t.CAPEM) {
			return nil, fmt.Errorf("sila2: tls: no certificate in the CA PEM")
		}
	}
	if pin == nil && roots == nil {
		return nil, fmt.Errorf("sila2: tls: give a CA or a pin_sha256 (or insecure_plaintext for a legacy server); a SiLA server's self-signed certificate is never trusted silently")
	}
	// Chain or pin, then the name, checked by hand: SiLA certificates carry
	// CN=SiLA2 and often no SAN at all, which Go's own check refuses.
	cfg.InsecureSkipVerify = true
	cfg.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
		return verifyServer(raw, roots, pin, t.ServerName)
	}
	return credentials.NewTLS(cfg), nil
}

// verifyServer checks the server's certificates: the leaf against the pin,
// or the chain against roots; then, with serverName, the leaf's names
// (checkServerName).
func verifyServer(raw [][]byte, roots *x509.CertPool, pin []byte, serverName string) error {
	if len(raw) == 0 {
		return fmt.Errorf("sila2: server sent no certificate")
	}
	certs := make([]*x509.Certificate, 0, len(raw))
	for _, r := range raw {
		c, err := x509.ParseCertificate(r)
		if err != nil {
			return fmt.Errorf("sila2: server certificate: %w", err)
		}
		certs = append(certs, c)
	}
	if pin != nil {
		sum := sha256.Sum256(raw[0])
		if subtle.ConstantTimeCompare(sum[:], pin) != 1 {
			return fmt.Errorf("sila2: server certificate sha256 %x does not match the pinned %x", sum, pin)
		}
	} else {
		inter := x509.NewCertPool()
		for _, c := range certs[1:] {
			inter.AddCert(c)
		}
		_, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		if err != nil {
			return fmt.Errorf("sila2: server certificate not trusted: %w", err)
		}
	}
	if serverName == "" {
		return nil
	}
	return checkServerName(certs[0], serverName)
}

// checkServerName checks tls.server_name against a leaf whose chain (or
// pin) is already verified. A leaf with DNS or IP SANs is checked by its
// SANs only, as Go and browsers check (x509.Certificate.VerifyHostname:
// wildcards, IP literals against IP SANs). A leaf with neither — the
// typical SiLA 2 certificate, CN=SiLA2 and nothing else — is checked by its
// Common Name: exactly, case-insensitively for a DNS name, as an IP when
// server_name is an IP literal; no wildcards.
func checkServerName(leaf *x509.Certificate, serverName string) error {
	if len(leaf.DNSNames) > 0 || len(leaf.IPAddresses) > 0 {
		if err := leaf.VerifyHostname(serverName); err != nil {
			return fmt.Errorf("sila2: tls: server_name %s does not match the server certificate (%s): a certificate with SANs is checked by its SANs only, never by its CN",
				serverName, certNames(leaf))
		}
		return nil
	}
	cn := leaf.Subject.CommonName
	want, got := strings.TrimSuffix(serverName, "."), strings.TrimSuffix(cn, ".")
	if ip := net.ParseIP(strings.Trim(want, "[]")); ip != nil {
		if cip := net.ParseIP(got); cip != nil && cip.Equal(ip) {
			return nil
		}
	} else if got != "" && strings.EqualFold(want, got) {
		return nil
	}
	return fmt.Errorf("sila2: tls: server_name %s does not match the server certificate (%s): a certificate without SANs is matched by its CN, exactly",
		serverName, certNames(leaf))
}

// certNames says what names a certificate carries, for errors (no double
// quotes: gRPC quotes the handshake error again).
func certNames(c *x509.Certificate) string {
	ips := make([]string, len(c.IPAddresses))
	for i, ip := range c.IPAddresses {
		ips[i] = ip.String()
	}
	san := "no SANs"
	switch {
	case len(c.DNSNames) > 0 && len(ips) > 0:
		san = "DNS SANs " + strings.Join(c.DNSNames, ", ") + " and IP SANs " + strings.Join(ips, ", ")
	case len(c.DNSNames) > 0:
		san = "DNS SANs " + strings.Join(c.DNSNames, ", ")
	case len(ips) > 0:
		san = "IP SANs " + strings.Join(ips, ", ")
	}
	cn := "CN " + c.Subject.CommonName
	if c.Subject.CommonName == "" {
		cn = "no CN"
	}
	return cn + "; " + san
}
