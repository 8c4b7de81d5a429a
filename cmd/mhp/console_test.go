package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go/conformance"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestServersMountConsoleAndMetrics: serve and serve-directory answer GET /
// with their page (public: it holds no secret) and GET /metrics behind the
// token; the lab's estop-all reports each device's answer.
func TestServersMountConsoleAndMetrics(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dev := serveAsync(t, "serve", "sim:thermocycler", "--http", "127.0.0.1:0", "--token-file", tokenFile, "--log-format", "json")[0]
	if code, body := get(t, dev+"/", ""); code != http.StatusOK || !strings.Contains(body, `id="estop"`) {
		t.Fatalf("GET / on serve: %d %.200s", code, body)
	}
	if code, _ := get(t, dev+"/metrics", ""); code != http.StatusUnauthorized {
		t.Fatalf("GET /metrics without the token: %d, want 401", code)
	}
	code, body := get(t, dev+"/metrics", "tok")
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if code != http.StatusOK || err != nil {
		t.Fatalf("GET /metrics: %d %v", code, err)
	}
	if _, ok := fams["mhp_backend_connected"]; !ok {
		t.Errorf("mhp_backend_connected missing from serve's /metrics")
	}

	manifest := filepath.Join(t.TempDir(), "lab.yaml")
	if err := os.WriteFile(manifest, []byte("targets:\n  - "+dev+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	lab := serveAsync(t, "serve-directory", manifest, "--http", "127.0.0.1:0", "--token-file", tokenFile)[0]
	if code, body := get(t, lab+"/", ""); code != http.StatusOK || !strings.Contains(body, `id="estop-all"`) {
		t.Fatalf("GET / on serve-directory: %d %.200s", code, body)
	}
	if code, _ := get(t, lab+"/metrics", ""); code != http.StatusUnauthorized {
		t.Fatalf("directory GET /metrics without the token: %d, want 401", code)
	}
	type answer struct {
		ID      string
		State   string
		Stopped bool
		Error   string
	}
	estopAll := func(tok string) (int, []answer) {
		req, _ := http.NewRequest(http.MethodPost, lab+"/lab/estop-all", strings.NewReader(`{"reason":"test"}`))
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct{ Answers []answer }
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out.Answers
	}
	if code, _ := estopAll(""); code != http.StatusUnauthorized {
		t.Fatalf("estop-all without the token: %d, want 401", code)
	}
	// The directory crawls its manifest in the background: wait until it
	// knows the device.
	var answers []answer
	conformance.EventuallyWithin(t, "the directory indexed the device", 30*time.Second, func() bool {
		_, answers = estopAll("tok")
		return len(answers) > 0
	})
	if len(answers) != 1 || answers[0].ID != "thermocycler-01" || !answers[0].Stopped || answers[0].State != "estop" {
		t.Fatalf("estop-all answers: %+v", answers)
	}
}

func TestConsoleHostsAndLogFormat(t *testing.T) {
	for _, c := range []struct{ addr, extra, want string }{
		{":18921", "", ""},
		{"0.0.0.0:18921", "lab-pc, lab-pc.local", "lab-pc,lab-pc.local"},
		{"bench.local:18921", "", "bench.local"},
		{"127.0.0.1:0", ",", ""},
	} {
		if got := strings.Join(consoleHosts(c.addr, c.extra), ","); got != c.want {
			t.Errorf("consoleHosts(%q, %q) = %q, want %q", c.addr, c.extra, got, c.want)
		}
	}
	var b strings.Builder
	log, err := newLogger(&b, parsed{flags: map[string]string{"log-format": "json"}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	log.Info("hello", "k", 1)
	var line map[string]any
	if err := json.Unmarshal([]byte(b.String()), &line); err != nil || line["msg"] != "hello" || line["k"] != 1.0 {
		t.Errorf("--log-format json wrote %q (%v)", b.String(), err)
	}
	if _, err := newLogger(&b, parsed{flags: map[string]string{"log-format": "xml"}}, 0); err == nil {
		t.Error("--log-format xml accepted")
	}
}
