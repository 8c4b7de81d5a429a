package clock

import (
	"sync"
	"time"
)

// Step is a clock for tests of loops that wait (a poll back-off, a retry
// window): every AfterFunc moves the clock forward by its delay and runs
// its function at once, in its own goroutine, so the loop goes on without
// a real sleep while Now says how much time it would have spent. It
// records the delays asked for ([Step.Waits]). Use it only where one loop
// waits at a time: two goroutines waiting on one Step each add their delay.
type Step struct {
	mu    sync.Mutex
	now   time.Time
	waits []time.Duration
}

// NewStep returns a stepping clock set to start.
func NewStep(start time.Time) *Step { return &Step{now: start} }

// Now returns the clock's time: start plus every delay waited so far.
func (s *Step) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now
}

// AfterFunc adds d (when positive) to the clock, records it and runs f in
// a new goroutine at once. The timer has already fired: Stop returns false.
func (s *Step) AfterFunc(d time.Duration, f func()) Timer {
	s.mu.Lock()
	if d > 0 {
		s.now = s.now.Add(d)
	}
	if len(s.waits) < maxStepWaits {
		s.waits = append(s.waits, d)
	}
	s.mu.Unlock()
	go f()
	return firedTimer{}
}

// maxStepWaits bounds the record of delays (a loop may wait without end).
const maxStepWaits = 1 << 16

// Waits returns a copy of the delays asked for, oldest first (the first
// 65,536).
func (s *Step) Waits() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.waits...)
}

type firedTimer struct{}

func (firedTimer) Stop() bool { return false }
