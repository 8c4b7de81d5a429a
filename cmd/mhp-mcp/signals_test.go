package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// TestSIGTERMEndsTheBridge: SIGTERM (systemd, docker stop) ends the bridge
// like SIGINT, so the deferred Close releases its leases.
func TestSIGTERMEndsTheBridge(t *testing.T) {
	if !slices.Contains(shutdownSignals, os.Signal(syscall.SIGTERM)) || !slices.Contains(shutdownSignals, os.Interrupt) {
		t.Fatalf("shutdown signals %v, want SIGINT and SIGTERM", shutdownSignals)
	}
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
