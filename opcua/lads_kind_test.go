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
