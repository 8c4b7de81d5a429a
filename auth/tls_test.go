package auth_test

import (
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go/auth"
	"github.com/openmhp/mhp-go/auth/authtest"
)

// tlsServer serves "hello <CN of the client certificate>" over HTTPS with st.
func tlsServer(t *testing.T, st *auth.ServerTLS) *httptest.Server {
	t.Helper()
	hs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		who := "nobody"
		if len(r.TLS.VerifiedChains) > 0 {
			who = r.TLS.VerifiedChains[0][0].Subject.CommonName
		}
		io.WriteString(w, "hello "+who)
	}))
	hs.TLS = st.Config()
	hs.StartTLS()
	t.Cleanup(hs.Close)
	return hs
}

func get(t *testing.T, url string, c auth.ClientTLS) (string, error) {
	t.Helper()
	cfg, err := c.Config()
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get(url)
	if err != nil {
		return "", auth.ExplainTLS(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), auth.ExplainTLS(err)
}

func handshake(t *testing.T, err error, side, says string) {
	t.Helper()
	var he *auth.HandshakeError
	if !errors.As(err, &he) || he.Side != side || !strings.Contains(he.Why, says) {
		t.Fatalf("got %v, want a handshake refused by the %s saying %q", err, side, says)
	}
}

func TestTLSServerAndClient(t *testing.T) {
	lab := authtest.NewLab(t)
	cert, key := lab.Files(t, "bench-pc", []string{"127.0.0.1", "bench-pc.lab"}, false)
	st, err := auth.NewServerTLS(auth.ServerTLSConfig{CertFile: cert, KeyFile: key})
	if err != nil {
		t.Fatal(err)
	}
	hs := tlsServer(t, st)
	if got, err := get(t, hs.URL, auth.ClientTLS{CAFile: lab.CAFile}); err != nil || got != "hello nobody" {
		t.Fatalf("with the lab CA: %q, %v", got, err)
	}
	_, err = get(t, hs.URL, auth.ClientTLS{})
	handshake(t, err, "client", "not signed by a CA this client trusts")

	// Pinning: the server's own fingerprint passes without a CA; another fails.
	var pin string
	{
		c, _ := tls.Dial("tcp", strings.TrimPrefix(hs.URL, "https://"), &tls.Config{InsecureSkipVerify: true})
		pin = auth.Fingerprint(c.ConnectionState().PeerCertificates[0])
		c.Close()
	}
	if got, err := get(t, hs.URL, auth.ClientTLS{Pin: pin}); err != nil || got != "hello nobody" {
		t.Fatalf("pinned: %q, %v", got, err)
	}
	_, err = get(t, hs.URL, auth.ClientTLS{Pin: "sha256:" + strings.Repeat("ab", 32)})
	handshake(t, err, "client", "the pin is sha256:abab")
	if _, err := (auth.ClientTLS{Pin: "md5:00"}).Config(); err == nil {
		t.Fatal("a pin that is not sha256: accepted")
	}

	// A name the certificate does not hold.
	other, otherKey := lab.Files(t, "other", []string{"other.lab"}, false)
	st2, _ := auth.NewServerTLS(auth.ServerTLSConfig{CertFile: other, KeyFile: otherKey})
	_, err = get(t, tlsServer(t, st2).URL, auth.ClientTLS{CAFile: lab.CAFile})
	handshake(t, err, "client", "name mismatch")

	// An expired certificate.
	old, err := lab.CA.Issue("old", []string{"127.0.0.1"}, false, -30*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	st3, _ := auth.NewServerTLS(auth.ServerTLSConfig{CertFile: lab.Write(t, "old.pem", old.CertPEM), KeyFile: lab.Write(t, "old-key.pem", old.KeyPEM)})
	_, err = get(t, tlsServer(t, st3).URL, auth.ClientTLS{CAFile: lab.CAFile})
	handshake(t, err, "client", "expired")
}

func TestMutualTLS(t *testing.T) {
	lab := authtest.NewLab(t)
	cert, key := lab.Files(t, "bench-pc", []string{"127.0.0.1"}, false)
	st, err := auth.NewServerTLS(auth.ServerTLSConfig{CertFile: cert, KeyFile: key, ClientCAFile: lab.CAFile})
	if err != nil || !st.MutualTLS() {
		t.Fatal(err)
	}
	hs := tlsServer(t, st)
	_, err = get(t, hs.URL, auth.ClientTLS{CAFile: lab.CAFile})
	handshake(t, err, "server", "requires a client certificate")

	cc, ck := lab.Files(t, "alice", nil, true)
	if got, err := get(t, hs.URL, auth.ClientTLS{CAFile: lab.CAFile, CertFile: cc, KeyFile: ck}); err != nil || got != "hello alice" {
		t.Fatalf("with a client certificate: %q, %v", got, err)
	}
	// A client certificate of another CA.
	stranger := authtest.NewLab(t)
	sc, sk := stranger.Files(t, "mallory", nil, true)
	_, err = get(t, hs.URL, auth.ClientTLS{CAFile: lab.CAFile, CertFile: sc, KeyFile: sk})
	handshake(t, err, "server", "")
}

// TestCertificateReload: replacing the certificate files changes the
// certificate of the next handshake, without a restart; a broken file
// keeps the one before.
func TestCertificateReload(t *testing.T) {
	lab := authtest.NewLab(t)
	cert, key := lab.Files(t, "bench-pc", []string{"127.0.0.1"}, false)
	st, err := auth.NewServerTLS(auth.ServerTLSConfig{CertFile: cert, KeyFile: key, CheckEvery: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	hs := tlsServer(t, st)
	serial := func() string {
		c, err := tls.Dial("tcp", strings.TrimPrefix(hs.URL, "https://"), &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	first := serial()
	next := lab.Issue(t, "bench-pc", []string{"127.0.0.1"}, false)
	later := time.Now().Add(time.Minute)
	for p, b := range map[string][]byte{cert: next.CertPEM, key: next.KeyPEM} {
		os.WriteFile(p, b, 0o600)
		os.Chtimes(p, later, later)
	}
	if got := serial(); got != next.Cert.SerialNumber.String() || got == first {
		t.Fatalf("after replacing the files the server presents serial %s, want %s (was %s)", got, next.Cert.SerialNumber, first)
	}
	os.WriteFile(cert, []byte("not a certificate"), 0o600)
	os.Chtimes(cert, later.Add(time.Minute), later.Add(time.Minute))
	if got := serial(); got != next.Cert.SerialNumber.String() {
		t.Fatalf("a broken certificate file replaced the good one: serial %s", got)
	}
	if err := st.Reload(); err == nil {
		t.Fatal("Reload of a broken file reported no error")
	}
}
