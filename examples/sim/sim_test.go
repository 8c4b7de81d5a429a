package sim

import (
	"context"
	"testing"
	"time"

	"github.com/openmhp/mhp-go/conformance"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/clock"
)

// fast are options for job tests: 10,000 simulated seconds per second.
func fast() Options { return Options{Speed: 10000, Tick: time.Millisecond} }

func newDriver(t *testing.T, cfg binding.Config) *binding.Driver {
	t.Helper()
	d, err := binding.New(cfg)
	if err != nil {
		t.Fatalf("binding.New: %v", err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

// waitJob polls the job until it ends, with a deadline.
func waitJob(t *testing.T, d mhp.Device, id string) *mhp.Job {
	t.Helper()
	return conformance.WaitJob(t, d, id, 10*time.Second, nil)
}

func invoke(t *testing.T, d mhp.Device, name string, params map[string]any, approved bool) *mhp.Job {
	t.Helper()
	res, err := d.Invoke(ctx(t), mhp.InvokeRequest{Name: name, Params: params, Approved: approved})
	if err != nil {
		t.Fatalf("invoke %s: %v", name, err)
	}
	return res.Job
}

func read(t *testing.T, d mhp.Device, name string) any {
	t.Helper()
	r, err := d.Read(ctx(t), []string{name})
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return r.Values[name]
}

func wantCode(t *testing.T, err error, code mhp.Code) {
	t.Helper()
	if mhp.CodeOf(err) != code {
		t.Fatalf("got %v, want %s", err, code)
	}
}

func TestThermocyclerPhysicsOnManualClock(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_800_000_000, 0))
	tc := NewThermocycler(Options{Clock: clk})
	d := newDriver(t, tc.Config())
	if _, err := d.Write(ctx(t), mhp.WriteRequest{Name: TCTargetTemp, Value: 95}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Write(ctx(t), mhp.WriteRequest{Name: TCLidHeater, Value: true}); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		advance    time.Duration
		block, lid float64
		safeToOpen bool
	}{
		{0, 22, 22, true},
		{5 * time.Second, 42, 32, true},    // 4 degC/s and 2 degC/s
		{5 * time.Second, 62, 42, false},   // above 60: lid may not open
		{30 * time.Second, 95, 102, false}, // block holds at target
		{10 * time.Second, 95, 105, false}, // lid holds at 105
	}
	for i, s := range steps {
		clk.Advance(s.advance)
		if got := read(t, d, TCBlockTemperature); got != s.block {
			t.Errorf("step %d: block %v, want %v", i, got, s.block)
		}
		if got := read(t, d, TCLidTemperature); got != s.lid {
			t.Errorf("step %d: lid %v, want %v", i, got, s.lid)
		}
		if got := read(t, d, TCLidSafe); got != s.safeToOpen {
			t.Errorf("step %d: lid_safe_to_open %v, want %v", i, got, s.safeToOpen)
		}
	}
	// The safe-to-open interlock refuses open_lid while the block is hot.
	_, err := d.Invoke(ctx(t), mhp.InvokeRequest{Name: TCOpenLid, Approved: true})
	wantCode(t, err, mhp.CodeInterlockOpen)
	// E-stop cuts the heaters: both cool passively at 0.5 degC/s.
	if _, err := d.EStop(ctx(t), "test"); err != nil {
		t.Fatal(err)
	}
	clk.Advance(10 * time.Second)
	if got := read(t, d, TCBlockTemperature); got != 90.0 {
		t.Errorf("after estop: block %v, want 90", got)
	}
	if got := read(t, d, TCLidTemperature); got != 100.0 {
		t.Errorf("after estop: lid %v, want 100", got)
	}
}

func TestSpeedScalesSimulatedTime(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_800_000_000, 0))
	d := newDriver(t, Thermocycler(Options{Clock: clk, Speed: 60}))
	if _, err := d.Write(ctx(t), mhp.WriteRequest{Name: TCTargetTemp, Value: 4}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(100 * time.Millisecond) // 6 simulated seconds at 4 degC/s
	if got := read(t, d, TCBlockTemperature); got != 4.0 {
		t.Fatalf("block %v, want 4 after 6 simulated seconds", got)
	}
}

