package opcua

import (
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/conformance"
)

// An estop during a LADS program leaves the functional unit Aborted (as on
// LADS devices); a reset says verified only once the unit can Start again,
// clearing it with Clear, and the next run works.
func TestLADSResetClearsAbortedUnit(t *testing.T) {
	srv := startFake(t)
	d := startDriver(t, extraConfig(srv.URL), nil)
	waitSignals(t, d)
	ctx := ctxT(t)
	dev := mhp.AsSession(d, "s1")
	run := map[string]any{"duration_s": 5.0}
	srv.In.Script(conformance.ActionRun, conformance.Block)
	res, err := dev.Invoke(ctx, mhp.InvokeRequest{Name: conformance.ActionRun, Params: run})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the unit to run", 10*time.Second, func() bool { return srv.UnitState(conformance.ActionRun) == "Running" })
	if _, err := dev.EStop(ctx, "test"); err != nil {
		t.Fatal(err)
	}
	waitJob(t, dev, res.Job.ID)
	eventually(t, "the unit to end Aborted", 10*time.Second, func() bool { return srv.UnitState(conformance.ActionRun) == "Aborted" })
	r, err := dev.Reset(ctx)
	if err != nil || !r.Verified || r.State != mhp.StateIdle {
		t.Fatalf("reset after an estop mid-program: %+v %v", r, err)
	}
	if got := srv.UnitState(conformance.ActionRun); got != "Stopped" || srv.Clears() != 1 {
		t.Fatalf("after the reset the unit is %s (%d clears), want Stopped after one Clear", got, srv.Clears())
	}
	srv.In.Script(conformance.ActionRun, conformance.Normal)
	if job := invokeWait(t, dev, conformance.ActionRun, run); job.State != mhp.JobDone {
		t.Fatalf("the run after the reset: %+v", job)
	}
}
