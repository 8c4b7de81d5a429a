package binding_test

import (
	"context"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/bench"
	"github.com/openmhp/mhp-go/binding"
)

// benchDevice is [bench.WriteDevice] (one setting behind all six gates,
// the lease held by the writing session), closed at the benchmark's end.
func benchDevice(b *testing.B) (*binding.Driver, context.Context, func(context.Context, any) (binding.WriteStatus, error)) {
	b.Helper()
	drv, ctx, write, err := bench.WriteDevice()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { drv.Close() })
	return drv, ctx, write
}

// BenchmarkWriteGated is settings/write through all six gates (interlock read
// live, limits checked, lease held) into the binding's Write hook.
func BenchmarkWriteGated(b *testing.B) {
	drv, ctx, _ := benchDevice(b)
	req := mhp.WriteRequest{Name: "setpoint", Value: 42.0}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := drv.Write(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWriteDirect is the same binding's Write hook called directly: the
// baseline of BenchmarkWriteGated.
func BenchmarkWriteDirect(b *testing.B) {
	_, ctx, write := benchDevice(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := write(ctx, 42.0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWriteGatedVsDirect times both in the same run and reports the
// gated/direct ratio and the nanoseconds the gates add per write.
func BenchmarkWriteGatedVsDirect(b *testing.B) {
	drv, ctx, write := benchDevice(b)
	req := mhp.WriteRequest{Name: "setpoint", Value: 42.0}
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if _, err := write(ctx, 42.0); err != nil {
			b.Fatal(err)
		}
	}
	direct := time.Since(start)
	start = time.Now()
	for i := 0; i < b.N; i++ {
		if _, err := drv.Write(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
	gated := time.Since(start)
	n := float64(b.N)
	b.ReportMetric(float64(direct.Nanoseconds())/n, "direct-ns/op")
	b.ReportMetric(float64(gated.Nanoseconds())/n, "gated-ns/op")
	b.ReportMetric(float64(gated-direct)/n, "added-ns/op")
	if direct > 0 {
		b.ReportMetric(float64(gated)/float64(direct), "gated/direct")
	}
}

// BenchmarkRead is signals/read of one named signal by a session, under a
// cancellable request context as net/http gives one: the binding's cost
// per read (the lock holds, the deadline, the result).
func BenchmarkRead(b *testing.B) {
	drv, ctx, _ := benchDevice(b)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	names := []string{"door_closed"}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := drv.Read(ctx, names); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEStopReset is one safety/estop and the safety/reset after it on
// a driver with one listener (as a transport registers): the binding's
// cost per estop (the latch, the stop hook on its own goroutine within
// EStopAnswerTimeout, the notification) and per reset.
func BenchmarkEStopReset(b *testing.B) {
	drv, ctx, _ := benchDevice(b)
	stop := drv.Listen(func(mhp.Notification) {})
	defer stop()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := drv.EStop(ctx, "bench"); err != nil {
			b.Fatal(err)
		}
		if _, err := drv.Reset(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
