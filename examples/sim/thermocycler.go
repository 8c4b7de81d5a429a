package sim

import (
	"context"
	"fmt"
	"sync"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
)

// Physics of the simulated thermocycler, per simulated second.
const (
	// Ambient is the room temperature the block and lid drift to, degC.
	Ambient = 22.0
	// BlockRamp is the block's active ramp rate, degC/s.
	BlockRamp = 4.0
	// PassiveRate is how fast an unheated block or lid drifts to ambient, degC/s.
	PassiveRate = 0.5
	// LidRamp is the heated lid's ramp rate, degC/s.
	LidRamp = 2.0
	// LidSetpoint is the heated lid's temperature, degC.
	LidSetpoint = 105.0
	// LidSafeBelow is the block temperature under which the lid may open, degC.
	LidSafeBelow = 60.0
	// LidTravel is how long the motorised lid takes to open or close, s.
	LidTravel = 3.0
	// MaxProtocol is the longest program run_protocol accepts, simulated seconds.
	MaxProtocol = 24 * 3600.0
	// BlockMin and BlockMax bound the block temperature, degC.
	BlockMin, BlockMax = 4.0, 105.0
)

// Names of the thermocycler's items.
const (
	TCBlockTemperature = "block_temperature"
	TCLidTemperature   = "lid_temperature"
	TCLidClosed        = "lid_closed"
	TCLidSafe          = "lid_safe_to_open"
	TCCycle            = "cycle"
	TCTargetTemp       = "target_temperature"
	TCLidHeater        = "lid_heater"
	TCRunProtocol      = "run_protocol"
	TCOpenLid          = "open_lid"
	TCCloseLid         = "close_lid"
)

// ThermocyclerSim is a simulated 96-well PCR thermocycler with a heated,
// motorised lid. Its lid starts open, ready for a plate.
type ThermocyclerSim struct {
	o Options
	e engine

	mu        sync.Mutex
	block     ramp
	lid       ramp
	heater    bool
	lidClosed bool
	cycle     int
	running   bool
}

// NewThermocycler returns a thermocycler at ambient temperature, lid open.
func NewThermocycler(opts Options) *ThermocyclerSim {
	o := opts.withDefaults("thermocycler-01")
	e := newEngine(o)
	now := o.Clock.Now()
	return &ThermocyclerSim{o: o, e: e,
		block: ramp{value: Ambient, target: Ambient, rate: PassiveRate, at: now},
		lid:   ramp{value: Ambient, target: Ambient, rate: PassiveRate, at: now}}
}

// Thermocycler returns the binding configuration of a fresh simulated thermocycler.
func Thermocycler(opts Options) binding.Config { return NewThermocycler(opts).Config() }

// BlockTemperature is the block's temperature now, degC.
func (t *ThermocyclerSim) BlockTemperature() float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.block.now(t.e, t.o.Clock.Now())
}

// LidClosed reports whether the lid is closed (and latched).
func (t *ThermocyclerSim) LidClosed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lidClosed
}

