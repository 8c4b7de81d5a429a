// Package conformance is MHP's behavioural suite as a library. Every adapter
// runs the same checks against its own fake backend:
//
//	func TestConformance(t *testing.T) { conformance.Run(t, myHarness) }
//
// The harness builds a fresh device under test whose items are the fixture's
// ([FixtureDescriptor]), backed by a fake that drives an Instrument, and hands
// back the Backend controls so that the suite can make a hook block, fail,
// refuse or ignore a cancel. The same checks run in process, over HTTP and
// stdio, and through each ecosystem adapter.
package conformance

import (
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
)

// Names of the fixture every device under test provides.
const (
	SignalTemperature = "temperature" // number, degC; the backend's reading
	SignalDoorClosed  = "door_closed" // boolean; the interlock of ActionRun

	SettingSetpoint  = "setpoint"        // number, 0..100 degC, approval auto
	SettingMode      = "mode"            // string, enum idle|heat|cool
	SettingConfirmed = "confirm_level"   // number, 0..10, approval confirm
	SettingForbidden = "forbidden_level" // number, approval forbid
	SettingFan       = "fan"             // boolean, during_job: may be written while a job runs

	ActionRun       = "run"              // long, cancellable, interlock door_closed, params {duration_s: number 0..3600}
	ActionQuick     = "quick"            // short, no params
	ActionMonitor   = "monitor"          // long, concurrent, cancellable, no params
	ActionProfile   = "profile"          // short, nested params {steps: [{temp 4..99, hold_s >= 0}], cycles 1..99}
	ActionConfirm   = "confirm_action"   // short, approval confirm, interlock door_closed
	ActionForbidden = "forbidden_action" // short, approval forbid
)

// Names of the fixture's extra items ([FixtureExtras]). A harness that serves
// them runs the checks that need them; for one that does not, those checks
// are skipped with a reason.
const (
	SettingGuarded = "guarded_level" // number, 0..10, approval confirm, interlock door_closed
	SettingFlow    = "flow_rate"     // number, exclusiveMin 0, exclusiveMax 10 (mL/min)
	ActionDose     = "dose"          // short, params {volume_ul: number, exclusiveMin 0, exclusiveMax 50}
)

// Exclusive bounds of [SettingFlow] and of [ActionDose]'s volume_ul.
const (
	FlowExclusiveMax = 10.0
	DoseExclusiveMax = 50.0
)

// FixtureDescriptor returns the items of the fixture device as specs. A
// harness's device must serve exactly these names with these types, limits,
// approvals and flags (an adapter puts them in its config).
func FixtureDescriptor() mhp.Descriptor {
	zero, hundred := 0.0, 100.0
	return mhp.Descriptor{
		DeviceInfo: mhp.DeviceInfo{ID: "conformance-01", Class: "test_fixture", Make: "OpenMHP", Model: "Fixture"},
		Signals: []mhp.Signal{
			{Name: SignalTemperature, Type: mhp.TypeNumber, Unit: "degC"},
			{Name: SignalDoorClosed, Type: mhp.TypeBoolean},
		},
		Settings: []mhp.Setting{
			{Name: SettingSetpoint, Type: mhp.TypeNumber, Unit: "degC", Limits: &mhp.Limits{Min: &zero, Max: &hundred}, Approval: mhp.ApprovalAuto},
			{Name: SettingMode, Type: mhp.TypeString, Limits: mhp.Enum("idle", "heat", "cool"), Approval: mhp.ApprovalAuto},
			{Name: SettingConfirmed, Type: mhp.TypeNumber, Limits: mhp.Range(0, 10), Approval: mhp.ApprovalConfirm},
			{Name: SettingForbidden, Type: mhp.TypeNumber, Approval: mhp.ApprovalForbid},
			{Name: SettingFan, Type: mhp.TypeBoolean, Approval: mhp.ApprovalAuto, DuringJob: true},
		},
		Actions: []mhp.Action{
			{Name: ActionRun, Duration: mhp.DurationLong, Approval: mhp.ApprovalAuto, Interlocks: []string{SignalDoorClosed},
				Cancellable: true,
				Params:      mhp.Params{{Name: "duration_s", Shape: &mhp.Shape{Type: mhp.TypeNumber, Unit: "s", Limits: mhp.Range(0, 3600)}}}},
			{Name: ActionQuick, Duration: mhp.DurationShort, Approval: mhp.ApprovalAuto},
			{Name: ActionMonitor, Duration: mhp.DurationLong, Approval: mhp.ApprovalAuto, Concurrent: true, Cancellable: true},
			{Name: ActionProfile, Duration: mhp.DurationShort, Approval: mhp.ApprovalAuto,
				Params: mhp.Params{
					{Name: "steps", Shape: &mhp.Shape{Type: mhp.TypeArray, Items: &mhp.Shape{Type: mhp.TypeObject,
						Properties: map[string]*mhp.Shape{
							"temp":   {Type: mhp.TypeNumber, Unit: "degC", Limits: mhp.Range(4, 99)},
							"hold_s": {Type: mhp.TypeNumber, Unit: "s", Limits: &mhp.Limits{Min: &zero}},
						}, Required: []string{"temp", "hold_s"}}}},
					{Name: "cycles", Shape: &mhp.Shape{Type: mhp.TypeInteger, Limits: mhp.Range(1, 99)}},
				}},
			{Name: ActionConfirm, Duration: mhp.DurationShort, Approval: mhp.ApprovalConfirm, Interlocks: []string{SignalDoorClosed}},
			{Name: ActionForbidden, Duration: mhp.DurationShort, Approval: mhp.ApprovalForbid},
		},
		Safety: mhp.Safety{EStop: true},
	}
}

