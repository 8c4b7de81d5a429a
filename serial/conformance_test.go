//go:build linux

package serial_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/clock"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/serial"
	"github.com/openmhp/mhp-go/serial/serialtest"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// start builds and starts the adapter on cfg with a manual driver clock.
func start(t testing.TB, cfg serial.Config, refine func(*binding.Config) error) (*binding.Driver, *clock.Manual) {
	t.Helper()
	clk := clock.NewManual(time.Now())
	drv, err := serial.New(context.Background(), cfg, serial.Options{Options: adapters.Options{Clock: clk, Logger: quiet(),
		Refine: refine}})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := drv.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = drv.Close() })
	return drv, clk
}

func harness(t *testing.T, opt conformance.Options) *conformance.Fixture {
	in := conformance.NewInstrument()
	proto := serialtest.NewFixture(in)
	fake := serialtest.New(t, proto, serialtest.Options{Concurrent: true})
	t.Cleanup(func() { in.ReleaseAll(); proto.Close() })
	cfg := serialtest.FixtureConfig(fake.Path(), opt.Extras)
	cfg.Safety.WatchdogS = opt.WatchdogS
	drv, clk := start(t, cfg, func(bc *binding.Config) error { bc.PollInterval = 20 * time.Millisecond; return nil })
	return &conformance.Fixture{
		Device:  mhp.AsSession(drv, conformance.MemorySessionA),
		Other:   mhp.AsSession(drv, conformance.MemorySessionB),
		Backend: in,
		Advance: clk.Advance,
	}
}

// TestConformance runs the whole conformance suite through the serial
// adapter against the fixture protocol on a pty.
func TestConformance(t *testing.T) {
	conformance.Run(t, harness)
}
