package binding_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/clock"
	"github.com/openmhp/mhp-go/conformance"
)

// Tests that kill the mutations of issue 29 in the gates, jobs and safety
// paths: each names the bug it catches. They drive the driver through its
// public methods only, so they hold the guarantee whatever the write path,
// the timers or the reset verification look like inside.

// TestInterlockReadTooLateRefusesOnBothPaths: an interlock that reads true,
// but only after InterlockTimeout, is open on the invoke path as on the write
// path (a value read too late is too old to act on); one read in time
// passes. Catches the invoke path acting on a late true (issue 29, item 1).
func TestInterlockReadTooLateRefusesOnBothPaths(t *testing.T) {
	for _, tc := range []struct {
		name string
		took time.Duration // how far the device clock moves during the read
		open bool
	}{
		{"in time", time.Second, false},
		{"too late", 3 * time.Second, true},
	} {
		for _, path := range []string{"invoke", "write"} {
			t.Run(path+"/"+tc.name, func(t *testing.T) {
				clk := clock.NewManual(time.Unix(1_800_000_000, 0))
				var acted atomic.Int32
				drv, err := binding.New(binding.Config{
					Device: mhp.DeviceInfo{ID: "late-01", Class: "test"},
					Clock:  clk,
					Logger: slog.New(slog.DiscardHandler),
					Signals: []binding.Signal{{Spec: mhp.Signal{Name: "door_closed", Type: mhp.TypeBoolean},
						Read: func(context.Context) (binding.Sample, error) {
							clk.Advance(tc.took) // a slow backend: the answer comes this much later
							return binding.Sample{Value: true}, nil
						}}},
					Settings: []binding.Setting{{Spec: mhp.Setting{Name: "sp", Type: mhp.TypeNumber, Interlocks: []string{"door_closed"}},
						Write: func(context.Context, any) (binding.WriteStatus, error) { acted.Add(1); return binding.Applied, nil }}},
					Actions: []binding.Action{{Spec: mhp.Action{Name: "go", Interlocks: []string{"door_closed"}},
						Run: func(context.Context, *binding.Job) (any, error) { acted.Add(1); return nil, nil }}},
					InterlockTimeout: 2 * time.Second,
					HookTimeout:      time.Hour,
				})
				if err != nil {
					t.Fatal(err)
				}
				defer drv.Close()
				ctx := mhp.WithSession(context.Background(), "s")
				var jobID string
				if path == "invoke" {
					var res *mhp.InvokeResult
					res, err = drv.Invoke(ctx, mhp.InvokeRequest{Name: "go"})
					if res != nil && res.Job != nil {
						jobID = res.Job.ID
					}
				} else {
					_, err = drv.Write(ctx, mhp.WriteRequest{Name: "sp", Value: 1.0})
				}
				if !tc.open {
					if err != nil {
						t.Fatalf("%s with the interlock read true in %s: %v", path, tc.took, err)
					}
					if jobID != "" {
						conformance.WaitJob(t, drv, jobID, 10*time.Second, nil)
					}
					if acted.Load() != 1 {
						t.Fatalf("the backend acted %d times, want once", acted.Load())
					}
					return
				}
				e := conformance.ExpectCode(t, err, mhp.CodeInterlockOpen)
				if e.Data[mhp.DataInterlock] != "door_closed" || e.Data[mhp.DataGate] != mhp.GateInterlocks {
					t.Fatalf("refusal data %v, want interlock door_closed at the interlocks gate", e.Data)
				}
				if jobs, _ := drv.Jobs(ctx, mhp.JobsRequest{}); len(jobs) != 0 || acted.Load() != 0 {
					t.Fatalf("a %s read after %s acted %d times (jobs %+v)", path, tc.took, acted.Load(), jobs)
				}
			})
		}
	}
}

