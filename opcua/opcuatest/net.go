package opcuatest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/gopcua/opcua/ua"
)

// The fake's network side: the proxy that lets tests cut, freeze and
// screen connections.

// serveProxy forwards client connections to the gopcua server, so that
// DropConnections can cut them like a broken link.
func (s *Server) serveProxy(l net.Listener, target string) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		reject := s.reject
		s.conns[c] = true
		s.mu.Unlock()
		go s.forward(c, target, reject)
	}
}

// forward connects a client to the gopcua server and pipes both ways; a
// screened client (RejectCertificates) is connected only once its secure
// channel request passed, so a refused one never reaches the server.
func (s *Server) forward(c net.Conn, target string, reject Rejection) {
	var pre []byte
	if reject != RejectNone {
		var ok bool
		if pre, ok = s.screen(c, reject); !ok {
			s.forget(c)
			return
		}
	}
	up, err := net.Dial("tcp", target)
	if err != nil {
		s.forget(c)
		return
	}
	s.mu.Lock()
	s.conns[up] = true
	s.mu.Unlock()
	if len(pre) > 0 {
		// pre is the client's HEL and OPN: the server's ACK to the HEL was
		// already given by screen, so this one is dropped.
		hel := int(binary.LittleEndian.Uint32(pre[4:8]))
		ack := make([]byte, 8)
		if _, err := up.Write(pre[:hel]); err != nil || readMsg(up, ack) != nil {
			s.forget(c)
			s.forget(up)
			return
		}
		if _, err := up.Write(pre[hel:]); err != nil {
			s.forget(c)
			s.forget(up)
			return
		}
	}
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, &gated{src, s})
		s.forget(dst)
		s.forget(src)
	}
	go pipe(c, up)
	pipe(up, c)
}

// forget closes a proxied connection and drops it from the set.
func (s *Server) forget(c net.Conn) {
	_ = c.Close()
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// readMsg reads one UACP message (header in hdr, body discarded).
func readMsg(c net.Conn, hdr []byte) error {
	if _, err := io.ReadFull(c, hdr[:8]); err != nil {
		return err
	}
	size := binary.LittleEndian.Uint32(hdr[4:8])
	if size < 8 || size > 1<<20 {
		return fmt.Errorf("message of %d bytes", size)
	}
	_, err := io.CopyN(io.Discard, c, int64(size-8))
	return err
}

// Close stops the fake.
func (s *Server) Close() error {
	select {
	case <-s.stop:
		return nil
	default:
	}
	close(s.stop)
	<-s.done
	s.mu.Lock()
	l := s.proxy
	s.mu.Unlock()
	l.Close()
	s.DropConnections()
	err := s.srv.Close()
	s.cancel()
	return err
}

// Down makes the server unreachable: the listener closes and every
// connection is cut, so reconnects fail until Up.
func (s *Server) Down() {
	s.mu.Lock()
	l := s.proxy
	s.mu.Unlock()
	l.Close()
	s.DropConnections()
}

// Up makes the server reachable again on the same address.
func (s *Server) Up() error {
	s.mu.Lock()
	addr := s.proxy.Addr().String()
	s.mu.Unlock()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.proxy = l
	s.mu.Unlock()
	go s.serveProxy(l, s.target)
	return nil
}

// Rejection is how the fake refuses a client certificate.
type Rejection int

const (
	// RejectNone accepts every secure channel.
	RejectNone Rejection = iota
	// RejectClose closes the socket on an OpenSecureChannel with a security
	// policy other than None, as open62541 1.4 did for an untrusted client
	// certificate (it logs BadCertificateUntrusted; the client sees EOF).
	RejectClose
	// RejectError answers such an OpenSecureChannel with an ERR message
	// carrying BadCertificateUntrusted, then closes (node-opcua's way).
	RejectError
)

// RejectCertificates makes new connections refuse secure channels with a
// client certificate (every policy but None), as a server that does not
// trust the client's certificate does.
func (s *Server) RejectCertificates(how Rejection) {
	s.mu.Lock()
	s.reject = how
	s.mu.Unlock()
}

// screen answers the client's HEL itself and reads its first
// OpenSecureChannel: one with a policy other than None is refused as
// configured (false; the connection is closed), else screen returns the
// HEL and OPN bytes for forward to replay to the server.
func (s *Server) screen(c net.Conn, how Rejection) ([]byte, bool) {
	var got []byte
	for {
		hdr := make([]byte, 8)
		if _, err := io.ReadFull(c, hdr); err != nil {
			return nil, false
		}
		size := binary.LittleEndian.Uint32(hdr[4:])
		if size < 8 || size > 1<<20 {
			return nil, false
		}
		body := make([]byte, size-8)
		if _, err := io.ReadFull(c, body); err != nil {
			return nil, false
		}
		got = append(got, hdr...)
		got = append(got, body...)
		switch string(hdr[:3]) {
		case "HEL":
			// ACK with the client's own buffer sizes.
			if len(body) < 20 {
				return nil, false
			}
			ack := make([]byte, 28)
			copy(ack, "ACKF")
			binary.LittleEndian.PutUint32(ack[4:], 28)
			copy(ack[8:], body[:20])
			if _, err := c.Write(ack); err != nil {
				return nil, false
			}
		case "OPN":
			uri := ""
			if len(body) >= 8 {
				if n := int32(binary.LittleEndian.Uint32(body[4:])); n > 0 && int(n) <= len(body)-8 {
					uri = string(body[8 : 8+n])
				}
			}
			if strings.HasSuffix(uri, "#None") {
				return got, true
			}
			if how == RejectError {
				reason := "BadCertificateUntrusted: the client certificate is not trusted"
				msg := make([]byte, 16, 16+len(reason))
				copy(msg, "ERRF")
				binary.LittleEndian.PutUint32(msg[4:], uint32(16+len(reason)))
				binary.LittleEndian.PutUint32(msg[8:], uint32(ua.StatusBadCertificateUntrusted))
				binary.LittleEndian.PutUint32(msg[12:], uint32(len(reason)))
				msg = append(msg, reason...)
				_, _ = c.Write(msg)
			}
			return nil, false
		default:
			return nil, false
		}
	}
}

// selfSigned makes the fake's server certificate.
func selfSigned() ([]byte, *rsa.PrivateKey, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, nil, err
	}
	u, _ := url.Parse("urn:openmhp:opcuatest")
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "opcuatest"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment | x509.KeyUsageDataEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, URIs: []*url.URL{u}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	return der, key, err
}

// Freeze makes the server hang as a stopped process does: connections
// stay open but nothing crosses them (requests and replies are held) and the
// server's clock stops notifying subscribers, until Thaw.
func (s *Server) Freeze() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.thawed == nil {
		s.thawed = make(chan struct{})
	}
}

// Thaw ends Freeze: held bytes flow again.
func (s *Server) Thaw() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.thawed != nil {
		close(s.thawed)
		s.thawed = nil
	}
}

// frozen returns the channel closed at Thaw, or nil when not frozen.
func (s *Server) frozen() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.thawed
}

// gated is a proxy reader that holds what it read while the server is frozen.
type gated struct {
	r io.Reader
	s *Server
}

func (g *gated) Read(p []byte) (int, error) {
	n, err := g.r.Read(p)
	if ch := g.s.frozen(); ch != nil {
		select {
		case <-ch:
		case <-g.s.stop:
		}
	}
	return n, err
}

// DropConnections cuts every client connection (TCP), as a broken link
// would: pending replies are lost.
func (s *Server) DropConnections() {
	s.mu.Lock()
	conns := make([]net.Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}
