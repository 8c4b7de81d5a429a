package main

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/sila2/silatest"
)

// closedPort returns an address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

var backendKey = regexp.MustCompile(`(?m)^(node_url|url|endpoint|broker): ([a-z.]+://)?\S+`)

// downCopy copies an example folder into a temp dir with its config's
// backend pointed at a closed port and its connect waits shortened.
func downCopy(t *testing.T, file string) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Dir(file)
	entries, _ := os.ReadDir(src)
	for _, e := range entries {
		if e.IsDir() {
			_ = os.MkdirAll(filepath.Join(dir, e.Name()), 0o755)
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		_ = os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	s := backendKey.ReplaceAllString(string(b), "${1}: ${2}"+closedPort(t))
	s = strings.NewReplacer("connect_timeout: 10s", "connect_timeout: 200ms", "connect_timeout_s: 10", "connect_timeout_s: 0.2").Replace(s)
	if strings.Contains(s, "ca: server-ca.pem") {
		cert, err := silatest.SelfSigned("example")
		if err != nil {
			t.Fatal(err)
		}
		_ = os.WriteFile(filepath.Join(dir, "server-ca.pem"), cert.PEM, 0o644)
	}
	out := filepath.Join(dir, filepath.Base(file))
	if err := os.WriteFile(out, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// pingBackend pings a served device and returns its backend link.
func pingBackend(t *testing.T, url string) *mhp.BackendLink {
	t.Helper()
	r := runCLI(t, url, "ping", "--json")
	var res mhp.PingResult
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &res) != nil {
		t.Fatalf("ping: %d %s %s", r.code, r.stdout, r.stderr)
	}
	return res.Backend
}

// TestServeExampleConfigsBackendDown: every example adapter config serves
// with its backend down and no descriptor snapshot, says so in ping, and
// refuses actuation not_started.
func TestServeExampleConfigsBackendDown(t *testing.T) {
	files, _ := filepath.Glob("../../examples/*/*.yaml")
	n := 0
	for _, f := range files {
		b, _ := os.ReadFile(f)
		if !strings.Contains(string(b), "\nadapter: ") && !strings.HasPrefix(string(b), "adapter: ") {
			continue
		}
		n++
		t.Run(filepath.Base(filepath.Dir(f))+"/"+filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			url := serveFile(t, downCopy(t, f))
			l := pingBackend(t, url)
			if l == nil || l.Connected || l.Error == "" {
				t.Fatalf("ping says the backend is %+v", l)
			}
			// Actuation is refused before anything is sent: an action the
			// file maps, or any name while no description was ever read.
			d := runCLI(t, url, "describe", "full", "--json")
			var desc mhp.Description
			if d.code != 0 || json.Unmarshal([]byte(d.stdout), &desc) != nil {
				t.Fatalf("describe: %d %s", d.code, d.stdout)
			}
			name := "anything"
			if len(desc.Descriptor.Actions) > 0 {
				name = desc.Descriptor.Actions[0].Name
			} else if !strings.Contains(desc.Descriptor.Notes, "never reached") {
				t.Errorf("a device without items does not say the backend was never reached: %q", desc.Descriptor.Notes)
			}
			inv := runCLI(t, url, "invoke", name, "--json", "--approved")
			if inv.code == 0 || !strings.Contains(inv.stdout, mhp.OutcomeNotStarted) {
				t.Fatalf("invoke %s with the backend down: %d %s %s", name, inv.code, inv.stdout, inv.stderr)
			}
		})
	}
	if n < 6 {
		t.Fatalf("found %d example adapter configs", n)
	}
}
