// Package clock is the injectable time source of drivers and adapters: the
// real clock in production, a manual one in tests so that watchdogs, lease
// expiry and staleness are exercised without sleeping.
package clock

import (
	"sync"
	"time"
)

// Clock tells the time and runs functions later.
type Clock interface {
	Now() time.Time
	// AfterFunc runs f once d has passed: the real clock in its own
	// goroutine, Manual during the Advance that reaches its time.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc.
type Timer interface {
	// Stop prevents the call; it reports whether it did.
	Stop() bool
}

// Real is the system clock.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// AfterFunc wraps time.AfterFunc.
func (Real) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// Manual is a clock that moves only when told. Advance runs the callbacks
// of the timers that fall due itself, in time order, and returns when they
// have all returned, so a test sees their effects as soon as Advance
// returns. A callback that arms a timer falling due within the same Advance
// runs in that Advance too.
type Manual struct {
	mu     sync.Mutex
	now    time.Time
	seq    uint64 // arming order, to order timers due at the same instant
	timers []*manualTimer
	adv    sync.Mutex // one Advance at a time
}

// NewManual returns a manual clock set to start.
func NewManual(start time.Time) *Manual { return &Manual{now: start} }

// Now returns the clock's current time.
func (m *Manual) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

// AfterFunc schedules f at Now()+d. A timer already due (d <= 0) runs at
// the next Advance.
func (m *Manual) AfterFunc(d time.Duration, f func()) Timer {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seq++
	t := &manualTimer{clock: m, at: m.now.Add(d), seq: m.seq, f: f}
	m.timers = append(m.timers, t)
	return t
}

// Advance moves the clock forward by d, stepping to each timer's time in
// order and running its callback on the calling goroutine; it returns when
// every callback due by the new time has returned. Callbacks must not call
// Advance.
func (m *Manual) Advance(d time.Duration) {
	m.adv.Lock()
	defer m.adv.Unlock()
	m.mu.Lock()
	end := m.now.Add(d)
	m.mu.Unlock()
	for {
		m.mu.Lock()
		t := m.nextDueLocked(end)
		if t == nil {
			if m.now.Before(end) {
				m.now = end
			}
			m.mu.Unlock()
			return
		}
		if t.at.After(m.now) {
			m.now = t.at
		}
		m.mu.Unlock()
		t.f()
	}
}

// nextDueLocked removes and returns the earliest timer due by end, or nil.
func (m *Manual) nextDueLocked(end time.Time) *manualTimer {
	best := -1
	for i, t := range m.timers {
		if t.at.After(end) {
			continue
		}
		if best < 0 || t.at.Before(m.timers[best].at) || (t.at.Equal(m.timers[best].at) && t.seq < m.timers[best].seq) {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	t := m.timers[best]
	m.timers = append(m.timers[:best], m.timers[best+1:]...)
	return t
}

// Pending reports how many timers are scheduled.
func (m *Manual) Pending() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.timers)
}

type manualTimer struct {
	clock *Manual
	at    time.Time
	seq   uint64
	f     func()
}

func (t *manualTimer) Stop() bool {
	m := t.clock
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, x := range m.timers {
		if x == t {
			m.timers = append(m.timers[:i], m.timers[i+1:]...)
			return true
		}
	}
	return false
}
