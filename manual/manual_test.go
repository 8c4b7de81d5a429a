package manual_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/auth"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/clock"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/devicepkg"
	"github.com/openmhp/mhp-go/evidence"
	"github.com/openmhp/mhp-go/guard"
	"github.com/openmhp/mhp-go/manual"
)

type rig struct {
	dev   *devicepkg.Device
	agent mhp.Device
	clk   *clock.Manual
	mu    sync.Mutex
	notes []mhp.Notification
}

func build(t *testing.T, refine func(*binding.Config) error) *rig {
	t.Helper()
	pkg, err := devicepkg.Load(filepath.Join("testdata", "centrifuge-01"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pkg.Close() })
	r := &rig{clk: clock.NewManual(time.Now())}
	r.dev, err = manual.Build(pkg, manual.Options{Clock: r.clk, Refine: refine})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.dev.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.dev.Close() })
	stop := r.dev.Listen(func(n mhp.Notification) { r.mu.Lock(); r.notes = append(r.notes, n); r.mu.Unlock() })
	t.Cleanup(stop)
	r.agent = mhp.AsSession(r.dev, "agent-1")
	return r
}

// alice is the operator as the transport identifies her.
func alice() context.Context {
	return auth.WithIdentity(mhp.WithSession(context.Background(), "console-7"),
		auth.Identity{Name: "alice", Role: auth.RoleOperator, Via: "console"})
}

func (r *rig) call(t *testing.T, ctx context.Context, method string, params any) (map[string]any, error) {
	t.Helper()
	fn, ok := mhp.OperatorExtensions(r.dev)[method]
	if !ok {
		t.Fatalf("%s is not an operator method of the device", method)
	}
	raw, _ := json.Marshal(params)
	res, err := fn(ctx, raw)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	b, _ := json.Marshal(res)
	_ = json.Unmarshal(b, &out)
	return out, nil
}

func (r *rig) find(method string, match func(map[string]any) bool) map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range r.notes {
		if n.Method == method && match(n.Params) {
			return n.Params
		}
	}
	return nil
}

