package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"strings"
	"time"
)

// Default lifetimes of the lab certificates `mhp certs` makes.
const (
	CALifetime   = 10 * 365 * 24 * time.Hour
	CertLifetime = 397 * 24 * time.Hour
)

// KeyPair is a certificate and its private key, both PEM.
type KeyPair struct {
	CertPEM, KeyPEM []byte
	Cert            *x509.Certificate
	key             *ecdsa.PrivateKey
}

// NewCA makes a self-signed lab CA (ECDSA P-256) named name, valid for
// lifetime from now (an hour back, for clocks that disagree a little).
func NewCA(name string, lifetime time.Duration) (*KeyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl, err := template(name, lifetime)
	if err != nil {
		return nil, err
	}
	tmpl.IsCA, tmpl.BasicConstraintsValid, tmpl.MaxPathLenZero = true, true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	return sign(tmpl, tmpl, key, key)
}

// ParseKeyPair reads a PEM certificate and its PEM EC key (a CA to issue with).
func ParseKeyPair(certPEM, keyPEM []byte) (*KeyPair, error) {
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, errors.New("certs: want a PEM certificate and a PEM key")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("certs: %w", err)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("certs: the key is not an EC private key: %w", err)
	}
	return &KeyPair{CertPEM: certPEM, KeyPEM: keyPEM, Cert: cert, key: key}, nil
}

// Issue makes a certificate signed by ca for name: a server certificate
// whose SANs are every host given (DNS names and IP addresses), or with
// client a client certificate (CN name; hosts, if any, as SANs too).
func (ca *KeyPair) Issue(name string, hosts []string, client bool, lifetime time.Duration) (*KeyPair, error) {
	if ca.key == nil || !ca.Cert.IsCA {
		return nil, errors.New("certs: issuing needs a CA and its key")
	}
	if !client && len(hosts) == 0 {
		return nil, errors.New("certs: a server certificate needs at least one --host (a DNS name or an IP address)")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl, err := template(name, lifetime)
	if err != nil {
		return nil, err
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	if client {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	for _, h := range hosts {
		h = strings.TrimSpace(h)
		switch ip := net.ParseIP(strings.Trim(h, "[]")); {
		case h == "":
		case ip != nil:
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		default:
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	if tmpl.NotAfter.After(ca.Cert.NotAfter) {
		tmpl.NotAfter = ca.Cert.NotAfter
	}
	return sign(tmpl, ca.Cert, key, ca.key)
}

func template(name string, lifetime time.Duration) (*x509.Certificate, error) {
	if name == "" {
		return nil, errors.New("certs: a name is required")
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	return &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: name, Organization: []string{"mhp lab"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(lifetime)}, nil
}

func sign(tmpl, parent *x509.Certificate, key, parentKey *ecdsa.PrivateKey) (*KeyPair, error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, fmt.Errorf("certs: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &KeyPair{CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), Cert: cert, key: key}, nil
}
