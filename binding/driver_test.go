package binding_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/clock"
	"github.com/openmhp/mhp-go/conformance"
)

// smallDevice is a hand-written device for the driver's own unit tests; the
// full behaviour is covered by the conformance suite.
func smallDevice(t *testing.T, clk clock.Clock, watchdog float64) (*binding.Driver, chan struct{}, *atomic.Int32) {
	t.Helper()
	release := make(chan struct{})
	stops := new(atomic.Int32)
	drv, err := binding.New(binding.Config{
		Device: mhp.DeviceInfo{ID: "small-01", Class: "test"},
		Clock:  clk,
		Safety: mhp.Safety{WatchdogS: watchdog},
		Signals: []binding.Signal{{Spec: mhp.Signal{Name: "ok", Type: mhp.TypeBoolean},
			Read: func(context.Context) (binding.Sample, error) { return binding.Sample{Value: true}, nil }}},
		Settings: []binding.Setting{{Spec: mhp.Setting{Name: "sp", Type: mhp.TypeNumber, Limits: mhp.Range(0, 10)},
			Write: func(ctx context.Context, v any) (binding.WriteStatus, error) {
				if v.(float64) == 7 {
					<-ctx.Done() // blocks until estop cancels the write
					return binding.Applied, ctx.Err()
				}
				return binding.Applied, nil
			}}},
		Actions: []binding.Action{{Spec: mhp.Action{Name: "stubborn", Cancellable: true},
			Run: func(ctx context.Context, j *binding.Job) (any, error) {
				<-release // ignores its context: runs to completion
				return map[string]any{"finished": true}, nil
			}}},
		EStop: func(context.Context) error { stops.Add(1); return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drv.Close() })
	return drv, release, stops
}

func waitJob(t *testing.T, dev mhp.Device, id string) *mhp.Job {
	t.Helper()
	return conformance.WaitJob(t, dev, id, conformance.WaitTimeout, nil)
}

func TestIgnoredCancelEndsDone(t *testing.T) {
	drv, release, _ := smallDevice(t, clock.Real{}, 0)
	ctx := mhp.WithSession(context.Background(), "a")
	res, err := drv.Invoke(ctx, mhp.InvokeRequest{Name: "stubborn"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := drv.CancelJob(ctx, res.Job.ID); err != nil {
		t.Fatal(err)
	}
	close(release)
	j := waitJob(t, drv, res.Job.ID)
	if j.State != mhp.JobDone || !j.CancelRequested {
		t.Fatalf("job ended %s (cancel requested %v), want done after an ignored cancel", j.State, j.CancelRequested)
	}
}

// TestEStopDoesNotWaitForBlockedWrite runs in a synctest bubble: the write
// is known to sit in its hook once every goroutine is blocked, and "within
// 50 ms" is measured on the bubble's clock, so no machine load can fail it.
func TestEStopDoesNotWaitForBlockedWrite(t *testing.T) {
	synctest.Test(t, testEStopDoesNotWaitForBlockedWrite)
}

func testEStopDoesNotWaitForBlockedWrite(t *testing.T) {
	drv, _, stops := smallDevice(t, clock.Real{}, 0)
	ctx := mhp.WithSession(context.Background(), "a")
	writeErr := make(chan error, 1)
	go func() {
		_, err := drv.Write(ctx, mhp.WriteRequest{Name: "sp", Value: 7.0})
		writeErr <- err
	}()
	synctest.Wait() // the write is inside its hook
	qctx, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
	_, err := drv.Write(qctx, mhp.WriteRequest{Name: "sp", Value: 1.0})
	cancel()
	if mhp.CodeOf(err) != mhp.CodeDeviceBusy {
		t.Fatalf("a second write while the first is in its hook: %v, want DeviceBusy", err)
	}
	done := make(chan *mhp.EStopResult, 1)
	go func() {
		r, _ := drv.EStop(ctx, "test")
		done <- r
	}()
	select {
	case r := <-done:
		if !r.Stopped || r.State != mhp.StateEStop || stops.Load() < 1 {
			t.Fatalf("estop result %+v, stops %d", r, stops.Load())
		}
	case <-time.After(50 * time.Millisecond):
		t.Fatal("estop did not return within 50 ms while a write was blocked")
	}
	err = <-writeErr
	// The write was cut off by the estop: never ok, refused EStopActive with
	// the outcome unknown (the hook was at the backend), and the stop is
	// re-asserted after it returned.
	if me, ok := mhp.AsError(err); !ok || me.Code != mhp.CodeEStopActive || !me.OutcomeUnknown() {
		t.Fatalf("interrupted write: %v, want EStopActive with outcome unknown", err)
	}
	synctest.Wait()
	if n := stops.Load(); n != 2 {
		t.Fatalf("stop hook ran %d times, want 2 (re-asserted after the cut-off write returned)", n)
	}
}

func TestWatchdogTripsOnceOnSilentHolder(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_800_000_000, 0))
	drv, _, stops := smallDevice(t, clk, 2)
	a := mhp.AsSession(drv, "a")
	ctx := context.Background()
	if _, err := a.Write(ctx, mhp.WriteRequest{Name: "sp", Value: 1.0}); mhp.CodeOf(err) != mhp.CodeNotLeased {
		t.Fatalf("unleased write on a watchdog device: %v, want NotLeased", err)
	}
	if _, err := a.Acquire(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ { // a pinging holder keeps the device idle
		clk.Advance(time.Second)
		if p, _ := a.Ping(ctx); p.State != mhp.StateIdle {
			t.Fatalf("state %s after heartbeat %d", p.State, i)
		}
	}
	clk.Advance(3 * time.Second)
	conformance.Eventually(t, "the watchdog to trip", func() bool {
		return drv.State() == mhp.StateEStop && stops.Load() > 0
	})
	clk.Advance(10 * time.Second)
	if n := stops.Load(); n != 1 {
		t.Fatalf("stop hook ran %d times, want once", n)
	}
	if _, err := a.Renew(ctx); mhp.CodeOf(err) != mhp.CodeNotLeased {
		t.Fatalf("lease survived the watchdog: %v", err)
	}
}

func TestHookErrorContract(t *testing.T) {
	refused := mhp.Errorf(mhp.CodeLimitViolation, "backend says no")
	for _, tc := range []struct {
		name      string
		err       error
		wantState mhp.DeviceState
		wantCode  mhp.Code
	}{
		{"refusal leaves state", refused, mhp.StateIdle, mhp.CodeLimitViolation},
		{"io error faults", errors.New("link down"), mhp.StateFault, mhp.CodeDeviceFault},
	} {
		t.Run(tc.name, func(t *testing.T) {
			drv, err := binding.New(binding.Config{
				Device: mhp.DeviceInfo{ID: "x"},
				Settings: []binding.Setting{{Spec: mhp.Setting{Name: "v", Type: mhp.TypeNumber},
					Write: func(context.Context, any) (binding.WriteStatus, error) { return binding.Applied, tc.err }}},
			})
			if err != nil {
				t.Fatal(err)
			}
			_, werr := drv.Write(context.Background(), mhp.WriteRequest{Name: "v", Value: 1})
			if mhp.CodeOf(werr) != tc.wantCode || drv.State() != tc.wantState {
				t.Fatalf("got %v in state %s, want code %s in state %s", werr, drv.State(), tc.wantCode, tc.wantState)
			}
		})
	}
}

func TestReadAfterCloseIsRefused(t *testing.T) {
	reads := 0
	drv, err := binding.New(binding.Config{Device: mhp.DeviceInfo{ID: "x"},
		Signals: []binding.Signal{{Spec: mhp.Signal{Name: "v", Type: mhp.TypeNumber},
			Read: func(context.Context) (binding.Sample, error) { reads++; return binding.Sample{Value: 1.0}, nil }}}})
	if err != nil {
		t.Fatal(err)
	}
	drv.Close()
	if _, err := drv.Read(context.Background(), nil); mhp.CodeOf(err) != mhp.CodeDeviceFault || reads != 0 {
		t.Fatalf("read after close: %v (%d reads reached the backend)", err, reads)
	}
}
