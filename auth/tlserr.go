package auth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"time"
)

// HandshakeError is a failed TLS handshake explained: which side refused
// and why, instead of "EOF" or "remote error".
type HandshakeError struct {
	// Side is "client" (this side refused the server) or "server" (the
	// server refused this client).
	Side string
	// Why is the reason in words, with what to do about it.
	Why string
	// Err is the error the TLS stack returned.
	Err error
}

// Error names the side that refused and why.
func (e *HandshakeError) Error() string {
	return fmt.Sprintf("TLS handshake refused by the %s: %s", e.Side, e.Why)
}

// Unwrap returns the TLS stack's error.
func (e *HandshakeError) Unwrap() error { return e.Err }

// remoteAlerts are the alerts a server sends when it refuses a client's
// certificate, as the Go TLS stack words them ("remote error: tls: ...").
var remoteAlerts = map[string]string{
	"certificate required":           "it requires a client certificate (mutual TLS) and none was sent: give --client-cert and --client-key (MHP_CLIENT_CERT, MHP_CLIENT_KEY)",
	"bad certificate":                "it did not accept the client certificate (not signed by the CA it trusts, or not for client use)",
	"unknown certificate authority":  "the client certificate is not signed by the CA the server trusts (--client-ca): issue it with that CA (mhp certs issue DIR NAME --client)",
	"expired certificate":            "the client certificate has expired: issue a new one (mhp certs issue DIR NAME --client)",
	"certificate expired":            "the client certificate has expired: issue a new one (mhp certs issue DIR NAME --client)",
	"unsupported certificate":        "the client certificate is not for client authentication: issue it with --client",
	"protocol version not supported": "no TLS version in common (the server needs TLS 1.2 or later)",
	"handshake failure":              "no cipher suite or parameters in common",
}

// ExplainTLS returns err as a [HandshakeError] when it is a TLS handshake
// failure it recognises (an unknown CA, a name mismatch, an expired
// certificate, a missing or refused client certificate, a pin mismatch),
// else err unchanged.
func ExplainTLS(err error) error {
	if err == nil {
		return nil
	}
	var he *HandshakeError
	if errors.As(err, &he) {
		return err
	}
	var pin *PinError
	if errors.As(err, &pin) {
		return &HandshakeError{Side: "client", Why: pin.Error()[len("the client refused the server's certificate: "):], Err: err}
	}
	var ua x509.UnknownAuthorityError
	if errors.As(err, &ua) {
		who := ""
		if ua.Cert != nil {
			who = fmt.Sprintf(" (%q, issued by %q)", ua.Cert.Subject.CommonName, ua.Cert.Issuer.CommonName)
		}
		return &HandshakeError{Side: "client", Err: err, Why: "the server's certificate" + who +
			" is not signed by a CA this client trusts: give the lab CA with --ca FILE (or MHP_CA), or pin the server with --pin sha256:HEX"}
	}
	var hn x509.HostnameError
	if errors.As(err, &hn) {
		names := ""
		if hn.Certificate != nil {
			names = strings.Join(append(append([]string{}, hn.Certificate.DNSNames...), ipStrings(hn.Certificate)...), ", ")
		}
		return &HandshakeError{Side: "client", Err: err, Why: fmt.Sprintf("name mismatch: the server's certificate is for [%s], not %q: "+
			"dial a name it holds, or issue it with that name (mhp certs issue DIR NAME --host %s)", names, hn.Host, hn.Host)}
	}
	var ci x509.CertificateInvalidError
	if errors.As(err, &ci) {
		why := "the server's certificate is not valid: " + ci.Error()
		if ci.Reason == x509.Expired && ci.Cert != nil {
			why = fmt.Sprintf("the server's certificate expired (valid %s to %s): issue a new one (mhp certs issue)",
				ci.Cert.NotBefore.UTC().Format(time.DateOnly), ci.Cert.NotAfter.UTC().Format(time.DateOnly))
		}
		return &HandshakeError{Side: "client", Err: err, Why: why}
	}
	var rec tls.RecordHeaderError
	if errors.As(err, &rec) {
		return &HandshakeError{Side: "client", Err: err, Why: "the server does not speak TLS (it answered in plain HTTP?): use http://, or start it with --tls-cert and --tls-key"}
	}
	msg := err.Error()
	if i := strings.Index(msg, "remote error: tls: "); i >= 0 {
		alert := msg[i+len("remote error: tls: "):]
		if why, ok := remoteAlerts[alert]; ok {
			return &HandshakeError{Side: "server", Err: err, Why: why}
		}
		return &HandshakeError{Side: "server", Err: err, Why: "it sent the alert " + alert}
	}
	return err
}

func ipStrings(c *x509.Certificate) []string {
	out := make([]string, 0, len(c.IPAddresses))
	for _, ip := range c.IPAddresses {
		out = append(out, ip.String())
	}
	return out
}

// ExplainServerSide words a handshake failure seen by a server (for its
// log): the client's alert, or why the server refused the client.
func ExplainServerSide(err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "client didn't provide a certificate"):
		return "the client sent no certificate and this server requires one (mutual TLS, --client-ca)"
	case strings.Contains(msg, "certificate signed by unknown authority"):
		return "the client certificate is not signed by the CA this server trusts (--client-ca)"
	case strings.Contains(msg, "certificate has expired"):
		return "the client certificate has expired"
	case strings.Contains(msg, "remote error: tls: "):
		return "the client refused this server's certificate: " + msg[strings.Index(msg, "remote error: tls: ")+len("remote error: tls: "):] +
			" (give the client the lab CA with --ca, or check the name it dials is in the certificate)"
	case strings.Contains(msg, "first record does not look like a TLS handshake"):
		return "the client spoke plain HTTP to this TLS server: use https://"
	}
	return msg
}
