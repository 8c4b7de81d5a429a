package clock_test

import (
	"slices"
	"testing"
	"time"

	"github.com/openmhp/mhp-go/clock"
)

// TestStep: each AfterFunc moves the clock by its delay, runs at once and
// is recorded; a non-positive delay moves nothing.
func TestStep(t *testing.T) {
	start := time.Unix(100, 0)
	s := clock.NewStep(start)
	ran := make(chan time.Duration, 3)
	for _, d := range []time.Duration{time.Second, 0, 5 * time.Minute} {
		if s.AfterFunc(d, func() { ran <- d }).Stop() {
			t.Fatal("Stop of a fired timer reported true")
		}
	}
	got := map[time.Duration]bool{}
	for range 3 {
		select {
		case d := <-ran:
			got[d] = true
		case <-time.After(10 * time.Second):
			t.Fatal("a function did not run")
		}
	}
	if len(got) != 3 {
		t.Fatalf("ran %v", got)
	}
	if now := s.Now(); !now.Equal(start.Add(time.Second + 5*time.Minute)) {
		t.Fatalf("now %v", now)
	}
	if w := s.Waits(); !slices.Equal(w, []time.Duration{time.Second, 0, 5 * time.Minute}) {
		t.Fatalf("waits %v", w)
	}
}
