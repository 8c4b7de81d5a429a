package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
)

// WriteDevice is a driver with one setting behind all six gates: state,
// approval (auto), an interlock signal read live, limits 0..100, the lease
// (held by the writing session) and busy. It returns the driver, the
// writer's context and the setting's Write hook for direct calls.
func WriteDevice() (*binding.Driver, context.Context, func(context.Context, any) (binding.WriteStatus, error), error) {
	var stored atomic.Value
	write := func(ctx context.Context, v any) (binding.WriteStatus, error) {
		stored.Store(v)
		return binding.Applied, nil
	}
	drv, err := binding.New(binding.Config{
		Device: mhp.DeviceInfo{ID: "bench-01", Class: "bench"},
		Signals: []binding.Signal{{Spec: mhp.Signal{Name: "door_closed", Type: mhp.TypeBoolean},
			Read: func(context.Context) (binding.Sample, error) { return binding.Sample{Value: true}, nil }}},
		Settings: []binding.Setting{{Spec: mhp.Setting{Name: "setpoint", Type: mhp.TypeNumber, Unit: "degC",
			Limits: mhp.Range(0, 100), Approval: mhp.ApprovalAuto, Interlocks: []string{"door_closed"}},
			Write: write}},
		EStop: func(context.Context) error { return nil },
	})
	if err != nil {
		return nil, nil, nil, err
	}
	ctx := mhp.WithSession(context.Background(), "bench")
	if _, err := drv.Acquire(ctx, time.Hour); err != nil {
		drv.Close()
		return nil, nil, nil, err
	}
	return drv, ctx, write, nil
}

// measureWrite is settings/write through the six gates against the Write
// hook called directly.
func measureWrite(_ context.Context, o Options) (Row, error) {
	drv, ctx, write, err := WriteDevice()
	if err != nil {
		return Row{}, err
	}
	defer drv.Close()
	req := mhp.WriteRequest{Name: "setpoint", Value: 42.0}
	gated := func() error { _, err := drv.Write(ctx, req); return err }
	direct := func() error { _, err := write(ctx, 42.0); return err }
	n := o.n(200000)
	var dNs, added, wall []float64
	for r := 0; r < o.Rounds; r++ {
		td, err := cpuN(n, direct)
		if err != nil {
			return Row{}, err
		}
		tg, err := cpuN(n, gated)
		if err != nil {
			return Row{}, err
		}
		wd, err := timeN(n, direct)
		if err != nil {
			return Row{}, err
		}
		wg, err := timeN(n, gated)
		if err != nil {
			return Row{}, err
		}
		dNs = append(dNs, float64(td.Nanoseconds())/float64(n))
		added = append(added, float64((tg-td).Nanoseconds())/float64(n))
		wall = append(wall, float64((wg-wd).Nanoseconds())/float64(n))
	}
	var werr error
	ag := testing.AllocsPerRun(1000, func() {
		if err := gated(); err != nil {
			werr = err
		}
	})
	ad := testing.AllocsPerRun(1000, func() { _ = direct() })
	if werr != nil {
		return Row{}, werr
	}
	addedAllocs := ag - ad
	return Row{
		What:     "write through the six gates vs the hook called directly",
		Baseline: fmt.Sprintf("direct %s ns CPU, %.0f allocs", spread(dNs, "%.0f"), ad),
		Now:      fmt.Sprintf("+%s ns CPU (wall +%s ns), +%.0f allocs", spread(added, "%.0f"), spread(wall, "%.0f"), addedAllocs),
		Goal:     "<= +500 ns, <= +2 allocs",
		Met:      ptr(median(added) <= 500 && addedAllocs <= 2),
	}, nil
}