func closedThermocycler(t *testing.T) (*ThermocyclerSim, *binding.Driver) {
	t.Helper()
	tc := NewThermocycler(fast())
	d := newDriver(t, tc.Config())
	j := waitJob(t, d, invoke(t, d, TCCloseLid, nil, true).ID)
	if j.State != mhp.JobDone || !tc.LidClosed() {
		t.Fatalf("close_lid: %+v", j)
	}
	return tc, d
}

func TestRunProtocolCompletes(t *testing.T) {
	tc, d := closedThermocycler(t)
	steps := []any{map[string]any{"temp": 95, "hold_s": 30}, map[string]any{"temp": 58, "hold_s": 30},
		map[string]any{"temp": 72, "hold_s": 45}}
	j := waitJob(t, d, invoke(t, d, TCRunProtocol, map[string]any{"steps": steps, "cycles": 3}, false).ID)
	if j.State != mhp.JobDone {
		t.Fatalf("run_protocol ended %s: %+v", j.State, j.Error)
	}
	res := j.Result.(map[string]any)
	if res["cycles_completed"] != 3 || res["final_block_temperature"] != 72.0 {
		t.Fatalf("result %v", res)
	}
	if got := read(t, d, TCCycle); got != 0 {
		t.Errorf("cycle after the run = %v, want 0", got)
	}
	if tc.BlockTemperature() != 72 {
		t.Errorf("block holds %v, want 72", tc.BlockTemperature())
	}
}

func TestRunProtocolProgress(t *testing.T) {
	_, d := closedThermocycler(t)
	got := make(chan float64, 1024)
	stop := d.Listen(func(n mhp.Notification) {
		if n.Method != mhp.NotifyJobsProgress {
			return
		}
		if j, ok := n.Params["job"].(mhp.Job); ok {
			select {
			case got <- j.Progress:
			default:
			}
		}
	})
	defer stop()
	steps := []any{map[string]any{"temp": 95, "hold_s": 60}}
	j := waitJob(t, d, invoke(t, d, TCRunProtocol, map[string]any{"steps": steps, "cycles": 2}, false).ID)
	if j.State != mhp.JobDone {
		t.Fatalf("ended %s", j.State)
	}
	stop()
	close(got)
	last, n := -1.0, 0
	for p := range got {
		if p < last {
			t.Fatalf("progress went back from %v to %v", last, p)
		}
		last, n = p, n+1
	}
	if n < 3 || last < 0.5 {
		t.Fatalf("want rising progress notifications, got %d ending at %v", n, last)
	}
}

func TestRunProtocolGates(t *testing.T) {
	d := newDriver(t, Thermocycler(fast())) // lid open
	ok := map[string]any{"steps": []any{map[string]any{"temp": 95, "hold_s": 1}}, "cycles": 1}
	_, err := d.Invoke(ctx(t), mhp.InvokeRequest{Name: TCRunProtocol, Params: ok})
	wantCode(t, err, mhp.CodeInterlockOpen)

	_, d = closedThermocycler(t)
	cases := []struct {
		name   string
		params map[string]any
		code   mhp.Code
	}{
		{"step too hot", map[string]any{"steps": []any{map[string]any{"temp": 200, "hold_s": 1}}, "cycles": 1}, mhp.CodeLimitViolation},
		{"step too cold", map[string]any{"steps": []any{map[string]any{"temp": 2, "hold_s": 1}}, "cycles": 1}, mhp.CodeLimitViolation},
		{"no steps", map[string]any{"steps": []any{}, "cycles": 1}, mhp.CodeLimitViolation},
		{"missing hold", map[string]any{"steps": []any{map[string]any{"temp": 90}}, "cycles": 1}, mhp.CodeInvalidValue},
		{"fractional cycles", map[string]any{"steps": []any{map[string]any{"temp": 90, "hold_s": 1}}, "cycles": 2.5}, mhp.CodeInvalidValue},
		{"too long", map[string]any{"steps": []any{map[string]any{"temp": 90, "hold_s": 3600}}, "cycles": 30}, mhp.CodeLimitViolation},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := d.Invoke(ctx(t), mhp.InvokeRequest{Name: TCRunProtocol, Params: c.params})
			wantCode(t, err, c.code)
		})
	}
	_, err = d.Invoke(ctx(t), mhp.InvokeRequest{Name: TCOpenLid})
	wantCode(t, err, mhp.CodeApprovalRequired)
}

