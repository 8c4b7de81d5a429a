package binding_test

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/conformance"
)

// TestPauseNeverFollowsTheStop: the stop is the last word the backend hears
// (003 §5.6). A pause asked after an estop is refused EStopActive and never
// reaches the backend; a pause in flight when the estop lands is cut off
// like a write: it is answered EStopActive and the stop is sent again after
// it returned.
func TestPauseNeverFollowsTheStop(t *testing.T) {
	var stops, pauses atomic.Int32
	var mu sync.Mutex
	var events []string // what the backend heard, in order
	heard := func(what string) { mu.Lock(); events = append(events, what); mu.Unlock() }
	last := func() string { mu.Lock(); defer mu.Unlock(); return events[len(events)-1] }
	pausing := make(chan struct{}, 1)
	release := make(chan struct{})
	runDone := make(chan struct{})
	var letGo sync.Once
	defer letGo.Do(func() { close(runDone) })
	holdPause := atomic.Bool{}
	drv, err := binding.New(binding.Config{
		Device: mhp.DeviceInfo{ID: "pause-estop-01", Class: "test"},
		Logger: slog.New(slog.DiscardHandler),
		Actions: []binding.Action{{Spec: mhp.Action{Name: "work", Pausable: true},
			// A backend that runs on after the stop until it lets go.
			Run: func(ctx context.Context, j *binding.Job) (any, error) {
				<-runDone
				return "ran on", nil
			},
			Pause: func(ctx context.Context, j *binding.Job) error {
				pauses.Add(1)
				if holdPause.Load() {
					pausing <- struct{}{}
					<-release
				}
				heard("pause")
				return nil
			},
			Resume: func(ctx context.Context, j *binding.Job) error { return nil },
		}},
		EStop: func(context.Context) error { stops.Add(1); heard("stop"); return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := drv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	ctx := mhp.WithSession(context.Background(), "agent")
	start := func() string {
		t.Helper()
		res, err := drv.Invoke(ctx, mhp.InvokeRequest{Name: "work"})
		if err != nil {
			t.Fatal(err)
		}
		conformance.Eventually(t, "the job running", func() bool {
			j, _ := drv.Job(ctx, res.Job.ID)
			return j != nil && j.State == mhp.JobRunning
		})
		return res.Job.ID
	}

	// A pause in flight when the estop lands.
	id := start()
	holdPause.Store(true)
	answered := make(chan error, 1)
	go func() { _, err := drv.PauseJob(ctx, id); answered <- err }()
	<-pausing
	if _, err := drv.EStop(ctx, "test"); err != nil {
		t.Fatal(err)
	}
	before := stops.Load()
	// A pause asked after the estop, of the job still running on at the
	// backend, reaches nothing.
	holdPause.Store(false)
	if j, _ := drv.Job(ctx, id); j == nil || j.State.Terminal() {
		t.Fatalf("job %+v ended; the backend runs on until released", j)
	}
	if _, err := drv.PauseJob(ctx, "no-such-job"); err == nil {
		t.Fatal("pause of an unknown job answered ok")
	}
	n := pauses.Load()
	_, err = drv.PauseJob(ctx, id)
	conformance.ExpectCode(t, err, mhp.CodeEStopActive)
	if pauses.Load() != n {
		t.Fatal("a pause asked after the estop reached the backend")
	}
	// The run returns first; the held pause is still out, so the stop is
	// not re-asserted yet. When the pause returns, it is answered
	// EStopActive and the stop comes after it: the backend's last word.
	letGo.Do(func() { close(runDone) })
	conformance.Eventually(t, "the job ended", func() bool {
		j, _ := drv.Job(ctx, id)
		return j != nil && j.State.Terminal()
	})
	close(release)
	select {
	case err := <-answered:
		conformance.ExpectCode(t, err, mhp.CodeEStopActive)
	case <-time.After(10 * time.Second):
		t.Fatal("the pause cut off by the estop never answered")
	}
	conformance.Eventually(t, "the stop re-asserted after the pause returned", func() bool {
		return stops.Load() > before && last() == "stop"
	})
}
