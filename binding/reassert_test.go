package binding_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/conformance"
)

// TestResetWaitsForTheReassertedStop: the stop re-asserted after a cut-off
// write returns is part of the estop. A reset that comes while it runs waits
// for it (bounded), so a stale stop never reaches the backend after the
// device was reset (it would stop the next, legitimate command).
func TestResetWaitsForTheReassertedStop(t *testing.T) {
	hookIn, hookOut := make(chan struct{}), make(chan struct{})
	secondStop := make(chan struct{})
	var stops atomic.Int32
	drv, err := binding.New(binding.Config{
		Device: mhp.DeviceInfo{ID: "reassert-01", Class: "test"},
		Settings: []binding.Setting{{Spec: mhp.Setting{Name: "sp", Type: mhp.TypeNumber},
			Write: func(context.Context, any) (binding.WriteStatus, error) {
				close(hookIn)
				<-hookOut // ignores its context: an uninterruptible vendor call
				return binding.Applied, nil
			}}},
		EStop: func(context.Context) error {
			if stops.Add(1) == 2 {
				<-secondStop // the re-assertion is slow
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	ctx := mhp.WithSession(context.Background(), "s")
	werr := make(chan error, 1)
	go func() { _, err := drv.Write(ctx, mhp.WriteRequest{Name: "sp", Value: 1.0}); werr <- err }()
	<-hookIn
	if _, err := drv.EStop(ctx, "test"); err != nil {
		t.Fatal(err)
	}
	close(hookOut)
	if err := <-werr; mhp.CodeOf(err) != mhp.CodeEStopActive {
		t.Fatalf("cut-off write answered %v, want EStopActive", err)
	}
	conformance.EventuallyWithin(t, "the re-assertion starts", 10*time.Second, func() bool { return stops.Load() == 2 })
	resetErr := make(chan error, 1)
	go func() { _, err := drv.Reset(ctx); resetErr <- err }()
	select { // a short window to catch a reset that does not wait
	case err := <-resetErr:
		t.Fatalf("reset returned (%v) while the stop was still being re-asserted", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(secondStop)
	select {
	case err := <-resetErr:
		if err != nil {
			t.Fatalf("reset after the re-assertion: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("reset did not return after the re-assertion ended")
	}
	if n := stops.Load(); n != 2 {
		t.Fatalf("stop ran %d times, want the stop and one re-assertion", n)
	}
}
