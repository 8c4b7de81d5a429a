package binding_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/clock"
)

type lockLog struct {
	mu     sync.Mutex
	events []string
	refuse bool
}

func (l *lockLog) hook(_ context.Context, holder string, acquire bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if acquire && l.refuse {
		return errors.New("locked by the instrument's own panel")
	}
	what := "unlock "
	if acquire {
		what = "lock "
	}
	l.events = append(l.events, what+holder)
	return nil
}

// settled returns the hook calls once every goroutine of the synctest
// bubble is blocked (the release hook runs on its own goroutine).
func (l *lockLog) settled() []string {
	synctest.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.events...)
}

// TestLeaseHookMirrorsLeases runs in a synctest bubble, so the release
// hook's goroutine is waited for, not polled.
func TestLeaseHookMirrorsLeases(t *testing.T) { synctest.Test(t, testLeaseHookMirrorsLeases) }

func testLeaseHookMirrorsLeases(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_900_000_000, 0))
	locks := &lockLog{}
	drv, err := binding.New(binding.Config{Device: mhp.DeviceInfo{ID: "locky"}, Clock: clk, Safety: mhp.Safety{WatchdogS: 5},
		Lease: locks.hook, EStop: func(context.Context) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	ctx := context.Background()
	a, b := mhp.AsSession(drv, "a"), mhp.AsSession(drv, "b")
	if _, err := a.Acquire(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Acquire(ctx, time.Minute); mhp.CodeOf(err) != mhp.CodeNotLeased {
		t.Fatalf("b took a's lease: %v", err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if ev := locks.settled(); len(ev) != 2 || ev[0] != "lock a" || ev[1] != "unlock a" {
		t.Fatalf("hook calls %v", ev)
	}
	// The watchdog ends b's lease: the backend lock is given back too.
	if _, err := b.Acquire(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	clk.Advance(6 * time.Second)
	if ev := locks.settled(); len(ev) != 4 || ev[3] != "unlock b" {
		t.Fatalf("hook calls after the watchdog %v", ev)
	}
	// A backend that refuses its lock refuses the lease.
	locks.mu.Lock()
	locks.refuse = true
	locks.mu.Unlock()
	if _, err := a.Acquire(ctx, time.Minute); mhp.CodeOf(err) != mhp.CodeNotLeased {
		t.Fatalf("lease granted although the backend refused its lock: %v", err)
	}
}

func TestFaultOnTheBackendsWord(t *testing.T) {
	stops := make(chan struct{}, 4)
	drv, err := binding.New(binding.Config{Device: mhp.DeviceInfo{ID: "node"},
		Settings: []binding.Setting{{Spec: mhp.Setting{Name: "v", Type: mhp.TypeNumber},
			Write: func(context.Context, any) (binding.WriteStatus, error) { return binding.Applied, nil }}},
		EStop: func(context.Context) error { stops <- struct{}{}; return nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	drv.Fault("node reports errored")
	if _, err := drv.Write(context.Background(), mhp.WriteRequest{Name: "v", Value: 1.0}); mhp.CodeOf(err) != mhp.CodeDeviceFault {
		t.Fatalf("write on a faulted device: %v", err)
	}
	select {
	case <-stops:
	case <-time.After(2 * time.Second):
		t.Fatal("the fault hook (default: the stop hook) did not run")
	}
	if _, err := drv.Reset(context.Background()); err != nil || drv.State() != mhp.StateIdle {
		t.Fatalf("reset: %v, state %s", err, drv.State())
	}
}

func TestVerifyTimeoutBoundsTheVerifyHook(t *testing.T) {
	var left time.Duration
	drv, err := binding.New(binding.Config{Device: mhp.DeviceInfo{ID: "v"}, VerifyTimeout: 90 * time.Second,
		Verify: func(ctx context.Context) error {
			d, _ := ctx.Deadline()
			left = time.Until(d)
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	drv.Fault("test")
	if _, err := drv.Reset(context.Background()); err != nil {
		t.Fatal(err)
	}
	if left < 60*time.Second || left > 90*time.Second {
		t.Fatalf("verify had %v, want the 90s VerifyTimeout (beyond the 30s HookTimeout)", left)
	}
}