// Config returns the bindings of this thermocycler.
func (t *ThermocyclerSim) Config() binding.Config {
	zero := 0.0
	one, twenty := 1, 20
	stepShape := &mhp.Shape{Type: mhp.TypeObject, Required: []string{"temp", "hold_s"},
		Properties: map[string]*mhp.Shape{
			"temp":   {Type: mhp.TypeNumber, Unit: "degC", Limits: mhp.Range(BlockMin, BlockMax)},
			"hold_s": {Type: mhp.TypeNumber, Unit: "s", Limits: &mhp.Limits{Min: &zero, Max: ptr(3600.0)}},
		}}
	return binding.Config{
		Device: mhp.DeviceInfo{ID: t.o.ID, Class: "thermocycler", Make: "SimBio", Model: "TC-96",
			Tags:        []string{"pcr", "heating", "96-well", "simulated"},
			Description: "Simulated 96-well PCR thermocycler with a heated, motorised lid; block 4 to 105 degC."},
		Notes: "Simulated. The block ramps 4 degC/s and drifts to 22 degC when idle; the lid heater reaches 105 degC in about 40 s.",
		Clock: t.o.Clock,
		Signals: []binding.Signal{
			{Spec: mhp.Signal{Name: TCBlockTemperature, Type: mhp.TypeNumber, Unit: "degC"}, Read: t.readFloat(&t.block)},
			{Spec: mhp.Signal{Name: TCLidTemperature, Type: mhp.TypeNumber, Unit: "degC"}, Read: t.readFloat(&t.lid)},
			{Spec: mhp.Signal{Name: TCLidClosed, Type: mhp.TypeBoolean, Notes: "True when the lid is closed and latched."},
				Read: func(context.Context) (binding.Sample, error) { return binding.Sample{Value: t.LidClosed()}, nil }},
			{Spec: mhp.Signal{Name: TCLidSafe, Type: mhp.TypeBoolean, Notes: "True while the block is below 60 degC: the lid may open."},
				Read: func(context.Context) (binding.Sample, error) {
					return binding.Sample{Value: t.BlockTemperature() < LidSafeBelow}, nil
				}},
			{Spec: mhp.Signal{Name: TCCycle, Type: mhp.TypeInteger, Notes: "Current cycle of a running protocol; 0 when none runs."},
				Read: func(context.Context) (binding.Sample, error) {
					t.mu.Lock()
					defer t.mu.Unlock()
					return binding.Sample{Value: t.cycle}, nil
				}},
		},
		Settings: []binding.Setting{
			{Spec: mhp.Setting{Name: TCTargetTemp, Type: mhp.TypeNumber, Unit: "degC", Limits: mhp.Range(BlockMin, BlockMax),
				Approval: mhp.ApprovalAuto, Notes: "Block setpoint; the block ramps to it and holds."},
				Write: func(ctx context.Context, v any) (binding.WriteStatus, error) {
					f, ok := v.(float64)
					if !ok {
						return 0, mhp.Errorf(mhp.CodeInvalidValue, "target_temperature: %v is not a number", v)
					}
					t.mu.Lock()
					defer t.mu.Unlock()
					if ctx.Err() != nil {
						return 0, notApplied(ctx)
					}
					t.block.retarget(t.e, t.o.Clock.Now(), f, BlockRamp)
					return binding.Applied, nil
				}},
			{Spec: mhp.Setting{Name: TCLidHeater, Type: mhp.TypeBoolean, Approval: mhp.ApprovalAuto, DuringJob: true,
				Notes: "Heats the lid to 105 degC to stop condensation."},
				Write: func(ctx context.Context, v any) (binding.WriteStatus, error) {
					on, ok := v.(bool)
					if !ok {
						return 0, mhp.Errorf(mhp.CodeInvalidValue, "lid_heater: %v is not a boolean", v)
					}
					t.mu.Lock()
					defer t.mu.Unlock()
					if ctx.Err() != nil {
						return 0, notApplied(ctx)
					}
					t.setHeater(on)
					return binding.Applied, nil
				}},
		},
		Actions: []binding.Action{
			{Spec: mhp.Action{Name: TCRunProtocol, Duration: mhp.DurationLong, Approval: mhp.ApprovalAuto,
				Interlocks: []string{TCLidClosed}, Cancellable: true, Pausable: true,
				Params: mhp.Params{
					{Name: "steps", Shape: &mhp.Shape{Type: mhp.TypeArray, Items: stepShape,
						Limits: &mhp.Limits{MinLength: &one, MaxLength: &twenty}}},
					{Name: "cycles", Shape: &mhp.Shape{Type: mhp.TypeInteger, Limits: mhp.Range(1, 99)}},
				},
				Returns: &mhp.Shape{Type: mhp.TypeObject, Properties: map[string]*mhp.Shape{
					"cycles_completed":        {Type: mhp.TypeInteger},
					"final_block_temperature": {Type: mhp.TypeNumber, Unit: "degC"}}},
				Notes: "Runs the steps in order, `cycles` times; each step ramps the block to temp and holds hold_s seconds."},
				Run:      t.runProtocol,
				Validate: validateProtocol,
				Timeout:  t.e.clockFor(MaxProtocol + 3600),
			},
			{Spec: mhp.Action{Name: TCOpenLid, Duration: mhp.DurationShort, Approval: mhp.ApprovalConfirm,
				Interlocks: []string{TCLidSafe}, Cancellable: true,
				Notes: "Opens the motorised lid. The lid may be hot; a person should be present."},
				Run: func(ctx context.Context, job *binding.Job) (any, error) { return t.moveLid(ctx, job, false) }},
			{Spec: mhp.Action{Name: TCCloseLid, Duration: mhp.DurationShort, Approval: mhp.ApprovalConfirm,
				Cancellable: true, Notes: "Closes and latches the lid. Pinch hazard; a person should be present."},
				Run: func(ctx context.Context, job *binding.Job) (any, error) { return t.moveLid(ctx, job, true) }},
		},
		Safety: mhp.Safety{Notes: "E-stop cuts the block and lid heaters; the block cools passively."},
		EStop:  t.estop,
	}
}

func (t *ThermocyclerSim) readFloat(r *ramp) func(context.Context) (binding.Sample, error) {
	return func(context.Context) (binding.Sample, error) {
		t.mu.Lock()
		defer t.mu.Unlock()
		return binding.Sample{Value: round1(r.now(t.e, t.o.Clock.Now()))}, nil
	}
}

// setHeater switches the lid heater; t.mu is held.
func (t *ThermocyclerSim) setHeater(on bool) {
	t.heater = on
	if on {
		t.lid.retarget(t.e, t.o.Clock.Now(), LidSetpoint, LidRamp)
	} else {
		t.lid.retarget(t.e, t.o.Clock.Now(), Ambient, PassiveRate)
	}
}

// estop cuts both heaters: the block and lid cool passively.
func (t *ThermocyclerSim) estop(context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.o.Clock.Now()
	t.setHeater(false)
	t.block.retarget(t.e, now, Ambient, PassiveRate)
	t.cycle = 0
	return nil
}

type pcrStep struct{ temp, hold float64 }

