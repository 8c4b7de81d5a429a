package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/examples/sim"
	"github.com/openmhp/mhp-go/transport"
)

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func TestBridgeOverStreamableHTTP(t *testing.T) {
	cfg, err := sim.Config("sim:thermocycler", sim.Options{Speed: 100})
	if err != nil {
		t.Fatal(err)
	}
	drv, err := binding.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	srv := transport.NewServer(drv, transport.Options{})
	defer srv.Close()
	dev := httptest.NewServer(srv.Handler())
	defer dev.Close()

	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("t0ken\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	urls := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--http", "127.0.0.1:0", "--token-file", tokenFile, "thermo=" + dev.URL}, io.Discard,
			func(u string) { urls <- u })
	}()
	var url string
	select {
	case url = <-urls:
	case err := <-done:
		t.Fatalf("mhp-mcp exited: %v", err)
	}
	defer func() { cancel(); <-done }()

	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{"t0ken"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mhp_find", Arguments: map[string]any{"query": "pcr", "state": "idle"}})
	if err != nil || res.IsError {
		t.Fatalf("find: %+v %v", res, err)
	}
	b, _ := json.Marshal(res.StructuredContent)
	var found struct {
		Results []struct{ ID, Class, State string }
	}
	_ = json.Unmarshal(b, &found)
	if len(found.Results) != 1 || found.Results[0].ID != "thermo" || found.Results[0].Class != "thermocycler" || found.Results[0].State != "idle" {
		t.Fatalf("find over HTTP: %s", b)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "mhp_write", Arguments: map[string]any{"device": "thermo", "name": "target_temperature", "value": 500}})
	if err != nil || !res.IsError {
		t.Fatalf("out-of-range write was not refused: %+v %v", res, err)
	}

	// GET /metrics next to /mcp, behind the token: tool calls by tool and outcome.
	metricsURL := strings.TrimSuffix(url, "/mcp") + "/metrics"
	if resp, err := http.Get(metricsURL); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("/metrics without the token: %v %v, want 401", resp, err)
	}
	resp, err := (&http.Client{Transport: bearer{"t0ken"}}).Get(metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	got := map[string]float64{}
	for _, m := range fams["mhp_mcp_tool_calls_total"].GetMetric() {
		l := map[string]string{}
		for _, lp := range m.GetLabel() {
			l[lp.GetName()] = lp.GetValue()
		}
		got[l["tool"]+"/"+l["outcome"]] = m.GetCounter().GetValue()
	}
	if got["mhp_find/ok"] != 1 || got["mhp_write/error"] != 1 {
		t.Errorf("mhp_mcp_tool_calls_total: %v, want mhp_find/ok 1 and mhp_write/error 1", got)
	}
}

func TestArgumentErrors(t *testing.T) {
	for _, args := range [][]string{{}, {"noequals"}, {"a=x", "a=y"}, {"--directory", "http://d", "a=http://x"}} {
		if err := run(context.Background(), args, io.Discard, nil); err == nil {
			t.Errorf("run(%q) accepted", args)
		}
	}
}
