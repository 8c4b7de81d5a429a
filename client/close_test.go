package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/client"
	"github.com/openmhp/mhp-go/clock"
)

// On a watchdog device, a clean Close gives the lease back (the device stays
// idle and another client can lease it), while a session that just ends
// keeps it until the watchdog trips.
func TestCloseReleasesTheLeaseOnAWatchdogDevice(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_900_000_000, 0))
	drv, err := binding.New(binding.Config{
		Device: mhp.DeviceInfo{ID: "wd-01"},
		Clock:  clk,
		Safety: mhp.Safety{WatchdogS: 5},
		Settings: []binding.Setting{{Spec: mhp.Setting{Name: "sp", Type: mhp.TypeNumber},
			Write: func(context.Context, any) (binding.WriteStatus, error) { return binding.Applied, nil }}},
		EStop: func(context.Context) error { return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	ctx := context.Background()
	a := client.Connect(drv, client.Options{})
	if _, err := a.Write(ctx, mhp.WriteRequest{Name: "sp", Value: 1.0}); err != nil { // leases on first use
		t.Fatal(err)
	}
	if !a.HoldsLease() {
		t.Fatal("no lease after a write on a watchdog device")
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b := client.Connect(drv, client.Options{Plain: true})
	defer b.Close()
	if _, err := b.Acquire(ctx, time.Minute); err != nil {
		t.Fatalf("the closed client kept its lease: %v", err)
	}
	clk.Advance(time.Second)
	if st := drv.State(); st != mhp.StateIdle {
		t.Fatalf("state %s after a clean close", st)
	}
}
