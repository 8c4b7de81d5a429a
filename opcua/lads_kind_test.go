package opcua

import (
	"strings"
	"testing"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/opcua/opcuatest"
)

// TestLADSControlFunctionIsNotSupported: a lads action pointed at a LADS
// control function is refused NotSupported naming the kind, nothing sent.
// Before the fix the invoke failed "BadNodeIDUnknown ... refused by the OPC
// UA server", although the server refused nothing.
func TestLADSControlFunctionIsNotSupported(t *testing.T) {
	srv := startFake(t)
	cfg := fixtureConfig(srv.URL, conformance.Options{})
	cfg.Actions = append(cfg.Actions, ActionItem{Action: mhp.Action{Name: "heat"},
		LADS: &LADSSpec{FunctionalUnit: opcuatest.NodeID("TempControl"), Start: "Start"}})
	d := startDriver(t, cfg, nil)
	waitSignals(t, d)
	ctx := ctxT(t)
	res, err := d.Invoke(ctx, mhp.InvokeRequest{Name: "heat"})
	if err == nil {
		var j *mhp.Job
		conformance.EventuallyWithin(t, "the job to end", 10e9, func() bool {
			j, _ = d.Job(ctx, res.Job.ID)
			return j != nil && j.State.Terminal()
		})
		if j.Error == nil {
			t.Fatalf("heat on a control function ended %s", j.State)
		}
		err = j.Error
	}
	e, _ := mhp.AsError(err)
	if e == nil || e.Code != mhp.CodeNotSupported || !strings.Contains(e.Message, "LADS control function") || strings.Contains(e.Message, "refused by the OPC UA server") {
		t.Fatalf("invoke on a control function: %v, want NotSupported naming the kind", err)
	}
}

// TestLADSEStopByAbortOnAStoppedUnit: an estop mapped to a unit's Abort
// answers stopped:true when the unit is already Stopped (the server answers
// BadInvalidState: there is nothing to stop). Before the fix it answered
// stopped:false with BadInvalidState.
func TestLADSEStopByAbortOnAStoppedUnit(t *testing.T) {
	srv := startFake(t)
	cfg := fixtureConfig(srv.URL, conformance.Options{})
	fu := "FU_" + conformance.ActionRun
	cfg.EStop = &EStopSpec{Method: &MethodSpec{Object: opcuatest.NodeID(fu + ".FunctionalUnitState"), Method: opcuatest.NodeID(fu + ".Abort")}}
	d := startDriver(t, cfg, nil)
	waitSignals(t, d)
	r, err := d.EStop(ctxT(t), "test")
	if err != nil || !r.Stopped {
		t.Fatalf("estop by Abort on a Stopped unit: %+v %v, want stopped:true", r, err)
	}
}

// TestLADSAbortedUnitRefusalSaysResetClearsIt: after a cancel by Abort the
// unit is Aborted; the next run is refused saying that safety/reset clears
// it, and after the reset the run starts.
func TestLADSAbortedUnitRefusalSaysResetClearsIt(t *testing.T) {
	srv := startFake(t)
	cfg := fixtureConfig(srv.URL, conformance.Options{})
	for i := range cfg.Actions {
		if l := cfg.Actions[i].LADS; l != nil && cfg.Actions[i].Name == conformance.ActionRun {
			l.CancelWith = "Abort"
		}
	}
	d := startDriver(t, cfg, nil)
	waitSignals(t, d)
	ctx := ctxT(t)
	run := func() (*mhp.Job, error) {
		res, err := d.Invoke(ctx, mhp.InvokeRequest{Name: conformance.ActionRun, Params: map[string]any{"duration_s": 60.0}})
		if err != nil {
			return nil, err
		}
		return res.Job, nil
	}
	j, err := run()
	if err != nil {
		t.Fatal(err)
	}
	conformance.EventuallyWithin(t, "the unit Running", 10e9, func() bool { return srv.UnitState(conformance.ActionRun) == "Running" })
	if _, err := d.CancelJob(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	conformance.EventuallyWithin(t, "the unit Aborted", 10e9, func() bool { return srv.UnitState(conformance.ActionRun) == "Aborted" })
	conformance.EventuallyWithin(t, "the job to end", 10e9, func() bool { got, _ := d.Job(ctx, j.ID); return got != nil && got.State.Terminal() })
	j, err = run()
	var msg string
	if err != nil {
		msg = err.Error()
	} else {
		var got *mhp.Job
		conformance.EventuallyWithin(t, "the second run to end", 10e9, func() bool {
			got, _ = d.Job(ctx, j.ID)
			return got != nil && got.State.Terminal()
		})
		if got.Error != nil {
			msg = got.Error.Message
		}
	}
	if !strings.Contains(msg, "Aborted") || !strings.Contains(msg, "safety/reset") {
		t.Fatalf("run on an Aborted unit: %q, want a refusal saying safety/reset clears it", msg)
	}
}
