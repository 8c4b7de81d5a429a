package guard_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/evidence"
	"github.com/openmhp/mhp-go/guard"
)

// TestDevicesOnASharedLog: two guarded devices record into one shared log
// through their handles; each lists only its own receipts; when one's
// receipt is torn by a full disk, the other's next write is refused before
// it reaches its backend (the log stopped for every device).
func TestDevicesOnASharedLog(t *testing.T) {
	dir := t.TempDir()
	var full atomic.Bool
	lg, err := evidence.Open(evidence.Config{Dir: dir, Shared: true,
		WrapFile: func(f evidence.File) evidence.File { return fullDiskFile{File: f, full: &full} }})
	if err != nil {
		t.Fatal(err)
	}
	a := newRig(t, guard.Config{Evidence: lg.For("tc-01")}, 0)
	b := newRig(t, guard.Config{Evidence: lg.For("arm-01")}, 0)
	s := session("agent-1")
	for i := 0; i < 3; i++ {
		if _, err := a.dev.Write(s, mhp.WriteRequest{Name: "sp", Value: float64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.dev.Write(s, mhp.WriteRequest{Name: "sp", Value: 9.0}); err != nil {
		t.Fatal(err)
	}
	p, err := b.dev.EvidenceList(s, evidence.Query{})
	if err != nil || len(p.Entries) != 1 || p.Entries[0].Device != "arm-01" {
		t.Fatalf("arm-01's evidence/list = %+v, %v; want its one receipt only", p, err)
	}
	if p, _ := a.dev.EvidenceList(s, evidence.Query{Device: "arm-01"}); len(p.Entries) != 3 || p.Entries[0].Device != "tc-01" {
		t.Fatalf("tc-01's evidence/list asking for arm-01 = %+v, want tc-01's own three", p.Entries)
	}
	if h, _ := a.dev.EvidenceHead(s); h.Log == "" || h.Seq != 5 {
		t.Fatalf("evidence/head = %+v, want the shared log's head (seq 5)", h)
	}
	full.Store(true)
	if _, err := a.dev.Write(s, mhp.WriteRequest{Name: "sp", Value: 4.0}); err == nil {
		t.Fatal("a write whose receipt was torn answered ok")
	}
	full.Store(false)
	_, err = b.dev.Write(s, mhp.WriteRequest{Name: "sp", Value: 8.0})
	if e, _ := mhp.AsError(err); e == nil || e.Data[mhp.DataOutcome] != mhp.OutcomeNotStarted || b.writes.Load() != 1 {
		t.Fatalf("arm-01's write after the shared log stopped = %v (backend writes %d), want refused before the backend", err, b.writes.Load())
	}
	lg.Close()
}

// TestNilLogIsNoEvidence: a nil *evidence.Log in Config is no evidence (not
// a log the guard calls).
func TestNilLogIsNoEvidence(t *testing.T) {
	var lg *evidence.Log
	r := newRig(t, guard.Config{Evidence: lg}, 0)
	if _, err := r.dev.Write(session("a"), mhp.WriteRequest{Name: "sp", Value: 1.0}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.dev.EvidenceHead(context.Background()); err == nil {
		t.Fatal("evidence/head answered without evidence")
	}
}
