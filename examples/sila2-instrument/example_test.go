package sila2instrument_test

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
	"github.com/openmhp/mhp-go/sila2"
	"github.com/openmhp/mhp-go/sila2/silatest"
)

// TestInstrumentYAML serves instrument.yaml against the fake server, as
// `mhp serve` would, with the endpoint pointed at the test's server.
func TestInstrumentYAML(t *testing.T) {
	srv, err := silatest.New(silatest.Options{CancelController: true, LockController: true})
	if err != nil {
		t.Fatal(err)
	}
	th := silatest.NewThermostat(293.15)
	if err := srv.AddFeature(silatest.GreetingProviderFDL, silatest.Greeter(2026)); err != nil {
		t.Fatal(err)
	}
	if err := srv.AddFeature(silatest.TemperatureControllerFDL, th.Handlers()); err != nil {
		t.Fatal(err)
	}
	cert, err := silatest.SelfSigned(srv.UUID())
	if err != nil {
		t.Fatal(err)
	}
	addr, err := srv.Start(&cert.TLS)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()

	data, err := os.ReadFile("instrument.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	text := strings.Replace(string(data), "endpoint: 127.0.0.1:50052", "endpoint: "+addr, 1)
	if err := os.WriteFile(filepath.Join(dir, "instrument.yaml"), []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "server-ca.pem"), cert.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	reg := adapters.NewRegistry()
	if err := sila2.Register(reg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := reg.Open(ctx, filepath.Join(dir, "instrument.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	desc := d.Descriptor()
	if _, ok := desc.Signal("block_temperature"); !ok {
		t.Error("no block_temperature signal")
	}
	if _, ok := desc.Signal("profile"); ok {
		t.Error("profile is hidden")
	}
	if s, ok := desc.Setting("mode"); !ok || len(s.Limits.Enum) != 3 {
		t.Errorf("mode setting %+v", s)
	}
	a, ok := desc.Action("control_temperature")
	if !ok || !a.Cancellable {
		t.Fatalf("control_temperature %+v", a)
	}
	p, _ := a.Params.Get("target_temperature")
	if *p.Limits.Min != 283.15 || *p.Limits.Max != 333.15 || *p.Limits.ExclusiveMin != 277 {
		t.Errorf("target_temperature limits %+v", p.Limits)
	}
	if st, _ := desc.Action("stabilize"); st.Approval != "confirm" {
		t.Errorf("stabilize approval %q", st.Approval)
	}
	if got := srv.Locked(); got != "" {
		t.Errorf("the server is locked (%q) without an MHP lease", got)
	}
	holder := mhp.AsSession(d, "operator")
	if _, err := holder.Acquire(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if srv.Locked() == "" {
		t.Error("the lease did not lock the server")
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// The release hook runs on its own goroutine.
	conformance.Eventually(t, "the release to unlock the server", func() bool { return srv.Locked() == "" })

	if _, err := os.Stat(filepath.Join(dir, "instrument.descriptor.json")); err != nil {
		t.Fatalf("the descriptor cache was not written next to the config: %v", err)
	}

	// `mhp serve instrument.yaml` with the server down: it starts from the
	// cache, serves, and reports the backend down.
	srv.Stop()
	down, err := reg.Open(ctx, filepath.Join(dir, "instrument.yaml"))
	if err != nil {
		t.Fatalf("open with the server down: %v", err)
	}
	defer down.Close()
	if err := down.Start(ctx); err != nil {
		t.Fatalf("start with the server down: %v", err)
	}
	if l := down.Link(); l == nil || l.Connected {
		t.Fatalf("backend link %+v with the server down", l)
	}
	cached := down.Descriptor()
	if _, ok := cached.Action("control_temperature"); !ok {
		t.Fatal("the cached device lacks control_temperature")
	}
}
