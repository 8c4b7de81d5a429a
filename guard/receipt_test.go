package guard_test

import (
	"os"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/evidence"
	"github.com/openmhp/mhp-go/guard"
)

// fullDiskFile is a chain file whose disk fills when full is set: a write
// keeps its first 16 bytes (a torn line) and fails with ENOSPC.
type fullDiskFile struct {
	evidence.File
	full *atomic.Bool
}

func (f fullDiskFile) Write(b []byte) (int, error) {
	if !f.full.Load() {
		return f.File.Write(b)
	}
	n, _ := f.File.Write(b[:min(16, len(b))])
	return n, &os.PathError{Op: "write", Path: "chain", Err: syscall.ENOSPC}
}

// TestReceiptLostFaultsAndLaterWritesAreRefused: on a full disk a write the
// device applied is not answered ok: it is answered DeviceFault with what
// the device did, the device is latched in fault, and the next write is
// refused before it reaches the backend. Reopening records the repair.
func TestReceiptLostFaultsAndLaterWritesAreRefused(t *testing.T) {
	dir := t.TempDir()
	var full atomic.Bool
	lg, err := evidence.Open(evidence.Config{Dir: dir, Device: "guard-01",
		WrapFile: func(f evidence.File) evidence.File { return fullDiskFile{File: f, full: &full} }})
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, guard.Config{Evidence: lg}, 0)
	a := session("agent-1")
	if _, err := r.dev.Write(a, mhp.WriteRequest{Name: "sp", Value: 5.0}); err != nil {
		t.Fatal(err)
	}
	full.Store(true)
	res, err := r.dev.Write(a, mhp.WriteRequest{Name: "sp", Value: 6.0})
	e, _ := mhp.AsError(err)
	if res != nil || e == nil || e.Code != mhp.CodeDeviceFault || e.Data[mhp.DataReason] != "receipt_lost" || e.Data[mhp.DataOutcome] != evidence.OutcomeOK || e.Data["result"] == nil {
		t.Fatalf("write whose receipt was torn = %+v, %v; want DeviceFault receipt_lost with the outcome and result", res, err)
	}
	if r.writes.Load() != 2 {
		t.Fatalf("backend writes = %d, want 2 (the second reached it)", r.writes.Load())
	}
	if p, _ := r.dev.Ping(a); p.State != mhp.StateFault {
		t.Fatalf("state after a lost receipt = %s, want fault", p.State)
	}
	full.Store(false)
	_, err = r.dev.Write(a, mhp.WriteRequest{Name: "sp", Value: 7.0})
	if e, _ := mhp.AsError(err); e == nil || e.Data[mhp.DataOutcome] != mhp.OutcomeNotStarted || r.writes.Load() != 2 {
		t.Fatalf("write after the log stopped = %v (backend writes %d), want refused before the backend", err, r.writes.Load())
	}
	if _, err := r.dev.Reset(a); err == nil {
		t.Fatal("reset with the evidence log stopped was accepted")
	}
	if res, err := r.dev.EStop(a, "x"); err != nil || res.State != mhp.StateEStop {
		t.Fatalf("estop with the evidence log stopped: %+v, %v; estop must always work", res, err)
	}
	lg.Close()
	lg, err = evidence.Open(evidence.Config{Dir: dir, Device: "guard-01"})
	if err != nil {
		t.Fatal(err)
	}
	lg.Close()
	rep, err := evidence.Verify(dir, nil)
	if err != nil || !rep.OK || len(rep.Repairs) != 1 || rep.Repairs[0].CutBytes != 16 {
		t.Fatalf("verify after reopening = %+v, %v; want the torn receipt's cut reported", rep, err)
	}
}
