package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/madsci/madscitest"
)

// writeMadsciPackage writes a device package whose driver is a madsci
// config (node.yaml) pointed at addr: the adapter allows setpoint up to
// 100, the package narrows it to 50 and adds a note.
func writeMadsciPackage(t *testing.T, addr string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"node.yaml": "adapter: madsci\ndevice: {id: reader-01, class: plate_reader}\nnode_url: http://" + addr + "\n" +
			"link: {retry_min: 20ms, retry_max: 100ms}\n" +
			"settings:\n  setpoint: {limits: {min: 0, max: 100}, approval: auto}\n",
		"DEVICE.md": "---\nmhp: \"2026-09-12\"\nid: reader-01\nclass: plate_reader\nlocation: bay 2\n" +
			"description: Plate reader on a fake MADSci node. Use for package tests only.\ndriver: node.yaml\n---\n\n# Reader 01\n\nKeep the setpoint low.\n",
		"descriptor.yaml": "settings:\n  - name: setpoint\n    limits: {min: 0, max: 50}\n    notes: Half range at most on this bench.\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestServePackageBeforeItsBackendWasReached: `mhp serve PKG` of a package
// on a madsci config whose node was never reached stays up, says so in
// ping, refuses actuation not_started, and adopts the node's description
// with the package's narrower limit when the node comes up.
func TestServePackageBeforeItsBackendWasReached(t *testing.T) {
	addr, err := madscitest.LaterAddr()
	if err != nil {
		t.Fatal(err)
	}
	url := serveFile(t, writeMadsciPackage(t, addr))
	if l := pingBackend(t, url); l == nil || l.Connected || !strings.Contains(l.Error, "never reached") {
		t.Fatalf("ping says the backend is %+v", l)
	}
	describe := func() mhp.Description {
		d := runCLI(t, url, "describe", "full", "--json")
		var desc mhp.Description
		if d.code != 0 || json.Unmarshal([]byte(d.stdout), &desc) != nil {
			t.Fatalf("describe: %d %s", d.code, d.stdout)
		}
		return desc
	}
	if desc := describe(); desc.ID != "reader-01" || desc.Location != "bay 2" || len(desc.Descriptor.Settings) != 0 || len(desc.Resources) == 0 {
		t.Fatalf("pending package: id %q location %q, %d settings, resources %v", desc.ID, desc.Location, len(desc.Descriptor.Settings), desc.Resources)
	}
	inv := runCLI(t, url, "invoke", "run", "--json", "--approved")
	if inv.code == 0 || !strings.Contains(inv.stdout, mhp.OutcomeNotStarted) {
		t.Fatalf("invoke with the node never reached: %d %s %s", inv.code, inv.stdout, inv.stderr)
	}

	n := madscitest.New(madscitest.Options{Addr: addr})
	defer n.Close()
	conformance.EventuallyWithin(t, "the node's description adopted", 10*time.Second, func() bool {
		l := pingBackend(t, url)
		return l != nil && l.Connected
	})
	desc := describe()
	var found bool
	for _, s := range desc.Descriptor.Settings {
		if s.Name == "setpoint" {
			found = true
			if s.Limits == nil || s.Limits.Max == nil || *s.Limits.Max != 50 || !strings.Contains(s.Notes, "Half range") {
				t.Fatalf("the package's refinement is not on the adopted setting: %+v", s)
			}
		}
	}
	if !found || desc.ID != "reader-01" || desc.Location != "bay 2" {
		t.Fatalf("adopted description: id %q location %q, setpoint found %v", desc.ID, desc.Location, found)
	}
	r := runCLI(t, url, "write", "setpoint", "80", "--json")
	var refusal struct {
		Error *mhp.Error `json:"error"`
	}
	if r.code != 1 || json.Unmarshal([]byte(r.stdout), &refusal) != nil || refusal.Error == nil ||
		refusal.Error.Code != mhp.CodeLimitViolation || refusal.Error.Data["max"] != 50.0 {
		t.Fatalf("80 is above the package's max 50 (the adapter allows 100): %d %q", r.code, r.stdout)
	}
	if r := runCLI(t, url, "write", "setpoint", "40", "--json"); r.code != 0 {
		t.Fatalf("40 is within the package's limits: %d %s %s", r.code, r.stdout, r.stderr)
	}
}
