package opcua

import (
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/opcua/opcuatest"
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
	conformance.EventuallyWithin(t, "the unit to run", 10*time.Second, func() bool { return srv.UnitState(conformance.ActionRun) == "Running" })
	if _, err := dev.EStop(ctx, "test"); err != nil {
		t.Fatal(err)
	}
	waitJob(t, dev, res.Job.ID)
	conformance.EventuallyWithin(t, "the unit to end Aborted", 10*time.Second, func() bool { return srv.UnitState(conformance.ActionRun) == "Aborted" })
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

// A server that does not trust our client certificate either answers the
// secure channel request with BadCertificateUntrusted or just closes the
// socket (open62541); both become an error that names the status (or the
// likely cause) and says which certificate to trust where, not "EOF".
func TestUntrustedClientCertificate(t *testing.T) {
	for _, c := range []struct {
		name string
		how  opcuatest.Rejection
		want string
	}{
		// gopcua v0.8.0 turns a server's ERR message into io.EOF
		// (uasc.readChunk: an error with no bytes is EOF), so the status
		// code of an ERR is lost and both cases read alike; codes that come
		// in a response (CreateSession) are named.
		{"error_message", opcuatest.RejectError, "closed the connection while opening the Basic256Sha256 secure channel"},
		{"socket_closed", opcuatest.RejectClose, "closed the connection while opening the Basic256Sha256 secure channel"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, err := opcuatest.StartWith(conformance.NewInstrument(), opcuatest.Options{Basic256Sha256: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = srv.Close() })
			srv.RejectCertificates(c.how)
			cfg := fixtureConfig(srv.URL, conformance.Options{})
			cfg.Security.Policy = PolicyBasic256Sha256
			cfg.Reconn.FailFast = true
			d, err := New(ctxT(t), cfg, quietOptions(nil))
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			err = d.Start(ctxT(t))
			if err == nil {
				t.Fatal("connected with a refused certificate")
			}
			msg := err.Error()
			for _, w := range []string{c.want, "trusted certificates folder", "sha256:", "urn:openmhp:mhp-go:opcua", "client_certificate"} {
				if !strings.Contains(msg, w) {
					t.Fatalf("error %q does not say %q", msg, w)
				}
			}
			// In the background mode the same words reach ping's backend.
			cfg.Reconn.FailFast = false
			d2, err := New(ctxT(t), cfg, quietOptions(nil))
			if err != nil {
				t.Fatal(err)
			}
			defer d2.Close()
			if err := d2.Start(ctxT(t)); err != nil {
				t.Fatal(err)
			}
			if l := d2.Link(); l == nil || l.Connected || !strings.Contains(l.Error, c.want) {
				t.Fatalf("backend link %+v", l)
			}
		})
	}
}
