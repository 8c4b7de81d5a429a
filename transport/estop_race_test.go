package transport_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/openmhp/mhp-go/conformance"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/client"
	"github.com/openmhp/mhp-go/transport"
)

// raceBackend records every command the driver's hooks send, in arrival
// order. Its write hook ignores its context (an uninterruptible vendor
// call): it sleeps a random time, then applies.
type raceBackend struct {
	mu  sync.Mutex
	log []string
	rnd *rand.Rand
}

func (b *raceBackend) send(cmd string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.log = append(b.log, cmd)
}

func (b *raceBackend) jitter(max time.Duration) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return time.Duration(b.rnd.Int64N(int64(max) + 1))
}

// since returns the commands from index from on.
func (b *raceBackend) since(from int) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.log[from:]...)
}

func (b *raceBackend) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.log)
}

// TestEStopRaceOverHTTP races settings/write (whose hook ignores its
// context) from one HTTP session against safety/estop from another, 1,000
// times with random offsets (200 with -short), resetting between races.
// After every race no write is answered ok unless its effect reached the
// backend before the stop, a write cut off by the estop is refused
// EStopActive with data.outcome, and the last command the backend received
// is the stop.
func TestEStopRaceOverHTTP(t *testing.T) {
	trials := 1_000
	if testing.Short() {
		trials = 200
	}
	const hookMax, offsetMax = 300 * time.Microsecond, 600 * time.Microsecond
	b := &raceBackend{rnd: rand.New(rand.NewPCG(1, 2))}
	drv, err := binding.New(binding.Config{
		Device: mhp.DeviceInfo{ID: "race-01", Class: "test"},
		Logger: slog.New(slog.DiscardHandler),
		EStop:  func(context.Context) error { b.send("stop"); return nil },
		Settings: []binding.Setting{{Spec: mhp.Setting{Name: "target", Type: mhp.TypeNumber},
			Write: func(_ context.Context, v any) (binding.WriteStatus, error) {
				time.Sleep(b.jitter(hookMax)) // a backend that takes a random while and ignores its context
				b.send(fmt.Sprintf("write=%v", v))
				return binding.Applied, nil
			}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = drv.Close() })
	hs := serveHTTP(t, newServer(t, drv, transport.Options{}))
	writer := dialHTTP(t, hs.URL, client.Options{})
	stopper := dialHTTP(t, hs.URL, client.Options{})

	var ok, cut, gated int
	for i := range trials {
		from := b.len()
		value := float64(i%100) + 1
		cmd := fmt.Sprintf("write=%v", value)
		offset := b.jitter(offsetMax)
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		var werr error
		var estop *mhp.EStopResult
		var eerr error
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, werr = writer.Write(ctx, mhp.WriteRequest{Name: "target", Value: value})
		}()
		go func() {
			defer wg.Done()
			time.Sleep(offset) // where the estop lands in the write: the race's random offset
			estop, eerr = stopper.EStop(ctx, "race")
		}()
		wg.Wait()
		if eerr != nil || estop.State != mhp.StateEStop {
			t.Fatalf("race %d: estop answered %+v, %v", i, estop, eerr)
		}
		switch {
		case werr == nil:
			ok++
			log := b.since(from)
			at, stop := index(log, cmd), index(log, "stop")
			if at < 0 || stop >= 0 && at > stop {
				t.Fatalf("race %d: write answered ok but its effect came after the stop: %v", i, log)
			}
		case mhp.CodeOf(werr) == mhp.CodeEStopActive:
			e, _ := mhp.AsError(werr)
			switch e.Data["outcome"] {
			case mhp.OutcomeUnknown, mhp.OutcomeNotStarted:
				cut++
			case nil:
				gated++
				if index(b.since(from), cmd) >= 0 {
					t.Fatalf("race %d: write refused at the state gate (%v) yet the backend got it", i, werr)
				}
			default:
				t.Fatalf("race %d: outcome %v", i, e.Data["outcome"])
			}
		default:
			t.Fatalf("race %d: write answered %v, want ok or EStopActive", i, werr)
		}
		// The stop is the last word: wait (bounded) for it, then reset,
		// which is refused while a cut-off call still owes its re-assertion.
		conformance.EventuallyWithin(t, fmt.Sprintf("race %d: the stop to be the last command", i), testTimeout, func() bool {
			log := b.since(from)
			return len(log) > 0 && log[len(log)-1] == "stop"
		})
		if n := count(b.since(from), "stop"); n > 2 {
			t.Fatalf("race %d: the stop ran %d times: %v", i, n, b.since(from))
		}
		conformance.EventuallyWithin(t, fmt.Sprintf("race %d: reset", i), testTimeout, func() bool {
			_, err := writer.Reset(ctx)
			return err == nil
		})
		if log := b.since(from); log[len(log)-1] != "stop" {
			t.Fatalf("race %d: a command landed after the stop: %v", i, log)
		}
		cancel()
	}
	t.Logf("%d races over HTTP: %d writes ok before the estop, %d cut off, %d refused at the state gate", trials, ok, cut, gated)
	if cut == 0 || ok+gated == 0 {
		t.Errorf("the races never cut a write off (%d) or never missed one (%d): the timing exercises nothing", cut, ok+gated)
	}
}

func index(log []string, cmd string) int {
	for i, c := range log {
		if c == cmd {
			return i
		}
	}
	return -1
}

func count(log []string, cmd string) int {
	n := 0
	for _, c := range log {
		if c == cmd {
			n++
		}
	}
	return n
}