func parseSteps(params map[string]any) ([]pcrStep, int) {
	raw, _ := params["steps"].([]any)
	steps := make([]pcrStep, 0, len(raw))
	for _, r := range raw {
		m, _ := r.(map[string]any)
		temp, _ := m["temp"].(float64)
		hold, _ := m["hold_s"].(float64)
		steps = append(steps, pcrStep{temp: temp, hold: hold})
	}
	cycles := 1
	switch c := params["cycles"].(type) {
	case int64:
		cycles = int(c)
	case float64:
		cycles = int(c)
	case int:
		cycles = c
	}
	return steps, cycles
}

// estimate is the simulated duration of a program starting at from degC.
func estimate(steps []pcrStep, cycles int, from float64) float64 {
	total, at := 0.0, from
	for c := 0; c < cycles; c++ {
		for _, s := range steps {
			d := s.temp - at
			if d < 0 {
				d = -d
			}
			total += d/BlockRamp + s.hold
			at = s.temp
		}
	}
	return total
}

// validateProtocol refuses a program longer than MaxProtocol.
func validateProtocol(params map[string]any) error {
	steps, cycles := parseSteps(params)
	if d := estimate(steps, cycles, BlockMax); d > MaxProtocol {
		return mhp.Errorf(mhp.CodeLimitViolation, "run_protocol: program takes about %.0f s, above the %.0f s maximum", d, MaxProtocol).
			With("max", MaxProtocol).With("field", "steps")
	}
	return nil
}

func (t *ThermocyclerSim) runProtocol(ctx context.Context, job *binding.Job) (any, error) {
	steps, cycles := parseSteps(job.Params())
	t.mu.Lock()
	if !t.lidClosed {
		t.mu.Unlock()
		return nil, mhp.Errorf(mhp.CodeInterlockOpen, "run_protocol: lid opened before the run started").With("interlock", TCLidClosed)
	}
	t.running = true
	total := estimate(steps, cycles, t.block.now(t.e, t.o.Clock.Now()))
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		t.running, t.cycle = false, 0
		t.mu.Unlock()
	}()

	done := 0.0
	report := func(c, s int, phase string) {
		temp := steps[s-1].temp
		p := 0.0
		if total > 0 {
			p = done / total
		}
		if p > 0.99 {
			p = 0.99
		}
		eta := round1((total - done) / t.e.speed)
		job.Progress(p, map[string]any{"cycle": c, "cycles": cycles, "step": s, "phase": phase, "eta_s": eta,
			"message": fmt.Sprintf("cycle %d/%d step %d: %s %g degC, %gs left", c, cycles, s, phase, temp, eta)})
	}
	completed := 0
	for c := 1; c <= cycles; c++ {
		for i, s := range steps {
			t.mu.Lock()
			t.cycle = c
			t.block.retarget(t.e, t.o.Clock.Now(), s.temp, BlockRamp)
			t.mu.Unlock()
			for {
				t.mu.Lock()
				left := t.block.secondsTo(t.e, t.o.Clock.Now())
				t.mu.Unlock()
				if left < 1e-6 {
					break
				}
				slept, err := t.e.step(ctx, job, left)
				done += slept
				if err != nil {
					return nil, t.abort(err)
				}
				report(c, i+1, "ramp")
			}
			for hold := s.hold; hold > 1e-9; {
				slept, err := t.e.step(ctx, job, hold)
				hold -= slept
				done += slept
				if err != nil {
					return nil, t.abort(err)
				}
				report(c, i+1, "hold")
			}
		}
		completed = c
	}
	return map[string]any{"cycles_completed": completed, "final_block_temperature": round1(t.BlockTemperature())}, nil
}

// abort stops the block heating after a cancelled or timed-out run.
func (t *ThermocyclerSim) abort(err error) error {
	t.mu.Lock()
	t.block.retarget(t.e, t.o.Clock.Now(), Ambient, PassiveRate)
	t.mu.Unlock()
	return stopped(err)
}

func (t *ThermocyclerSim) moveLid(ctx context.Context, job *binding.Job, closeIt bool) (any, error) {
	t.mu.Lock()
	if t.lidClosed == closeIt {
		t.mu.Unlock()
		return map[string]any{"lid_closed": closeIt, "moved": false}, nil
	}
	if !closeIt && t.block.now(t.e, t.o.Clock.Now()) >= LidSafeBelow {
		t.mu.Unlock()
		return nil, mhp.Errorf(mhp.CodeInterlockOpen, "open_lid: block is at or above %.0f degC", LidSafeBelow).With("interlock", TCLidSafe)
	}
	if !closeIt {
		t.lidClosed = false // the latch releases first
	}
	t.mu.Unlock()
	for left := LidTravel; left > 1e-9; {
		slept, err := t.e.step(ctx, job, left)
		left -= slept
		if err != nil {
			return nil, stopped(err)
		}
		job.Progress((LidTravel-left)/LidTravel, nil)
	}
	t.mu.Lock()
	t.lidClosed = closeIt
	t.mu.Unlock()
	return map[string]any{"lid_closed": closeIt, "moved": true}, nil
}

func ptr[T any](v T) *T { return &v }
