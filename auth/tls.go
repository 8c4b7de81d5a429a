package auth

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"
)

// ServerTLSConfig names a server's certificate files and, for mutual TLS,
// the CA its clients' certificates must chain to.
type ServerTLSConfig struct {
	// CertFile and KeyFile are the PEM certificate (chain) and key (--tls-cert, --tls-key).
	CertFile, KeyFile string
	// ClientCAFile, when set, turns on mutual TLS (--client-ca): a client
	// without a certificate signed by one of its CAs is refused in the handshake.
	ClientCAFile string
	// CheckEvery bounds how often the files' modification times are looked
	// at (on a handshake); default 1s.
	CheckEvery time.Duration
	// Logger reports reloads; default slog.Default().
	Logger *slog.Logger
}

// Enabled reports whether a certificate is configured.
func (c ServerTLSConfig) Enabled() bool { return c.CertFile != "" || c.KeyFile != "" }

// Validate reports a half-given pair or a client CA without a certificate.
func (c ServerTLSConfig) Validate() error {
	switch {
	case (c.CertFile == "") != (c.KeyFile == ""):
		return errors.New("tls: give both --tls-cert and --tls-key")
	case c.ClientCAFile != "" && c.CertFile == "":
		return errors.New("tls: --client-ca (mutual TLS) needs --tls-cert and --tls-key")
	case c.CheckEvery < 0:
		return fmt.Errorf("tls: CheckEvery %v is negative", c.CheckEvery)
	}
	return nil
}

// ServerTLS is a server's TLS configuration whose certificate and client CA
// pool are reloaded when their files change (or on [ServerTLS.Reload], for
// SIGHUP) without a restart: connections already open keep their session.
type ServerTLS struct {
	cfg ServerTLSConfig

	mu      sync.Mutex
	current *tls.Config
	mods    [3]time.Time
	checked time.Time
}

// NewServerTLS loads the files of cfg.
func NewServerTLS(cfg ServerTLSConfig) (*ServerTLS, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !cfg.Enabled() {
		return nil, errors.New("tls: no certificate configured")
	}
	if cfg.CheckEvery == 0 {
		cfg.CheckEvery = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &ServerTLS{cfg: cfg}
	if err := s.Reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// MutualTLS reports whether client certificates are required.
func (s *ServerTLS) MutualTLS() bool { return s != nil && s.cfg.ClientCAFile != "" }

// Config returns the tls.Config to serve with: TLS 1.2 at least (1.3
// preferred by the Go stack), the current certificate on every handshake.
func (s *ServerTLS) Config() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			s.refresh()
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.current, nil
		},
	}
}

// Reload reads the files now. On failure the configuration loaded before
// stays and the error is returned.
func (s *ServerTLS) Reload() error {
	mods := s.modTimes()
	pair, err := tls.LoadX509KeyPair(s.cfg.CertFile, s.cfg.KeyFile)
	if err != nil {
		return s.failed(fmt.Errorf("tls: loading %s and %s: %w", s.cfg.CertFile, s.cfg.KeyFile, err), mods)
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}, Certificates: []tls.Certificate{pair}}
	if s.cfg.ClientCAFile != "" {
		pool, err := LoadCAs(s.cfg.ClientCAFile)
		if err != nil {
			return s.failed(err, mods)
		}
		c.ClientCAs, c.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	s.mu.Lock()
	first := s.current == nil
	s.current, s.mods, s.checked = c, mods, time.Now()
	s.mu.Unlock()
	if !first {
		s.cfg.Logger.Info("tls certificate reloaded", "cert", s.cfg.CertFile, "client_ca", s.cfg.ClientCAFile)
	}
	return nil
}

func (s *ServerTLS) failed(err error, mods [3]time.Time) error {
	s.mu.Lock()
	first := s.current == nil
	s.mods, s.checked = mods, time.Now() // not retried until the files change again
	s.mu.Unlock()
	if !first {
		s.cfg.Logger.Error("tls certificate not reloaded: the one loaded before stays", "err", err)
	}
	return err
}

func (s *ServerTLS) modTimes() [3]time.Time {
	var m [3]time.Time
	for i, f := range []string{s.cfg.CertFile, s.cfg.KeyFile, s.cfg.ClientCAFile} {
		if f == "" {
			continue
		}
		if st, err := os.Stat(f); err == nil {
			m[i] = st.ModTime()
		}
	}
	return m
}