func TestRunProtocolCancelEndsCancelled(t *testing.T) {
	tc, d := closedThermocycler(t)
	long := map[string]any{"steps": []any{map[string]any{"temp": 95, "hold_s": 3600}}, "cycles": 20}
	j := invoke(t, d, TCRunProtocol, long, false)
	conformance.EventuallyWithin(t, "block above 40", 10*time.Second, func() bool { return tc.BlockTemperature() > 40 })
	if _, err := d.CancelJob(ctx(t), j.ID); err != nil {
		t.Fatal(err)
	}
	end := waitJob(t, d, j.ID)
	if end.State != mhp.JobCancelled {
		t.Fatalf("ended %s, want cancelled", end.State)
	}
	// The block stops heating and drifts down to ambient.
	tc.mu.Lock()
	target, rate := tc.block.target, tc.block.rate
	tc.mu.Unlock()
	if target != Ambient || rate != PassiveRate {
		t.Fatalf("block heads for %v at %v degC/s after cancel, want ambient, passive", target, rate)
	}
	if st, _ := d.Ping(ctx(t)); st.State != mhp.StateIdle {
		t.Fatalf("state %s after cancel, want idle", st.State)
	}
}

func TestRunProtocolPauseResume(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_800_000_000, 0))
	tc := NewThermocycler(Options{Clock: clk, Tick: time.Second})
	d := newDriver(t, tc.Config())
	// drive advances the manual clock a second at a time until cond holds.
	drive := func(what string, cond func() bool) {
		t.Helper()
		conformance.EventuallyWithin(t, "the clock driven to "+what, 10*time.Second, func() bool {
			if cond() {
				return true
			}
			clk.Advance(time.Second) // the simulation's goroutine runs before the next poll
			return false
		})
	}
	lid := invoke(t, d, TCCloseLid, nil, true)
	drive("lid closed", func() bool { x, _ := d.Job(ctx(t), lid.ID); return x.State.Terminal() })
	long := map[string]any{"steps": []any{map[string]any{"temp": 50, "hold_s": 100}}, "cycles": 1}
	j := invoke(t, d, TCRunProtocol, long, false)
	drive("hold phase", func() bool { x, _ := d.Job(ctx(t), j.ID); return x.Extra["phase"] == "hold" })
	if _, err := d.PauseJob(ctx(t), j.ID); err != nil {
		t.Fatal(err)
	}
	// Let the job reach its checkpoint, then note where it stopped.
	clk.Advance(time.Second)
	conformance.EventuallyWithin(t, "job parked at its checkpoint", 10*time.Second, func() bool { return clk.Pending() == 0 })
	x, _ := d.Job(ctx(t), j.ID)
	p0 := x.Progress
	// Ten simulated minutes pass while paused: the hold does not advance.
	for i := 0; i < 600; i++ {
		clk.Advance(time.Second)
	}
	x, _ = d.Job(ctx(t), j.ID)
	if x.State.Terminal() || x.Progress != p0 || !x.Paused {
		t.Fatalf("paused job moved on: %s paused=%v %.3f -> %.3f", x.State, x.Paused, p0, x.Progress)
	}
	if _, err := d.ResumeJob(ctx(t), j.ID); err != nil {
		t.Fatal(err)
	}
	drive("the run's end", func() bool { x, _ := d.Job(ctx(t), j.ID); return x.State.Terminal() })
	if end, _ := d.Job(ctx(t), j.ID); end.State != mhp.JobDone {
		t.Fatalf("ended %s", end.State)
	}
}

