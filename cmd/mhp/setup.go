package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/openmhp/mhp-go/host"
)

var setupFlags = flagSpec{"dry-run": false, "name": true, "command": true, "home": true, "policy": true}

const setupUsage = `setup: usage: mhp setup claude-desktop|claude-code|FILE.json [--dry-run] [--name mhp] [--command PATH] [--home DIR] [--policy FILE]
  registers mhp-mcp (serving the host's fleet) in the harness's MCP config: merged into the file, never overwritten;
  running it again changes nothing. --policy passes a host policy (e.g. {"enabled": true, "allow_hardware": true}).`

// maxConfigBytes bounds a harness config file (~/.claude.json grows with history).
const maxConfigBytes = 64 << 20

// setupCmd runs `mhp setup HARNESS|FILE`.
func (a *app) setupCmd(ctx context.Context, args []string) int {
	p, err := parseArgs(args, setupFlags)
	if err != nil || len(p.args) != 1 || p.has("help") {
		return a.usageError("%s", setupUsage)
	}
	file, err := a.harnessConfig(p.args[0])
	if err != nil {
		return a.usageError("setup: %v", err)
	}
	entry, err := a.mcpEntry(p)
	if err != nil {
		fmt.Fprintf(a.stderr, "mhp setup: %v\n", err)
		return exitRefused
	}
	name := p.flags["name"]
	if name == "" {
		name = "mhp"
	}
	old, err := readConfig(file)
	if err != nil {
		fmt.Fprintf(a.stderr, "mhp setup: %v\n", err)
		return exitRefused
	}
	merged, changed, err := mergeServer(old, name, entry)
	if err != nil {
		fmt.Fprintf(a.stderr, "mhp setup: %s: %v; the file was left untouched\n", file, err)
		return exitRefused
	}
	show, _ := json.MarshalIndent(map[string]any{"mcpServers": map[string]any{name: entry}}, "", "  ")
	switch {
	case !changed:
		fmt.Fprintf(a.stdout, "%s already registers %q as wanted: nothing to change\n", file, name)
		return exitOK
	case p.has("dry-run"):
		fmt.Fprintf(a.stdout, "would merge into %s (nothing written):\n%s\n", file, show)
		return exitOK
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		fmt.Fprintf(a.stderr, "mhp setup: %v\n", err)
		return exitRefused
	}
	mode := os.FileMode(0o600)
	if fi, err := os.Stat(file); err == nil {
		mode = fi.Mode().Perm()
	}
	if err := host.WriteFileAtomic(file, merged, mode); err != nil {
		fmt.Fprintf(a.stderr, "mhp setup: %v\n", err)
		return exitRefused
	}
	fmt.Fprintf(a.stdout, "registered %q in %s:\n%s\nRestart the harness to load it. The Agent Skills: mhp skills install ~/.claude/skills\n", name, file, show)
	return exitOK
}

// harnessConfig is the MCP config file of a harness, or the file named.
func (a *app) harnessConfig(which string) (string, error) {
	home, err := a.homeDir()
	if err != nil {
		return "", err
	}
	switch which {
	case "claude-code":
		return filepath.Join(home, ".claude.json"), nil // user scope: the top-level mcpServers
	case "claude-desktop":
		switch runtime.GOOS {
		case "darwin":
			return filepath.Join(home, "Library", "Application Support", "Claude", "claude_desktop_config.json"), nil
		case "windows":
			if app := a.env("APPDATA"); app != "" {
				return filepath.Join(app, "Claude", "claude_desktop_config.json"), nil
			}
			return "", errors.New("APPDATA is not set")
		}
		cfg := a.env("XDG_CONFIG_HOME")
		if cfg == "" {
			cfg = filepath.Join(home, ".config")
		}
		return filepath.Join(cfg, "Claude", "claude_desktop_config.json"), nil
	}
	if !strings.HasSuffix(which, ".json") {
		return "", fmt.Errorf("%q: give claude-desktop, claude-code or the path of a JSON MCP config file", which)
	}
	return filepath.Abs(which)
}

