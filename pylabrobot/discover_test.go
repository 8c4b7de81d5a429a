package pylabrobot_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/pylabrobot"
	"github.com/openmhp/mhp-go/pylabrobot/plrtest"
)

// TestDiscover: the bridge's /describe becomes a config with an override
// per action at approval confirm and the descriptor snapshot; the file
// round-trips (Load, Validate, New) and serves the snapshot with the
// bridge down.
func TestDiscover(t *testing.T) {
	b := plrtest.NewBridge()
	defer b.Close()
	r := adapters.NewRegistry()
	if err := pylabrobot.Register(r); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	g, err := r.Discover(ctx, pylabrobot.Kind, b.URL, adapters.DiscoverOptions{Snapshot: "bridge.descriptor.json"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := g.Config.(pylabrobot.Config)
	for _, want := range []string{"run", "aspirate", "move_plate", "setup", "set_setpoint"} {
		if o, ok := cfg.Actions[want]; !ok || o.Approval != mhp.ApprovalConfirm {
			t.Errorf("action %s: %+v (%v)", want, o, ok)
		}
	}
	if cfg.Device.ID != "fixture-machine" || cfg.Device.Model != "FixtureMachine" || g.Report.Files["bridge.descriptor.json"] == nil {
		t.Fatalf("device %+v, files %d", cfg.Device, len(g.Report.Files))
	}
	text := string(g.YAML)
	for _, w := range []string{"calls the machine's stop()", "TODO(integrator): watchdog", "Settings are methods you map yourself", "PROPOSED"} {
		if w == "PROPOSED" {
			if len(g.Report.Proposals) == 0 { // door_closed
				t.Error("no interlock proposal for door_closed")
			}
			continue
		}
		if !strings.Contains(text, w) {
			t.Errorf("file lacks %q\n%s", w, text)
		}
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "bridge.yaml")
	if err := os.WriteFile(path, g.YAML, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bridge.descriptor.json"), g.Report.Files["bridge.descriptor.json"], 0o644); err != nil {
		t.Fatal(err)
	}
	src, _ := adapters.ReadSource(path)
	loaded, err := pylabrobot.Load(src)
	if err != nil {
		t.Fatalf("Load: %v\n%s", err, text)
	}
	d, err := pylabrobot.New(ctx, loaded, pylabrobot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	n := len(d.Descriptor().Actions)
	d.Close()
	b.Close()
	d, err = pylabrobot.New(ctx, loaded, pylabrobot.Options{})
	if err != nil {
		t.Fatalf("New with the bridge down and a snapshot: %v", err)
	}
	defer d.Close()
	if l := d.Link(); l == nil || l.Connected || len(d.Descriptor().Actions) != n {
		t.Fatalf("link %+v, %d actions of %d", l, len(d.Descriptor().Actions), n)
	}
}
