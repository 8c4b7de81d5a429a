package guard_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/clock"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/evidence"
	"github.com/openmhp/mhp-go/guard"
)

type rig struct {
	dev     *guard.Device
	drv     *binding.Driver
	clk     *clock.Manual
	writes  atomic.Int32
	runs    atomic.Int32
	permits *guard.Permits
	log     *evidence.Log
	dir     string
}

func newRig(t *testing.T, cfg guard.Config, slow time.Duration) *rig {
	t.Helper()
	r := &rig{clk: clock.NewManual(time.Unix(1_800_000_000, 0))}
	drv, err := binding.New(binding.Config{
		Device: mhp.DeviceInfo{ID: "guard-01", Class: "test"},
		Settings: []binding.Setting{
			{Spec: mhp.Setting{Name: "sp", Type: mhp.TypeNumber, Limits: mhp.Range(0, 100)},
				Write: func(ctx context.Context, v any) (binding.WriteStatus, error) {
					r.writes.Add(1)
					if slow > 0 {
						time.Sleep(slow) // a slow backend, so duplicates overlap
					}
					return binding.Applied, nil
				}},
			{Spec: mhp.Setting{Name: "lid", Type: mhp.TypeNumber, Limits: mhp.Range(0, 1), Approval: mhp.ApprovalConfirm},
				Write: func(ctx context.Context, v any) (binding.WriteStatus, error) {
					r.writes.Add(1)
					return binding.Applied, nil
				}},
		},
		Actions: []binding.Action{{Spec: mhp.Action{Name: "go"},
			Run: func(context.Context, *binding.Job) (any, error) {
				r.runs.Add(1)
				return map[string]any{"ok": true}, nil
			}}},
		EStop: func(context.Context) error { return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drv.Close() })
	r.drv = drv
	if cfg.Clock == nil {
		cfg.Clock = r.clk
	}
	r.permits = cfg.Permits
	r.log, _ = cfg.Evidence.(*evidence.Log)
	g, err := guard.New(drv, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	r.dev = g
	return r
}

func session(label string) context.Context { return mhp.WithSession(context.Background(), label) }

func code(err error) mhp.Code {
	if e, ok := mhp.AsError(err); ok {
		return e.Code
	}
	return 0
}

func TestCommandIDReplaysAndNeverActsTwice(t *testing.T) {
	r := newRig(t, guard.Config{}, 0)
	a := session("a")
	w := mhp.WriteRequest{Name: "sp", Value: 5.0, CommandID: "cmd-1"}
	first, err := r.dev.Write(a, w)
	if err != nil {
		t.Fatal(err)
	}
	again, err := r.dev.Write(a, w)
	if err != nil || again != first {
		t.Fatalf("replay = %+v, %v; want the first answer %+v", again, err, first)
	}
	if n := r.writes.Load(); n != 1 {
		t.Fatalf("the backend saw %d writes, want 1", n)
	}
	_, err = r.dev.Write(a, mhp.WriteRequest{Name: "sp", Value: 6.0, CommandID: "cmd-1"})
	if e, _ := mhp.AsError(err); code(err) != mhp.CodeInvalidParams || e.Data["reason"] != "command_id_reused" {
		t.Fatalf("same id, other value: %v; want InvalidParams command_id_reused", err)
	}
	// Ids are per session: another session's cmd-1 is its own intent.
	if _, err := r.dev.Write(session("b"), w); err != nil || r.writes.Load() != 2 {
		t.Fatalf("another session's id acted %d times (%v), want it to act", r.writes.Load(), err)
	}
	// Invokes too.
	inv := mhp.InvokeRequest{Name: "go", CommandID: "run-1"}
	j1, err := r.dev.Invoke(a, inv)
	if err != nil {
		t.Fatal(err)
	}
	j2, _ := r.dev.Invoke(a, inv)
	if j2.Job.ID != j1.Job.ID {
		t.Fatalf("invoke replay started job %s, want %s again", j2.Job.ID, j1.Job.ID)
	}
}

func TestCommandIDConcurrentDuplicates(t *testing.T) {
	r := newRig(t, guard.Config{}, 20*time.Millisecond)
	a := session("a")
	var wg sync.WaitGroup
	results := make([]*mhp.WriteResult, 32)
	for i := range results {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			res, err := r.dev.Write(a, mhp.WriteRequest{Name: "sp", Value: 7.0, CommandID: "dup"})
			if err != nil {
				t.Error(err)
			}
			results[i] = res
		}(i)
	}
	wg.Wait()
	if n := r.writes.Load(); n != 1 {
		t.Fatalf("32 concurrent requests with one command id made %d writes, want 1", n)
	}
	for _, res := range results {
		if res != results[0] {
			t.Fatal("concurrent duplicates got different answers")
		}
	}
}

func TestCommandIDRefusalIsNotKept(t *testing.T) {
	r := newRig(t, guard.Config{}, 0)
	holder, other := session("holder"), session("other")
	if _, err := r.dev.Acquire(holder, time.Minute); err != nil {
		t.Fatal(err)
	}
	w := mhp.WriteRequest{Name: "sp", Value: 5.0, CommandID: "after-lease"}
	if _, err := r.dev.Write(other, w); code(err) != mhp.CodeNotLeased {
		t.Fatalf("write under another's lease: %v", err)
	}
	r.dev.Release(holder)
	if _, err := r.dev.Write(other, w); err != nil || r.writes.Load() != 1 {
		t.Fatalf("retry with the same id after a refusal: %v (writes %d), want it to act once", err, r.writes.Load())
	}
}

func TestCommandIDWindowIsBounded(t *testing.T) {
	r := newRig(t, guard.Config{ReplayEntries: 3, ReplayAge: time.Minute}, 0)
	a := session("a")
	for _, id := range []string{"1", "2", "3", "4"} {
		if _, err := r.dev.Write(a, mhp.WriteRequest{Name: "sp", Value: 1.0, CommandID: id}); err != nil {
			t.Fatal(err)
		}
	}
	r.dev.Write(a, mhp.WriteRequest{Name: "sp", Value: 1.0, CommandID: "4"}) // still in the window
	if n := r.writes.Load(); n != 4 {
		t.Fatalf("writes = %d, want 4 (id 4 replayed)", n)
	}
	r.dev.Write(a, mhp.WriteRequest{Name: "sp", Value: 1.0, CommandID: "1"}) // evicted by count: acts again
	if n := r.writes.Load(); n != 5 {
		t.Fatalf("writes = %d, want 5 (id 1 left the window of 3)", n)
	}
	r.clk.Advance(2 * time.Minute)
	r.dev.Write(a, mhp.WriteRequest{Name: "sp", Value: 1.0, CommandID: "4"}) // evicted by age
	if n := r.writes.Load(); n != 6 {
		t.Fatalf("writes = %d, want 6 (id 4 aged out)", n)
	}
	if _, err := r.dev.Write(a, mhp.WriteRequest{Name: "sp", Value: 1.0, CommandID: string(make([]byte, 300))}); code(err) != mhp.CodeInvalidParams {
		t.Fatalf("a 300-byte command id: %v, want InvalidParams", err)
	}
}

func TestPermits(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_800_000_000, 0))
	permits := guard.NewPermits("guard-01", clk)
	r := newRig(t, guard.Config{Permits: permits, Clock: clk}, 0)
	a := session("agent")
	issue := func(value any) string {
		p, err := permits.Issue(guard.PermitRequest{Method: "settings/write", Name: "lid", Value: value, TTL: 60})
		if err != nil {
			t.Fatal(err)
		}
		return p.ID
	}
	if _, err := r.dev.Write(a, mhp.WriteRequest{Name: "lid", Value: 1.0}); code(err) != mhp.CodeApprovalRequired {
		t.Fatalf("confirm item without approval: %v", err)
	}
	id := issue(1.0)
	if _, err := r.dev.Write(a, mhp.WriteRequest{Name: "lid", Value: 1.0, PermitID: id}); err != nil {
		t.Fatalf("write with a matching permit: %v", err)
	}
	mismatch := func(req mhp.WriteRequest, want string) {
		t.Helper()
		_, err := r.dev.Write(a, req)
		e, _ := mhp.AsError(err)
		if code(err) != mhp.CodeApprovalRequired || e.Data["reason"] != "permit_mismatch" {
			t.Fatalf("%+v: %v, want ApprovalRequired permit_mismatch", req, err)
		}
		if m, _ := e.Data["mismatch"].(string); want != "" && !contains(m, want) {
			t.Fatalf("mismatch %q does not say %q", m, want)
		}
	}
	mismatch(mhp.WriteRequest{Name: "lid", Value: 1.0, PermitID: id}, "already used")
	mismatch(mhp.WriteRequest{Name: "lid", Value: 0.0, PermitID: issue(1.0)}, "other parameters")
	mismatch(mhp.WriteRequest{Name: "sp", Value: 1.0, PermitID: issue(1.0)}, `not "sp"`)
	mismatch(mhp.WriteRequest{Name: "lid", Value: 1.0, PermitID: "permit_forged"}, "unknown")
	late := issue(1.0)
	clk.Advance(2 * time.Minute)
	mismatch(mhp.WriteRequest{Name: "lid", Value: 1.0, PermitID: late}, "expired")
	if n := r.writes.Load(); n != 1 {
		t.Fatalf("backend writes = %d, want only the permitted one", n)
	}
	// Gate order: in estop the state gate answers before a bad permit.
	r.dev.EStop(a, "test")
	if _, err := r.dev.Write(a, mhp.WriteRequest{Name: "lid", Value: 1.0, PermitID: "permit_forged"}); code(err) != mhp.CodeEStopActive {
		t.Fatalf("bad permit in estop: %v, want EStopActive first", err)
	}
	// A permit refused before acting (estop) stays usable.
	keep := issue(1.0)
	if _, err := r.dev.Write(a, mhp.WriteRequest{Name: "lid", Value: 1.0, PermitID: keep}); code(err) != mhp.CodeEStopActive {
		t.Fatalf("good permit in estop: %v", err)
	}
	if _, err := r.dev.Reset(a); err != nil {
		t.Fatal(err)
	}
	if _, err := r.dev.Write(a, mhp.WriteRequest{Name: "lid", Value: 1.0, PermitID: keep}); err != nil {
		t.Fatalf("the permit refused in estop no longer works after reset: %v", err)
	}
	if _, err := permits.Issue(guard.PermitRequest{Method: "settings/write", Name: "lid", Value: 1.0, TTL: 1e9}); code(err) != mhp.CodeInvalidParams {
		t.Fatalf("a permit ttl of 1e9 s: %v, want refused with bounds", err)
	}
}

