package sim

import (
	"context"
	"fmt"
	"math"
	"sort"
	"sync"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
)

// Names of the arm's items.
const (
	ArmHolding    = "holding"
	ArmPosition   = "position"
	ArmOccupied   = "occupied"
	ArmLocations  = "locations"
	ArmSpeed      = "speed"
	ArmPickPlate  = "pick_plate"
	ArmPlacePlate = "place_plate"
	ArmHome       = "home"
)

// Arm kinematics.
const (
	// ArmMaxSpeed is the travel speed at 100 %, mm per simulated second.
	ArmMaxSpeed = 250.0
	// ArmMinTravel is the shortest move, simulated seconds at 100 % (settling).
	ArmMinTravel = 0.2
	// ArmTravelFromUnknown is the move time at 100 % when the arm does not
	// know where it is (after a stop mid-travel): it goes up first.
	ArmTravelFromUnknown = 2.0
	// ArmGrip is the time to lower, grip or release, and lift, simulated
	// seconds at 100 %.
	ArmGrip = 1.0
	// ArmDefaultSpeed is the speed setting at start, percent.
	ArmDefaultSpeed = 50.0
)

// Positions that are not locations.
const (
	PositionHome    = "home"
	PositionUnknown = "unknown" // after a stop mid-travel, until the next move
)

// Point is a position in the arm's frame, in millimetres.
type Point struct {
	X float64 `json:"x"`
	Y float64 `json:"y"`
	Z float64 `json:"z"`
}

// Dist is the straight-line distance to q, mm.
func (p Point) Dist(q Point) float64 {
	return math.Sqrt((p.X-q.X)*(p.X-q.X) + (p.Y-q.Y)*(p.Y-q.Y) + (p.Z-q.Z)*(p.Z-q.Z))
}

// HomePoint is the home position, above the deck centre.
func HomePoint() Point { return Point{0, 0, 250} }

// DefaultLocations returns the arm's locations map when ArmOptions gives
// none: four deck positions and the thermocycler's block.
func DefaultLocations() map[string]Point {
	return map[string]Point{
		"deck_A1": {-130, -90, 0}, "deck_A2": {0, -90, 0},
		"deck_B1": {-130, 90, 0}, "deck_B2": {0, 90, 0},
		"thermocycler": {260, 0, 40},
	}
}

// Guard is a cell-level check the arm runs before it moves a plate to or from
// a location (the demo refuses to reach into a closed thermocycler). A
// non-nil *mhp.Error refuses the request; it must not block.
type Guard func(ctx context.Context, action, location string) error

// ArmOptions configure a simulated plate arm.
type ArmOptions struct {
	Options
	// Locations maps the named places the arm can reach to their positions;
	// default DefaultLocations().
	Locations map[string]Point
	// Plates are the locations holding a plate at start; default the first
	// location in name order (deck_A1). Pass an empty non-nil slice for none.
	Plates []string
	// Guard, when set, is asked before every pick and place.
	Guard Guard
}

// ArmSim is a simulated SBS plate arm (gripper) that moves plates between
// named locations.
type ArmSim struct {
	o     ArmOptions
	e     engine
	locs  []string // names, sorted
	known map[string]Point

	mu       sync.Mutex
	position string
	holding  bool
	occupied map[string]bool
	speed    float64
}

// NewArm returns an arm at home with an empty gripper.
func NewArm(opts ArmOptions) *ArmSim {
	opts.Options = opts.Options.withDefaults("arm-01")
	locs := opts.Locations
	if len(locs) == 0 {
		locs = DefaultLocations()
	}
	a := &ArmSim{o: opts, e: newEngine(opts.Options), known: map[string]Point{}, occupied: map[string]bool{},
		position: PositionHome, speed: ArmDefaultSpeed}
	for name, pt := range locs {
		a.known[name] = pt
		a.locs = append(a.locs, name)
	}
	sort.Strings(a.locs)
	plates := opts.Plates
	if plates == nil {
		plates = a.locs[:1]
	}
	for _, p := range plates {
		a.occupied[p] = true
	}
	return a
}

// Arm returns the binding configuration of a fresh simulated plate arm.
func Arm(opts ArmOptions) binding.Config { return NewArm(opts).Config() }

// Holding reports whether the gripper holds a plate.
func (a *ArmSim) Holding() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.holding
}

// Position is where the arm is: a location, "home" or "unknown".
func (a *ArmSim) Position() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.position
}

// Occupied lists the locations holding a plate, sorted.
func (a *ArmSim) Occupied() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.occupiedLocked()
}

func (a *ArmSim) occupiedLocked() []string {
	out := make([]string, 0, len(a.occupied))
	for l, ok := range a.occupied {
		if ok {
			out = append(out, l)
		}
	}
	sort.Strings(out)
	return out
}

