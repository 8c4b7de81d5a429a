package madsci_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/conformance"
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

// TestServeBeforeTheNodeWasEverReached: without the node and without a
// snapshot the config serves its identity and the link, refuses actuation
// not_started, and adopts the node's description when it first answers
// (an estop latched meanwhile carries over).
func TestServeBeforeTheNodeWasEverReached(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	dir := t.TempDir()
	path := filepath.Join(dir, "node.yaml")
	body := "adapter: madsci\ndevice: {id: reader-01, class: plate_reader}\nnode_url: http://" + addr +
		"\nlink: {retry_min: 20ms, retry_max: 100ms, descriptor_cache: node.descriptor.json}\n"
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	r := adapters.NewRegistry()
	if err := madsci.Register(r); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dev, closeDev, err := r.OpenDevice(ctx, path, nil)
	if err != nil {
		t.Fatalf("serve with the node never reached: %v", err)
	}
	defer closeDev()
	p, ok := dev.(*adapters.Pending)
	if !ok {
		t.Fatalf("device is %T, want *adapters.Pending", dev)
	}
	ping, err := dev.Ping(ctx)
	if err != nil || ping.Backend == nil || ping.Backend.Connected || !strings.Contains(ping.Backend.Error, "never reached") {
		t.Fatalf("ping %+v %v", ping, err)
	}
	desc, _ := dev.Describe(ctx, mhp.DescribeRequest{Detail: "full"})
	if desc.ID != "reader-01" || len(desc.Actions) != 0 || !strings.Contains(desc.Notes, "never reached") {
		t.Fatalf("describe %+v", desc)
	}
	if _, err := dev.Invoke(ctx, mhp.InvokeRequest{Name: "run"}); err == nil {
		t.Fatal("invoke before the node was accepted")
	} else if e, _ := mhp.AsError(err); e == nil || e.Data[mhp.DataOutcome] != mhp.OutcomeNotStarted {
		t.Fatalf("invoke before the node: %v", err)
	}
	if _, err := dev.EStop(ctx, "operator"); err != nil {
		t.Fatal(err)
	}
	n := madscitest.New(madscitest.Options{Addr: addr})
	defer n.Close()
	conformance.EventuallyWithin(t, "the node's description adopted", 10*time.Second, p.Adopted)
	desc, _ = dev.Describe(ctx, mhp.DescribeRequest{Detail: "full"})
	if len(desc.Actions) == 0 || desc.Backend == nil || !desc.Backend.Connected {
		t.Fatalf("after adoption: %d actions, backend %+v", len(desc.Actions), desc.Backend)
	}
	if st := p.Driver().State(); st != mhp.StateEStop {
		t.Fatalf("the estop latched before adoption did not carry over: %+v", st)
	}
	if _, err := os.Stat(filepath.Join(dir, "node.descriptor.json")); err != nil {
		t.Fatalf("no snapshot written on adoption: %v", err)
	}
}
