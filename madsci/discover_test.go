package madsci_test

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/madsci"
	"github.com/openmhp/mhp-go/madsci/madscitest"
)

// TestDiscover: the node's /info becomes a config with an override per
// action and setting at approval confirm and the descriptor snapshot; the
// file round-trips (Load, Validate, New) and serves from the snapshot with
// the node down.
func TestDiscover(t *testing.T) {
	n := madscitest.New(madscitest.Options{})
	defer n.Close()
	r := adapters.NewRegistry()
	if err := madsci.Register(r); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	g, err := r.Discover(ctx, madsci.Kind, n.URL, adapters.DiscoverOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := g.Config.(madsci.Config)
	var actions, settings []string
	for k, o := range cfg.Actions {
		actions = append(actions, k)
		if o.Approval != mhp.ApprovalConfirm {
			t.Errorf("action %s approval %q", k, o.Approval)
		}
	}
	for k, o := range cfg.Settings {
		settings = append(settings, k)
		if o.Approval != mhp.ApprovalConfirm {
			t.Errorf("setting %s approval %q", k, o.Approval)
		}
	}
	sort.Strings(actions)
	sort.Strings(settings)
	// The fixture's actions and settings, and the node's own "transfer";
	// never the node's wiring (node_url, rate limiting).
	if strings.Join(actions, ",") != "confirm_action,forbidden_action,monitor,profile,quick,run,transfer" ||
		strings.Join(settings, ",") != "confirm_level,fan,forbidden_level,mode,setpoint" {
		t.Fatalf("actions %v settings %v", actions, settings)
	}
	if cfg.Device.ID != "fake-node" || cfg.Link.DescriptorCache != "fake-node.descriptor.json" || g.Report.Files[cfg.Link.DescriptorCache] == nil {
		t.Fatalf("device %s, cache %q, files %v", cfg.Device.ID, cfg.Link.DescriptorCache, len(g.Report.Files))
	}
	text := string(g.YAML)
	for _, w := range []string{"WARNING: NO LIMITS", "TODO(integrator): estop. The adapter's estop posts the node's safety_stop", "TODO(integrator): watchdog"} {
		if !strings.Contains(text, w) {
			t.Errorf("file lacks %q\n%s", w, text)
		}
	}
	// Round trip, from a folder holding the file and its snapshot.
	dir := t.TempDir()
	path := filepath.Join(dir, "node.yaml")
	if err := os.WriteFile(path, g.YAML, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, data := range g.Report.Files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	src, _ := adapters.ReadSource(path)
	loaded, err := madsci.Load(src)
	if err != nil {
		t.Fatalf("Load: %v\n%s", err, text)
	}
	d, err := madsci.New(ctx, loaded, madsci.Options{})
	if err != nil {
		t.Fatal(err)
	}
	desc := d.Descriptor()
	d.Close()
	for _, a := range desc.Actions {
		if a.Approval != mhp.ApprovalConfirm {
			t.Errorf("served action %s approval %q", a.Name, a.Approval)
		}
	}
	// With the node gone the file serves its snapshot, the link down.
	n.Close()
	d, err = madsci.New(ctx, loaded, madsci.Options{})
	if err != nil {
		t.Fatalf("New with the node down and a snapshot: %v", err)
	}
	defer d.Close()
	if l := d.Link(); l == nil || l.Connected || len(d.Descriptor().Actions) != len(desc.Actions) {
		t.Fatalf("link %+v, %d actions", l, len(d.Descriptor().Actions))
	}
	if _, _, err := madsci.Discover(ctx, n.URL, madsci.DiscoverOptions{}); err == nil {
		t.Fatal("discovery of a node that is down succeeded")
	}
}
