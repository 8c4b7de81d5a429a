package binding_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/conformance"
)

// TestWriteGatesInOrderWithoutInterlocks: a setting without interlocks is
// written in one locked step, yet a write failing several gates is refused
// by the first of them in the six gates' order (state, approval, limits,
// lease, busy), naming it in data.gate; a dry run turns approval, lease and
// busy into notes and is refused only by the state and the limits.
func TestWriteGatesInOrderWithoutInterlocks(t *testing.T) {
	type fails struct{ estop, unapproved, outOfLimits, leasedByOther, busy bool }
	all := fails{true, true, true, true, true}
	for _, tc := range []struct {
		name  string
		f     fails
		dry   bool
		code  mhp.Code // 0: ok
		gate  string
		notes mhp.DryRunNotes
	}{
		{"state first", all, false, mhp.CodeEStopActive, mhp.GateState, mhp.DryRunNotes{}},
		{"then approval", fails{false, true, true, true, true}, false, mhp.CodeApprovalRequired, mhp.GateApproval, mhp.DryRunNotes{}},
		{"then limits", fails{false, false, true, true, true}, false, mhp.CodeLimitViolation, mhp.GateLimits, mhp.DryRunNotes{}},
		{"then lease", fails{false, false, false, true, true}, false, mhp.CodeNotLeased, mhp.GateLease, mhp.DryRunNotes{}},
		{"then busy", fails{false, false, false, false, true}, false, mhp.CodeDeviceBusy, mhp.GateBusy, mhp.DryRunNotes{}},
		{"all pass", fails{}, false, 0, "", mhp.DryRunNotes{}},
		{"dry run in estop", all, true, mhp.CodeEStopActive, mhp.GateState, mhp.DryRunNotes{}},
		{"dry run out of limits", fails{false, true, true, true, true}, true, mhp.CodeLimitViolation, mhp.GateLimits, mhp.DryRunNotes{}},
		{"dry run notes", fails{false, true, false, true, true}, true, 0, "", mhp.DryRunNotes{NeedsApproval: true, LeaseHeldBy: "other", BusyNow: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hold := make(chan struct{})
			var wrote int
			drv, err := binding.New(binding.Config{
				Device: mhp.DeviceInfo{ID: "order-01", Class: "test"},
				Logger: slog.New(slog.DiscardHandler),
				EStop:  func(context.Context) error { return nil },
				Settings: []binding.Setting{{Spec: mhp.Setting{Name: "q", Type: mhp.TypeNumber, Limits: mhp.Range(0, 10),
					Approval: mhp.ApprovalConfirm}, Write: func(context.Context, any) (binding.WriteStatus, error) {
					wrote++
					return binding.Applied, nil
				}}},
				Actions: []binding.Action{{Spec: mhp.Action{Name: "hold", Cancellable: true},
					Run: func(ctx context.Context, _ *binding.Job) (any, error) {
						select {
						case <-hold:
						case <-ctx.Done():
						}
						return nil, nil
					}}},
				JobGrace: time.Second,
			})
			if err != nil {
				t.Fatal(err)
			}
			defer drv.Close()
			defer close(hold)
			me, other := mhp.WithSession(context.Background(), "me"), mhp.WithSession(context.Background(), "other")
			holder := me
			if tc.f.leasedByOther {
				holder = other
			}
			if _, err := drv.Acquire(holder, time.Hour); err != nil {
				t.Fatal(err)
			}
			if tc.f.busy {
				res, err := drv.Invoke(holder, mhp.InvokeRequest{Name: "hold"})
				if err != nil {
					t.Fatal(err)
				}
				conformance.Eventually(t, "the job to run", func() bool {
					j, err := drv.Job(holder, res.Job.ID)
					return err == nil && j.State == mhp.JobRunning
				})
			}
			if tc.f.estop {
				if _, err := drv.EStop(holder, "test"); err != nil {
					t.Fatal(err)
				}
			}
			v := 5.0
			if tc.f.outOfLimits {
				v = 50
			}
			res, err := drv.Write(me, mhp.WriteRequest{Name: "q", Value: v, Approved: !tc.f.unapproved, DryRun: tc.dry})
			if tc.code == 0 {
				if err != nil {
					t.Fatalf("write: %v", err)
				}
				var notes mhp.DryRunNotes
				if res.Notes != nil {
					notes = *res.Notes
				}
				if notes != tc.notes {
					t.Fatalf("notes %+v, want %+v", notes, tc.notes)
				}
			} else {
				e := conformance.ExpectCode(t, err, tc.code)
				if e.Data[mhp.DataGate] != tc.gate {
					t.Fatalf("refused at gate %v, want %s (%s)", e.Data[mhp.DataGate], tc.gate, e.Message)
				}
			}
			if want := map[bool]int{true: 1, false: 0}[tc.code == 0 && !tc.dry]; wrote != want {
				t.Fatalf("the hook ran %d times, want %d", wrote, want)
			}
		})
	}
}