// TestLatchDuringInvokeInterlockReadsKeepsTheJobOut: an estop (or a fault)
// that lands while an invoke reads its interlocks refuses the invoke: no job
// is registered and Run is never called. Catches job admission skipping its
// state re-check (issue 29, item 2; the stop-is-last-word race test covers
// writes only).
func TestLatchDuringInvokeInterlockReadsKeepsTheJobOut(t *testing.T) {
	for _, tc := range []struct {
		name  string
		latch func(d *binding.Driver)
		want  mhp.Code
		state mhp.DeviceState
	}{
		{"estop", func(d *binding.Driver) {
			d.EStop(mhp.WithSession(context.Background(), "op"), "during the interlock read")
		},
			mhp.CodeEStopActive, mhp.StateEStop},
		{"fault", func(d *binding.Driver) { d.Fault("the backend alarmed during the interlock read") },
			mhp.CodeDeviceFault, mhp.StateFault},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var drv *binding.Driver
			var runs atomic.Int32
			var err error
			drv, err = binding.New(binding.Config{
				Device: mhp.DeviceInfo{ID: "admit-01", Class: "test"},
				Logger: slog.New(slog.DiscardHandler),
				Signals: []binding.Signal{{Spec: mhp.Signal{Name: "door_closed", Type: mhp.TypeBoolean},
					Read: func(context.Context) (binding.Sample, error) {
						tc.latch(drv) // lands after the state gate, before admission
						return binding.Sample{Value: true}, nil
					}}},
				Actions: []binding.Action{{Spec: mhp.Action{Name: "go", Interlocks: []string{"door_closed"}},
					Run: func(context.Context, *binding.Job) (any, error) { runs.Add(1); return nil, nil }}},
				EStop: func(context.Context) error { return nil },
			})
			if err != nil {
				t.Fatal(err)
			}
			defer drv.Close()
			ctx := mhp.WithSession(context.Background(), "agent")
			res, err := drv.Invoke(ctx, mhp.InvokeRequest{Name: "go"})
			if err == nil {
				t.Fatalf("invoke admitted job %+v although the device latched %s during its interlock reads", res.Job, tc.name)
			}
			conformance.ExpectCode(t, err, tc.want)
			if jobs, _ := drv.Jobs(ctx, mhp.JobsRequest{}); len(jobs) != 0 {
				t.Fatalf("jobs %+v registered after the %s", jobs, tc.name)
			}
			if runs.Load() != 0 || drv.State() != tc.state {
				t.Fatalf("Run called %d times, state %s; want never and %s", runs.Load(), drv.State(), tc.state)
			}
		})
	}
}

