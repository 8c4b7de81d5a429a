package guard_test

import (
	"context"
	"testing"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/evidence"
	"github.com/openmhp/mhp-go/guard"
)

// BenchmarkWriteEvidence compares settings/write in process: the bare driver
// (the baseline), guarded without evidence, and with evidence under both
// sync policies. Report the ratios against "bare" from the same run.
func BenchmarkWriteEvidence(b *testing.B) {
	newDrv := func(b *testing.B) *binding.Driver {
		drv, err := binding.New(binding.Config{
			Device: mhp.DeviceInfo{ID: "bench-01", Class: "test"},
			Settings: []binding.Setting{{Spec: mhp.Setting{Name: "sp", Type: mhp.TypeNumber, Limits: mhp.Range(0, 100)},
				Write: func(context.Context, any) (binding.WriteStatus, error) { return binding.Applied, nil }}},
		})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { drv.Close() })
		return drv
	}
	run := func(b *testing.B, dev mhp.Device) {
		ctx := mhp.WithSession(context.Background(), "bench")
		req := mhp.WriteRequest{Name: "sp", Value: 42.0}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := dev.Write(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
	}
	withLog := func(b *testing.B, sync evidence.SyncPolicy) mhp.Device {
		lg, err := evidence.Open(evidence.Config{Dir: b.TempDir(), Device: "bench-01", Sync: sync, SegmentEntries: 1 << 20})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { lg.Close() })
		g, err := guard.New(newDrv(b), guard.Config{Evidence: lg})
		if err != nil {
			b.Fatal(err)
		}
		return g
	}
	b.Run("bare", func(b *testing.B) { run(b, newDrv(b)) })
	b.Run("guard", func(b *testing.B) {
		g, _ := guard.New(newDrv(b), guard.Config{})
		run(b, g)
	})
	b.Run("evidence-nosync", func(b *testing.B) { run(b, withLog(b, evidence.SyncNever)) })
	b.Run("evidence-fsync", func(b *testing.B) { run(b, withLog(b, evidence.SyncAlways)) })
}
