//go:build linux

package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/openmhp/mhp-go/serial/serialtest"
)

// TestInitSerial: `mhp init serial PORT` identifies the hotplate on the pty
// fake and writes a file that validate accepts and serve serves, reading
// the plate's temperature.
func TestInitSerial(t *testing.T) {
	fake := serialtest.New(t, serialtest.NewHotplate(), serialtest.Options{})
	out := filepath.Join(t.TempDir(), "hotplate.yaml")
	r := runCLI(t, "init", "serial", fake.Path(), "-o", out, "--profile", "namur", "--id", "plate-7")
	if r.code != 0 || !strings.Contains(r.stdout, "wrote "+out) {
		t.Fatalf("init serial: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, "init", "serial", fake.Path(), "--ca", "x.pem"); r.code == 0 || !strings.Contains(r.stderr, "no option --ca") {
		t.Errorf("init serial --ca: %d %s", r.code, r.stderr)
	}
	v := runCLI(t, "validate", out)
	if v.code != 0 || !strings.Contains(v.stdout, "TODO(integrator)") {
		t.Fatalf("validate: %d\n%s%s", v.code, v.stdout, v.stderr)
	}
	url := serveFile(t, out)
	rd := runCLI(t, url, "read", "plate_temperature", "--json")
	if rd.code != 0 || !strings.Contains(rd.stdout, "25") {
		t.Errorf("read: %d %s %s", rd.code, rd.stdout, rd.stderr)
	}
}