// Config returns the bindings of this arm.
func (a *ArmSim) Config() binding.Config {
	enum := make([]any, len(a.locs))
	for i, l := range a.locs {
		enum[i] = l
	}
	locParam := func(notes string) mhp.Params {
		return mhp.Params{{Name: "location", Shape: &mhp.Shape{Type: mhp.TypeString, Limits: mhp.Enum(enum...), Notes: notes}}}
	}
	return binding.Config{
		Device: mhp.DeviceInfo{ID: a.o.ID, Class: "robot_arm", Make: "SimBio", Model: "PA-1",
			Tags:        []string{"plate", "gripper", "sbs", "simulated"},
			Description: "Simulated SBS plate arm that moves one plate between named deck locations and the thermocycler."},
		Notes: "Simulated. Travels at 250 mm/s at 100 % speed, plus 1 s to grip or release.",
		Clock: a.o.Clock,
		Signals: []binding.Signal{
			{Spec: mhp.Signal{Name: ArmHolding, Type: mhp.TypeBoolean, Notes: "True when the gripper holds a plate."},
				Read: func(context.Context) (binding.Sample, error) { return binding.Sample{Value: a.Holding()}, nil }},
			{Spec: mhp.Signal{Name: ArmPosition, Type: mhp.TypeString, Notes: "A location, home, or unknown after a stop mid-travel."},
				Read: func(context.Context) (binding.Sample, error) { return binding.Sample{Value: a.Position()}, nil }},
			{Spec: mhp.Signal{Name: ArmLocations, Type: mhp.TypeObject, Unit: "mm",
				Notes: "The locations map: each location's position {x, y, z} in the arm's frame."},
				Read: func(context.Context) (binding.Sample, error) {
					out := make(map[string]any, len(a.known))
					for n, p := range a.known {
						out[n] = map[string]any{"x": p.X, "y": p.Y, "z": p.Z}
					}
					return binding.Sample{Value: out}, nil
				}},
			{Spec: mhp.Signal{Name: ArmOccupied, Type: mhp.TypeArray, Notes: "Locations with a plate, as the arm last saw them."},
				Read: func(context.Context) (binding.Sample, error) {
					occ := a.Occupied()
					out := make([]any, len(occ))
					for i, o := range occ {
						out[i] = o
					}
					return binding.Sample{Value: out}, nil
				}},
		},
		Settings: []binding.Setting{
			{Spec: mhp.Setting{Name: ArmSpeed, Type: mhp.TypeNumber, Unit: "%", Limits: mhp.Range(1, 100), Approval: mhp.ApprovalAuto,
				Notes: "Travel speed, percent of maximum."},
				Write: func(ctx context.Context, v any) (binding.WriteStatus, error) {
					f, ok := v.(float64)
					if !ok {
						return 0, mhp.Errorf(mhp.CodeInvalidValue, "speed: %v is not a number", v)
					}
					a.mu.Lock()
					defer a.mu.Unlock()
					if ctx.Err() != nil {
						return 0, notApplied(ctx)
					}
					a.speed = f
					return binding.Applied, nil
				}},
		},
		Actions: []binding.Action{
			{Spec: mhp.Action{Name: ArmPickPlate, Duration: mhp.DurationShort, Approval: mhp.ApprovalAuto, Cancellable: true,
				Params:   locParam("Where to pick the plate from; it must hold a plate and the gripper must be empty."),
				Examples: []map[string]any{{"location": a.locs[0]}},
				Notes:    "Travels to the location, grips the plate and lifts it."},
				Validate: func(p map[string]any) error { return a.check(ArmPickPlate, p) },
				Run:      func(ctx context.Context, job *binding.Job) (any, error) { return a.transfer(ctx, job, true) }},
			{Spec: mhp.Action{Name: ArmPlacePlate, Duration: mhp.DurationShort, Approval: mhp.ApprovalAuto, Cancellable: true,
				Params:   locParam("Where to put the held plate; it must be free."),
				Examples: []map[string]any{{"location": a.locs[len(a.locs)-1]}},
				Notes:    "Travels to the location, lowers the plate and releases it."},
				Validate: func(p map[string]any) error { return a.check(ArmPlacePlate, p) },
				Run:      func(ctx context.Context, job *binding.Job) (any, error) { return a.transfer(ctx, job, false) }},
			{Spec: mhp.Action{Name: ArmHome, Duration: mhp.DurationShort, Approval: mhp.ApprovalAuto, Cancellable: true,
				Notes: "Returns to the home position, holding whatever it holds."},
				Run: a.home},
		},
		Safety: mhp.Safety{Notes: "E-stop halts the arm where it is; a held plate stays gripped."},
		EStop:  a.estop,
	}
}

