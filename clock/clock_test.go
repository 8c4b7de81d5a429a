package clock

import (
	"slices"
	"testing"
	"time"
)

// TestManualAdvanceRunsDueCallbacksBeforeReturning: callbacks due by the new
// time have all run, in time order (arming order for equal times), when
// Advance returns; each sees Now at its own time; a timer a callback arms
// within the window runs in the same Advance; later ones stay pending.
func TestManualAdvanceRunsDueCallbacksBeforeReturning(t *testing.T) {
	start := time.Unix(1_800_000_000, 0)
	m := NewManual(start)
	var got []string
	at := func(name string) func() {
		return func() { got = append(got, name+"@"+m.Now().Sub(start).String()) }
	}
	m.AfterFunc(3*time.Second, at("c"))
	m.AfterFunc(time.Second, at("a"))
	m.AfterFunc(time.Second, at("a2"))
	m.AfterFunc(2*time.Second, func() {
		at("b")()
		m.AfterFunc(500*time.Millisecond, at("b+")) // due at 2.5s: within this Advance
		m.AfterFunc(5*time.Second, at("late"))      // due at 7s: not yet
	})
	stopped := m.AfterFunc(time.Second, at("stopped"))
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop should report true once, then false")
	}
	m.Advance(3 * time.Second)
	want := []string{"a@1s", "a2@1s", "b@2s", "b+@2.5s", "c@3s"}
	if !slices.Equal(got, want) {
		t.Fatalf("callbacks %v, want %v", got, want)
	}
	if m.Now() != start.Add(3*time.Second) || m.Pending() != 1 {
		t.Fatalf("now %v, pending %d; want 3s and the one late timer", m.Now().Sub(start), m.Pending())
	}
	m.Advance(4*time.Second - time.Nanosecond)
	if len(got) != len(want) {
		t.Fatalf("a timer ran before its time: %v", got)
	}
	m.Advance(time.Nanosecond)
	if got[len(got)-1] != "late@7s" {
		t.Fatalf("the late timer did not run at its time: %v", got)
	}
}

// TestManualZeroDelayRunsAtNextAdvance: a timer armed with no delay runs at
// the next Advance, even Advance(0).
func TestManualZeroDelayRunsAtNextAdvance(t *testing.T) {
	m := NewManual(time.Unix(0, 0))
	ran := false
	m.AfterFunc(0, func() { ran = true })
	if ran {
		t.Fatal("ran before Advance")
	}
	m.Advance(0)
	if !ran {
		t.Fatal("a due timer did not run at Advance(0)")
	}
}
