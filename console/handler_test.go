package console_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/openmhp/mhp-go/auth"
	"github.com/openmhp/mhp-go/console"
)

func TestConfigValidate(t *testing.T) {
	if _, err := console.Device(console.Config{}); err == nil {
		t.Error("Device without a transport accepted")
	}
	ok := http.NotFoundHandler()
	stop := func(context.Context, string) []console.EStopAnswer { return nil }
	for _, c := range []console.LabConfig{{EStopAll: stop}, {Directory: ok}, {Directory: ok, EStopAll: stop, EStopTimeout: -1}} {
		if _, err := console.Lab(c); err == nil {
			t.Errorf("Lab(%+v) accepted", c)
		}
	}
}

func TestPagesArePublicWithSafeHeaders(t *testing.T) {
	h, err := console.Device(console.Config{Transport: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot) // the transport: reached for anything but the page
	})})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	defer hs.Close()
	for _, c := range []struct {
		path, want string
		code       int
	}{
		{"/", `id="estop"`, 200},
		{"/console/device.js", "safety/estop", 200},
		{"/console/common.js", "sessionStorage", 200},
		{"/console/app.css", ".estop", 200},
		{"/console/nope.js", "", 404},
		{"/mhp.json", "", http.StatusTeapot},
		{"/metrics", "", http.StatusTeapot}, // no metrics configured: not ours
	} {
		resp, err := http.Get(hs.URL + c.path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.code || !strings.Contains(string(b), c.want) {
			t.Errorf("GET %s: %d, want %d with %q", c.path, resp.StatusCode, c.code, c.want)
		}
		if c.code == 200 {
			if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "default-src 'self'") {
				t.Errorf("GET %s: CSP %q", c.path, csp)
			}
		}
	}
}

func TestLabEStopAllGuards(t *testing.T) {
	calls := 0
	h, err := console.Lab(console.LabConfig{
		Directory: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) }),
		EStopAll: func(ctx context.Context, reason string) []console.EStopAnswer {
			calls++
			if _, ok := ctx.Deadline(); !ok {
				t.Error("estop-all without a deadline")
			}
			return []console.EStopAnswer{{Target: "http://x", ID: "x", State: "estop", Stopped: true}}
		},
		Guard: tokenGuard(t, "tok"),
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	defer hs.Close()
	host := strings.TrimPrefix(hs.URL, "http://")
	for _, c := range []struct {
		name, path, body, token, origin string
		code                            int
	}{
		{"no token", "/lab/estop-all", `{}`, "", "", 401},
		{"wrong token", "/lab/estop-all", `{}`, "nope", "", 401},
		{"foreign origin", "/lab/estop-all", `{}`, "tok", "http://evil.example", 403},
		{"not JSON", "/lab/estop-all", `stop!`, "tok", "", 400},
		{"reason too long", "/lab/estop-all", `{"reason":"` + strings.Repeat("x", 600) + `"}`, "tok", "", 400},
		{"ok", "/lab/estop-all", `{"reason":"fire"}`, "tok", "", 200},
		{"ok from the page", "/lab/estop-all", `{}`, "tok", "http://" + host, 200},
		{"directory needs the token", "/rpc", `{}`, "", "", 401},
		{"directory with it", "/rpc", `{}`, "tok", "", http.StatusTeapot},
	} {
		req, _ := http.NewRequest(http.MethodPost, hs.URL+c.path, strings.NewReader(c.body))
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		if c.origin != "" {
			req.Header.Set("Origin", c.origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.code {
			t.Errorf("%s: HTTP %d, want %d", c.name, resp.StatusCode, c.code)
		}
	}
	if calls != 2 {
		t.Errorf("EStopAll called %d times, want 2 (only the accepted requests)", calls)
	}
}

func TestTrustedHost(t *testing.T) {
	for host, want := range map[string]bool{
		"127.0.0.1:80": true, "[::1]:8080": true, "localhost:1": true, "LOCALHOST.": true, "127.1.2.3": true,
		"lab-pc:18921": true, "evil.example:18921": false, "10.0.0.5:18921": true, "[fe80::1]:1": true, "": false, "localhost.evil.example": false,
	} {
		if got := console.TrustedHost(host, []string{"lab-pc"}); got != want {
			t.Errorf("TrustedHost(%q) = %v, want %v", host, got, want)
		}
	}
}

// tokenGuard is the front door of a server with one bearer token ("" for none).
func tokenGuard(t *testing.T, token string) auth.Guard {
	t.Helper()
	if token == "" {
		return auth.Guard{}
	}
	a, err := auth.New(auth.Config{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	return auth.Guard{Auth: a}
}