func TestThermocyclerEStopDuringRun(t *testing.T) {
	tc, d := closedThermocycler(t)
	if _, err := d.Write(ctx(t), mhp.WriteRequest{Name: TCLidHeater, Value: true}); err != nil {
		t.Fatal(err)
	}
	long := map[string]any{"steps": []any{map[string]any{"temp": 95, "hold_s": 3600}}, "cycles": 20}
	j := invoke(t, d, TCRunProtocol, long, false)
	conformance.EventuallyWithin(t, "running", 10*time.Second, func() bool { return read(t, d, TCCycle) == 1 })
	res, err := d.EStop(ctx(t), "test")
	if err != nil || !res.Stopped {
		t.Fatalf("estop: %+v %v", res, err)
	}
	if end := waitJob(t, d, j.ID); end.State != mhp.JobCancelled {
		t.Fatalf("job ended %s, want cancelled", end.State)
	}
	tc.mu.Lock()
	heater, lidTarget := tc.heater, tc.lid.target
	tc.mu.Unlock()
	if heater || lidTarget != Ambient {
		t.Fatalf("heater %v lid target %v after estop", heater, lidTarget)
	}
	_, err = d.Write(ctx(t), mhp.WriteRequest{Name: TCTargetTemp, Value: 50})
	wantCode(t, err, mhp.CodeEStopActive)
	if _, err := d.Reset(ctx(t)); err != nil {
		t.Fatal(err)
	}
}

func TestArmMovesPlates(t *testing.T) {
	arm := NewArm(ArmOptions{Options: fast()})
	d := newDriver(t, arm.Config())
	if _, err := d.Write(ctx(t), mhp.WriteRequest{Name: ArmSpeed, Value: 100}); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		action, loc string
		code        mhp.Code // 0: the job ends done
	}{
		{ArmPlacePlate, "deck_A2", mhp.CodeInvalidValue}, // holds nothing
		{ArmPickPlate, "deck_B1", mhp.CodeInvalidValue},  // no plate there
		{ArmPickPlate, "deck_A1", 0},
		{ArmPickPlate, "deck_A2", mhp.CodeInvalidValue}, // already holding
		{ArmPlacePlate, "nowhere", mhp.CodeLimitViolation},
		{ArmPlacePlate, "thermocycler", 0},
		{ArmPickPlate, "thermocycler", 0},
		{ArmPlacePlate, "deck_A1", 0},
	}
	for i, s := range steps {
		res, err := d.Invoke(ctx(t), mhp.InvokeRequest{Name: s.action, Params: map[string]any{"location": s.loc}})
		if s.code != 0 {
			wantCode(t, err, s.code)
			continue
		}
		if err != nil {
			t.Fatalf("step %d %s %s: %v", i, s.action, s.loc, err)
		}
		if j := waitJob(t, d, res.Job.ID); j.State != mhp.JobDone {
			t.Fatalf("step %d: %s", i, j.State)
		}
		if got := read(t, d, ArmPosition); got != s.loc {
			t.Fatalf("step %d: position %v", i, got)
		}
	}
	if got := arm.Occupied(); len(got) != 1 || got[0] != "deck_A1" || arm.Holding() {
		t.Fatalf("end state %s", arm)
	}
	occ := read(t, d, ArmOccupied).([]any)
	if len(occ) != 1 || occ[0] != "deck_A1" {
		t.Fatalf("occupied signal %v", occ)
	}
}

func TestArmGuardRefusesAtTheGates(t *testing.T) {
	lidClosed := true
	guard := func(_ context.Context, action, loc string) error {
		if loc == "thermocycler" && lidClosed {
			return mhp.Errorf(mhp.CodeInterlockOpen, "%s: thermocycler lid is closed", action).With("interlock", "thermocycler.lid_closed")
		}
		return nil
	}
	arm := NewArm(ArmOptions{Options: fast(), Guard: guard})
	d := newDriver(t, arm.Config())
	waitJob(t, d, invoke(t, d, ArmPickPlate, map[string]any{"location": "deck_A1"}, false).ID)
	_, err := d.Invoke(ctx(t), mhp.InvokeRequest{Name: ArmPlacePlate, Params: map[string]any{"location": "thermocycler"}, DryRun: true})
	wantCode(t, err, mhp.CodeInterlockOpen)
	lidClosed = false
	j := waitJob(t, d, invoke(t, d, ArmPlacePlate, map[string]any{"location": "thermocycler"}, false).ID)
	if j.State != mhp.JobDone {
		t.Fatalf("place ended %s", j.State)
	}
}