// FixtureExtras returns the fixture's extra items: a setting with both an
// approval level and an interlock (the write path's gate order), and a
// setting and an action param with exclusive bounds. [MemoryDriver] serves
// them after [FixtureDescriptor]'s items; an adapter's harness opts in by
// serving them too ([WithExtras]) when [Options.Extras] asks.
func FixtureExtras() (settings []mhp.Setting, actions []mhp.Action) {
	exclusive := func(max float64) *mhp.Limits {
		lo, hi := 0.0, max
		return &mhp.Limits{ExclusiveMin: &lo, ExclusiveMax: &hi}
	}
	settings = []mhp.Setting{
		{Name: SettingGuarded, Type: mhp.TypeNumber, Limits: mhp.Range(0, 10), Approval: mhp.ApprovalConfirm,
			Interlocks: []string{SignalDoorClosed}},
		{Name: SettingFlow, Type: mhp.TypeNumber, Unit: "mL/min", Limits: exclusive(FlowExclusiveMax), Approval: mhp.ApprovalAuto},
	}
	actions = []mhp.Action{
		{Name: ActionDose, Duration: mhp.DurationShort, Approval: mhp.ApprovalAuto,
			Params: mhp.Params{{Name: "volume_ul", Shape: &mhp.Shape{Type: mhp.TypeNumber, Unit: "uL", Limits: exclusive(DoseExclusiveMax)}}}},
	}
	return settings, actions
}

// WithExtras returns d with [FixtureExtras] appended.
func WithExtras(d mhp.Descriptor) mhp.Descriptor {
	s, a := FixtureExtras()
	d.Settings = append(append([]mhp.Setting(nil), d.Settings...), s...)
	d.Actions = append(append([]mhp.Action(nil), d.Actions...), a...)
	return d
}

// Behaviour is how the fake backend answers calls of one setting or action.
type Behaviour int

const (
	// Normal: a write is applied; an action completes at once with result {"ok": true}.
	Normal Behaviour = iota
	// Block: the call does not return (a write) or the work does not finish
	// (an action) until Release; an action honours a cancel and ends cancelled.
	Block
	// IgnoreCancel: the action runs until Release and completes successfully
	// whatever cancels it receives; the backend acknowledges cancel requests
	// but does not act on them.
	IgnoreCancel
	// FailReported: the backend reports that the work failed (known outcome).
	FailReported
	// FailUnknown: the command reaches the backend, then the connection drops
	// or the reply never comes: nobody knows the outcome.
	FailUnknown
	// Refuse: the backend refuses the command before anything takes effect.
	Refuse
)

func (b Behaviour) String() string {
	return [...]string{"Normal", "Block", "IgnoreCancel", "FailReported", "FailUnknown", "Refuse"}[b]
}

// Backend is what the suite controls of the fake behind the device under test.
// [*Instrument] implements it; a harness whose fake wraps an Instrument returns it.
type Backend interface {
	// SetSignal sets a signal's value at the backend, as the instrument would.
	SetSignal(name string, value any)
	// SetUnavailable makes a signal unreadable at the backend (stale, bad quality, offline).
	SetUnavailable(name string, unavailable bool)
	// Script sets how the backend answers later calls of a setting or action.
	Script(name string, b Behaviour)
	// Release lets every blocked call or work of the named item finish.
	Release(name string)
	// Calls counts the calls of a setting or action that reached the backend.
	Calls(name string) int
	// Written returns the value the backend last applied to a setting.
	Written(name string) (any, bool)
	// StopCalls counts the estop commands the backend received.
	StopCalls() int
	// FailStop makes later estop commands fail at the backend.
	FailStop(fail bool)
}

// ReadCounter is implemented by a Backend that counts the signal reads that
// reached it ([*Instrument] does); checks that must see the backend left
// alone use it and are skipped when the backend cannot tell.
type ReadCounter interface {
	Reads() int
}

// StopHanger is implemented by a Backend whose estop command can be made to
// hang ([*Instrument] does): the bounded estop answer is checked with it, and
// skipped when the backend cannot hang.
type StopHanger interface {
	HangStop(hang bool)
}

// Options ask the harness for a variant of the fixture.
type Options struct {
	// WatchdogS, when positive, makes the device declare safety.watchdog_s.
	WatchdogS float64
	// Extras asks for [FixtureExtras] too. Run sets it for every check; a
	// harness that cannot serve them ignores it and the checks that need
	// them are skipped.
	Extras bool
}

// Fixture is one fresh device under test.
type Fixture struct {
	// Device is the device as seen by the first session.
	Device mhp.Device
	// Other is the same device as seen by a second, independent session.
	Other mhp.Device
	// Backend controls the fake behind the device.
	Backend Backend
	// Advance moves the driver's clock forward (watchdog, lease expiry); the
	// timer callbacks due by the new time must have run when it returns, as
	// with clock.Manual's Advance, so the watchdog's edges can be checked
	// exactly. When nil, checks that need time to pass wait in real time,
	// bounded by deadlines, and those that need exact edges are skipped.
	Advance func(time.Duration)
	// Skip names checks the harness cannot express, with the reason; the
	// suite reports them skipped.
	Skip map[string]string
}

// Harness makes a fresh fixture for each check; it registers its own cleanup
// with t.Cleanup.
type Harness func(t *testing.T, opt Options) *Fixture
