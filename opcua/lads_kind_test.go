package opcua

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/opcua/opcuatest"
)

// TestLADSControlFunctionIsNotSupported: a lads action pointed at a LADS
// control function is refused as soon as the server tells the node's kind.
// The config is refused at load (Probe, Register) and at Start when the
// server is up then, naming the action, the node and the kind; with the
// server first reached later, the invoke (and its dry run) is refused
// NotSupported naming the kind, before any job is made. The first fix
// refused only inside the job (a job was made and failed); before it the
// invoke failed "BadNodeIDUnknown ... refused by the OPC UA server",
// although the server refused nothing.
func TestLADSControlFunctionIsNotSupported(t *testing.T) {
	srv := startFake(t)
	cfg := fixtureConfig(srv.URL, conformance.Options{})
	cfg.Actions = append(cfg.Actions, ActionItem{Action: mhp.Action{Name: "heat"},
		LADS: &LADSSpec{FunctionalUnit: opcuatest.NodeID("TempControl"), Start: "Start"}})
	names := func(t *testing.T, err error) {
		t.Helper()
		var ke *KindError
		if !errors.As(err, &ke) || ke.Action != "heat" || !strings.Contains(err.Error(), "LADS control function") ||
			!strings.Contains(err.Error(), opcuatest.NodeID("TempControl")) {
			t.Fatalf("got %v, want a KindError naming action heat, its node and the kind", err)
		}
	}
	t.Run("at load", func(t *testing.T) {
		_, err := Probe(ctxT(t), cfg, DialOptions{Logger: quietLogger()})
		names(t, err)
		file := configFile(srv.URL, "", `actions:
  - name: heat
    lads: {functional_unit: "`+opcuatest.NodeID("TempControl")+`", start: Start}
`)
		_, err = buildFile(t, file)
		names(t, err)
	})
	t.Run("at start", func(t *testing.T) {
		d, err := New(context.Background(), cfg, quietOptions(nil))
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		names(t, d.Start(ctxT(t)))
	})
	t.Run("server reached later", func(t *testing.T) {
		srv.Down()
		d := startDriver(t, cfg, nil)
		if err := srv.Up(); err != nil {
			t.Fatal(err)
		}
		linkUp(t, d)
		ctx := ctxT(t)
		for _, dry := range []bool{true, false} {
			res, err := d.Invoke(ctx, mhp.InvokeRequest{Name: "heat", DryRun: dry})
			e, _ := mhp.AsError(err)
			if e == nil || e.Code != mhp.CodeNotSupported || !strings.Contains(e.Message, "LADS control function") ||
				strings.Contains(e.Message, "refused by the OPC UA server") {
				t.Fatalf("invoke (dry run %v) on a control function: %+v %v, want NotSupported naming the kind", dry, res, err)
			}
		}
		if jobs, _ := d.Jobs(ctx, mhp.JobsRequest{}); len(jobs) != 0 {
			t.Fatalf("a job was made for a refused invoke: %+v", jobs)
		}
	})
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
