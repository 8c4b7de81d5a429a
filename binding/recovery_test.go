package binding_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
)

// recoveryDevice has a quiet sensor (NaN until told otherwise), an
// interlock signal (door_closed, on the run action) that can be made
// unreadable, and a third signal marked required_for_recovery.
type recoveryDevice struct {
	drv                    *binding.Driver
	doorBroken, levelBroke atomic.Bool
}

func newRecoveryDevice(t *testing.T, verify func(context.Context) error) *recoveryDevice {
	t.Helper()
	rd := &recoveryDevice{}
	c := binding.Config{
		Device: mhp.DeviceInfo{ID: "recovery-01", Class: "test"},
		Signals: []binding.Signal{
			{Spec: mhp.Signal{Name: "nan_value", Type: mhp.TypeNumber},
				Read: func(context.Context) (binding.Sample, error) { return binding.Sample{Value: math.NaN()}, nil }},
			{Spec: mhp.Signal{Name: "door_closed", Type: mhp.TypeBoolean},
				Read: func(context.Context) (binding.Sample, error) {
					if rd.doorBroken.Load() {
						return binding.Sample{}, binding.Unavailable("door switch not answering")
					}
					return binding.Sample{Value: true}, nil
				}},
			{Spec: mhp.Signal{Name: "coolant_level", Type: mhp.TypeNumber, RequiredForRecovery: true},
				Read: func(context.Context) (binding.Sample, error) {
					if rd.levelBroke.Load() {
						return binding.Sample{}, errors.New("sensor cable cut")
					}
					return binding.Sample{Value: 3.0}, nil
				}},
		},
		Actions: []binding.Action{{Spec: mhp.Action{Name: "run", Interlocks: []string{"door_closed"}},
			Run: func(context.Context, *binding.Job) (any, error) { return nil, nil }}},
		EStop:  func(context.Context) error { return nil },
		Verify: verify,
	}
	drv, err := binding.New(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := drv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = drv.Close() })
	rd.drv = drv
	return rd
}

// TestResetIsNotBlockedByAQuietSignal: a signal reading NaN (rosbridge's
// null, a topic that publishes only on change) no longer blocks recovery
// from an estop; the answer names it. Before the fix every unreadable
// signal refused the reset for as long as it was unavailable.
func TestResetIsNotBlockedByAQuietSignal(t *testing.T) {
	rd := newRecoveryDevice(t, nil)
	ctx := context.Background()
	if _, err := rd.drv.EStop(ctx, "test"); err != nil {
		t.Fatal(err)
	}
	r, err := rd.drv.Reset(ctx)
	if err != nil {
		t.Fatalf("reset with only a quiet sensor unavailable: %v", err)
	}
	if r.State != mhp.StateIdle || !r.Verified {
		t.Fatalf("reset answer %+v, want idle and verified", r)
	}
	if why := r.Unavailable["nan_value"]; !strings.Contains(why, "non-finite") {
		t.Fatalf("reset answer unavailable %v, want nan_value named with its reason", r.Unavailable)
	}
	if _, named := r.Unavailable["door_closed"]; named {
		t.Fatalf("reset answer names door_closed, which read: %v", r.Unavailable)
	}
}

// TestResetStillRefusesAnUnreadableInterlock: the interlock signal, and a
// signal marked required_for_recovery, must read for a reset; the refusal
// names the signal and why it counts.
func TestResetStillRefusesAnUnreadableInterlock(t *testing.T) {
	for _, tc := range []struct {
		name   string
		break_ func(*recoveryDevice)
		want   string
	}{
		{"interlock", func(rd *recoveryDevice) { rd.doorBroken.Store(true) }, "door_closed unreadable (an interlock)"},
		{"required", func(rd *recoveryDevice) { rd.levelBroke.Store(true) }, "coolant_level unreadable (required for recovery)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rd := newRecoveryDevice(t, nil)
			ctx := context.Background()
			if _, err := rd.drv.EStop(ctx, "test"); err != nil {
				t.Fatal(err)
			}
			tc.break_(rd)
			_, err := rd.drv.Reset(ctx)
			e, _ := mhp.AsError(err)
			if e == nil || e.Code != mhp.CodeDeviceFault || !strings.Contains(e.Message, tc.want) {
				t.Fatalf("reset with %s unreadable: %v, want DeviceFault naming %q", tc.name, err, tc.want)
			}
			if st := rd.drv.State(); st != mhp.StateEStop {
				t.Fatalf("state %s after a refused reset, want estop", st)
			}
		})
	}
}

// TestResetRunsTheAdapterCheckAndThenTheSignals: the adapter's own check
// runs (and refuses on its own word), and passing it does not skip the
// interlock reads.
func TestResetRunsTheAdapterCheckAndThenTheSignals(t *testing.T) {
	var notReady atomic.Bool
	rd := newRecoveryDevice(t, func(context.Context) error {
		if notReady.Load() {
			return errors.New("unit still Aborted")
		}
		return nil
	})
	ctx := context.Background()
	if _, err := rd.drv.EStop(ctx, "test"); err != nil {
		t.Fatal(err)
	}
	notReady.Store(true)
	if _, err := rd.drv.Reset(ctx); err == nil || !strings.Contains(err.Error(), "unit still Aborted") {
		t.Fatalf("reset with the adapter check failing: %v", err)
	}
	notReady.Store(false)
	rd.doorBroken.Store(true)
	if _, err := rd.drv.Reset(ctx); err == nil || !strings.Contains(err.Error(), "door_closed") {
		t.Fatalf("reset with the adapter check passing and the interlock unreadable: %v", err)
	}
	if got := rd.drv.RecoverySignals(); !got["door_closed"] || !got["coolant_level"] || got["nan_value"] {
		t.Fatalf("RecoverySignals %v, want door_closed and coolant_level only", got)
	}
}

// TestResetWaitsForTheFaultHook: a reset that comes while the fault hook
// still stops the device waits for it (bounded by StopTimeout) before it
// verifies recovery. Before the fix it verified at once, while the hook held
// the backend: a serial line's stop commands made every signal read fail.
func TestResetWaitsForTheFaultHook(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	var hookRunning, verifiedDuringHook atomic.Bool
	drv, err := binding.New(binding.Config{
		Device: mhp.DeviceInfo{ID: "hook-01", Class: "test"},
		Signals: []binding.Signal{{Spec: mhp.Signal{Name: "ok", Type: mhp.TypeBoolean},
			Read: func(context.Context) (binding.Sample, error) { return binding.Sample{Value: true}, nil }}},
		EStop: func(context.Context) error { return nil },
		OnFault: func(context.Context, string) error {
			hookRunning.Store(true)
			close(started)
			<-release
			hookRunning.Store(false)
			return nil
		},
		Verify: func(context.Context) error {
			verifiedDuringHook.Store(hookRunning.Load())
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := drv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = drv.Close() })
	drv.Fault("plc alarm")
	<-started
	done := make(chan error, 1)
	go func() { _, err := drv.Reset(context.Background()); done <- err }()
	// The hook ends a moment later; a reset that does not wait verifies
	// before that (this only decides whether the bug shows, never makes a
	// waiting reset fail).
	time.AfterFunc(100*time.Millisecond, func() { close(release) })
	if err := <-done; err != nil {
		t.Fatalf("reset after the fault hook: %v", err)
	}
	if verifiedDuringHook.Load() {
		t.Fatal("the reset verified recovery while the fault hook was still stopping the device")
	}
}
