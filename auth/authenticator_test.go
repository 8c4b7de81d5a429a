package auth_test

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/auth"
	"github.com/openmhp/mhp-go/auth/authtest"
)

func TestParseCredentialsIsStrict(t *testing.T) {
	h := auth.HashToken("alice-token")
	ok := "- {name: alice, role: operator, token_sha256: " + h + "}\n- {name: bench, role: agent, client_cert: {cn: bench-3}}\n" +
		"- {name: wall, role: viewer, client_cert: {san: wall.lab}}\n"
	creds, err := auth.ParseCredentials([]byte(ok))
	if err != nil || len(creds) != 3 || creds[1].ClientCert.CN != "bench-3" {
		t.Fatalf("ParseCredentials = %+v, %v", creds, err)
	}
	for name, bad := range map[string]string{
		"unknown key":       "- {name: a, role: agent, token_sha256: " + h + ", colour: red}",
		"duplicate key":     "- name: a\n  name: b\n  role: agent\n  token_sha256: " + h,
		"duplicate name":    "- {name: a, role: agent, token_sha256: " + h + "}\n- {name: a, role: viewer, client_cert: {cn: x}}",
		"duplicate token":   "- {name: a, role: agent, token_sha256: " + h + "}\n- {name: b, role: viewer, token_sha256: " + strings.ToUpper(h) + "}",
		"bad role":          "- {name: a, role: root, token_sha256: " + h + "}",
		"no credential":     "- {name: a, role: agent}",
		"both credentials":  "- {name: a, role: agent, token_sha256: " + h + ", client_cert: {cn: a}}",
		"a token, not hash": "- {name: a, role: agent, token_sha256: hunter2}",
		"cn and san":        "- {name: a, role: agent, client_cert: {cn: a, san: a}}",
		"slash in name":     "- {name: a/b, role: agent, token_sha256: " + h + "}",
		"not a list":        "name: a",
	} {
		if _, err := auth.ParseCredentials([]byte(bad)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func bearerRequest(token string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/rpc", nil)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	return r
}

// TestRevokedTokenStopsWorking: the credentials file is re-read when it
// changes (and on Reload, the SIGHUP path); a token taken out of it is
// refused without a restart, and a broken file keeps the identities before.
func TestRevokedTokenStopsWorking(t *testing.T) {
	file := filepath.Join(t.TempDir(), "credentials.yaml")
	write := func(body string, mod time.Time) {
		if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(file, mod, mod); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Now().Add(-time.Hour)
	write("- {name: alice, role: operator, token_sha256: "+auth.HashToken("alice-token")+"}\n- {name: bob, role: viewer, token_sha256: "+auth.HashToken("bob-token")+"}\n", t0)
	a, err := auth.New(auth.Config{CredentialsFile: file, CheckEvery: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	id, err := a.Authenticate(bearerRequest("bob-token"))
	if err != nil || id.Name != "bob" || id.Role != auth.RoleViewer || id.Via != "token" {
		t.Fatalf("bob = %+v, %v", id, err)
	}
	for _, tok := range []string{"", "nobody", "alice-token "} {
		if _, err := a.Authenticate(bearerRequest(tok)); err == nil && tok != "alice-token " {
			t.Fatalf("token %q accepted", tok)
		}
	}
	// bob is revoked: the file changes (mtime), no restart.
	write("- {name: alice, role: operator, token_sha256: "+auth.HashToken("alice-token")+"}\n", t0.Add(time.Minute))
	_, err = a.Authenticate(bearerRequest("bob-token"))
	if e, ok := mhp.AsError(err); !ok || e.Data[mhp.DataReason] != auth.ReasonUnauthorized {
		t.Fatalf("bob after revocation: %v, want unauthorized", err)
	}
	// A broken file: refused, alice stays.
	write("- {name: alice, role: emperor}\n", t0.Add(2*time.Minute))
	if err := a.Reload(); err == nil || a.Err() == nil {
		t.Fatal("a broken credentials file reloaded")
	}
	if id, err := a.Authenticate(bearerRequest("alice-token")); err != nil || id.Role != auth.RoleOperator {
		t.Fatalf("alice after a broken reload: %+v, %v", id, err)
	}
}

func TestLegacyTokensAndOpenServer(t *testing.T) {
	var none *auth.Authenticator
	if id, err := none.Authenticate(bearerRequest("")); err != nil || id != auth.Anonymous || none.Required() {
		t.Fatalf("no authenticator: %+v, %v", id, err)
	}
	a, err := auth.New(auth.Config{Token: "agent-token-1234", OperatorToken: "operator-token-1234"})
	if err != nil {
		t.Fatal(err)
	}
	if id, err := a.Authenticate(bearerRequest("agent-token-1234")); err != nil || id.Name != auth.LegacyAgent || id.Role != auth.RoleAgent {
		t.Fatalf("legacy token: %+v, %v", id, err)
	}
	r := bearerRequest("agent-token-1234")
	r.Header.Set(mhp.HeaderOperator, "operator-token-1234")
	if id, err := a.Authenticate(r); err != nil || id.Name != auth.LegacyAgent || id.Role != auth.RoleOperator {
		t.Fatalf("legacy operator header on the agent: %+v, %v (want the agent's name, role operator)", id, err)
	}
	r.Header.Set(mhp.HeaderOperator, "guess")
	if id, _ := a.Authenticate(r); id.Role != auth.RoleAgent {
		t.Fatalf("a wrong operator token raised the role to %s", id.Role)
	}
	if _, err := a.Authenticate(bearerRequest("")); err == nil {
		t.Fatal("no token accepted by a server with one")
	}
	if _, err := auth.New(auth.Config{Token: "same-token-1234", OperatorToken: "same-token-1234"}); err == nil {
		t.Fatal("equal agent and operator tokens accepted")
	}
}

func TestClientCertificateIdentity(t *testing.T) {
	lab := authtest.NewLab(t)
	file := filepath.Join(t.TempDir(), "credentials.yaml")
	os.WriteFile(file, []byte("- {name: bench, role: agent, client_cert: {cn: bench-3}}\n- {name: wall, role: viewer, client_cert: {san: wall.lab}}\n"), 0o600)
	a, err := auth.New(auth.Config{CredentialsFile: file, ClientCerts: true})
	if err != nil {
		t.Fatal(err)
	}
	withCert := func(c *x509.Certificate) *http.Request {
		r := bearerRequest("")
		r.TLS = &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{c, lab.CA.Cert}}}
		return r
	}
	if id, err := a.Authenticate(withCert(lab.Issue(t, "bench-3", nil, true).Cert)); err != nil || id.Name != "bench" || id.Via != "cert" {
		t.Fatalf("by CN: %+v, %v", id, err)
	}
	if id, err := a.Authenticate(withCert(lab.Issue(t, "display", []string{"wall.lab"}, true).Cert)); err != nil || id.Name != "wall" || id.Role != auth.RoleViewer {
		t.Fatalf("by SAN: %+v, %v", id, err)
	}
	if _, err := a.Authenticate(withCert(lab.Issue(t, "stranger", nil, true).Cert)); err == nil || !strings.Contains(err.Error(), "stranger") {
		t.Fatalf("a verified certificate no credential names: %v", err)
	}
	open, _ := auth.New(auth.Config{ClientCerts: true})
	if id, err := open.Authenticate(withCert(lab.Issue(t, "bench-9", nil, true).Cert)); err != nil || id.Name != "bench-9" || id.Role != auth.RoleAgent {
		t.Fatalf("mTLS without a credentials file: %+v, %v (want the CN as an agent)", id, err)
	}
}

func TestHostAllowed(t *testing.T) {
	for host, want := range map[string]bool{"": true, "127.0.0.1:1": true, "[::1]:8": true, "localhost:9": true, "a.localhost": true,
		"LAB-PC.local:18921": true, "evil.example": false, "evil.example:18921": false, "localhost.evil.example": false} {
		if got := auth.HostAllowed(host, []string{"lab-pc.local"}); got != want {
			t.Errorf("HostAllowed(%q) = %v, want %v", host, got, want)
		}
	}
}

func TestCheckExposure(t *testing.T) {
	for _, tc := range []struct {
		addr                     string
		tls, creds, insecure, ok bool
	}{
		{"127.0.0.1:80", false, false, false, true},
		{"[::1]:80", false, false, false, true},
		{"localhost:80", false, false, false, true},
		{":80", false, false, false, true},
		{"80", false, false, false, true},
		{"0.0.0.0:80", false, false, false, false},
		{"10.1.2.3:80", false, true, false, false},
		{"lab-pc:80", true, false, false, false},
		{"0.0.0.0:80", true, true, false, true},
		{"0.0.0.0:80", false, false, true, true},
	} {
		err := auth.CheckExposure("serve", tc.addr, tc.tls, tc.creds, tc.insecure)
		if (err == nil) != tc.ok {
			t.Errorf("CheckExposure(%s, tls %v, credentials %v, insecure %v) = %v", tc.addr, tc.tls, tc.creds, tc.insecure, err)
		}
		if err != nil && (!strings.Contains(err.Error(), "mhp certs") || !strings.Contains(err.Error(), "--insecure")) {
			t.Errorf("refusal does not say how: %v", err)
		}
	}
}
