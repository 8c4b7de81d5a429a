package opcua

import (
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/opcua/opcuatest"
)

func TestProgramOutcomes(t *testing.T) {
	srv := startFake(t)
	cfg := extraConfig(srv.URL)
	cfg.Actions = append(cfg.Actions, ActionItem{Action: mhp.Action{Name: "batch"},
		Program: &ProgramSpec{Node: opcuatest.NodeID("Batch"), Result: opcuatest.NodeID("Batch.Result"),
			Outputs: map[string]string{"yield": opcuatest.NodeID("Batch.Yield")}}})
	d := startDriver(t, cfg, nil)
	waitSignals(t, d)
	ctx := ctxT(t)
	dev := mhp.AsSession(d, "s1")
	in := srv.In
	const act = opcuatest.ProgramAction

	job := invokeWait(t, dev, "batch", nil)
	if job.State != mhp.JobDone {
		t.Fatalf("batch: %+v", job)
	}
	if r := job.Result.(map[string]any); r["yield"] != 12.5 || r["result"] != true {
		t.Fatalf("batch result %+v", job.Result)
	}

	in.Script(act, conformance.FailReported)
	job = invokeWait(t, dev, "batch", nil)
	if job.State != mhp.JobFailed || job.Outcome != mhp.OutcomeFailed {
		t.Fatalf("failed batch: %+v", job)
	}

	// Pause -> Suspend, resume -> Resume, cancel -> Halt -> cancelled.
	in.Script(act, conformance.Block)
	res, err := dev.Invoke(ctx, mhp.InvokeRequest{Name: "batch"})
	if err != nil {
		t.Fatal(err)
	}
	conformance.EventuallyWithin(t, "the batch to run", 5*time.Second, func() bool { return in.Calls(act) == 3 })
	if _, err := dev.PauseJob(ctx, res.Job.ID); err != nil {
		t.Fatalf("pause: %v", err)
	}
	if _, err := dev.ResumeJob(ctx, res.Job.ID); err != nil {
		t.Fatalf("resume: %v", err)
	}
	if _, err := dev.CancelJob(ctx, res.Job.ID); err != nil {
		t.Fatal(err)
	}
	job = waitJob(t, dev, res.Job.ID)
	if job.State != mhp.JobCancelled {
		t.Fatalf("halted batch: %+v", job)
	}

	// A Halt the program ignores: it completes anyway -> done.
	in.Script(act, conformance.IgnoreCancel)
	res, err = dev.Invoke(ctx, mhp.InvokeRequest{Name: "batch"})
	if err != nil {
		t.Fatal(err)
	}
	conformance.EventuallyWithin(t, "the batch to run", 5*time.Second, func() bool { return in.Calls(act) == 4 })
	if _, err := dev.CancelJob(ctx, res.Job.ID); err != nil {
		t.Fatal(err)
	}
	in.Release(act)
	job = waitJob(t, dev, res.Job.ID)
	if job.State != mhp.JobDone {
		t.Fatalf("batch that ignored Halt: %+v", job)
	}
}
