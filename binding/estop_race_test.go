package binding_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
)

// stubbornBackend models what a backend last heard: every command the
// driver's hooks send it, in arrival order. Its hooks ignore their context,
// as a vendor call that cannot be interrupted does: a write sleeps a random
// time and then applies; a Run sleeps and then applies its own command.
type stubbornBackend struct {
	mu   sync.Mutex
	log  []string // "write=<v>", "run=<id>", "stop"
	rand *rand.Rand
}

func (b *stubbornBackend) send(cmd string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.log = append(b.log, cmd)
	return len(b.log) - 1
}

func (b *stubbornBackend) snapshot() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.log...)
}

func (b *stubbornBackend) jitter(max time.Duration) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return time.Duration(b.rand.Int64N(int64(max) + 1))
}

// state reports the index of cmd in the log (-1 if absent), the index of the
// first stop and the last command.
func (b *stubbornBackend) state(cmd string) (at, firstStop int, last string, stops int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	at, firstStop = -1, -1
	for i, c := range b.log {
		if c == cmd && at < 0 {
			at = i
		}
		if c == "stop" {
			stops++
			if firstStop < 0 {
				firstStop = i
			}
		}
	}
	if len(b.log) > 0 {
		last = b.log[len(b.log)-1]
	}
	return at, firstStop, last, stops
}

