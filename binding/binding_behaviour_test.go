package binding_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
)

// stuckDevice has a setting whose Write never returns on its own: it ignores
// its context and waits on a channel only the test's cleanup closes (a vendor
// call hung forever), and an action whose Run ignores cancels and completes
// when told.
type stuckDevice struct {
	drv      *binding.Driver
	inHook   chan struct{} // closed when the stuck write is inside its hook
	forever  chan struct{} // closed only by cleanup
	finish   chan struct{} // lets the stubborn action complete
	started  chan struct{} // closed when the stubborn action runs
	stops    atomic.Int32
	hookOnce sync.Once
	runOnce  sync.Once
}

func newStuckDevice(t *testing.T) *stuckDevice {
	t.Helper()
	s := &stuckDevice{inHook: make(chan struct{}), forever: make(chan struct{}),
		finish: make(chan struct{}), started: make(chan struct{})}
	drv, err := binding.New(binding.Config{
		Device: mhp.DeviceInfo{ID: "stuck-01", Class: "test"},
		Signals: []binding.Signal{{Spec: mhp.Signal{Name: "door_closed", Type: mhp.TypeBoolean},
			Read: func(context.Context) (binding.Sample, error) { return binding.Sample{Value: true}, nil }}},
		Settings: []binding.Setting{
			{Spec: mhp.Setting{Name: "hang", Type: mhp.TypeNumber, Limits: mhp.Range(0, 100)},
				Write: func(ctx context.Context, v any) (binding.WriteStatus, error) {
					s.hookOnce.Do(func() { close(s.inHook) })
					<-s.forever // ignores ctx: blocked forever
					return binding.Applied, nil
				}},
		},
		Actions: []binding.Action{{Spec: mhp.Action{Name: "stubborn", Cancellable: true},
			Run: func(ctx context.Context, j *binding.Job) (any, error) {
				s.runOnce.Do(func() { close(s.started) })
				select { // ignores ctx: the backend acknowledges a cancel but runs on
				case <-s.finish:
				case <-s.forever:
				}
				return map[string]any{"completed": true}, nil
			}}},
		EStop: func(context.Context) error { s.stops.Add(1); return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		close(s.forever)
		drv.Close()
	})
	s.drv = drv
	return s
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// TestBehaviourEStopWithin50msWhileWriteBlockedForever: safety/estop answers
// within 50 ms while another write sits in a hook that never returns (not
// even when its context is cancelled).
func TestBehaviourEStopWithin50msWhileWriteBlockedForever(t *testing.T) {
	s := newStuckDevice(t)
	a := mhp.AsSession(s.drv, "a")
	b := mhp.AsSession(s.drv, "b")
	go func() { _, _ = a.Write(context.Background(), mhp.WriteRequest{Name: "hang", Value: 5.0}) }()
	waitClosed(t, s.inHook, "the write to enter its hook")

	type answer struct {
		r   *mhp.EStopResult
		err error
	}
	done := make(chan answer, 1)
	deadline := time.NewTimer(50 * time.Millisecond)
	defer deadline.Stop()
	go func() {
		r, err := b.EStop(context.Background(), "hung vendor call")
		done <- answer{r, err}
	}()
	select {
	case got := <-done:
		if got.err != nil || got.r.State != mhp.StateEStop || !got.r.Stopped {
			t.Fatalf("estop answer %+v, %v; want stopped in estop", got.r, got.err)
		}
	case <-deadline.C:
		t.Fatal("safety/estop did not return within 50 ms while a write was blocked forever in its hook")
	}
	if n := s.stops.Load(); n != 1 {
		t.Fatalf("stop hook ran %d times, want 1", n)
	}
	if st := s.drv.State(); st != mhp.StateEStop {
		t.Fatalf("state %s, want estop", st)
	}
	// The hung hook still holds the request lock; reads and ping still answer.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := b.Read(ctx, nil); err != nil {
		t.Fatalf("read while a write hangs: %v", err)
	}
	if p, err := b.Ping(ctx); err != nil || p.State != mhp.StateEStop {
		t.Fatalf("ping while a write hangs: %+v, %v", p, err)
	}
}

// TestBehaviourIgnoredCancelEndsDoneNeverCancelled: a cancel the backend
// acknowledges but does not act on leaves the job running, and when the work
// completes the job ends done; at no point, in status or notification, is it
// reported cancelled.
func TestBehaviourIgnoredCancelEndsDoneNeverCancelled(t *testing.T) {
	s := newStuckDevice(t)
	a := mhp.AsSession(s.drv, "a")
	var mu sync.Mutex
	var seen []mhp.JobState
	stop := s.drv.Listen(func(n mhp.Notification) {
		if j, ok := n.Params["job"].(mhp.Job); ok {
			mu.Lock()
			seen = append(seen, j.State)
			mu.Unlock()
		}
	})
	defer stop()
	ctx := context.Background()
	res, err := a.Invoke(ctx, mhp.InvokeRequest{Name: "stubborn"})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Job.ID
	waitClosed(t, s.started, "the action to start")
	j, err := a.CancelJob(ctx, id)
	if err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if j.State.Terminal() || !j.CancelRequested {
		t.Fatalf("cancel answered %+v, want the job still running with cancel_requested", j)
	}
	// The backend runs on: the job stays running, not cancelled.
	if j, _ := a.Job(ctx, id); j.State != mhp.JobRunning {
		t.Fatalf("job %s after an ignored cancel, want running", j.State)
	}
	close(s.finish)
	if j = waitJob(t, a, id); j.State == mhp.JobCancelled {
		t.Fatal("job reported cancelled although the backend completed the work")
	}
	if j.State != mhp.JobDone || !j.CancelRequested {
		t.Fatalf("job %+v, want done with cancel_requested", j)
	}
	if r, _ := j.Result.(map[string]any); r["completed"] != true {
		t.Fatalf("result %v, want the backend's result", j.Result)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, st := range seen {
		if st == mhp.JobCancelled {
			t.Fatalf("a notification reported the job cancelled: %v", seen)
		}
	}
	if len(seen) == 0 || seen[len(seen)-1] != mhp.JobDone {
		t.Fatalf("job notifications %v, want the last to be done", seen)
	}
}
