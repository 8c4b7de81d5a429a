package sila2_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/clock"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/sila2"
	"github.com/openmhp/mhp-go/sila2/silatest"
)

// fixtureHarness serves the conformance fixture from a fake SiLA 2 server
// (TLS, pinned certificate, CancelController, LockController) and fronts it
// with the adapter built from silatest.FixtureConfig. The config names no
// lock mode, so MHP leases lock the server (lease mode): the whole suite
// runs with every leased call carrying the lock identifier.
func fixtureHarness(t *testing.T, opt conformance.Options) *conformance.Fixture {
	t.Helper()
	clk := clock.NewManual(time.Now())
	in, d := fixtureDriver(t, opt, clk)
	jobs := &invokeCounter{n: map[string]int{}}
	return &conformance.Fixture{
		Device:  countingDevice{mhp.AsSession(d, "session-a"), jobs},
		Other:   countingDevice{mhp.AsSession(d, "session-b"), jobs},
		Backend: releaseAfterArrival{in, jobs},
		Advance: clk.Advance,
	}
}

// conformanceDriver is the fixture driver on the real clock.
func conformanceDriver(t *testing.T) (*conformance.Instrument, *binding.Driver) {
	return fixtureDriver(t, conformance.Options{}, clock.Real{})
}

func fixtureDriver(t *testing.T, opt conformance.Options, clk clock.Clock) (*conformance.Instrument, *binding.Driver) {
	t.Helper()
	in := conformance.NewInstrument()
	srv, err := silatest.New(silatest.Options{Name: "Conformance fixture", CancelController: true, LockController: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.AddFeature(silatest.FixtureFDL, silatest.FixtureHandlers(in)); err != nil {
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
	text := silatest.FixtureConfig + fmt.Sprintf("endpoint: %s\ntls: {pin_sha256: %q}\n", addr, cert.PinSHA256)
	cfg, err := sila2.Load(adapters.Source{Path: "fixture.yaml", Data: []byte(text)})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Safety.WatchdogS = opt.WatchdogS
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	d, err := sila2.New(ctx, cfg, sila2.Options{Options: adapters.Options{Clock: clk}})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		in.ReleaseAll()
		if err := d.Close(); err != nil {
			t.Errorf("driver Close: %v", err)
		}
		srv.Stop()
	})
	return in, d
}

// invokeCounter counts the jobs started per action.
type invokeCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *invokeCounter) get(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[name]
}

// countingDevice counts the jobs its Invoke starts.
type countingDevice struct {
	mhp.Device
	jobs *invokeCounter
}

func (d countingDevice) Invoke(ctx context.Context, req mhp.InvokeRequest) (*mhp.InvokeResult, error) {
	r, err := d.Device.Invoke(ctx, req)
	if err == nil && r != nil && r.Job != nil {
		d.jobs.mu.Lock()
		d.jobs.n[req.Name]++
		d.jobs.mu.Unlock()
	}
	return r, err
}

// releaseAfterArrival bridges the network gap of a real protocol: a job is
// "running" as soon as the driver calls the action's Run, but its command
// reaches the instrument one gRPC round trip later. Release first waits
// (bounded) until every started job's command has arrived, so the release
// is not lost on work that does not exist yet. (In process, the memory
// harness has the same gap, only shorter.)
type releaseAfterArrival struct {
	*conformance.Instrument
	jobs *invokeCounter
}

func (b releaseAfterArrival) Release(name string) {
	// Not conformance.Eventually: running out of time here is no failure
	// (a job stopped before its command left the driver never arrives), so
	// this polls best-effort until the deadline and releases regardless.
	deadline := time.Now().Add(2 * time.Second)
	for b.Calls(name) < b.jobs.get(name) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	b.Instrument.Release(name)
}

func TestConformance(t *testing.T) {
	conformance.Run(t, fixtureHarness)
}