// TestResetInFaultRefusedWhileAJobIsActive: 003 section 5.6, safety/reset
// "MUST fail with DeviceBusy while any job is still active". In fault
// (unlike estop) the job is not cut off, so only the active-job check stands
// between the reset and a device reset under a running job. Catches that
// check removed (issue 29, item 3).
func TestResetInFaultRefusedWhileAJobIsActive(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	drv, err := binding.New(binding.Config{
		Device: mhp.DeviceInfo{ID: "busy-reset-01", Class: "test"},
		Logger: slog.New(slog.DiscardHandler),
		Actions: []binding.Action{{Spec: mhp.Action{Name: "work"},
			Run: func(ctx context.Context, j *binding.Job) (any, error) {
				started <- struct{}{}
				select {
				case <-release:
					return "done", nil
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}}},
		EStop: func(context.Context) error { return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	ctx := mhp.WithSession(context.Background(), "agent")
	res, err := drv.Invoke(ctx, mhp.InvokeRequest{Name: "work"})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	drv.Fault("a PLC alarm while the job runs")
	for range 2 {
		_, err := drv.Reset(ctx)
		e := conformance.ExpectCode(t, err, mhp.CodeDeviceBusy)
		if e.Data["active"] == nil {
			t.Errorf("the busy refusal does not say how many jobs are active: %v", e.Data)
		}
		if drv.State() != mhp.StateFault {
			t.Fatalf("state %s after a refused reset, want fault", drv.State())
		}
	}
	if j, _ := drv.Job(ctx, res.Job.ID); j == nil || j.State.Terminal() {
		t.Fatalf("job %+v ended; the refused reset must leave it running", j)
	}
	close(release)
	conformance.WaitJob(t, drv, res.Job.ID, 10*time.Second, nil)
	if _, err := drv.Reset(ctx); err != nil || drv.State() != mhp.StateIdle {
		t.Fatalf("reset once the job ended: %v (state %s), want idle", err, drv.State())
	}
}

// TestResetRefusedWhileAStuckReassertionRuns: a stop re-assertion whose
// hook ignores its context past StopTimeout is still the estop's last word:
// a reset waits for it up to StopTimeout, then is refused DeviceBusy with
// data.reason "stop_reasserting", and succeeds once the re-assertion ended.
// Catches the reset going through while the stop is being re-asserted
// (issue 29, item 4). Runs in a synctest bubble: StopTimeout passes at once.
func TestResetRefusedWhileAStuckReassertionRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hookIn, hookOut, release := make(chan struct{}), make(chan struct{}), make(chan struct{})
		var stops, writes atomic.Int32
		drv, err := binding.New(binding.Config{
			Device: mhp.DeviceInfo{ID: "reassert-02", Class: "test"},
			Logger: slog.New(slog.DiscardHandler),
			Settings: []binding.Setting{{Spec: mhp.Setting{Name: "sp", Type: mhp.TypeNumber},
				Write: func(context.Context, any) (binding.WriteStatus, error) {
					if writes.Add(1) == 1 {
						close(hookIn)
						<-hookOut // an uninterruptible vendor call
					}
					return binding.Applied, nil
				}}},
			StopTimeout: 5 * time.Second,
			EStop: func(context.Context) error {
				if stops.Add(1) == 2 {
					<-release // the re-assertion hangs, ignoring its context
				}
				return nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer drv.Close()
		defer close(release)
		ctx := mhp.WithSession(context.Background(), "s")
		werr := make(chan error, 1)
		go func() { _, err := drv.Write(ctx, mhp.WriteRequest{Name: "sp", Value: 1.0}); werr <- err }()
		<-hookIn
		if r, _ := drv.EStop(ctx, "test"); r == nil || !r.Stopped {
			t.Fatalf("estop answered %+v", r)
		}
		close(hookOut)
		if err := <-werr; mhp.CodeOf(err) != mhp.CodeEStopActive {
			t.Fatalf("cut-off write answered %v, want EStopActive", err)
		}
		synctest.Wait() // the re-assertion is running and stuck
		if n := stops.Load(); n != 2 {
			t.Fatalf("stop hook ran %d times, want the stop and the re-assertion", n)
		}
		start := time.Now()
		_, err = drv.Reset(ctx)
		e := conformance.ExpectCode(t, err, mhp.CodeDeviceBusy)
		if e.Data[mhp.DataReason] != "stop_reasserting" {
			t.Fatalf("reset during the stuck re-assertion refused with %v, want reason stop_reasserting", e.Data)
		}
		if waited := time.Since(start); waited < 5*time.Second {
			t.Fatalf("reset refused after %v, want it to wait StopTimeout (5s) for the re-assertion first", waited)
		}
		if drv.State() != mhp.StateEStop {
			t.Fatalf("state %s after the refused reset, want estop", drv.State())
		}
		// Nothing reaches the backend while the stop is re-asserted, so no
		// call can be cut off during it (why issue 29's item 19 cannot happen).
		if _, err := drv.Write(ctx, mhp.WriteRequest{Name: "sp", Value: 2.0}); mhp.CodeOf(err) != mhp.CodeEStopActive || writes.Load() != 1 {
			t.Fatalf("a write during the re-assertion: %v (backend writes %d), want EStopActive and none", err, writes.Load())
		}
		release <- struct{}{} // the re-assertion ends (the deferred close then finds no reader)
		synctest.Wait()
		if _, err := drv.Reset(ctx); err != nil || drv.State() != mhp.StateIdle {
			t.Fatalf("reset after the re-assertion ended: %v (state %s)", err, drv.State())
		}
	})
}

// TestActionTimeoutBoundsItsRun: an action's own Timeout is its Run's
// deadline; without one, Config.JobTimeout is. Catches Action.Timeout
// ignored (issue 29, item 5).
func TestActionTimeoutBoundsItsRun(t *testing.T) {
	deadlines := make(chan time.Time, 2)
	run := func(ctx context.Context, j *binding.Job) (any, error) {
		dl, ok := ctx.Deadline()
		if !ok {
			dl = time.Time{}
		}
		deadlines <- dl
		return nil, nil
	}
	drv, err := binding.New(binding.Config{
		Device:     mhp.DeviceInfo{ID: "timeout-01", Class: "test"},
		Logger:     slog.New(slog.DiscardHandler),
		JobTimeout: time.Hour,
		Actions: []binding.Action{
			{Spec: mhp.Action{Name: "short", Concurrent: true}, Timeout: time.Minute, Run: run},
			{Spec: mhp.Action{Name: "default", Concurrent: true}, Run: run},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	ctx := mhp.WithSession(context.Background(), "agent")
	for _, tc := range []struct {
		action string
		want   time.Duration
	}{{"short", time.Minute}, {"default", time.Hour}} {
		at := time.Now()
		res, err := drv.Invoke(ctx, mhp.InvokeRequest{Name: tc.action})
		if err != nil {
			t.Fatal(err)
		}
		dl := <-deadlines
		conformance.WaitJob(t, drv, res.Job.ID, 10*time.Second, nil)
		// 10 s of slack either way: the deadline is set between at and now.
		if got := dl.Sub(at); got < tc.want-10*time.Second || got > tc.want+10*time.Second {
			t.Fatalf("action %s: Run's deadline is %v after the invoke, want %v", tc.action, got, tc.want)
		}
	}
}

// TestInvokeInterlockReadBoundedByInterlockTimeout: a live interlock read
// during actions/invoke that hangs (honouring its context) is cut at
// InterlockTimeout and the interlock is open; Run is never called. The
// invoke-path twin of TestWriteInterlockReadBoundedByInterlockTimeout.
func TestInvokeInterlockReadBoundedByInterlockTimeout(t *testing.T) {
	var runs atomic.Int32
	drv, err := binding.New(binding.Config{
		Device: mhp.DeviceInfo{ID: "lock-02", Class: "test"},
		Logger: slog.New(slog.DiscardHandler),
		Signals: []binding.Signal{{Spec: mhp.Signal{Name: "door_closed", Type: mhp.TypeBoolean},
			Read: func(ctx context.Context) (binding.Sample, error) {
				<-ctx.Done() // a backend that never answers but honours its context
				return binding.Sample{}, ctx.Err()
			}}},
		Actions: []binding.Action{{Spec: mhp.Action{Name: "go", Interlocks: []string{"door_closed"}},
			Run: func(context.Context, *binding.Job) (any, error) { runs.Add(1); return nil, nil }}},
		InterlockTimeout: 20 * time.Millisecond,
		JobTimeout:       time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	res := make(chan error, 1)
	go func() {
		_, err := drv.Invoke(mhp.WithSession(context.Background(), "s"), mhp.InvokeRequest{Name: "go"})
		res <- err
	}()
	select {
	case err := <-res:
		if e := conformance.ExpectCode(t, err, mhp.CodeInterlockOpen); e.Data[mhp.DataInterlock] != "door_closed" {
			t.Fatalf("refusal data %v, want interlock door_closed", e.Data)
		}
	case <-time.After(10 * time.Second): // 500x InterlockTimeout
		t.Fatal("invoke still blocked on its interlock read 10s after InterlockTimeout (20ms)")
	}
	if runs.Load() != 0 {
		t.Fatal("Run was called on an unread interlock")
	}
}
