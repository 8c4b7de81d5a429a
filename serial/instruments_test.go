//go:build linux

package serial_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/serial"
	"github.com/openmhp/mhp-go/serial/serialtest"
)

// packageConfig loads an example package's serial config and points it at
// the fake, with short waits.
func packageConfig(t *testing.T, dir, file string, fake *serialtest.Fake) serial.Config {
	t.Helper()
	src, err := adapters.ReadSource(filepath.Join("..", "examples", "devices", dir, file))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := serial.Load(src)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	cfg.Port = fake.Path()
	cfg.InterCommandDelayS = 0
	cfg.Timeouts.ReplyS = 0.3
	cfg.Timeouts.ReconnectMinS, cfg.Timeouts.ReconnectMaxS = 0.02, 0.1
	cfg.Timeouts.PresenceS = 0.02
	return cfg
}

func read(t *testing.T, d mhp.Device, name string) (any, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := d.Read(ctx, []string{name})
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return r.Values[name], r.Unavailable[name]
}

func write(d mhp.Device, name string, v any) (*mhp.WriteResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return d.Write(ctx, mhp.WriteRequest{Name: name, Value: v, Approved: true})
}

func invoke(t *testing.T, d mhp.Device, name string, params map[string]any) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := d.Invoke(ctx, mhp.InvokeRequest{Name: name, Params: params, Approved: true})
	if err != nil {
		t.Fatalf("invoke %s: %v", name, err)
	}
	return res.Job.ID
}

func waitJob(t *testing.T, d mhp.Device, id string) *mhp.Job {
	t.Helper()
	var j *mhp.Job
	conformance.Eventually(t, "job "+id+" to end", func() bool {
		var err error
		j, err = d.Job(context.Background(), id)
		return err == nil && j.State.Terminal()
	})
	return j
}

