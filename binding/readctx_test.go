package binding_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
)

// readDevice is a driver with one signal whose Read hook is hook.
func readDevice(t *testing.T, timeout time.Duration, hook func(ctx context.Context) (binding.Sample, error)) *binding.Driver {
	t.Helper()
	drv, err := binding.New(binding.Config{
		Device:           mhp.DeviceInfo{ID: "read-01", Class: "test"},
		InterlockTimeout: timeout,
		Signals:          []binding.Signal{{Spec: mhp.Signal{Name: "temp", Type: mhp.TypeNumber}, Read: hook}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drv.Close() })
	return drv
}

// TestReadContextBoundsTheHooks: the context a Read hook gets carries the
// read's deadline (InterlockTimeout, or the caller's when sooner), the
// caller's values and cancellation, ends at its deadline for a hook that
// waits on it (directly, or through a context derived from it), and is
// ended once the read returns; Err never reports an end before Done is
// closed.
func TestReadContextBoundsTheHooks(t *testing.T) {
	type key struct{}
	cases := []struct {
		name    string
		timeout time.Duration
		caller  func() (context.Context, context.CancelFunc)
		hook    func(ctx context.Context) error // ctx's error: the signal is unavailable; any other: the test fails
		unavail bool
		check   func(t *testing.T, seen context.Context)
	}{
		{name: "a hook that waits ends at the read's deadline", timeout: 20 * time.Millisecond,
			hook: func(ctx context.Context) error {
				if err := waitEnd(ctx); err != nil {
					return err
				}
				if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
					return errors.New("ended without DeadlineExceeded")
				}
				if cause := context.Cause(ctx); !errors.Is(cause, context.DeadlineExceeded) {
					return fmt.Errorf("context.Cause %v, want DeadlineExceeded", cause)
				}
				return ctx.Err()
			}, unavail: true},
		{name: "a derived context ends at the read's deadline", timeout: 20 * time.Millisecond,
			hook: func(ctx context.Context) error {
				dctx, cancel := context.WithTimeout(ctx, time.Hour)
				defer cancel()
				if err := waitEnd(dctx); err != nil {
					return err
				}
				return dctx.Err()
			}, unavail: true},
		{name: "the caller's cancellation reaches a waiting hook", timeout: time.Hour,
			caller: func() (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(context.Background())
				time.AfterFunc(10*time.Millisecond, cancel)
				return ctx, cancel
			},
			hook: func(ctx context.Context) error {
				if err := waitEnd(ctx); err != nil {
					return err
				}
				if !errors.Is(ctx.Err(), context.Canceled) {
					return errors.New("ended without the caller's Canceled")
				}
				return ctx.Err()
			}, unavail: true},
		{name: "the caller's cause reaches a waiting hook", timeout: time.Hour,
			caller: func() (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancelCause(context.Background())
				time.AfterFunc(10*time.Millisecond, func() { cancel(errCallerGone) })
				return ctx, func() { cancel(nil) }
			},
			hook: func(ctx context.Context) error {
				if err := waitEnd(ctx); err != nil {
					return err
				}
				if cause := context.Cause(ctx); !errors.Is(cause, errCallerGone) {
					return fmt.Errorf("context.Cause %v, want the caller's", cause)
				}
				return ctx.Err()
			}, unavail: true},
		{name: "the deadline passed reads as Err without waiting", timeout: 5 * time.Millisecond,
			hook: func(ctx context.Context) error {
				dl, ok := ctx.Deadline()
				if !ok {
					return errors.New("no deadline")
				}
				for time.Now().Before(dl) { // the clock passes the deadline; no Done asked for
					time.Sleep(time.Millisecond)
				}
				if err := ctx.Err(); !errors.Is(err, context.DeadlineExceeded) {
					return errors.New("Err is nil after the deadline")
				}
				select {
				case <-ctx.Done(): // Err reported the end: Done is closed
				default:
					return errors.New("Err reported the end before Done closed")
				}
				return ctx.Err()
			}, unavail: true},
		{name: "the caller's sooner deadline is kept", timeout: time.Hour,
			caller: func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), time.Minute)
			},
			hook: func(ctx context.Context) error {
				if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > time.Minute {
					return errors.New("the caller's deadline is lost")
				}
				return nil
			}},
		{name: "a quick hook gets the deadline and the caller's values", timeout: time.Minute,
			caller: func() (context.Context, context.CancelFunc) {
				return context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
			},
			hook: func(ctx context.Context) error {
				if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > time.Minute || time.Until(dl) < 30*time.Second {
					return errors.New("no deadline of InterlockTimeout")
				}
				if ctx.Value(key{}) != "v" {
					return errors.New("the caller's value is lost")
				}
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return nil
			},
			check: func(t *testing.T, seen context.Context) {
				select { // the read returned: the hook's context is ended
				case <-seen.Done():
				case <-time.After(10 * time.Second):
					t.Fatal("the hook's context is not ended after the read")
				}
				if !errors.Is(seen.Err(), context.Canceled) {
					t.Fatalf("after the read: Err %v, want Canceled", seen.Err())
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var seen context.Context
			var hookErr error
			drv := readDevice(t, tc.timeout, func(ctx context.Context) (binding.Sample, error) {
				seen = ctx
				if hookErr = tc.hook(ctx); hookErr != nil {
					return binding.Sample{}, hookErr
				}
				return binding.Sample{Value: 21.5}, nil
			})
			ctx, cancel := context.Background(), context.CancelFunc(func() {})
			if tc.caller != nil {
				ctx, cancel = tc.caller()
			}
			defer cancel()
			r, err := drv.Read(ctx, []string{"temp"})
			if err != nil {
				t.Fatal(err)
			}
			if hookErr != nil && !errors.Is(hookErr, context.DeadlineExceeded) && !errors.Is(hookErr, context.Canceled) {
				t.Fatalf("the hook saw: %v", hookErr)
			}
			why, unavailable := r.Unavailable["temp"]
			if unavailable != tc.unavail {
				t.Fatalf("unavailable %v (%q), want %v", unavailable, why, tc.unavail)
			}
			if !tc.unavail && r.Values["temp"] != 21.5 {
				t.Fatalf("value %v", r.Values["temp"])
			}
			if tc.unavail && !strings.Contains(why, "no answer within the deadline") {
				t.Fatalf("unavailable: %q", why)
			}
			if tc.check != nil {
				tc.check(t, seen)
			}
		})
	}
}

