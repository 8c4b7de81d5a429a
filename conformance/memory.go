package conformance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/clock"
)

// Timings of the reference mapping. They are real time, not the driver's
// clock: they bound waits on the backend, which runs in real time even when
// the driver's clock is manual.
const (
	// memoryProgressEvery is how often a running action's backend progress is
	// copied into the job.
	memoryProgressEvery = 20 * time.Millisecond
	// memoryCancelWait bounds how long Run keeps waiting for the backend's
	// real end state after its context ended and the cancel was sent.
	memoryCancelWait = 30 * time.Second
)

// MemoryDriver maps an Instrument onto bindings with exactly the items of
// [FixtureDescriptor] (and [FixtureExtras] when opt.Extras): the in-memory reference adapter that every ecosystem
// adapter's mapping follows.
//
//   - signal Read -> in.ReadSignal; an unreadable signal wraps [binding.ErrUnavailable];
//   - setting Write -> in.WriteSetting; [ErrRefused] and [ErrReported] (the backend
//     said no, nothing changed) become an [*mhp.Error] refusal that leaves the
//     device state alone; [ErrDropped] or a write cut off by its context is a
//     plain error, so the outcome is unknown and the device latches in fault;
//   - action Run -> in.Start, then wait for the work to end; when the job's
//     context ends (jobs/cancel, estop, timeout) the backend's cancel is sent
//     and Run keeps waiting, bounded, for the backend's real end state:
//     succeeded -> the result (a cancel the backend ignored ends done),
//     cancelled -> [binding.ErrCancelled], failed -> [binding.Failed], dropped ->
//     a plain error (outcome unknown);
//   - estop -> in.Stop.
//
// opt.WatchdogS becomes safety.watchdog_s; clk is the driver's clock.
func MemoryDriver(in *Instrument, opt Options, clk clock.Clock) (*binding.Driver, error) {
	if in == nil {
		return nil, errors.New("conformance: MemoryDriver needs an Instrument")
	}
	if clk == nil {
		clk = clock.Real{}
	}
	desc := FixtureDescriptor()
	if opt.Extras {
		desc = WithExtras(desc)
	}
	cfg := binding.Config{
		Device: desc.DeviceInfo,
		Notes:  "In-memory conformance fixture over a simulated Instrument.",
		Safety: desc.Safety,
		EStop:  func(ctx context.Context) error { return in.Stop() },
		Clock:  clk,
		// The suite provokes faults and failed stops on purpose; keep test logs quiet.
		Logger: slog.New(slog.DiscardHandler),
		// Subscriptions poll quickly so notifications arrive promptly in tests.
		PollInterval: 20 * time.Millisecond,
	}
	cfg.Safety.WatchdogS = opt.WatchdogS
	for _, s := range desc.Signals {
		cfg.Signals = append(cfg.Signals, binding.Signal{Spec: s, Read: memoryRead(in, s.Name)})
	}
	for _, s := range desc.Settings {
		cfg.Settings = append(cfg.Settings, binding.Setting{Spec: s, Write: memoryWrite(in, s.Name)})
	}
	for _, a := range desc.Actions {
		cfg.Actions = append(cfg.Actions, binding.Action{Spec: a, Run: memoryRun(in, a.Name)})
	}
	return binding.New(cfg)
}

func memoryRead(in *Instrument, name string) func(context.Context) (binding.Sample, error) {
	return func(ctx context.Context) (binding.Sample, error) {
		v, err := in.ReadSignal(name)
		if err != nil {
			// A read has no effect on the device: whatever went wrong, the
			// value is simply not available (null, interlock open).
			return binding.Sample{}, binding.Unavailable("%s: %v", name, err)
		}
		return binding.Sample{Value: v}, nil
	}
}

func memoryWrite(in *Instrument, name string) func(context.Context, any) (binding.WriteStatus, error) {
	return func(ctx context.Context, value any) (binding.WriteStatus, error) {
		err := in.WriteSetting(ctx, name, value)
		switch {
		case err == nil:
			return binding.Applied, nil
		case errors.Is(err, ErrRefused):
			return binding.Applied, backendRefusal(name, "backend_refused", err)
		case errors.Is(err, ErrReported):
			return binding.Applied, backendRefusal(name, "backend_reported_failure", err)
		default:
			// ErrDropped, or the call cut off by its context after it reached
			// the backend: nobody knows whether the value took effect.
			return binding.Sent, fmt.Errorf("%s: write %v: %w", name, value, err)
		}
	}
}