func (a *app) env(k string) string {
	if a.getenv == nil {
		return ""
	}
	return a.getenv(k)
}

func (a *app) homeDir() (string, error) {
	if h := a.env("HOME"); h != "" {
		return h, nil
	}
	return os.UserHomeDir()
}

// mcpEntry is the server entry: the absolute path of mhp-mcp (on PATH, or
// beside this mhp, where go install puts both) and its arguments.
func (a *app) mcpEntry(p parsed) (map[string]any, error) {
	cmd := p.flags["command"]
	if cmd == "" {
		if found, err := exec.LookPath("mhp-mcp"); err == nil {
			cmd = found
		} else if self, err := os.Executable(); err == nil {
			if sib := filepath.Join(filepath.Dir(self), "mhp-mcp"+exeSuffix()); fileExists(sib) {
				cmd = sib
			}
		}
	}
	if cmd == "" {
		return nil, errors.New("mhp-mcp is not on PATH nor beside mhp: go install github.com/openmhp/mhp-go/cmd/mhp-mcp@latest (or give --command PATH)")
	}
	abs, err := filepath.Abs(cmd)
	if err != nil {
		return nil, err
	}
	entry := map[string]any{"command": abs, "args": []string{}}
	var args []string
	if pol := p.flags["policy"]; pol != "" {
		ap, err := filepath.Abs(pol)
		if err != nil {
			return nil, err
		}
		args = append(args, "--policy", ap)
	}
	if h := p.flags["home"]; h != "" {
		ah, err := filepath.Abs(h)
		if err != nil {
			return nil, err
		}
		args = append(args, "--home", ah)
	}
	if args != nil {
		entry["args"] = args
	}
	return entry, nil
}

func exeSuffix() string {
	if runtime.GOOS == "windows" {
		return ".exe"
	}
	return ""
}

func fileExists(p string) bool { fi, err := os.Stat(p); return err == nil && fi.Mode().IsRegular() }

// readConfig reads a harness config; a missing file is empty.
func readConfig(file string) ([]byte, error) {
	f, err := os.Open(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxConfigBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes", file, maxConfigBytes)
	}
	return b, nil
}

// member is one key of a JSON object, in file order.
type member struct {
	key string
	val json.RawMessage
}

// objectMembers splits a JSON object into its members, keeping their order.
func objectMembers(b []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("not JSON: %v", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("not a JSON object")
	}
	var out []member
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("not JSON: %v", err)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("not JSON: %v", err)
		}
		out = append(out, member{k.(string), v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("not JSON: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("not JSON: text after the object")
	}
	return out, nil
}

func joinMembers(ms []member) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range ms {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m.key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(m.val)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// mergeServer sets mcpServers[name] = entry in a config, keeping every
// other key and server (and their order); changed is false when the entry
// is already there as wanted.
func mergeServer(old []byte, name string, entry map[string]any) (merged []byte, changed bool, err error) {
	if len(bytes.TrimSpace(old)) == 0 {
		old = []byte("{}")
	}
	top, err := objectMembers(old)
	if err != nil {
		return nil, false, err
	}
	want, _ := json.Marshal(entry)
	i := -1
	for j, m := range top {
		if m.key == "mcpServers" {
			i = j
		}
	}
	var servers []member
	if i >= 0 {
		if servers, err = objectMembers(top[i].val); err != nil {
			return nil, false, fmt.Errorf("mcpServers is %v", err)
		}
	}
	found := false
	for j, s := range servers {
		if s.key != name {
			continue
		}
		found = true
		if jsonEqual(s.val, want) {
			return old, false, nil
		}
		servers[j].val = want
	}
	if !found {
		servers = append(servers, member{name, want})
	}
	if i >= 0 {
		top[i].val = joinMembers(servers)
	} else {
		top = append(top, member{"mcpServers", joinMembers(servers)})
	}
	var out bytes.Buffer
	if err := json.Indent(&out, joinMembers(top), "", "  "); err != nil {
		return nil, false, err
	}
	out.WriteByte('\n')
	return out.Bytes(), true, nil
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}