func newStubbornDriver(t testing.TB, b *stubbornBackend, hookMax time.Duration) *binding.Driver {
	t.Helper()
	write := func(_ context.Context, v any) (binding.WriteStatus, error) {
		time.Sleep(b.jitter(hookMax)) // ignores its context
		b.send(fmt.Sprintf("write=%v", v))
		return binding.Applied, nil
	}
	d, err := binding.New(binding.Config{
		Device: mhp.DeviceInfo{ID: "stubborn-01", Class: "test"},
		Logger: slog.New(slog.DiscardHandler),
		EStop:  func(context.Context) error { b.send("stop"); return nil },
		// "guarded" has an interlock (always closed): its write takes the
		// three locked steps, "target"'s the two of a setting without one.
		Signals: []binding.Signal{{Spec: mhp.Signal{Name: "door_closed", Type: mhp.TypeBoolean},
			Read: func(context.Context) (binding.Sample, error) { return binding.Sample{Value: true}, nil }}},
		Settings: []binding.Setting{{Spec: mhp.Setting{Name: "target", Type: mhp.TypeNumber}, Write: write},
			{Spec: mhp.Setting{Name: "guarded", Type: mhp.TypeNumber, Interlocks: []string{"door_closed"}}, Write: write}},
		Actions: []binding.Action{{Spec: mhp.Action{Name: "heat", Cancellable: true},
			Run: func(_ context.Context, j *binding.Job) (any, error) {
				time.Sleep(b.jitter(hookMax)) // keeps going after cancel
				b.send("run=" + j.ID())
				return "heated", nil
			}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestEStopRaceStopIsLastWord races a write (of a setting with an
// interlock, whose write takes three locked steps, or without one, two) or
// an invoke whose hook ignores its context against an estop from another
// session, 10,000 times (1,000
// with -short) across parallel workers, with random hook durations and
// estop offsets. After each race:
//   - a write answered ok had its effect before the first stop (its answer
//     was decided before the estop latched, so before any estop answer);
//     every other write is refused EStopActive with an outcome;
//   - once every call returned, the last command the backend received is
//     the stop: no effect survives it;
//   - the stop ran at most twice (the stop and one re-assertion).
func TestEStopRaceStopIsLastWord(t *testing.T) {
	trials := 10_000
	if testing.Short() {
		trials = 1_000
	}
	const hookMax, offsetMax = 300 * time.Microsecond, 400 * time.Microsecond
	var okWrites, cutWrites, refusedBefore, runs, okGuarded, cutGuarded atomic.Int64
	var next atomic.Int64
	workers := max(4, 2*runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	errs := make(chan string, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(trials) {
					return
				}
				ok, cut := &okWrites, &cutWrites
				if i%4 == 1 {
					ok, cut = &okGuarded, &cutGuarded
				}
				if msg := estopRace(t, i, hookMax, offsetMax, ok, cut, &refusedBefore, &runs); msg != "" {
					errs <- msg
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for msg := range errs {
		t.Error(msg)
	}
	t.Logf("%d races: %d writes ok before the estop, %d cut off by it (of an interlocked setting %d and %d), %d refused at the state gate, %d runs",
		trials, okWrites.Load()+okGuarded.Load(), cutWrites.Load()+cutGuarded.Load(), okGuarded.Load(), cutGuarded.Load(), refusedBefore.Load(), runs.Load())
	if cutWrites.Load() == 0 || okWrites.Load() == 0 || cutGuarded.Load() == 0 || okGuarded.Load() == 0 {
		t.Errorf("the races never cut a write off (%d, interlocked %d) or never let one finish first (%d, interlocked %d): the timing exercises nothing",
			cutWrites.Load(), cutGuarded.Load(), okWrites.Load(), okGuarded.Load())
	}
}

func estopRace(t *testing.T, i int64, hookMax, offsetMax time.Duration, okWrites, cutWrites, refusedBefore, runs *atomic.Int64) string {
	b := &stubbornBackend{rand: rand.New(rand.NewPCG(uint64(i), 17))}
	d := newStubbornDriver(t, b, hookMax)
	defer func() { _ = d.Close() }()
	ctxA := mhp.WithSession(context.Background(), "writer")
	ctxB := mhp.WithSession(context.Background(), "stopper")
	value := float64(i%100) + 1
	invoke := i%4 == 3
	offset := b.jitter(offsetMax)

	var wres *mhp.WriteResult
	var werr error
	var job *mhp.Job
	var estop *mhp.EStopResult
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		if invoke {
			r, err := d.Invoke(ctxA, mhp.InvokeRequest{Name: "heat"})
			if err == nil {
				job = r.Job
			}
			werr = err
			return
		}
		name := "target"
		if i%4 == 1 {
			name = "guarded"
		}
		wres, werr = d.Write(ctxA, mhp.WriteRequest{Name: name, Value: value})
	}()
	go func() {
		defer wg.Done()
		time.Sleep(offset) // where the estop lands in the hook: the race's random offset
		estop, _ = d.EStop(ctxB, "race")
	}()
	wg.Wait()
	if estop == nil || estop.State != mhp.StateEStop {
		return fmt.Sprintf("race %d: estop answered %+v", i, estop)
	}

	cmd := fmt.Sprintf("write=%v", value)
	if invoke {
		if werr != nil {
			if mhp.CodeOf(werr) != mhp.CodeEStopActive {
				return fmt.Sprintf("race %d: invoke refused %v, want EStopActive", i, werr)
			}
			refusedBefore.Add(1)
			return settle(d, b, i, "", -1)
		}
		runs.Add(1)
		// The job ends however its Run reports; what matters is the backend.
		deadline := time.Now().Add(5 * time.Second)
		for {
			j, err := d.Job(ctxA, job.ID)
			if err == nil && j.State.Terminal() {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Sprintf("race %d: job %s never ended", i, job.ID)
			}
			// Polling, bounded by the deadline: a worker goroutine cannot
			// use conformance.Eventually (it may not call t.Fatal).
			time.Sleep(50 * time.Microsecond)
		}
		return settle(d, b, i, "run="+job.ID, -1)
	}

	switch {
	case werr == nil:
		if !wres.OK {
			return fmt.Sprintf("race %d: write answered %+v without an error", i, wres)
		}
		okWrites.Add(1)
		at, firstStop, _, _ := b.state(cmd)
		if at < 0 || firstStop >= 0 && at > firstStop {
			return fmt.Sprintf("race %d: write answered ok but its effect (at %d) came after the stop (at %d): %v", i, at, firstStop, b.snapshot())
		}
		return settle(d, b, i, cmd, 1)
	case mhp.CodeOf(werr) == mhp.CodeEStopActive:
		e, _ := mhp.AsError(werr)
		switch e.Data["outcome"] {
		case mhp.OutcomeUnknown, mhp.OutcomeNotStarted:
			cutWrites.Add(1)
		case nil:
			refusedBefore.Add(1) // refused at a state gate before the hook ran
			if at, _, _, _ := b.state(cmd); at >= 0 {
				return fmt.Sprintf("race %d: write refused before its hook (%v) yet the backend got it", i, werr)
			}
		default:
			return fmt.Sprintf("race %d: cut-off write outcome %v", i, e.Data["outcome"])
		}
		return settle(d, b, i, cmd, 2)
	default:
		return fmt.Sprintf("race %d: write answered %v, want ok or EStopActive", i, werr)
	}
}

// settle waits (bounded) until the backend's last command is the stop and
// checks the stop ran at most maxStops times (when maxStops > 0).
func settle(d *binding.Driver, b *stubbornBackend, i int64, cmd string, maxStops int) string {
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, _, last, stops := b.state(cmd)
		if last == "stop" {
			// Give a wrong extra stop no chance to hide: ping (a driver call)
			// and count again.
			_, _ = d.Ping(context.Background())
			_, _, last, stops = b.state(cmd)
			if last != "stop" {
				return fmt.Sprintf("race %d: a command landed after the stop: %v", i, b.snapshot())
			}
			if stops > 2 || maxStops > 0 && stops > maxStops {
				return fmt.Sprintf("race %d: the stop ran %d times: %v", i, stops, b.snapshot())
			}
			return ""
		}
		if time.Now().After(deadline) {
			return fmt.Sprintf("race %d: the backend's last command is %q, not the stop: %v", i, last, b.snapshot())
		}
		time.Sleep(50 * time.Microsecond) // polling from a worker goroutine, bounded by the deadline (no t.Fatal here)
	}
}
