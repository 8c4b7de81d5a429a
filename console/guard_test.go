package console_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/openmhp/mhp-go/auth"
	"github.com/openmhp/mhp-go/auth/authtest"
	"github.com/openmhp/mhp-go/console"
	"github.com/openmhp/mhp-go/transport"
)

// TestHostCheckOnEveryConsoleRoute: the page, its assets, /whoami,
// /metrics, the transport's routes and the lab's estop-all all refuse a
// foreign Host (DNS rebinding) when no credential is required.
func TestHostCheckOnEveryConsoleRoute(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	dev, err := console.Device(console.Config{Transport: ok, Metrics: ok})
	if err != nil {
		t.Fatal(err)
	}
	lab, err := console.Lab(console.LabConfig{Directory: ok, Metrics: ok,
		EStopAll: func(context.Context, string) []console.EStopAnswer { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	for name, h := range map[string]http.Handler{"device": dev, "lab": lab} {
		hs := httptest.NewServer(h)
		defer hs.Close()
		for _, rt := range []struct{ method, path string }{{"GET", "/"}, {"GET", "/console/app.css"}, {"GET", "/whoami"},
			{"GET", "/metrics"}, {"POST", "/rpc"}, {"GET", "/events"}, {"GET", "/mhp.json"}, {"POST", "/lab/estop-all"}} {
			for host, foreign := range map[string]bool{"evil.example": true, "127.0.0.1": false} {
				req, _ := http.NewRequest(rt.method, hs.URL+rt.path, strings.NewReader(`{}`))
				req.Host = host
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if foreign != (resp.StatusCode == http.StatusForbidden) {
					t.Errorf("%s %s %s with Host %s: %d", name, rt.method, rt.path, host, resp.StatusCode)
				}
			}
		}
	}
}

// TestWhoami: the page learns who it is signed in as, and what it may show.
func TestWhoami(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {})
	a, err := auth.New(auth.Config{CredentialsFile: credentials(t)})
	if err != nil {
		t.Fatal(err)
	}
	h, err := console.Device(console.Config{Transport: ok, Guard: auth.Guard{Auth: a}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	defer hs.Close()
	who := func(token string) console.Whoami {
		req, _ := http.NewRequest(http.MethodGet, hs.URL+"/whoami", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var w console.Whoami
		if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&w) != nil {
			t.Fatalf("GET /whoami: %d", resp.StatusCode)
		}
		return w
	}
	if w := who(""); w.Role != "" || len(w.Can) != 0 {
		t.Fatalf("nobody: %+v", w)
	}
	if w := who("vera-token"); w.Name != "vera" || w.Role != auth.RoleViewer || strings.Join(w.Can, ",") != "read,estop" {
		t.Fatalf("viewer: %+v", w)
	}
	if w := who("olga-token"); w.Role != auth.RoleOperator || strings.Join(w.Can, ",") != "read,estop,write,operator" {
		t.Fatalf("operator: %+v", w)
	}
}

// credentials writes a credentials file with a viewer (vera-token) and an
// operator (olga-token).
func credentials(t *testing.T) string {
	return authtest.Credentials(t, t.TempDir(), "vera=viewer:vera-token", "olga=operator:olga-token")
}

// TestOpenConsoleDoesNotOpenTheTransport: a console mounted without the
// transport's guard does not let requests past the transport's own
// credentials.
func TestOpenConsoleDoesNotOpenTheTransport(t *testing.T) {
	a, err := auth.New(auth.Config{Token: "secret-token-1"})
	if err != nil {
		t.Fatal(err)
	}
	inner := auth.Guard{Auth: a}.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "device") }))
	h, err := console.Device(console.Config{Transport: inner})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	defer hs.Close()
	resp, err := http.Post(hs.URL+"/rpc", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("POST /rpc through an open console: %d, want 401 from the transport", resp.StatusCode)
	}
}

// TestConsoleOnTheServerKeepsItsRoles: a console given the server itself
// (Config.Server) puts the page behind the server's guard, so /whoami
// names the operator the transport would; mounted with only the handler
// it names nobody (the footgun Server closes).
func TestConsoleOnTheServerKeepsItsRoles(t *testing.T) {
	a, err := auth.New(auth.Config{CredentialsFile: credentials(t)})
	if err != nil {
		t.Fatal(err)
	}
	srv := transport.NewServer(simDriver(t, "sim:thermocycler", "tc-whoami"), transport.Options{Auth: a})
	defer srv.Close()
	for _, c := range []struct {
		name string
		cfg  console.Config
		want string // the name and role /whoami gives
	}{
		{"server", console.Config{Server: srv}, "olga operator"},
		{"server and wrapped handler", console.Config{Server: srv, Transport: srv.Handler()}, "olga operator"},
		{"handler only", console.Config{Transport: srv.Handler()}, " agent"}, // anonymous: the page's own guard has no credentials

	} {
		h, err := console.Device(c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(h)
		req, _ := http.NewRequest(http.MethodGet, hs.URL+"/whoami", nil)
		req.Header.Set("Authorization", "Bearer olga-token")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var w console.Whoami
		derr := json.NewDecoder(resp.Body).Decode(&w)
		resp.Body.Close()
		hs.Close()
		if got := w.Name + " " + string(w.Role); derr != nil || got != c.want {
			t.Errorf("%s: /whoami as olga = %+v (%v), want %q", c.name, w, derr, c.want)
		}
	}
}
