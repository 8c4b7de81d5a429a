package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/transport"
)

// TestHelperMHPMCP is mhp-mcp itself when the test binary is run as the
// child of TestSIGTERMReleasesLeases.
func TestHelperMHPMCP(t *testing.T) {
	args := os.Getenv("MHP_MCP_HELPER_ARGS")
	if args == "" {
		t.Skip("run as mhp-mcp by TestSIGTERMReleasesLeases")
	}
	os.Args = append([]string{"mhp-mcp"}, strings.Split(args, "\x1f")...)
	main()
}

// TestSIGTERMReleasesLeases: mhp-mcp stopped with SIGTERM (systemd, docker
// stop) releases the leases it holds, as with SIGINT, instead of leaving
// them to their ttl.
func TestSIGTERMReleasesLeases(t *testing.T) {
	drv, err := binding.New(binding.Config{Device: mhp.DeviceInfo{ID: "rig", Class: "incubator"}, Logger: slog.New(slog.DiscardHandler),
		Signals: []binding.Signal{{Spec: mhp.Signal{Name: "t", Type: mhp.TypeNumber},
			Read: func(context.Context) (binding.Sample, error) { return binding.Sample{Value: 1.0}, nil }}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drv.Close() })
	srv := transport.NewServer(drv, transport.Options{Logger: slog.New(slog.DiscardHandler)})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); srv.Close() })
	leased := func() bool {
		ctx := mhp.WithSession(context.Background(), "probe")
		if _, err := drv.Acquire(ctx, time.Minute); err != nil {
			return true
		}
		drv.Release(ctx)
		return false
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperMHPMCP$")
	cmd.Env = append(os.Environ(), "MHP_MCP_HELPER_ARGS="+strings.Join([]string{"--simulated", "rig", "rig=" + hs.URL}, "\x1f"))
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	var childErr bytes.Buffer
	cmd.Stderr = &childErr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := bufio.NewScanner(out)
	lines.Buffer(nil, 1<<20)
	send := func(s string) { io.WriteString(in, s+"\n") }
	answer := func() map[string]any {
		t.Helper()
		for lines.Scan() {
			var m map[string]any
			if json.Unmarshal(lines.Bytes(), &m) == nil && m["id"] != nil {
				return m
			}
		}
		t.Fatal("mhp-mcp ended without an answer")
		return nil
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	answer()
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"mhp_lab","arguments":{"op":"acquire","device":"rig","ttl_s":3600}}}`)
	if a := answer(); !leased() {
		t.Fatalf("acquire through mhp-mcp: %v", a)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			cmd.Process.Kill()
			cmd.Wait()
			t.Logf("mhp-mcp's stderr:\n%s", childErr.String())
		}
	})
	conformance.Eventually(t, "the lease released after SIGTERM (its ttl is an hour)", func() bool { return !leased() })
}

// TestDisabledPolicySaysWhyAtStart: operator_tools without enabled is said
// on stderr at start, not discovered as an empty tool list.
func TestDisabledPolicySaysWhyAtStart(t *testing.T) {
	pf := filepath.Join(t.TempDir(), "policy.json")
	os.WriteFile(pf, []byte(`{"operator_tools": true}`), 0o600)
	var stderr bytes.Buffer
	err := run(context.Background(), []string{"--policy", pf, "d=http://127.0.0.1:1"}, strings.NewReader(""), &bytes.Buffer{}, &stderr, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr.String(), "operator_tools is true but enabled is not") {
		t.Fatalf("stderr at start: %q", stderr.String())
	}
	os.WriteFile(pf, []byte(`{"enabled": true, "allow_hardware": false, "allow_hardware": true}`), 0o600)
	if err := run(context.Background(), []string{"--policy", pf, "d=http://127.0.0.1:1"}, strings.NewReader(""), &bytes.Buffer{}, &bytes.Buffer{}, nil); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("a policy with a duplicate key started: %v", err)
	}
}
