package guard_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/clock"
	"github.com/openmhp/mhp-go/guard"
)

// scripted is a device whose settings/write answers with a scripted error
// after it reached the "backend" (counted): a device that may have acted.
type scripted struct {
	mhp.Device
	acts   atomic.Int32
	answer func() error
}

func (s *scripted) Write(ctx context.Context, req mhp.WriteRequest) (*mhp.WriteResult, error) {
	s.acts.Add(1)
	if err := s.answer(); err != nil {
		return nil, err
	}
	return &mhp.WriteResult{OK: true, Name: req.Name, Value: req.Value, Applied: true, Status: mhp.WriteApplied}, nil
}

func newScripted(t *testing.T, answer func() error) *scripted {
	t.Helper()
	drv, err := binding.New(binding.Config{Device: mhp.DeviceInfo{ID: "guard-01", Class: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drv.Close() })
	return &scripted{Device: drv, answer: answer}
}

// The answers a guarded device may get back from the device it wraps.
var (
	// outcomeUnknown: the backend may have acted (a write whose hook failed
	// after sending, a vendor call that timed out).
	outcomeUnknown = func() error {
		return mhp.Errorf(mhp.CodeDeviceFault, "write sp=5: outcome unknown: timeout").With(mhp.DataOutcome, mhp.OutcomeUnknown)
	}
	// refusedBefore: the state gate refused; nothing reached the backend.
	refusedBefore = func() error {
		return mhp.Errorf(mhp.CodeDeviceFault, "device is in fault (x); safety/reset is needed").With(mhp.DataGate, mhp.GateState)
	}
	// notStarted: refused with an explicit not_started outcome.
	notStarted = func() error {
		return mhp.Errorf(mhp.CodeServerError, "cancelled before it was sent").With(mhp.DataOutcome, mhp.OutcomeNotStarted)
	}
)

// TestCommandIDKeptAfterAnUnknownOutcome: a request whose outcome is unknown
// may have acted, so its command id stays in the window and a retry with the
// same id replays the answer instead of acting again; a request refused
// before acting is dropped, so its retry acts. Catches an unknown-outcome
// DeviceFault counted as "refused before acting" (issue 29, item 6).
func TestCommandIDKeptAfterAnUnknownOutcome(t *testing.T) {
	for _, tc := range []struct {
		name     string
		first    func() error
		wantActs int32 // after the first request and its retry
	}{
		{"outcome unknown: replayed", outcomeUnknown, 1},
		{"refused at the state gate: acts again", refusedBefore, 2},
		{"not started: acts again", notStarted, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			dev := newScripted(t, func() error {
				calls++
				if calls == 1 {
					return tc.first()
				}
				return nil
			})
			g, err := guard.New(dev, guard.Config{})
			if err != nil {
				t.Fatal(err)
			}
			a := session("a")
			w := mhp.WriteRequest{Name: "sp", Value: 5.0, CommandID: "cmd-7"}
			_, err1 := g.Write(a, w)
			if code(err1) != mhp.CodeOf(tc.first()) {
				t.Fatalf("first answer %v, want the device's %v", err1, tc.first())
			}
			_, err2 := g.Write(a, w)
			if n := dev.acts.Load(); n != tc.wantActs {
				t.Fatalf("the retry with the same command id: the device acted %d times, want %d", n, tc.wantActs)
			}
			if tc.wantActs == 1 && (code(err2) != code(err1) || err2.Error() != err1.Error()) {
				t.Fatalf("the retry answered %v, want the first answer %v replayed", err2, err1)
			}
		})
	}
}

// TestPermitSpentAfterAnUnknownOutcome: a single-use operator permit whose
// request may have acted is used up; only a request refused before acting
// gives it back. Catches the permit restored after any error (issue 29,
// item 7: one approval approving twice).
func TestPermitSpentAfterAnUnknownOutcome(t *testing.T) {
	for _, tc := range []struct {
		name      string
		first     func() error
		reusable  bool
		wantActs  int32
		wantCode2 mhp.Code // the second request with the same permit
	}{
		{"outcome unknown: spent", outcomeUnknown, false, 1, mhp.CodeApprovalRequired},
		{"refused at the state gate: usable again", refusedBefore, true, 2, 0},
		{"not started: usable again", notStarted, true, 2, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewManual(time.Unix(1_800_000_000, 0))
			permits := guard.NewPermits("guard-01", clk)
			calls := 0
			dev := newScripted(t, func() error {
				calls++
				if calls == 1 {
					return tc.first()
				}
				return nil
			})
			g, err := guard.New(dev, guard.Config{Permits: permits, Clock: clk, RequirePermits: true})
			if err != nil {
				t.Fatal(err)
			}
			p, err := permits.Issue(guard.PermitRequest{Method: mhp.MethodSettingsWrite, Name: "sp", Value: 5.0, TTL: 60})
			if err != nil {
				t.Fatal(err)
			}
			a := session("agent")
			w := mhp.WriteRequest{Name: "sp", Value: 5.0, PermitID: p.ID}
			if _, err := g.Write(a, w); code(err) != mhp.CodeOf(tc.first()) {
				t.Fatalf("first answer %v, want the device's %v", err, tc.first())
			}
			_, err = g.Write(a, w)
			if code(err) != tc.wantCode2 || dev.acts.Load() != tc.wantActs {
				t.Fatalf("second request with the permit: %v, device acted %d times; want code %d and %d acts",
					err, dev.acts.Load(), tc.wantCode2, tc.wantActs)
			}
			if !tc.reusable {
				if e, _ := mhp.AsError(err); e.Data[mhp.DataReason] != "permit_mismatch" {
					t.Fatalf("the spent permit was refused with %v, want reason permit_mismatch", e.Data)
				}
			}
		})
	}
}