func state(t *testing.T, d mhp.Device) mhp.DeviceState {
	t.Helper()
	p, err := d.Ping(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return p.State
}

func TestHotplateReadsWritesActions(t *testing.T) {
	plate := serialtest.NewHotplate()
	fake := serialtest.New(t, plate, serialtest.Options{})
	drv, _ := start(t, packageConfig(t, "ika-cmag-hs7", "hotplate.yaml", fake), nil)
	d := mhp.AsSession(drv, "s1")

	// The plate is IN_PV_2, not the external probe IN_PV_1.
	if v, why := read(t, d, "plate_temperature"); v != 25.0 {
		t.Fatalf("plate_temperature = %v (%s), want 25 from IN_PV_2", v, why)
	}
	// The watchdog was armed at connect with the configured seconds.
	if st := plate.State(); st.Watchdog != 30 {
		t.Fatalf("watchdog = %d, want OUT_WD1@30 sent at connect", st.Watchdog)
	}
	// A set has no reply: the read-back makes it applied.
	res, err := write(d, "target_temperature", 80.0)
	if err != nil || !res.Applied {
		t.Fatalf("write target_temperature: %+v %v, want applied by read-back", res, err)
	}
	if st := plate.State(); st.TempSet != 80 {
		t.Fatalf("plate setpoint %v, want 80", st.TempSet)
	}
	// Not below the safety temperature (320): refused, never sent.
	sent := fake.Count("OUT_SP_1")
	if _, err := write(d, "target_temperature", 330.0); err == nil {
		t.Fatal("330 degC above IN_SP_3 (320) was accepted")
	} else if me, _ := mhp.AsError(err); me == nil || me.Code != mhp.CodeLimitViolation {
		t.Fatalf("330 degC: %v, want LimitViolation", err)
	}
	if fake.Count("OUT_SP_1") != sent {
		t.Fatal("a setpoint above the safety temperature reached the plate")
	}
	// An action sequence.
	if j := waitJob(t, d, invoke(t, d, "start_heating", nil)); j.State != mhp.JobDone {
		t.Fatalf("start_heating: %+v", j)
	}
	// START_1 has no reply: the job ends once it is drained to the wire,
	// and the fake reads it on its own goroutine.
	conformance.Eventually(t, "START_1 at the plate", func() bool { return plate.State().Heating })
	if state(t, d) != mhp.StateIdle {
		t.Fatalf("state %s, want idle", state(t, d))
	}
}

// TestHotplateEStopInterruptsCommandInFlight: a query the plate never
// answers holds the line for its whole reply timeout (10 s); the estop
// takes the line from it at once and the stop reaches the plate.
func TestHotplateEStopInterruptsCommandInFlight(t *testing.T) {
	plate := serialtest.NewHotplate()
	fake := serialtest.New(t, plate, serialtest.Options{})
	cfg := packageConfig(t, "ika-cmag-hs7", "hotplate.yaml", fake)
	cfg.Timeouts.ReplyS = 10
	drv, _ := start(t, cfg, nil)
	d := mhp.AsSession(drv, "s1")
	if j := waitJob(t, d, invoke(t, d, "start_heating", nil)); j.State != mhp.JobDone {
		t.Fatalf("start_heating: %+v", j)
	}
	conformance.Eventually(t, "START_1 at the plate", func() bool { return plate.State().Heating })
	fake.Mute("IN_PV_2", true)
	got := make(chan string, 1)
	go func() {
		_, why := read(t, d, "plate_temperature")
		got <- why
	}()
	conformance.Eventually(t, "IN_PV_2 on the wire", func() bool { return fake.Count("IN_PV_2") > 0 })
	began := time.Now()
	res, err := d.EStop(context.Background(), "test")
	took := time.Since(began)
	if err != nil || !res.Stopped {
		t.Fatalf("estop: %+v %v, want stopped", res, err)
	}
	if took > 5*time.Second {
		t.Fatalf("estop took %v: it waited behind the query in flight (reply timeout 10s)", took)
	}
	// Drained to the wire before the answer; the fake reads it on its own.
	conformance.Eventually(t, "STOP_1 and STOP_4 at the plate", func() bool {
		st := plate.State()
		return !st.Heating && fake.Count("STOP_1") > 0 && fake.Count("STOP_4") > 0
	})
	select {
	case why := <-got:
		if why == "" {
			t.Fatal("the interrupted read reported a value")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the interrupted read did not return")
	}
}

// TestHotplateStaleReplyDiscarded: a reply that comes after its timeout is
// never read as the next command's answer.
func TestHotplateStaleReplyDiscarded(t *testing.T) {
	plate := serialtest.NewHotplate()
	fake := serialtest.New(t, plate, serialtest.Options{})
	drv, _ := start(t, packageConfig(t, "ika-cmag-hs7", "hotplate.yaml", fake), nil)
	d := mhp.AsSession(drv, "s1")
	fake.Delay("IN_PV_2", 600*time.Millisecond) // reply_s is 0.3
	replies := fake.Replies()
	if v, why := read(t, d, "plate_temperature"); why == "" {
		t.Fatalf("a reply later than reply_s read as %v", v)
	}
	conformance.Eventually(t, "the late reply on the wire", func() bool { return fake.Replies() > replies })
	fake.Delay("IN_PV_2", 0)
	plate.SetPlate(42.5)
	if v, why := read(t, d, "plate_temperature"); v != 42.5 {
		t.Fatalf("plate_temperature = %v (%s), want 42.5: the stale 25.0 was read", v, why)
	}
	// Split replies are reassembled.
	fake.Split(true)
	if v, why := read(t, d, "plate_temperature"); v != 42.5 {
		t.Fatalf("split reply read %v (%s)", v, why)
	}
}

// TestHotplateVanishMidCommand: the port goes away after the setpoint was
// sent: nobody knows whether it took effect, so the device is in fault.
func TestHotplateVanishMidCommand(t *testing.T) {
	plate := serialtest.NewHotplate()
	fake := serialtest.New(t, plate, serialtest.Options{})
	drv, _ := start(t, packageConfig(t, "ika-cmag-hs7", "hotplate.yaml", fake), nil)
	d := mhp.AsSession(drv, "s1")
	fake.HangUpOn("OUT_SP_1")
	_, err := write(d, "target_temperature", 60.0)
	me, _ := mhp.AsError(err)
	if me == nil || !me.OutcomeUnknown() {
		t.Fatalf("write across an unplug: %v, want outcome unknown", err)
	}
	if s := state(t, d); s != mhp.StateFault {
		t.Fatalf("state %s, want fault", s)
	}
	conformance.Eventually(t, "link down", func() bool { l := drv.Link(); return l != nil && !l.Connected })
}

// TestHotplateVanishIdleAndReconnect: unplugged while idle, the link goes
// down; plugged back in (a new pty behind the same by-id path) the adapter
// reconnects, checks the identity again and reads fresh values, not the
// bytes left on the line.
func TestHotplateVanishIdleAndReconnect(t *testing.T) {
	plate := serialtest.NewHotplate()
	fake := serialtest.New(t, plate, serialtest.Options{})
	drv, _ := start(t, packageConfig(t, "ika-cmag-hs7", "hotplate.yaml", fake), nil)
	d := mhp.AsSession(drv, "s1")
	idents := fake.Count("IN_NAME")
	fake.Unplug()
	conformance.Eventually(t, "link down", func() bool { l := drv.Link(); return l != nil && !l.Connected })
	if _, why := read(t, d, "plate_temperature"); why == "" {
		t.Fatal("a signal read a value with the port gone")
	}
	if _, err := write(d, "target_speed", 100.0); err == nil {
		t.Fatal("a write was accepted with the port gone")
	}
	plate.SetPlate(31)
	fake.Replug("99.9 2\r\n")
	conformance.Eventually(t, "link up", func() bool { l := drv.Link(); return l != nil && l.Connected })
	if fake.Count("IN_NAME") <= idents {
		t.Fatal("no identity check at reconnect")
	}
	if v, why := read(t, d, "plate_temperature"); v != 31.0 {
		t.Fatalf("after reconnect plate_temperature = %v (%s), want 31", v, why)
	}
	if s := state(t, d); s != mhp.StateIdle {
		t.Fatalf("state %s after an idle unplug, want idle (nothing was in flight)", s)
	}
}

func TestBalance(t *testing.T) {
	bal := serialtest.NewBalance()
	fake := serialtest.New(t, bal, serialtest.Options{})
	drv, _ := start(t, packageConfig(t, "mettler-balance", "balance.yaml", fake), nil)
	d := mhp.AsSession(drv, "s1")
	bal.Load(100)
	if v, why := read(t, d, "weight"); v != 100.0 {
		t.Fatalf("weight %v (%s), want 100 from `S S     100.00 g`", v, why)
	}
	bal.Stable(false)
	if v, why := read(t, d, "weight"); why == "" {
		t.Fatalf("an unsettled pan read %v, want unavailable (S I)", v)
	}
	if v, _ := read(t, d, "stable"); v != false {
		t.Fatalf("stable = %v, want false (S D)", v)
	}
	bal.Stable(true)
	if j := waitJob(t, d, invoke(t, d, "tare", nil)); j.State != mhp.JobDone || bal.Tare() != 100 {
		t.Fatalf("tare: %+v, tare memory %v", j, bal.Tare())
	}
	// Busy: the balance answers `T I`: refused, nothing changed, no fault.
	bal.Busy(true)
	j := waitJob(t, d, invoke(t, d, "zero", nil))
	if j.State != mhp.JobFailed || j.Outcome != mhp.OutcomeNotStarted {
		t.Fatalf("zero while busy: %+v, want failed not_started", j)
	}
	if s := state(t, d); s != mhp.StateIdle {
		t.Fatalf("state %s after a refused zero", s)
	}
	bal.Busy(false)
	if res, err := write(d, "tare_preset", 12.5); err != nil || !res.Applied || bal.Tare() != 12.5 {
		t.Fatalf("tare_preset: %+v %v tare %v", res, err, bal.Tare())
	}
}

func TestPump(t *testing.T) {
	pump := serialtest.NewPump()
	pump.Alarm("R") // the first reply after power-up is A?R
	fake := serialtest.New(t, pump, serialtest.Options{Terminator: "\r"})
	drv, _ := start(t, packageConfig(t, "ne1000-pump", "pump.yaml", fake), nil)
	d := mhp.AsSession(drv, "s1")
	if v, why := read(t, d, "syringe_diameter"); v != 14.43 {
		t.Fatalf("syringe_diameter %v (%s)", v, why)
	}
	if res, err := write(d, "rate_ml_min", 2.5); err != nil || !res.Applied {
		t.Fatalf("rate: %+v %v", res, err)
	}
	if st := pump.State(); st.Rate != 2.5 || st.RateUnit != "MM" {
		t.Fatalf("pump rate %+v", st)
	}
	// An error reply (an alarm refuses the set): refused, nothing changed.
	pump.Alarm("S")
	_, err := write(d, "syringe_diameter", 20.0)
	if me, ok := mhp.AsError(err); !ok || me.OutcomeUnknown() || me.Data["reason"] != "device_refused" {
		t.Fatalf("set during an alarm: %v, want refused by the device", err)
	}
	if s := state(t, d); s != mhp.StateIdle || pump.State().Dia != 14.43 {
		t.Fatalf("state %s dia %v after a refused set", s, pump.State().Dia)
	}
	if _, err := write(d, "volume_ml", 1.5); err != nil {
		t.Fatal(err)
	}
	id := invoke(t, d, "pump", nil)
	conformance.Eventually(t, "pumping", func() bool { return pump.State().Status == "I" })
	pump.Finish()
	if j := waitJob(t, d, id); j.State != mhp.JobDone {
		t.Fatalf("pump job %+v", j)
	}
	// Cancel sends STP; the pump pauses: cancelled.
	id = invoke(t, d, "pump", nil)
	conformance.Eventually(t, "pumping", func() bool { return pump.State().Status == "I" })
	if _, err := d.CancelJob(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	if j := waitJob(t, d, id); j.State != mhp.JobCancelled {
		t.Fatalf("cancelled pump job %+v", j)
	}
}
