package conformance

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/openmhp/mhp-go"
)

// The suite's checks tested themselves: a check that cannot fail is a
// defect. Each check is run against a device that commits its fault on
// purpose, under a fakeT that notes the failure without failing this
// test, and against the honest reference device, where it must pass.

// fakeT is a testing.TB that notes failures and skips instead of
// reporting them. Fatal and Skip end the calling goroutine, as they end a
// test's; Cleanup, Name and the rest go to the test that runs the check.
type fakeT struct {
	testing.TB

	mu      sync.Mutex
	failed  bool
	skipped bool
	log     []string
}

func (r *fakeT) note(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = append(r.log, strings.TrimSpace(s))
}

func (r *fakeT) Helper()                    {}
func (r *fakeT) Log(args ...any)            { r.note(fmt.Sprintln(args...)) }
func (r *fakeT) Logf(f string, args ...any) { r.note(fmt.Sprintf(f, args...)) }
func (r *fakeT) Error(args ...any)          { r.Log(args...); r.Fail() }
func (r *fakeT) Errorf(f string, a ...any)  { r.Logf(f, a...); r.Fail() }
func (r *fakeT) Fatal(args ...any)          { r.Log(args...); r.FailNow() }
func (r *fakeT) Fatalf(f string, a ...any)  { r.Logf(f, a...); r.FailNow() }
func (r *fakeT) Skip(args ...any)           { r.Log(args...); r.SkipNow() }
func (r *fakeT) Skipf(f string, a ...any)   { r.Logf(f, a...); r.SkipNow() }

func (r *fakeT) Fail() {
	r.mu.Lock()
	r.failed = true
	r.mu.Unlock()
}

func (r *fakeT) FailNow() { r.Fail(); runtime.Goexit() }

func (r *fakeT) SkipNow() {
	r.mu.Lock()
	r.skipped = true
	r.mu.Unlock()
	runtime.Goexit()
}

func (r *fakeT) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

func (r *fakeT) Skipped() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.skipped
}

func (r *fakeT) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.log, "\n")
}

// recorded runs f on its own goroutine with a fakeT (so Fatal ends only
// it) and returns what the fakeT saw.
func recorded(t *testing.T, f func(tb testing.TB)) *fakeT {
	t.Helper()
	rec := &fakeT{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(rec)
	}()
	<-done
	return rec
}

// fault is a spec violation a faultyDevice commits on purpose.
type fault int

const (
	honest fault = iota
	// estopClaimsStopped: safety/estop answers stopped:true (and no
	// stop_pending) while its stop command still hangs.
	estopClaimsStopped
	// estopHidesPending: safety/estop answers stopped:false without
	// stop_pending while its stop command still hangs.
	estopHidesPending
	// cutOffWriteOK: a write cut off by an estop is answered ok.
	cutOffWriteOK
	// resetWhileBusy: safety/reset answers idle while a job is active.
	resetWhileBusy
)

func (f fault) String() string {
	return [...]string{"honest", "estop_claims_stopped", "estop_hides_pending", "cut_off_write_ok", "reset_while_busy"}[f]
}

// faultyDevice wraps the device under test and commits one fault.
type faultyDevice struct {
	mhp.Device
	fault fault
}

func (d *faultyDevice) EStop(ctx context.Context, reason string) (*mhp.EStopResult, error) {
	r, err := d.Device.EStop(ctx, reason)
	if r == nil || !r.StopPending {
		return r, err
	}
	lie := *r
	switch d.fault {
	case estopClaimsStopped:
		lie.Stopped, lie.StopPending, lie.StopError = true, false, ""
	case estopHidesPending:
		lie.StopPending = false
	}
	return &lie, err
}

func (d *faultyDevice) Write(ctx context.Context, req mhp.WriteRequest) (*mhp.WriteResult, error) {
	r, err := d.Device.Write(ctx, req)
	if d.fault == cutOffWriteOK && mhp.CodeOf(err) == mhp.CodeEStopActive {
		if e, _ := mhp.AsError(err); e.Data[mhp.DataOutcome] != nil {
			return &mhp.WriteResult{OK: true, Name: req.Name, Value: req.Value, Applied: true, Status: mhp.WriteApplied}, nil
		}
	}
	return r, err
}

