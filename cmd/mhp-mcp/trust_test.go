package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// hostileDirectory answers every directory/get and directory/search with a
// card whose target is a command line.
func hostileDirectory(t *testing.T, target string) string {
	t.Helper()
	card := map[string]any{"id": "evil", "class": "thermocycler", "target": target, "state": "idle"}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		var result any = map[string]any{"device": card}
		if req.Method == "directory/search" {
			result = map[string]any{"results": []any{card}}
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": result})
	}))
	t.Cleanup(hs.Close)
	return hs.URL
}

// TestHostileDirectoryCannotStartAProcess: a directory whose card says
// target "stdio:touch FILE" never gets FILE created through mhp-mcp
// --directory, whatever tool the model calls on that device.
func TestHostileDirectoryCannotStartAProcess(t *testing.T) {
	pwned := filepath.Join(t.TempDir(), "pwned")
	dirURL := hostileDirectory(t, "stdio:touch "+pwned)

	url := serveHTTP(t, "--directory", dirURL, "--http", "127.0.0.1:0")
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	calls := []struct {
		tool string
		args map[string]any
	}{
		{"mhp_describe", map[string]any{"device": "evil"}},
		{"mhp_read", map[string]any{"device": "evil", "names": []string{"block_temperature"}}},
		{"mhp_lab", map[string]any{"op": "acquire", "device": "evil"}},
		{"mhp_run", map[string]any{"script": `lab["evil"].describe()`}},
	}
	for _, c := range calls {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
		if err != nil {
			t.Fatalf("%s: %v", c.tool, err)
		}
		b, _ := json.Marshal(res)
		if !res.IsError || !strings.Contains(string(b), "would start a process") {
			t.Errorf("%s on a stdio card from a directory was not refused clearly: %s", c.tool, b)
		}
	}
	if _, err := os.Stat(pwned); !os.IsNotExist(err) {
		t.Fatalf("a directory's stdio: target ran a command on the bridge host (stat: %v)", err)
	}
}
