package host

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/madsci"
	"github.com/openmhp/mhp-go/madsci/madscitest"
)

// TestFleetHostsAPackageBeforeItsBackendWasReached: the fleet hosts a
// package on a madsci config (and the bare config) whose node was never
// reached: both serve, say so in ping and refuse actuation not_started;
// when the node comes up they adopt its description, the package's with
// its narrower limit.
func TestFleetHostsAPackageBeforeItsBackendWasReached(t *testing.T) {
	addr, err := madscitest.LaterAddr()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := map[string]string{
		"node.yaml": "adapter: madsci\ndevice: {id: reader-01, class: plate_reader}\nnode_url: http://" + addr + "\n" +
			"link: {retry_min: 20ms, retry_max: 100ms}\n" +
			"settings:\n  setpoint: {limits: {min: 0, max: 100}, approval: auto}\n",
		"DEVICE.md": "---\nmhp: \"2026-09-12\"\nid: reader-02\nclass: plate_reader\nlocation: bay 2\n" +
			"description: Plate reader on a fake MADSci node. Use for fleet tests only.\ndriver: node.yaml\n---\n\n# Reader 02\n",
		"descriptor.yaml": "device:\n  notes: Bench reader.\nsettings:\n  - name: setpoint\n    limits: {min: 0, max: 50}\n",
	}
	f := madsciFleet(t, dir, files)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pkgDev, err := f.Hosted(ctx, prefixPackage+dir)
	if err != nil {
		t.Fatalf("host the package with the node never reached: %v", err)
	}
	cfgDev, err := f.Hosted(ctx, prefixConfig+filepath.Join(dir, "node.yaml"))
	if err != nil {
		t.Fatalf("host the config with the node never reached: %v", err)
	}
	for _, dev := range []Device{pkgDev, cfgDev} {
		ping, err := dev.Ping(ctx)
		if err != nil || ping.Backend == nil || ping.Backend.Connected || !strings.Contains(ping.Backend.Error, "never reached") {
			t.Fatalf("ping %+v %v", ping, err)
		}
		if _, err := dev.Invoke(ctx, mhp.InvokeRequest{Name: "run"}); err == nil {
			t.Fatal("invoke before the node was accepted")
		} else if e, _ := mhp.AsError(err); e == nil || e.Data[mhp.DataOutcome] != mhp.OutcomeNotStarted {
			t.Fatalf("invoke before the node: %v", err)
		}
	}
	desc, _ := pkgDev.Describe(ctx, mhp.DescribeRequest{Detail: mhp.DetailFull})
	if desc.ID != "reader-02" || !strings.Contains(desc.Notes, "Bench reader.") || !strings.Contains(desc.Notes, "never reached") || len(desc.Resources) == 0 {
		t.Fatalf("pending package describes %q notes %q resources %v", desc.ID, desc.Notes, desc.Resources)
	}

	n := madscitest.New(madscitest.Options{Addr: addr})
	defer n.Close()
	for _, dev := range []Device{pkgDev, cfgDev} {
		conformance.EventuallyWithin(t, "the node's description adopted", 10*time.Second, func() bool {
			p, err := dev.Ping(ctx)
			return err == nil && p.Backend != nil && p.Backend.Connected
		})
	}
	// 80: the adapter's limit (max 100) allows it, the package's (50) does not.
	if _, err := pkgDev.Write(ctx, mhp.WriteRequest{Name: "setpoint", Value: 80.0}); mhp.CodeOf(err) != mhp.CodeLimitViolation {
		t.Fatalf("80 above the package's max 50: %v", err)
	}
	if _, err := cfgDev.Write(ctx, mhp.WriteRequest{Name: "setpoint", Value: 80.0}); err != nil {
		t.Fatalf("80 within the bare config's max 100: %v", err)
	}
	desc, _ = pkgDev.Describe(ctx, mhp.DescribeRequest{Detail: mhp.DetailFull})
	if desc.ID != "reader-02" || desc.Notes != "Bench reader." || len(desc.Resources) == 0 {
		t.Fatalf("adopted package describes %q notes %q resources %v", desc.ID, desc.Notes, desc.Resources)
	}
}

// A package that refines an item the node turns out not to have is not
// adopted, and ping says why instead of "never reached".
func TestPendingPackageThatDoesNotFitItsNode(t *testing.T) {
	addr, err := madscitest.LaterAddr()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := map[string]string{
		"node.yaml": "adapter: madsci\ndevice: {id: reader-03, class: plate_reader}\nnode_url: http://" + addr + "\n" +
			"link: {retry_min: 20ms, retry_max: 100ms}\n",
		"DEVICE.md": "---\nmhp: \"2026-09-12\"\nid: reader-03\nclass: plate_reader\n" +
			"description: Plate reader on a fake MADSci node. Use for fleet tests only.\ndriver: node.yaml\n---\n\n# Reader 03\n",
		"descriptor.yaml": "settings:\n  - name: no_such_setting\n    limits: {min: 0, max: 50}\n",
	}
	f := madsciFleet(t, dir, files)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dev, err := f.Hosted(ctx, prefixPackage+dir)
	if err != nil {
		t.Fatal(err)
	}
	n := madscitest.New(madscitest.Options{Addr: addr})
	defer n.Close()
	conformance.EventuallyWithin(t, "ping names the misfit", 10*time.Second, func() bool {
		p, err := dev.Ping(ctx)
		return err == nil && p.Backend != nil && strings.Contains(p.Backend.Error, "no_such_setting")
	})
	if _, err := dev.Write(ctx, mhp.WriteRequest{Name: "setpoint", Value: 1.0}); err == nil {
		t.Fatal("a write was accepted by a package that never fit its node")
	} else if e, _ := mhp.AsError(err); e == nil || e.Data[mhp.DataOutcome] != mhp.OutcomeNotStarted {
		t.Fatalf("write on a package that never fit its node: %v", err)
	}
}

// madsciFleet writes files into dir and opens a fleet whose registry
// builds madsci configs.
func madsciFleet(t *testing.T, dir string, files map[string]string) *Fleet {
	t.Helper()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	reg := adapters.NewRegistry()
	if err := madsci.Register(reg); err != nil {
		t.Fatal(err)
	}
	f, err := Open(Config{Home: t.TempDir(), Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