// refresh reloads when a file's modification time changed, looking at most
// every CheckEvery.
func (s *ServerTLS) refresh() {
	s.mu.Lock()
	due := time.Since(s.checked) >= s.cfg.CheckEvery
	if due {
		s.checked = time.Now()
	}
	old := s.mods
	s.mu.Unlock()
	if due && s.modTimes() != old {
		_ = s.Reload()
	}
}

// LoadCAs reads a PEM file of one or more CA certificates into a pool.
func LoadCAs(file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("tls: CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("tls: CA file %s holds no PEM certificate", file)
	}
	return pool, nil
}

// ClientTLS is how a client checks a server and shows itself: the CAs it
// trusts (a pool, or a PEM file), a pinned SHA-256 of the server's
// certificate, and its own certificate for mutual TLS. The zero value is
// the system's roots and no client certificate.
type ClientTLS struct {
	// CAFile is a PEM file of CAs to trust (--ca, MHP_CA) instead of the system's.
	CAFile string
	// CAs is a pool to trust (used when CAFile is empty).
	CAs *x509.CertPool
	// Pin is "sha256:HEX", the SHA-256 of the server's leaf certificate
	// (DER) (--pin). Without a CA it replaces chain verification (a
	// self-signed server); with one, both must hold.
	Pin string
	// CertFile and KeyFile are the client's certificate for mutual TLS
	// (--client-cert, --client-key; MHP_CLIENT_CERT, MHP_CLIENT_KEY).
	CertFile, KeyFile string
}

// IsZero reports whether nothing is configured.
func (c ClientTLS) IsZero() bool {
	return c.CAFile == "" && c.CAs == nil && c.Pin == "" && c.CertFile == "" && c.KeyFile == ""
}

// ParsePin reads "sha256:HEX" (64 hex digits; colons between bytes allowed).
func ParsePin(pin string) ([]byte, error) {
	hexPart, ok := strings.CutPrefix(strings.TrimSpace(pin), "sha256:")
	if !ok {
		return nil, fmt.Errorf("tls: pin %q: want sha256:HEX (the SHA-256 of the server's certificate)", pin)
	}
	b, err := hex.DecodeString(strings.ReplaceAll(hexPart, ":", ""))
	if err != nil || len(b) != sha256.Size {
		return nil, fmt.Errorf("tls: pin %q: want sha256: and 64 hex digits", pin)
	}
	return b, nil
}

// Fingerprint returns the pin of a certificate: "sha256:" and the hex SHA-256 of its DER.
func Fingerprint(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.Raw)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// PinError is the refusal of a server whose certificate is not the pinned one.
type PinError struct{ Want, Got string }

// Error says the fingerprint seen and the pin expected.
func (e *PinError) Error() string {
	return fmt.Sprintf("the client refused the server's certificate: its fingerprint is %s, the pin is %s (a different server, or its certificate was replaced)", e.Got, e.Want)
}

// Config builds the tls.Config of a client.
func (c ClientTLS) Config() (*tls.Config, error) {
	t := &tls.Config{MinVersion: tls.VersionTLS12}
	switch {
	case c.CAFile != "":
		pool, err := LoadCAs(c.CAFile)
		if err != nil {
			return nil, err
		}
		t.RootCAs = pool
	case c.CAs != nil:
		t.RootCAs = c.CAs
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return nil, errors.New("tls: give both the client certificate and its key (--client-cert, --client-key)")
	}
	if c.CertFile != "" {
		pair, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("tls: client certificate: %w", err)
		}
		t.Certificates = []tls.Certificate{pair}
	}
	if c.Pin != "" {
		want, err := ParsePin(c.Pin)
		if err != nil {
			return nil, err
		}
		if t.RootCAs == nil {
			// A pin alone: the chain is not verified, the pin is the trust.
			t.InsecureSkipVerify = true
		}
		t.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the server presented no certificate")
			}
			sum := sha256.Sum256(cs.PeerCertificates[0].Raw)
			if !bytesEqual(sum[:], want) {
				return &PinError{Want: "sha256:" + hex.EncodeToString(want), Got: Fingerprint(cs.PeerCertificates[0])}
			}
			return nil
		}
	}
	return t, nil
}

func bytesEqual(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	var d byte
	for i := range a {
		d |= a[i] ^ b[i]
	}
	return d == 0
}
