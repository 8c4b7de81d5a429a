package transport

import (
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"
)

// event is one notification frame, marshalled once and shared by every
// session that receives it, numbered per session for SSE resume.
type event struct {
	id   uint64
	data []byte
}

// session is one client's server-issued identity: its subscriptions, its
// buffered notifications and when it was last heard from. Leases are held by
// the device under the session id.
type session struct {
	id     string
	client string // display name from clientInfo or X-MHP-Client; logs only
	stdio  bool   // bound to a stream: lives as long as the stream

	mu        sync.Mutex
	subs      map[string]bool
	ring      []event // circular buffer of at most cap events
	head      int     // index of the oldest event in ring
	count     int     // events in ring
	cap       int
	nextID    uint64 // id of the next event
	delivered uint64 // highest id written to a stream
	wake      chan struct{}
	lastSeen  time.Time
	streams   int // open SSE streams
	closed    bool
}

func newSession(client string, capacity int, now time.Time) *session {
	return &session{id: newSessionID(), client: client, cap: capacity, nextID: 1,
		subs: map[string]bool{}, wake: make(chan struct{}), lastSeen: now}
}

// newSessionID returns "s_" + 128 random bits in hex, from crypto/rand.
func newSessionID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("transport: crypto/rand failed: " + err.Error())
	}
	return "s_" + hex.EncodeToString(b[:])
}

// touch records activity.
func (s *session) touch(now time.Time) {
	s.mu.Lock()
	if now.After(s.lastSeen) {
		s.lastSeen = now
	}
	s.mu.Unlock()
}

// idleSince reports when the session was last active, and whether it is
// pinned alive (a stream session or an open SSE stream).
func (s *session) idleSince() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastSeen, s.stdio || s.streams > 0
}

func (s *session) subscribe(names []string) {
	s.mu.Lock()
	for _, n := range names {
		s.subs[n] = true
	}
	s.mu.Unlock()
}

func (s *session) unsubscribe(names []string) {
	s.mu.Lock()
	if len(names) == 0 {
		s.subs = map[string]bool{}
	}
	for _, n := range names {
		delete(s.subs, n)
	}
	s.mu.Unlock()
}

// wants reports whether a signals/update for signal goes to this session.
func (s *session) wants(signal string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.subs[signal]
}

// push appends a notification to the ring and wakes the streams.
func (s *session) push(data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	e := event{id: s.nextID, data: data}
	s.nextID++
	switch {
	case s.count < len(s.ring):
		s.ring[(s.head+s.count)%len(s.ring)] = e
		s.count++
	case len(s.ring) < s.cap: // grow lazily up to cap
		s.ring = append(s.ring, e)
		s.count++
	default: // full: overwrite the oldest
		s.ring[s.head] = e
		s.head = (s.head + 1) % len(s.ring)
	}
	close(s.wake)
	s.wake = make(chan struct{})
}

// since returns the buffered events with id > after, how many events after
// `after` were already dropped from the ring, and a channel closed at the next
// push. ok is false once the session is closed.
func (s *session) since(after uint64) (evs []event, lost uint64, wake <-chan struct{}, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, 0, nil, false
	}
	if s.count > 0 {
		if oldest := s.ring[s.head].id; oldest > after+1 {
			lost = oldest - after - 1
		}
		for i := 0; i < s.count; i++ {
			if e := s.ring[(s.head+i)%len(s.ring)]; e.id > after {
				evs = append(evs, e)
			}
		}
	}
	return evs, lost, s.wake, true
}

// markDelivered records that a stream wrote events up to id.
func (s *session) markDelivered(id uint64) {
	s.mu.Lock()
	if id > s.delivered {
		s.delivered = id
	}
	s.mu.Unlock()
}

// resumePoint is where a stream that gave no Last-Event-ID starts: after the
// last event any stream of this session delivered (so a fresh session gets
// everything since initialize).
func (s *session) resumePoint() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.delivered
}

func (s *session) streamOpened(now time.Time) {
	s.mu.Lock()
	s.streams++
	s.lastSeen = now
	s.mu.Unlock()
}

func (s *session) streamClosed(now time.Time) {
	s.mu.Lock()
	s.streams--
	s.lastSeen = now
	s.mu.Unlock()
}

// close ends the session's streams.
func (s *session) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.wake)
		s.ring, s.count = nil, 0
	}
}
