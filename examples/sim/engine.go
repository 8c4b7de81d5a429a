// Package sim holds simulated instruments built with binding.Config: a
// thermocycler and a plate arm, the devices of the demo lab. They need no
// hardware; their physics (temperature ramps, arm travel) runs on an
// injectable clock, and a speed factor makes simulated time pass faster than
// the clock so that a 30-second hold takes milliseconds in a test.
//
// Each device is a small state machine behind a mutex. Signals read the
// state at the moment of the read (temperatures are computed from the last
// setpoint change and the clock, so nothing polls in the background); long
// actions advance the state in ticks, report progress, honour pause and
// cancel at every tick through binding.Job.Checkpoint, and return
// binding.ErrCancelled only when the simulated work really stopped.
package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/clock"
)

// Options are shared by every simulated device.
type Options struct {
	// ID overrides the device id (default "thermocycler-01" / "arm-01").
	ID string
	// Clock is the time source of the physics and of the driver; default the system clock.
	Clock clock.Clock
	// Speed is how many simulated seconds pass per clock second; default 1.
	// The demo uses 60 (a 30 s hold takes half a second).
	Speed float64
	// Tick is the clock time between two steps of a running job (progress
	// report, pause and cancel checkpoint); default 50ms.
	Tick time.Duration
}

// withDefaults fills zero options.
func (o Options) withDefaults(id string) Options {
	if o.ID == "" {
		o.ID = id
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Speed <= 0 || math.IsNaN(o.Speed) || math.IsInf(o.Speed, 0) {
		o.Speed = 1
	}
	if o.Tick <= 0 {
		o.Tick = 50 * time.Millisecond
	}
	return o
}

// engine turns simulated seconds into clock time and waits on the clock.
type engine struct {
	clk   clock.Clock
	speed float64
	tick  time.Duration
}

func newEngine(o Options) engine { return engine{clk: o.Clock, speed: o.Speed, tick: o.Tick} }

// simSeconds is the simulated time between two clock times.
func (e engine) simSeconds(from, to time.Time) float64 {
	d := to.Sub(from).Seconds() * e.speed
	if d < 0 {
		return 0
	}
	return d
}

// clockFor is the clock duration of s simulated seconds.
func (e engine) clockFor(s float64) time.Duration {
	return time.Duration(s / e.speed * float64(time.Second))
}

// sleep waits d on the engine's clock, or until ctx ends.
func (e engine) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	done := make(chan struct{})
	t := e.clk.AfterFunc(d, func() { close(done) })
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		t.Stop()
		return ctx.Err()
	}
}

// tickSim is the simulated length of one tick.
func (e engine) tickSim() float64 { return e.tick.Seconds() * e.speed }

// step sleeps one tick (or less when less simulated time remains) and then
// passes the job's checkpoint. It returns the simulated seconds slept, or the
// reason to stop: binding.ErrCancelled after a cancel or estop, the context
// error after a timeout.
func (e engine) step(ctx context.Context, job *binding.Job, remaining float64) (float64, error) {
	chunk := math.Min(remaining, e.tickSim())
	if chunk < 0 {
		chunk = 0
	}
	if err := e.sleep(ctx, e.clockFor(chunk)); err != nil {
		return 0, job.Checkpoint(ctx)
	}
	if err := job.Checkpoint(ctx); err != nil {
		return chunk, err
	}
	return chunk, nil
}

// notApplied is a simulated write's refusal when its context ended before
// it took effect (an estop, its deadline): the value was not applied.
func notApplied(ctx context.Context) error {
	return mhp.Errorf(mhp.CodeServerError, "simulated write not applied: %v", context.Cause(ctx)).
		With("outcome", mhp.OutcomeNotStarted)
}

// stopped maps the reason a simulated job stopped early to the binding's
// contract: a confirmed cancel is ErrCancelled; any other end (a timeout) is
// a failure whose outcome is known, because the simulation did stop.
func stopped(err error) error {
	if errors.Is(err, binding.ErrCancelled) {
		return binding.ErrCancelled
	}
	return binding.Failed(fmt.Errorf("simulated work stopped: %w", err), nil)
}

// ramp is a first-order value moving linearly toward a target at a rate in
// units per simulated second, evaluated lazily from the clock.
type ramp struct {
	value  float64   // value at `at`
	target float64   // where it is heading
	rate   float64   // units per simulated second
	at     time.Time // when value was last settled
}

// now returns the value at clock time t.
func (r *ramp) now(e engine, t time.Time) float64 {
	moved := r.rate * e.simSeconds(r.at, t)
	switch {
	case r.value < r.target:
		return math.Min(r.target, r.value+moved)
	case r.value > r.target:
		return math.Max(r.target, r.value-moved)
	}
	return r.value
}

// retarget settles the value at t and heads for a new target at a new rate.
func (r *ramp) retarget(e engine, t time.Time, target, rate float64) {
	r.value = r.now(e, t)
	r.at = t
	r.target = target
	r.rate = rate
}

// secondsTo is the simulated time the value needs to reach its target from t.
func (r *ramp) secondsTo(e engine, t time.Time) float64 {
	if r.rate <= 0 {
		return math.Inf(1)
	}
	return math.Abs(r.target-r.now(e, t)) / r.rate
}

// round1 rounds to 0.1, the resolution the simulated sensors report.
func round1(v float64) float64 { return math.Round(v*10) / 10 }
