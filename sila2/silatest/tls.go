package silatest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/hex"
	"encoding/pem"
	"math/big"
	"net"
	"time"
)

// OIDServerUUID is the certificate extension SiLA 2 recommends for the server UUID.
var OIDServerUUID = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 58583}

// Cert is a self-signed SiLA server certificate made for a test.
type Cert struct {
	TLS tls.Certificate
	// PEM is the certificate, usable as the client's CA.
	PEM []byte
	// PinSHA256 is the hex SHA-256 of the certificate's DER.
	PinSHA256 string
}

// SelfSigned makes a self-signed certificate as SiLA 2 asks: CN "SiLA2",
// the server UUID in extension 1.3.6.1.4.1.58583, valid for 127.0.0.1.
func SelfSigned(serverUUID string) (*Cert, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	ext, err := asn1.Marshal(serverUUID)
	if err != nil {
		return nil, err
	}
	tpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "SiLA2", Organization: []string{"silatest"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
		ExtraExtensions:       []pkix.Extension{{Id: OIDServerUUID, Value: ext}},
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(der)
	return &Cert{
		TLS:       tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
		PEM:       pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		PinSHA256: hex.EncodeToString(sum[:]),
	}, nil
}
