package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openmhp/mhp-go/evidence"
)

// Serving the fleet, --evidence DIR keeps the hosted devices' receipts in
// one shared log in DIR: a write through the bridge carries a command id and
// leaves its receipt there, read back with mhp_evidence.
func TestFleetEvidenceFlag(t *testing.T) {
	home, e := twinFleet(t)
	evDir := t.TempDir()
	call := sdkCaller(t, serveHTTP(t, "--http", "127.0.0.1:0", "--home", home, "--evidence", evDir))
	call("mhp_write", map[string]any{"device": e.ID, "name": "target_temperature", "value": 60})
	list, _ := call("mhp_evidence", map[string]any{"device": e.ID})["entries"].([]any)
	if len(list) != 1 {
		t.Fatalf("receipts: %v", list)
	}
	if r, _ := list[0].(map[string]any); r["name"] != "target_temperature" || r["command_id"] == nil || r["command_id"] == "" {
		t.Fatalf("receipt of the write: %v", r)
	}
	if r, err := evidence.Verify(evDir, nil); err != nil || !r.OK || r.Log == "" || r.Devices[e.ID] != 1 {
		t.Fatalf("--evidence %s is not the shared log holding %s's receipt: %+v %v", evDir, e.ID, r, err)
	}
	if _, err := os.Stat(filepath.Join(home, "evidence")); !os.IsNotExist(err) {
		t.Fatalf("evidence kept under the home despite --evidence: %v", err)
	}
}

// --evidence is for the fleet's hosted devices: with named targets it is
// refused, not silently ignored.
func TestEvidenceFlagNeedsTheFleet(t *testing.T) {
	err := run(context.Background(), []string{"--evidence", t.TempDir(), "thermo=http://127.0.0.1:1"}, nil, nil, os.Stderr, nil)
	if err == nil || !strings.Contains(err.Error(), "fleet") {
		t.Fatalf("--evidence with a named target: %v", err)
	}
}

// The guard flags mhp serve has are mhp-mcp's too when it hosts the fleet,
// checked the same way (host.GuardFlags), and refused with targets.
func TestFleetGuardFlags(t *testing.T) {
	home, _ := twinFleet(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--require-permits"}, "--require-permits needs --operator-token-file"},
		{[]string{"--evidence-sync", "sometimes"}, "--evidence-sync is always or never"},
		{[]string{"--evidence-head-every", "0"}, "--evidence-head-every is a count"},
		{[]string{"--evidence-head-interval", "10s"}, "need --evidence-key"},
		{[]string{"--require-permits", "thermo=http://127.0.0.1:1"}, "fleet's hosted devices"},
		{[]string{"--evidence-sync", "never", "--directory", "http://127.0.0.1:1"}, "fleet's hosted devices"},
	} {
		args := append([]string{"--home", home}, c.args...)
		err := run(context.Background(), args, nil, nil, os.Stderr, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("mhp-mcp %v: %v, want an error with %q", c.args, err, c.want)
		}
	}
}