// check is the state precondition of a pick or place, run at the gates (and
// for dry runs) and again just before the arm moves.
func (a *ArmSim) check(action string, params map[string]any) error {
	loc, _ := params["location"].(string)
	a.mu.Lock()
	holding, occupied := a.holding, a.occupied[loc]
	a.mu.Unlock()
	switch {
	case action == ArmPickPlate && holding:
		return mhp.Errorf(mhp.CodeInvalidValue, "pick_plate: the gripper already holds a plate; place it first").With("field", "location")
	case action == ArmPickPlate && !occupied:
		return mhp.Errorf(mhp.CodeInvalidValue, "pick_plate: no plate at %s", loc).With("field", "location")
	case action == ArmPlacePlate && !holding:
		return mhp.Errorf(mhp.CodeInvalidValue, "place_plate: the gripper holds no plate").With("field", "location")
	case action == ArmPlacePlate && occupied:
		return mhp.Errorf(mhp.CodeInvalidValue, "place_plate: %s already holds a plate", loc).With("field", "location")
	}
	if a.o.Guard != nil {
		if err := a.o.Guard(context.Background(), action, loc); err != nil {
			return err
		}
	}
	return nil
}

// travel moves the arm to dest over its travel time, reporting progress from
// p0 to p1. A stop mid-travel leaves the position unknown.
func (a *ArmSim) travel(ctx context.Context, job *binding.Job, dest string, p0, p1 float64) error {
	a.mu.Lock()
	if a.position == dest {
		a.mu.Unlock()
		return nil
	}
	total := a.travelTime(dest) * 100 / a.speed
	a.position = "moving to " + dest
	a.mu.Unlock()
	return a.phase(ctx, job, total, p0, p1, dest)
}

// phase runs simulated time with progress from p0 to p1; a stop leaves the
// position unknown.
func (a *ArmSim) phase(ctx context.Context, job *binding.Job, total, p0, p1 float64, at string) error {
	for left := total; left > 1e-9; {
		slept, err := a.e.step(ctx, job, left)
		left -= slept
		if err != nil {
			a.mu.Lock()
			a.position = PositionUnknown
			a.mu.Unlock()
			return err
		}
		job.Progress(p0+(p1-p0)*(total-left)/total, map[string]any{"position": at})
	}
	a.mu.Lock()
	a.position = at
	a.mu.Unlock()
	return nil
}

func (a *ArmSim) transfer(ctx context.Context, job *binding.Job, pick bool) (any, error) {
	action := ArmPlacePlate
	if pick {
		action = ArmPickPlate
	}
	loc, _ := job.Params()["location"].(string)
	if err := a.check(action, job.Params()); err != nil {
		if e, ok := mhp.AsError(err); ok {
			return nil, e // refused before the arm moved
		}
		return nil, mhp.Errorf(mhp.CodeInvalidValue, "%s: %v", action, err)
	}
	if err := a.travel(ctx, job, loc, 0, 0.7); err != nil {
		return nil, stopped(err)
	}
	a.mu.Lock()
	grip := ArmGrip * 100 / a.speed
	a.mu.Unlock()
	if err := a.phase(ctx, job, grip, 0.7, 1, loc); err != nil {
		return nil, stopped(err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.holding = pick
	a.occupied[loc] = !pick
	return map[string]any{"location": loc, "holding": a.holding}, nil
}

func (a *ArmSim) home(ctx context.Context, job *binding.Job) (any, error) {
	if err := a.travel(ctx, job, PositionHome, 0, 1); err != nil {
		return nil, stopped(err)
	}
	return map[string]any{"position": PositionHome, "holding": a.Holding()}, nil
}

// travelTime is the move from the current position to dest at 100 %,
// simulated seconds; a.mu is held.
func (a *ArmSim) travelTime(dest string) float64 {
	point := func(name string) (Point, bool) {
		if name == PositionHome {
			return HomePoint(), true
		}
		p, ok := a.known[name]
		return p, ok
	}
	from, ok1 := point(a.position)
	to, ok2 := point(dest)
	if !ok1 || !ok2 {
		return ArmTravelFromUnknown
	}
	return math.Max(ArmMinTravel, from.Dist(to)/ArmMaxSpeed)
}

// estop halts the arm; the running job's context is cancelled by the driver
// and the travel loop leaves the position unknown.
func (a *ArmSim) estop(context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.known[a.position]; !ok && a.position != PositionHome {
		a.position = PositionUnknown
	}
	return nil
}

// String describes the arm's state, for logs.
func (a *ArmSim) String() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return fmt.Sprintf("arm at %s holding=%v occupied=%v", a.position, a.holding, a.occupiedLocked())
}
