package opcua

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/url"
	"os"
	"syscall"
	"time"

	"github.com/gopcua/opcua/ua"
	"github.com/gopcua/opcua/uacp"
)

// Certificates: the server pin, the client certificate, and what to say when
// the server refuses ours.

// certificateCodes are the status codes of a server refusing the client
// certificate.
var certificateCodes = map[ua.StatusCode]bool{
	ua.StatusBadCertificateUntrusted: true, ua.StatusBadSecurityChecksFailed: true, ua.StatusBadCertificateInvalid: true,
	ua.StatusBadCertificateURIInvalid: true, ua.StatusBadCertificateTimeInvalid: true, ua.StatusBadCertificateRevoked: true,
	ua.StatusBadCertificateUseNotAllowed: true, ua.StatusBadCertificateIssuerRevocationUnknown: true,
	ua.StatusBadCertificateRevocationUnknown: true, ua.StatusBadCertificateIssuerTimeInvalid: true,
	ua.StatusBadCertificateIssuerUseNotAllowed: true, ua.StatusBadCertificateHostNameInvalid: true,
	ua.StatusBadCertificatePolicyCheckFailed: true, ua.StatusBadNoValidCertificates: true,
}

// certificateHint explains a failed secure connection that looks like a
// refused client certificate: the server's status code when it reached us
// (a CreateSession answer, a ServiceFault), or a closed socket while
// opening a secure channel (open62541 1.4 logs BadCertificateUntrusted and
// just closes; node-opcua sends an ERR message, which gopcua v0.8.0 turns
// into io.EOF in uasc.readChunk, losing its code). It says which
// certificate to trust and where; "" when err is something else.
func (c *Conn) certificateHint(err error) string {
	if c.cfg.Security.Policy == PolicyNone {
		return ""
	}
	code := ua.StatusCode(0)
	var ue *uacp.Error
	var sc ua.StatusCode
	switch {
	case errors.As(err, &ue):
		code = ua.StatusCode(ue.ErrorCode)
	case errors.As(err, &sc):
		code = sc
	}
	var what string
	switch {
	case certificateCodes[code]:
		what = fmt.Sprintf("the server refused our client certificate with %s", StatusName(code))
	case code == 0 && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)):
		what = fmt.Sprintf("the server closed the connection while opening the %s secure channel, most likely because it does not trust our client certificate (open62541 logs BadCertificateUntrusted)", c.cfg.Security.Policy)
	default:
		return ""
	}
	cert := "the ephemeral certificate this process made (it changes at every start: set security.client_certificate and client_key so that there is one certificate to trust)"
	if c.cfg.Security.ClientCertificate != "" {
		cert = c.cfg.Security.ClientCertificate
	}
	return fmt.Sprintf("%s; trust %s (%s, application URI %s) on the server: copy it into its trusted certificates folder "+
		"(open62541: the folder given as its trust list, e.g. pki/trusted/certs; node-opcua: <pki>/trusted/certs, where a refused one waits in <pki>/rejected) and retry",
		what, cert, Fingerprint(c.cert), c.cfg.Security.ApplicationURI)
}

// checkPin compares the server certificate with security.server_certificate.
func (c *Conn) checkPin(der []byte) error {
	pin := c.cfg.Security.ServerCertificate
	if pin == "" {
		if c.cfg.Security.Policy != PolicyNone {
			c.log.Warn("opcua: server certificate not pinned: any server certificate is accepted", "endpoint", c.cfg.Endpoint)
		}
		return nil
	}
	if fp, err := parseFingerprint(pin); err == nil {
		sum := sha256.Sum256(der)
		if len(der) > 0 && bytes.Equal(sum[:], fp) {
			return nil
		}
		return fmt.Errorf("opcua: %s: server certificate %s does not match the pinned %s", c.cfg.Endpoint, Fingerprint(der), pin)
	}
	b, err := os.ReadFile(pin)
	if err != nil {
		return fmt.Errorf("opcua: security.server_certificate: %w", err)
	}
	want := derOf(b)
	if len(der) == 0 || !bytes.Equal(want, der) {
		return fmt.Errorf("opcua: %s: server certificate %s does not match the pinned file %s (%s)", c.cfg.Endpoint, Fingerprint(der), pin, Fingerprint(want))
	}
	return nil
}

// derOf returns the DER bytes of a PEM or DER file's content.
func derOf(b []byte) []byte {
	if blk, _ := pem.Decode(b); blk != nil {
		return blk.Bytes
	}
	return b
}

// loadClientCert loads the configured client certificate and key, or makes
// an ephemeral self-signed pair whose URI SAN is the application URI.
func (c *Conn) loadClientCert() error {
	s := c.cfg.Security
	if s.ClientCertificate != "" {
		cb, err := os.ReadFile(s.ClientCertificate)
		if err != nil {
			return fmt.Errorf("opcua: security.client_certificate: %w", err)
		}
		kb, err := os.ReadFile(s.ClientKey)
		if err != nil {
			return fmt.Errorf("opcua: security.client_key: %w", err)
		}
		kder := derOf(kb)
		var key *rsa.PrivateKey
		if k, err := x509.ParsePKCS1PrivateKey(kder); err == nil {
			key = k
		} else if k, err := x509.ParsePKCS8PrivateKey(kder); err == nil {
			rk, ok := k.(*rsa.PrivateKey)
			if !ok {
				return fmt.Errorf("opcua: security.client_key: not an RSA key")
			}
			key = rk
		} else {
			return fmt.Errorf("opcua: security.client_key: not a PKCS#1 or PKCS#8 RSA key")
		}
		c.cert, c.key = derOf(cb), key
		return nil
	}
	cert, key, err := SelfSignedCert(s.ApplicationURI, "mhp-go opcua adapter")
	if err != nil {
		return err
	}
	c.log.Warn("opcua: no client certificate configured; using an ephemeral self-signed one", "endpoint", c.cfg.Endpoint)
	c.cert, c.key = cert, key
	return nil
}

// SelfSignedCert makes an RSA-2048 self-signed certificate (DER) for an OPC
// UA application: the URI SAN is appURI, valid for a year, usable for
// signing and encryption as clients and servers need.
func SelfSignedCert(appURI, name string) ([]byte, *rsa.PrivateKey, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, nil, err
	}
	u, err := url.Parse(appURI)
	if err != nil {
		return nil, nil, fmt.Errorf("opcua: application URI %q: %w", appURI, err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name, Organization: []string{"OpenMHP"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment | x509.KeyUsageDataEncipherment | x509.KeyUsageContentCommitment | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		URIs:                  []*url.URL{u},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	return der, key, nil
}