func (d *faultyDevice) Reset(ctx context.Context) (*mhp.ResetResult, error) {
	r, err := d.Device.Reset(ctx)
	if d.fault == resetWhileBusy && mhp.CodeOf(err) == mhp.CodeDeviceBusy {
		return &mhp.ResetResult{State: mhp.StateIdle, Verified: true}, nil
	}
	return r, err
}

// checkNamed returns the suite's check of that name.
func checkNamed(t *testing.T, name string) check {
	t.Helper()
	for _, ck := range registry() {
		if ck.name == name {
			return ck
		}
	}
	t.Fatalf("no check %q", name)
	return check{}
}

// TestChecksFailAgainstTheirFault: each check fails against a device that
// commits the fault it exists to catch, and passes against the honest
// device. Catches a check that cannot fail (issue 29): item 16,
// estop/answers_while_stop_hangs not looking at stopped / stop_pending; item
// 18, estop/cuts_off_write_in_flight accepting an ok answer; and the check
// added for item 3, reset/refused_while_job_active_in_fault.
func TestChecksFailAgainstTheirFault(t *testing.T) {
	for _, tc := range []struct {
		check string
		fault fault
		why   string // what the failure must mention
	}{
		{"estop/answers_while_stop_hangs", honest, ""},
		{"estop/answers_while_stop_hangs", estopClaimsStopped, "stop_pending"},
		{"estop/answers_while_stop_hangs", estopHidesPending, "stop_pending"},
		{"estop/cuts_off_write_in_flight", honest, ""},
		{"estop/cuts_off_write_in_flight", cutOffWriteOK, "ok"},
		{"reset/refused_while_job_active_in_fault", honest, ""},
		{"reset/refused_while_job_active_in_fault", resetWhileBusy, "DeviceBusy"},
	} {
		t.Run(tc.check+"/"+tc.fault.String(), func(t *testing.T) {
			ck := checkNamed(t, tc.check)
			opt := ck.opt
			opt.Extras = true
			f := MemoryHarness(t, opt)
			f.Device = &faultyDevice{Device: f.Device, fault: tc.fault}
			f.Other = &faultyDevice{Device: f.Other, fault: tc.fault}
			rec := recorded(t, func(tb testing.TB) { runCheck(tb, ck, opt, f) })
			if rec.Skipped() {
				t.Fatalf("%s skipped on the memory harness: %s", tc.check, rec)
			}
			if tc.fault == honest {
				if rec.Failed() {
					t.Fatalf("%s fails against the honest device:\n%s", tc.check, rec)
				}
				return
			}
			if !rec.Failed() {
				t.Fatalf("%s passed against a device that commits fault %s: the check cannot fail\n%s", tc.check, tc.fault, rec)
			}
			if !strings.Contains(rec.String(), tc.why) {
				t.Errorf("%s failed without naming the fault (%q):\n%s", tc.check, tc.why, rec)
			}
			t.Logf("%s against fault %s: %s", tc.check, tc.fault, rec)
		})
	}
}

// TestExpectCodeFailsOnEveryOtherAnswer: ExpectCode passes only an
// *mhp.Error with the wanted code, a message and a ts; a success, a non-MHP
// error and another code fail it. Catches ExpectCode not comparing the code
// (issue 29, item 17), which would turn every refusal check of the suite
// into one that cannot fail.
func TestExpectCodeFailsOnEveryOtherAnswer(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		fail bool
	}{
		{"the code", &mhp.Error{Code: mhp.CodeInterlockOpen, Message: "interlock door_closed is open", TS: 1}, false},
		{"another code", &mhp.Error{Code: mhp.CodeLimitViolation, Message: "value 500 is over 100", TS: 1}, true},
		{"success", nil, true},
		{"a non-MHP error", errors.New("connection reset"), true},
		{"no message", &mhp.Error{Code: mhp.CodeInterlockOpen, TS: 1}, true},
		{"no ts", &mhp.Error{Code: mhp.CodeInterlockOpen, Message: "interlock door_closed is open"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got *mhp.Error
			rec := recorded(t, func(tb testing.TB) { got = ExpectCode(tb, tc.err, mhp.CodeInterlockOpen) })
			if rec.Failed() != tc.fail {
				t.Fatalf("ExpectCode(%v, InterlockOpen): failed %v, want %v\n%s", tc.err, rec.Failed(), tc.fail, rec)
			}
			if !tc.fail && (got == nil || got.Code != mhp.CodeInterlockOpen) {
				t.Fatalf("ExpectCode returned %v, want the error", got)
			}
		})
	}
}