func (r *rig) job(t *testing.T, id string) *mhp.Job {
	t.Helper()
	j, err := r.agent.Job(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func (r *rig) spin(t *testing.T) string {
	t.Helper()
	if _, err := r.call(t, alice(), mhp.MethodOperatorRecord, map[string]any{"signal": "balanced", "value": true}); err != nil {
		t.Fatal(err)
	}
	res, err := r.agent.Invoke(context.Background(), mhp.InvokeRequest{Name: "spin", Approved: true, Params: map[string]any{"duration_s": 30.0}})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Job.ID
	conformance.Eventually(t, "waiting_operator", func() bool { return r.job(t, id).State == mhp.JobWaitingOperator })
	return id
}

func TestActionWaitsForTheOperator(t *testing.T) {
	r := build(t, nil)
	id := r.spin(t)
	j := r.job(t, id)
	if got, _ := j.Extra["instruction"].(string); got != "Close the lid and start a 30 s spin; report done when it stops." {
		t.Fatalf("instruction %q", got)
	}
	if n := r.find(mhp.NotifyOperatorInstruct, func(p map[string]any) bool { return p["job"] == id }); n == nil {
		t.Fatal("no notifications/operator/instruction for the job")
	}
	// An agent cannot answer: the methods are operator-only on the wire
	// (transport), and the answer's value types are checked.
	if _, err := r.call(t, alice(), mhp.MethodOperatorAnswer, map[string]any{"job": id, "outcome": "done", "values": map[string]any{"lid_closed": "yes"}}); err == nil {
		t.Fatal("a string recorded for a boolean signal was accepted")
	}
	if r.job(t, id).State != mhp.JobWaitingOperator {
		t.Fatal("a refused answer ended the job")
	}
	out, err := r.call(t, alice(), mhp.MethodOperatorAnswer, map[string]any{"job": id, "outcome": "done", "note": "ran clean",
		"values": map[string]any{"lid_closed": true}})
	if err != nil {
		t.Fatal(err)
	}
	if by := out["by"].(map[string]any); by["name"] != "alice" || by["role"] != "operator" || by["via"] != "console" {
		t.Fatalf("answer by %v", by)
	}
	j = r.job(t, id)
	res, _ := j.Result.(map[string]any)
	if j.State != mhp.JobDone || res["answered_by"] != "alice" || res["note"] != "ran clean" {
		t.Fatalf("job %+v", j)
	}
	fin := r.find(mhp.NotifyJobsFinished, func(p map[string]any) bool { jj, _ := p["job"].(mhp.Job); return jj.ID == id })
	if fin == nil {
		t.Fatal("no jobs/finished")
	}
	if ans := r.find(mhp.NotifyOperatorAnswer, func(p map[string]any) bool { return p["job"] == id }); ans == nil || ans["by"] != "alice" {
		t.Fatalf("operator/answer notification %v", ans)
	}
	// What the person recorded is now a reading.
	rd, _ := r.agent.Read(context.Background(), []string{"lid_closed"})
	if rd.Values["lid_closed"] != true {
		t.Fatalf("lid_closed %v", rd.Values)
	}
	// A second answer is refused.
	if _, err := r.call(t, alice(), mhp.MethodOperatorAnswer, map[string]any{"job": id, "outcome": "done"}); err == nil {
		t.Fatal("a finished job was answered again")
	}
}

func TestFailedAndCouldNot(t *testing.T) {
	r := build(t, nil)
	id := r.spin(t)
	if _, err := r.call(t, alice(), mhp.MethodOperatorAnswer, map[string]any{"job": id, "outcome": "failed", "note": "imbalance alarm"}); err != nil {
		t.Fatal(err)
	}
	if j := r.job(t, id); j.State != mhp.JobFailed || j.Outcome != mhp.OutcomeFailed || !strings.Contains(j.Error.Message, "imbalance alarm") {
		t.Fatalf("failed: %+v", j)
	}
	id = r.spin(t)
	if _, err := r.call(t, alice(), mhp.MethodOperatorAnswer, map[string]any{"job": id, "outcome": "could_not", "note": "no tubes"}); err != nil {
		t.Fatal(err)
	}
	if j := r.job(t, id); j.State != mhp.JobFailed || j.Outcome != mhp.OutcomeNotStarted {
		t.Fatalf("could_not: %+v", j)
	}
	if s := r.dev.State(); s != mhp.StateIdle {
		t.Fatalf("state %s after reported failures, want idle", s)
	}
}

func TestCancelIsAskedOfTheOperator(t *testing.T) {
	r := build(t, nil)
	id := r.spin(t)
	if _, err := r.agent.CancelJob(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	conformance.Eventually(t, "cancel instruction", func() bool {
		return r.find(mhp.NotifyOperatorInstruct, func(p map[string]any) bool { return p["kind"] == "cancel" && p["job"] == id }) != nil
	})
	if r.job(t, id).State.Terminal() {
		t.Fatal("the job ended before the person answered the cancel")
	}
	if _, err := r.call(t, alice(), mhp.MethodOperatorAnswer, map[string]any{"job": id, "outcome": "cancelled"}); err != nil {
		t.Fatal(err)
	}
	conformance.Eventually(t, "cancelled", func() bool { return r.job(t, id).State == mhp.JobCancelled })
}

func TestSettingIsARequestUntilConfirmed(t *testing.T) {
	r := build(t, nil)
	res, err := r.agent.Write(context.Background(), mhp.WriteRequest{Name: "speed_rpm", Value: 3000.0})
	if err != nil {
		t.Fatal(err)
	}
	if res.Applied || res.Status != "sent" {
		t.Fatalf("write %+v, want applied:false status sent", res)
	}
	if n := r.find(mhp.NotifyOperatorInstruct, func(p map[string]any) bool { return p["setting"] == "speed_rpm" }); n == nil ||
		n["text"] != "Set the speed dial to 3000 rpm." {
		t.Fatalf("instruction %v", n)
	}
	pend, err := r.call(t, alice(), mhp.MethodOperatorPending, nil)
	if err != nil || len(pend["settings"].([]any)) != 1 {
		t.Fatalf("pending %v %v", pend, err)
	}
	out, err := r.call(t, alice(), mhp.MethodOperatorAnswer, map[string]any{"setting": "speed_rpm", "outcome": "done",
		"values": map[string]any{"speed_rpm": 2950.0}})
	if err != nil || out["applied"] != true || out["value"] != 2950.0 {
		t.Fatalf("confirm %v %v", out, err)
	}
	ch := r.find(mhp.NotifySettingsChanged, func(p map[string]any) bool { return p["name"] == "speed_rpm" && p["applied"] == true })
	if ch == nil || ch["value"] != 2950.0 || ch["requested"] != 3000.0 || ch["by"] != "alice" {
		t.Fatalf("settings/changed %v", ch)
	}
}

func TestReadingsAgeOut(t *testing.T) {
	r := build(t, nil)
	rd, _ := r.agent.Read(context.Background(), []string{"balanced"})
	if rd.Unavailable["balanced"] == "" {
		t.Fatal("a signal nobody recorded read a value")
	}
	if _, err := r.call(t, alice(), mhp.MethodOperatorRecord, map[string]any{"signal": "balanced", "value": true}); err != nil {
		t.Fatal(err)
	}
	r.clk.Advance(30 * time.Second)
	rd, _ = r.agent.Read(context.Background(), []string{"balanced"})
	if rd.Values["balanced"] != true {
		t.Fatalf("30 s old reading: %+v", rd)
	}
	r.clk.Advance(31 * time.Second) // max_age_s 60 for balanced
	rd, _ = r.agent.Read(context.Background(), []string{"balanced"})
	if rd.Values["balanced"] != nil || !strings.Contains(rd.Unavailable["balanced"], "alice") {
		t.Fatalf("61 s old reading: %+v", rd)
	}
	// ... so the interlock on it is open again.
	_, err := r.agent.Invoke(context.Background(), mhp.InvokeRequest{Name: "spin", Approved: true, Params: map[string]any{"duration_s": 5.0}})
	if me, _ := mhp.AsError(err); me == nil || me.Code != mhp.CodeInterlockOpen {
		t.Fatalf("spin on a stale balanced reading: %v, want InterlockOpen", err)
	}
}

func TestEStopIsARequest(t *testing.T) {
	r := build(t, nil)
	res, err := r.agent.EStop(context.Background(), "smoke")
	if err != nil {
		t.Fatal(err)
	}
	if res.Stopped || !strings.Contains(res.StopError, "Press the red STOP button") {
		t.Fatalf("estop %+v, want stopped:false naming the request", res)
	}
	if _, err := r.agent.Reset(context.Background()); err == nil {
		t.Fatal("reset before the person confirmed the stop")
	}
	if _, err := r.call(t, alice(), mhp.MethodOperatorAnswer, map[string]any{"estop": true, "outcome": "done"}); err != nil {
		t.Fatal(err)
	}
	// Reset verifies every interlock signal (binding's recovery check): on
	// an operator-run device that is a reading the person took, so one
	// nobody has recorded keeps the device stopped and the refusal names it.
	_, err = r.agent.Reset(context.Background())
	if err == nil || !strings.Contains(err.Error(), "balanced") {
		t.Fatalf("reset with the interlock never recorded: %v, want a refusal naming balanced", err)
	}
	if _, err := r.call(t, alice(), mhp.MethodOperatorRecord, map[string]any{"signal": "balanced", "value": true}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.agent.Reset(context.Background()); err != nil {
		t.Fatalf("reset after the confirmation and a recorded interlock: %v", err)
	}
}

func TestWaitingJobTimesOut(t *testing.T) {
	r := build(t, func(c *binding.Config) error {
		for i := range c.Actions {
			c.Actions[i].Timeout = 100 * time.Millisecond
		}
		return nil
	})
	id := r.spin(t)
	conformance.Eventually(t, "timed out", func() bool { return r.job(t, id).State.Terminal() })
	if j := r.job(t, id); j.State != mhp.JobFailed || j.Outcome != mhp.OutcomeUnknown || !strings.Contains(j.Error.Message, "no answer") {
		t.Fatalf("timed-out job %+v", j)
	}
}

// TestAnswerInEvidence: the person's answer is a receipt under their name.
func TestAnswerInEvidence(t *testing.T) {
	r := build(t, nil)
	log, err := evidence.Open(evidence.Config{Dir: t.TempDir(), Device: "centrifuge-01", Sync: evidence.SyncNever})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = log.Close() })
	g, err := guard.New(r.dev, guard.Config{Evidence: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	id := r.spin(t)
	if _, err := r.call(t, alice(), mhp.MethodOperatorAnswer, map[string]any{"job": id, "outcome": "done"}); err != nil {
		t.Fatal(err)
	}
	conformance.Eventually(t, "the answer's receipt", func() bool {
		page, err := log.List(evidence.Query{Session: "alice"})
		if err != nil {
			return false
		}
		for _, e := range page.Entries {
			if e.Method == mhp.NotifyOperatorAnswer {
				return true
			}
		}
		return false
	})
}
