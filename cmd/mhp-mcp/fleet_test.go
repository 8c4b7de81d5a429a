package main

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openmhp/mhp-go/host"
)

// With no targets mhp-mcp serves the host's fleet: its packages hosted in
// process, found, read and written (a twin, simulated by the host's say).
func TestNoTargetsServesTheFleet(t *testing.T) {
	home, _ := twinFleet(t)
	call := sdkCaller(t, serveHTTP(t, "--http", "127.0.0.1:0", "--home", home))
	found := call("mhp_find", map[string]any{"query": "PCR thermocycler"})
	if rs, _ := found["results"].([]any); len(rs) != 1 || rs[0].(map[string]any)["state"] != "idle" {
		t.Fatalf("find: %v", found)
	}
	call("mhp_write", map[string]any{"device": "thermocycler-01-sim", "name": "target_temperature", "value": 60})
	if fl, _ := call("mhp_lab", map[string]any{"op": "list"})["fleet"].([]any); len(fl) != 1 {
		t.Fatalf("list: %v", fl)
	}
}

// twinFleet is a home whose fleet holds the twin of the example
// thermocycler package (its entry returned).
func twinFleet(t *testing.T) (string, host.Entry) {
	t.Helper()
	home := t.TempDir()
	f, err := host.Open(host.Config{Home: home})
	if err != nil {
		t.Fatal(err)
	}
	pkg, _ := filepath.Abs("../../examples/devices/thermocycler-01")
	e, err := f.Prepare(context.Background(), pkg, host.AddOptions{Twin: true})
	if err == nil {
		_, err = f.Commit(e)
	}
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	return home, e
}

// sdkCaller connects the Go SDK client to url and returns a call that
// answers a tool's structured result, failing the test on a tool error.
func sdkCaller(t *testing.T, url string) func(tool string, args map[string]any) map[string]any {
	t.Helper()
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: http.DefaultClient}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return func(tool string, args map[string]any) map[string]any {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		var body map[string]any
		b, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(b, &body)
		if res.IsError {
			t.Fatalf("%s %v: %v", tool, args, body)
		}
		return body
	}
}