func contains(s, sub string) bool {
	return len(sub) == 0 || (len(s) >= len(sub) && indexOf(s, sub) >= 0)
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

func TestRequirePermitsIgnoresApproved(t *testing.T) {
	permits := guard.NewPermits("guard-01", nil)
	r := newRig(t, guard.Config{Permits: permits, RequirePermits: true}, 0)
	if _, err := r.dev.Write(session("a"), mhp.WriteRequest{Name: "lid", Value: 1.0, Approved: true}); code(err) != mhp.CodeApprovalRequired {
		t.Fatalf("approved:true with RequirePermits: %v, want ApprovalRequired", err)
	}
	if r.writes.Load() != 0 {
		t.Fatal("a boolean approval reached the backend")
	}
	if _, err := guard.New(r.drv, guard.Config{RequirePermits: true}); err == nil {
		t.Fatal("RequirePermits without Permits was accepted")
	}
}

func TestEvidenceReceipts(t *testing.T) {
	dir := t.TempDir()
	lg, err := evidence.Open(evidence.Config{Dir: dir, Device: "guard-01"})
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, guard.Config{Evidence: lg}, 0)
	a := session("agent-7f3a")
	r.dev.Acquire(a, time.Minute)
	r.dev.Write(a, mhp.WriteRequest{Name: "sp", Value: 5.0, CommandID: "c1"})
	r.dev.Write(a, mhp.WriteRequest{Name: "sp", Value: 500.0})             // refused: limits
	r.dev.Write(a, mhp.WriteRequest{Name: "sp", Value: 5.0, DryRun: true}) // no receipt
	inv, _ := r.dev.Invoke(a, mhp.InvokeRequest{Name: "go"})
	waitFinished(t, r.drv, inv.Job.ID)
	r.dev.EStop(session("someone"), "smoke")
	r.dev.Reset(a)
	r.dev.Release(a)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.dev.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	p, err := lg.List(evidence.Query{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var methods []string
	byMethod := map[string][]evidence.Entry{}
	for _, e := range p.Entries {
		methods = append(methods, e.Method+":"+e.Outcome)
		byMethod[e.Method] = append(byMethod[e.Method], e)
	}
	want := map[string]int{"session/acquire": 1, "settings/write": 2, "actions/invoke": 1, mhp.NotifyJobsFinished: 1,
		"safety/estop": 1, mhp.NotifySafetyEStop: 1, "safety/reset": 1, "session/release": 1}
	for m, n := range want {
		if len(byMethod[m]) != n {
			t.Fatalf("receipts %v: want %d of %s", methods, n, m)
		}
	}
	w := byMethod["settings/write"]
	if w[0].Outcome != evidence.OutcomeOK || w[0].CommandID != "c1" || w[0].Session != "agent-7f3a" || w[0].ParamsDigest == "" {
		t.Fatalf("write receipt = %+v", w[0])
	}
	if w[1].Outcome != evidence.OutcomeRefused || w[1].Error == nil || w[1].Error.Code != mhp.CodeLimitViolation {
		t.Fatalf("refusal receipt = %+v", w[1])
	}
	if byMethod["safety/estop"][0].Session != "someone" {
		t.Fatalf("estop receipt names %q", byMethod["safety/estop"][0].Session)
	}
	if j := byMethod[mhp.NotifyJobsFinished][0]; j.Job != inv.Job.ID || j.Outcome != "done" {
		t.Fatalf("job end receipt = %+v", j)
	}
	lg.Close()
	if rep, err := evidence.Verify(dir, nil); err != nil || !rep.OK {
		t.Fatalf("verify = %+v, %v", rep, err)
	}
}

func TestEvidenceFailureRefusesActuationNotEStop(t *testing.T) {
	lg, err := evidence.Open(evidence.Config{Dir: t.TempDir(), Device: "guard-01"})
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, guard.Config{Evidence: lg}, 0)
	lg.Close() // the log is gone (disk failure, closed)
	_, err = r.dev.Write(session("a"), mhp.WriteRequest{Name: "sp", Value: 1.0})
	if e, _ := mhp.AsError(err); e == nil || e.Data["outcome"] != mhp.OutcomeNotStarted || r.writes.Load() != 0 {
		t.Fatalf("write without evidence: %v (writes %d), want refused not_started", err, r.writes.Load())
	}
	if res, err := r.dev.EStop(session("a"), "x"); err != nil || res.State != mhp.StateEStop {
		t.Fatalf("estop without evidence: %+v %v, want it to work", res, err)
	}
}

func waitFinished(t *testing.T, dev mhp.Device, id string) {
	t.Helper()
	conformance.EventuallyWithin(t, "job "+id+" to finish", 10*time.Second, func() bool {
		j, err := dev.Job(context.Background(), id)
		return err == nil && j.State.Terminal()
	})
}
