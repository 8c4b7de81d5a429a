package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runHome runs the CLI with HOME set to home.
func runHome(t *testing.T, home string, args ...string) result {
	t.Helper()
	a, out, errb := testApp()
	a.getenv = func(k string) string {
		if k == "HOME" {
			return home
		}
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code := a.run(ctx, args)
	return result{code, out.String(), errb.String()}
}

// mhp setup merges mhp-mcp into a harness config: other servers and keys
// kept (in their order), idempotent, --dry-run writes nothing, a malformed
// file is left untouched with a clear error.
func TestSetupMergesTheHarnessConfig(t *testing.T) {
	home := t.TempDir()
	cmd := filepath.Join(home, "bin", "mhp-mcp")
	file := filepath.Join(home, ".claude.json")
	sample := `{"numStartups": 12, "mcpServers": {"github": {"command": "gh-mcp", "args": []}}, "projects": {"/src/x": {"allowedTools": []}}}`
	if err := os.WriteFile(file, []byte(sample), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runHome(t, home, "setup", "claude-code", "--command", cmd, "--dry-run")
	if r.code != 0 || !strings.Contains(r.stdout, "would merge") || !strings.Contains(r.stdout, cmd) {
		t.Fatalf("dry run: %+v", r)
	}
	if b, _ := os.ReadFile(file); string(b) != sample {
		t.Fatal("--dry-run wrote the file")
	}
	if r := runHome(t, home, "setup", "claude-code", "--command", cmd); r.code != 0 {
		t.Fatalf("setup: %+v", r)
	}
	b, _ := os.ReadFile(file)
	var got struct {
		NumStartups int                        `json:"numStartups"`
		MCPServers  map[string]map[string]any  `json:"mcpServers"`
		Projects    map[string]json.RawMessage `json:"projects"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.NumStartups != 12 || got.MCPServers["github"] == nil || got.Projects["/src/x"] == nil || got.MCPServers["mhp"]["command"] != cmd {
		t.Fatalf("merged:\n%s", b)
	}
	if strings.Index(string(b), "numStartups") > strings.Index(string(b), "projects") {
		t.Fatalf("key order changed:\n%s", b)
	}
	if fi, _ := os.Stat(file); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
	// Again: nothing changes, byte for byte.
	if r := runHome(t, home, "setup", "claude-code", "--command", cmd); r.code != 0 || !strings.Contains(r.stdout, "nothing to change") {
		t.Fatalf("second setup: %+v", r)
	}
	if again, _ := os.ReadFile(file); string(again) != string(b) {
		t.Fatal("a second setup changed the file")
	}
	// A malformed file is left as it is.
	bad := filepath.Join(home, "bad.json")
	broken := `{"mcpServers": {"github": {"command": "gh-mcp",}}`
	os.WriteFile(bad, []byte(broken), 0o644)
	r = runHome(t, home, "setup", bad, "--command", cmd)
	if r.code != exitRefused || !strings.Contains(r.stderr, "not JSON") || !strings.Contains(r.stderr, "left untouched") {
		t.Fatalf("malformed: %+v", r)
	}
	if now, _ := os.ReadFile(bad); string(now) != broken {
		t.Fatal("the malformed file was changed")
	}
	// Claude Desktop's file is made when missing (Linux: XDG or ~/.config).
	if r := runHome(t, home, "setup", "claude-desktop", "--command", cmd, "--policy", "pol.json"); r.code != 0 {
		t.Fatalf("desktop: %+v", r)
	}
	matches, _ := filepath.Glob(filepath.Join(home, "*", "Claude", "claude_desktop_config.json"))
	matches2, _ := filepath.Glob(filepath.Join(home, "*", "*", "Claude", "claude_desktop_config.json"))
	if len(matches)+len(matches2) != 1 {
		t.Fatalf("desktop config not written: %v %v", matches, matches2)
	}
}