func TestArmCancelMidTravel(t *testing.T) {
	arm := NewArm(ArmOptions{Options: Options{Speed: 1, Tick: time.Millisecond}})
	d := newDriver(t, arm.Config())
	if _, err := d.Write(ctx(t), mhp.WriteRequest{Name: ArmSpeed, Value: 1}); err != nil { // 200 s travel
		t.Fatal(err)
	}
	j := invoke(t, d, ArmPickPlate, map[string]any{"location": "deck_A1"}, false)
	conformance.EventuallyWithin(t, "moving", 10*time.Second, func() bool { return arm.Position() == "moving to deck_A1" })
	if _, err := d.CancelJob(ctx(t), j.ID); err != nil {
		t.Fatal(err)
	}
	if end := waitJob(t, d, j.ID); end.State != mhp.JobCancelled {
		t.Fatalf("ended %s", end.State)
	}
	if arm.Position() != PositionUnknown || arm.Holding() {
		t.Fatalf("after cancel: %s", arm)
	}
}

func TestArmTravelTimeFollowsTheLocationsMap(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_800_000_000, 0))
	arm := NewArm(ArmOptions{Options: Options{Clock: clk, Tick: 10 * time.Millisecond}})
	d := newDriver(t, arm.Config())
	if _, err := d.Write(ctx(t), mhp.WriteRequest{Name: ArmSpeed, Value: 100}); err != nil {
		t.Fatal(err)
	}
	locs := read(t, d, ArmLocations).(map[string]any)
	if len(locs) != 5 || locs["thermocycler"].(map[string]any)["x"] != 260.0 {
		t.Fatalf("locations signal %v", locs)
	}
	j := invoke(t, d, ArmPickPlate, map[string]any{"location": "deck_A1"}, false)
	// Drive the clock one tick at a time, each once the job waits on it.
	elapsed := time.Duration(0)
	conformance.EventuallyWithin(t, "the pick to end (the job neither waits on the clock nor ends)", 10*time.Second, func() bool {
		for {
			x, _ := d.Job(ctx(t), j.ID)
			if x.State.Terminal() {
				if x.State != mhp.JobDone {
					t.Fatalf("pick ended %s", x.State)
				}
				return true
			}
			if clk.Pending() == 0 {
				return false // the job is between timers: let it run before stepping the clock again
			}
			clk.Advance(10 * time.Millisecond)
			elapsed += 10 * time.Millisecond
		}
	})
	// home (0,0,250) to deck_A1 (-130,-90,0) is 296.1 mm at 250 mm/s, plus 1 s to grip.
	want := HomePoint().Dist(Point{-130, -90, 0})/ArmMaxSpeed + ArmGrip
	if got := elapsed.Seconds(); got < want-0.011 || got > want+0.011 {
		t.Fatalf("pick took %.3f simulated s, want %.3f", got, want)
	}
}

// TestWritesHonourTheirContext: a simulated write whose context already
// ended (an estop cut it off, its deadline passed) applies nothing and
// says so with a refusal (outcome not_started), so the stop stays the last
// word the simulated device heard.
func TestWritesHonourTheirContext(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_800_000_000, 0))
	tc := NewThermocycler(Options{Clock: clk})
	arm := NewArm(ArmOptions{Options: Options{Clock: clk}})
	hooks := map[string]binding.Setting{}
	for _, s := range tc.Config().Settings {
		hooks[s.Spec.Name] = s
	}
	for _, s := range arm.Config().Settings {
		hooks[s.Spec.Name] = s
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tt := range []struct {
		name  string
		value any
		same  func() bool
	}{
		{TCTargetTemp, 95.0, func() bool { return tc.BlockTemperature() < 30 }},
		{TCLidHeater, true, func() bool { tc.mu.Lock(); defer tc.mu.Unlock(); return !tc.heater }},
		{ArmSpeed, 7.0, func() bool { arm.mu.Lock(); defer arm.mu.Unlock(); return arm.speed != 7.0 }},
	} {
		_, err := hooks[tt.name].Write(ctx, tt.value)
		me, ok := mhp.AsError(err)
		if !ok || me.OutcomeUnknown() || me.Data["outcome"] != mhp.OutcomeNotStarted {
			t.Fatalf("%s with an ended context: %v, want a not_started refusal", tt.name, err)
		}
		clk.Advance(time.Minute)
		if !tt.same() {
			t.Fatalf("%s: a write whose context had ended took effect", tt.name)
		}
	}
}