// backendRefusal is the refusal of a backend that said no before anything took
// effect: an *mhp.Error, so the driver leaves the device state unchanged.
func backendRefusal(name, reason string, err error) *mhp.Error {
	return mhp.Errorf(mhp.CodeServerError, "%s: the backend refused: %v", name, err).
		With(mhp.DataReason, reason).With(mhp.DataBackendError, err.Error())
}

func memoryRun(in *Instrument, name string) func(context.Context, *binding.Job) (any, error) {
	return func(ctx context.Context, job *binding.Job) (any, error) {
		work, err := in.Start(name, job.Params())
		if err != nil {
			if errors.Is(err, ErrRefused) {
				return nil, backendRefusal(name, "backend_refused", err)
			}
			return nil, fmt.Errorf("%s: start: %w", name, err)
		}
		return awaitWork(ctx, job, work)
	}
}

// awaitWork waits for the work's end state. When ctx ends it sends the
// backend's cancel once and keeps waiting for the backend to say how the work
// ended, at most memoryCancelWait; only the backend's answer decides.
func awaitWork(ctx context.Context, job *binding.Job, work *Work) (any, error) {
	tick := time.NewTicker(memoryProgressEvery)
	defer tick.Stop()
	last := 0.0
	report := func() {
		if p := work.Progress(); p != last {
			last = p
			job.Progress(p, nil)
		}
	}
	report()
	ctxDone := ctx.Done()
	var giveUp <-chan time.Time
	for {
		select {
		case <-work.Done():
			return workOutcome(work)
		case <-ctxDone:
			ctxDone = nil
			work.Cancel()
			t := time.NewTimer(memoryCancelWait)
			defer t.Stop()
			giveUp = t.C
		case <-giveUp:
			return nil, fmt.Errorf("%s: the backend reported no end state within %v of the cancel", work.Action, memoryCancelWait)
		case <-tick.C:
			report()
		}
	}
}

func workOutcome(work *Work) (any, error) {
	state, result, err := work.State()
	switch state {
	case WorkSucceeded:
		return result, nil
	case WorkCancelled:
		return nil, binding.ErrCancelled
	case WorkFailed:
		if err == nil {
			err = errors.New("work failed")
		}
		return nil, binding.Failed(err, map[string]any{"backend_error": err.Error()})
	default:
		if err == nil {
			err = fmt.Errorf("work ended %s", state)
		}
		return nil, fmt.Errorf("%s: %w", work.Action, err)
	}
}

// MemoryClockStart is where a [MemoryHarness] device clock starts, in Unix
// seconds (2030-01-01 UTC): far from the wall clock on purpose.
const MemoryClockStart = 1_893_456_000

// Session ids of the two sessions a [MemoryHarness] fixture gives.
const (
	MemorySessionA = "session-a"
	MemorySessionB = "session-b"
)

// MemoryHarness is the Harness of [MemoryDriver]: a fresh Instrument and
// driver per check, on a manual clock ([Fixture.Advance] moves it), with Device
// and Other as two sessions of the same driver. Cleanup releases every
// blocked backend call and closes the driver.
func MemoryHarness(t *testing.T, opt Options) *Fixture {
	t.Helper()
	in := NewInstrument()
	// The device clock starts far from the wall clock, so a timestamp taken
	// from the wrong clock shows.
	clk := clock.NewManual(time.Unix(MemoryClockStart, 0))
	d, err := MemoryDriver(in, opt, clk)
	if err != nil {
		t.Fatalf("MemoryDriver: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.Start(ctx); err != nil {
		t.Fatalf("driver Start: %v", err)
	}
	t.Cleanup(func() {
		in.ReleaseAll()
		if err := d.Close(); err != nil {
			t.Errorf("driver Close: %v", err)
		}
	})
	return &Fixture{
		Device:  mhp.AsSession(d, MemorySessionA),
		Other:   mhp.AsSession(d, MemorySessionB),
		Backend: in,
		Advance: clk.Advance,
	}
}
