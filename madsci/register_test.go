package madsci_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/clock"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/madsci"
	"github.com/openmhp/mhp-go/madsci/madscitest"
)

// TestExampleConfigServesFakeNode builds the example config through the
// registry against the fake node.
func TestExampleConfigServesFakeNode(t *testing.T) {
	n := madscitest.New(madscitest.Options{})
	defer n.Close()
	path := filepath.Join("..", "examples", "madsci-node", "node.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(data), "http://127.0.0.1:2000", n.URL, 1)
	// The example overrides actions of a plate reader; the fake has others.
	text = text[:strings.Index(text, "\nsettings:")] + "\n"
	r := adapters.NewRegistry()
	if err := madsci.Register(r); err != nil {
		t.Fatal(err)
	}
	if err := madsci.Register(r); err == nil {
		t.Fatal("registering madsci twice succeeded")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// The descriptor cache goes to a temp dir, not into examples/.
	dir := t.TempDir()
	d, err := r.Build(ctx, adapters.Source{Path: path, Dir: dir, Data: []byte(text)})
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	defer d.Close()
	if _, err := os.Stat(filepath.Join(dir, "node.descriptor.json")); err != nil {
		t.Fatalf("the example's descriptor cache was not written: %v", err)
	}
	desc := d.Descriptor()
	if desc.ID != "platereader-01" || len(desc.Actions) == 0 {
		t.Fatalf("descriptor %+v", desc.DeviceInfo)
	}
	run, _ := desc.Action("run")
	if len(run.Interlocks) != 1 || run.Interlocks[0] != madsci.SignalReady {
		t.Fatalf("run interlocks %v, want node.ready", run.Interlocks)
	}

	// `mhp serve` of the example with the node down: it starts, serves
	// the cached description and reports the backend down.
	n.Close()
	down, err := r.Build(ctx, adapters.Source{Path: path, Dir: dir, Data: []byte(text)})
	if err != nil {
		t.Fatalf("build with the node down: %v", err)
	}
	defer down.Close()
	if err := down.Start(ctx); err != nil {
		t.Fatalf("start with the node down: %v", err)
	}
	if l := down.Link(); l == nil || l.Connected {
		t.Fatalf("backend link %+v with the node down", l)
	}
	if len(down.Descriptor().Actions) != len(desc.Actions) {
		t.Fatalf("served %d actions from the cache, the node had %d", len(down.Descriptor().Actions), len(desc.Actions))
	}
}

func TestConfigRejectsTypos(t *testing.T) {
	src := adapters.Source{Path: "x.yaml", Data: []byte("adapter: madsci\ndevice: {id: a}\nnode_ulr: http://x\n")}
	if _, err := madsci.Load(src); err == nil || !strings.Contains(err.Error(), "node_ulr") {
		t.Fatalf("typo accepted: %v", err)
	}
}

// TestValidateNamesTheField: Validate takes zero options at their defaults
// (no panic on a config built in Go without Defaults), and each refusal
// names the field; Load refuses the same in a file.
func TestValidateNamesTheField(t *testing.T) {
	neg := -time.Second
	tr, f := true, false
	for _, tc := range []struct {
		name, field string
		mut         func(*madsci.Config)
	}{
		{"ok", "", func(*madsci.Config) {}},
		{"adapter", "adapter", func(c *madsci.Config) { c.Adapter = "opcua" }},
		{"device", "device.id", func(c *madsci.Config) { c.Device.ID = "" }},
		{"url", "node_url", func(c *madsci.Config) { c.NodeURL = "ftp://x" }},
		{"layout", "layout", func(c *madsci.Config) { c.Layout = "v9" }},
		{"result", "result", func(c *madsci.Config) { c.Result = "raw" }},
		{"timeout", "request_timeout", func(c *madsci.Config) { c.RequestTimeout = neg }},
		{"status_poll", "status_poll", func(c *madsci.Config) { c.StatusPoll = &neg }},
		{"retries", "max_retries", func(c *madsci.Config) { c.MaxRetries = -1 }},
		{"poll_failures", "poll_failures", func(c *madsci.Config) { c.PollFailures = -1 }},
		{"poll_retry", "poll_retry.backoff", func(c *madsci.Config) { c.PollRetry.Backoff = neg }},
		{"poll_retry window", "poll_retry.window", func(c *madsci.Config) { c.PollRetry.Window = neg }},
		{"unknown_polls", "unknown_polls", func(c *madsci.Config) { c.UnknownPolls = -1 }},
		{"interlock", "ready_interlock", func(c *madsci.Config) { c.ReadyInterlock, c.StatusSignals = &tr, &f }},
		{"action", "actions.run.timeout", func(c *madsci.Config) {
			c.Actions = map[string]madsci.ActionOverride{"quick": {}, "run": {Timeout: neg}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := madsci.Config{}
			cfg.Device.ID = "a"
			tc.mut(&cfg)
			err := cfg.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("a zero config with a device id: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("Validate: %v, want a refusal naming %s", err, tc.field)
			}
		})
	}
	src := adapters.Source{Path: "x.yaml", Data: []byte("adapter: madsci\ndevice: {id: a}\nnode_url: ftp://x\n")}
	if _, err := madsci.Load(src); err == nil || !strings.Contains(err.Error(), "node_url") {
		t.Fatalf("Load of a bad node_url: %v", err)
	}
}

// TestRegisterPassesRefine: a registry build applies the source's Refine
// to the generated bindings, and a Refine error refuses the driver.
func TestRegisterPassesRefine(t *testing.T) {
	n := madscitest.New(madscitest.Options{})
	defer n.Close()
	r := adapters.NewRegistry()
	if err := madsci.Register(r); err != nil {
		t.Fatal(err)
	}
	data := []byte("adapter: madsci\ndevice: {id: a}\nnode_url: " + n.URL + "\n")
	ctx, cancel := context.WithTimeout(context.Background(), conformance.WaitTimeout)
	defer cancel()
	d, err := r.Build(ctx, adapters.Source{Path: "x.yaml", Data: data, Refine: func(bc *binding.Config) error {
		bc.Notes = "refined"
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if got := d.Descriptor().Notes; got != "refined" {
		t.Fatalf("notes %q, want the Refine's", got)
	}
	_, err = r.Build(ctx, adapters.Source{Path: "x.yaml", Data: data, Refine: func(*binding.Config) error {
		return errors.New("descriptor mismatch")
	}})
	if err == nil || !strings.Contains(err.Error(), "descriptor mismatch") {
		t.Fatalf("a refusing Refine: %v", err)
	}
}

func TestOverrideOfUnknownActionRefused(t *testing.T) {
	n := madscitest.New(madscitest.Options{})
	defer n.Close()
	cfg := baseConfig(n.URL, "")
	cfg.Device.ID = "a"
	cfg.Actions = map[string]madsci.ActionOverride{"rnu": {Approval: "confirm"}}
	_, err := madsci.New(context.Background(), cfg, madsci.Options{})
	if err == nil || !strings.Contains(err.Error(), "rnu") {
		t.Fatalf("override of a missing action: %v", err)
	}
}

func TestExampleConfigParsesWhole(t *testing.T) {
	path := filepath.Join("..", "examples", "madsci-node", "node.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := madsci.Load(adapters.Source{Path: path, Dir: filepath.Dir(path), Data: data})
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.RequestTimeout != 10*time.Second || cfg.UnknownPolls != 5 {
		t.Fatalf("Load left defaults unset: %+v", cfg)
	}
	if cfg.Actions["run_protocol"].Timeout != 2*time.Hour || cfg.Actions["read_plate"].Params["wavelength_nm"].Limits == nil ||
		!strings.HasSuffix(cfg.FilesDir, filepath.Join("madsci-node", "protocols")) {
		t.Fatalf("example config decoded as %+v", cfg)
	}
}

// TestOptionsLoggerAndClock: the shared options reach the adapter: the
// link reports to Options.Logger, and the driver's clock is Options.Clock.
func TestOptionsLoggerAndClock(t *testing.T) {
	n := madscitest.New(madscitest.Options{})
	defer n.Close()
	cfg := baseConfig(n.URL, "")
	cfg.Device.ID = "a"
	// The link reports "up" inside New; the handler serialises its
	// writes, and buf is read before Start runs anything that logs.
	var buf bytes.Buffer
	clk := clock.NewManual(time.Unix(1_000_000, 0))
	ctx, cancel := context.WithTimeout(context.Background(), conformance.WaitTimeout)
	defer cancel()
	d, err := madsci.New(ctx, cfg, madsci.Options{Options: adapters.Options{Clock: clk,
		Logger: slog.New(slog.NewTextHandler(&buf, nil))}})
	if err != nil {
		t.Fatal(err)
	}
	if s := buf.String(); !strings.Contains(s, "backend link up") || !strings.Contains(s, n.URL) {
		t.Fatalf("the given logger got %q, want the link's report", s)
	}
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	p, err := d.Ping(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := float64(clk.Now().Unix()); p.TS < want || p.TS >= want+1 {
		t.Fatalf("ping ts %v, want the given clock's %v", p.TS, want)
	}
}
