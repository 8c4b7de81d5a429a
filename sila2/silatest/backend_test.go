package silatest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/openmhp/mhp-go/sila2"
	"github.com/openmhp/mhp-go/sila2/silatest"
)

// TestBackendDefaults: a nil func answers ErrNotFaked (never a nil
// dereference), Subscribe without one waits for its context, and the
// fields given are what the seam sees.
func TestBackendDefaults(t *testing.T) {
	ctx := context.Background()
	var b silatest.Backend
	if _, err := b.Property(ctx, "F", "P"); !errors.Is(err, silatest.ErrNotFaked) {
		t.Errorf("Property: %v", err)
	}
	if _, err := b.Call(ctx, "F", "C", nil); !errors.Is(err, silatest.ErrNotFaked) {
		t.Errorf("Call: %v", err)
	}
	if _, err := b.Start(ctx, "F", "C", nil); !errors.Is(err, silatest.ErrNotFaked) {
		t.Errorf("Start: %v", err)
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if err := b.Subscribe(sctx, "F", "P", func(any) error { t.Error("delivered a value"); return nil }); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Subscribe: %v, want the context's end", err)
	}

	var x silatest.Execution
	if x.UUID() != silatest.DefaultExecutionUUID || x.Lifetime() != 0 {
		t.Errorf("zero Execution: %q %v", x.UUID(), x.Lifetime())
	}
	if _, err := x.Follow(ctx, func(sila2.ExecInfo) {}); !errors.Is(err, silatest.ErrNotFaked) {
		t.Errorf("Follow: %v", err)
	}
	if _, err := x.Result(ctx); !errors.Is(err, silatest.ErrNotFaked) {
		t.Errorf("Result: %v", err)
	}
	if err := x.Cancel(ctx); !errors.Is(err, silatest.ErrNotFaked) {
		t.Errorf("Cancel: %v", err)
	}
	if err := x.Intermediate(ctx, func(map[string]any) {}); err != nil {
		t.Errorf("Intermediate: %v", err)
	}
	x = silatest.Execution{ExecutionUUID: "u", LifetimeOfExecution: time.Minute,
		CancelFunc: func(context.Context) error { return sila2.ErrNotCancellable }}
	if x.UUID() != "u" || x.Lifetime() != time.Minute || !errors.Is(x.Cancel(ctx), sila2.ErrNotCancellable) {
		t.Errorf("Execution %q %v", x.UUID(), x.Lifetime())
	}
}