var errCallerGone = errors.New("the caller went away")

// waitEnd waits for ctx to end, at most 10s (an error then), and checks
// that Err agrees.
func waitEnd(ctx context.Context) error {
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		return errors.New("the context did not end within 10s")
	}
	if ctx.Err() == nil {
		return errors.New("Done is closed but Err is nil")
	}
	return nil
}

// TestReadOfAQuickHookAllocatesOnlyTheAnswer: a read whose hook returns a
// value in memory arms no timer and registers nothing with the caller's
// context (a cancellable one, as net/http gives): the answer and its
// values map are all it allocates.
func TestReadOfAQuickHookAllocatesOnlyTheAnswer(t *testing.T) {
	drv := readDevice(t, time.Minute, func(context.Context) (binding.Sample, error) { return binding.Sample{Value: true}, nil })
	ctx, cancel := context.WithCancel(mhp.WithSession(context.Background(), "s1"))
	defer cancel()
	names := []string{"temp"}
	if _, err := drv.Read(ctx, names); err != nil { // the session's record, made once
		t.Fatal(err)
	}
	n := testing.AllocsPerRun(200, func() {
		if _, err := drv.Read(ctx, names); err != nil {
			t.Fatal(err)
		}
	})
	if n > 3 {
		t.Fatalf("a quick read allocates %v times, want at most 3 (the answer with its context, the values map)", n)
	}
}
