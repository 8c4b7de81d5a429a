package sila2_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/sila2"
	"github.com/openmhp/mhp-go/sila2/silatest"
)

// TestDiscoverConfig: a live server's features become a config (the
// non-core features, default_approval confirm, the snapshot) that
// round-trips (Load, Validate, New) and serves its snapshot with the
// server down.
func TestDiscoverConfig(t *testing.T) {
	l := startLab(t, silatest.Options{CancelController: true})
	dir := t.TempDir()
	ca := filepath.Join(dir, "server-ca.pem")
	if err := os.WriteFile(ca, l.cert.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	r := adapters.NewRegistry()
	if err := sila2.Register(r); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	g, err := r.Discover(ctx, sila2.Kind, l.addr, adapters.DiscoverOptions{Flags: map[string]string{"ca": ca}, Snapshot: "instrument.descriptor.json"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := g.Config.(sila2.Config)
	if strings.Join(cfg.Features, ",") != "GreetingProvider,TemperatureController" || cfg.DefaultApproval != mhp.ApprovalConfirm || cfg.TLS.CA != ca {
		t.Fatalf("features %v approval %q tls %+v", cfg.Features, cfg.DefaultApproval, cfg.TLS)
	}
	core := false
	for _, s := range g.Report.Skipped {
		core = core || (s.Source == "CancelController" && strings.Contains(s.Why, "core"))
	}
	if !core {
		t.Errorf("CancelController not reported skipped: %+v", g.Report.Skipped)
	}
	path := filepath.Join(dir, "instrument.yaml")
	if err := os.WriteFile(path, g.YAML, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "instrument.descriptor.json"), g.Report.Files["instrument.descriptor.json"], 0o644); err != nil {
		t.Fatal(err)
	}
	src, _ := adapters.ReadSource(path)
	loaded, err := sila2.Load(src)
	if err != nil {
		t.Fatalf("Load: %v\n%s", err, g.YAML)
	}
	d, err := sila2.New(ctx, loaded, sila2.Options{})
	if err != nil {
		t.Fatal(err)
	}
	desc := d.Descriptor()
	d.Close()
	if len(desc.Actions) == 0 {
		t.Fatal("no actions served")
	}
	for _, a := range desc.Actions {
		if a.Approval != mhp.ApprovalConfirm {
			t.Errorf("action %s approval %q", a.Name, a.Approval)
		}
	}
	l.srv.Stop()
	d, err = sila2.New(ctx, loaded, sila2.Options{})
	if err != nil {
		t.Fatalf("New with the server down and a snapshot: %v", err)
	}
	defer d.Close()
	if lk := d.Link(); lk == nil || lk.Connected || len(d.Descriptor().Actions) != len(desc.Actions) {
		t.Fatalf("link %+v, %d actions of %d", lk, len(d.Descriptor().Actions), len(desc.Actions))
	}
}
