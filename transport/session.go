package transport

import (
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"

	"github.com/openmhp/mhp-go/auth"
)

// sessionKind says how a session was issued and how its caller proves it.
type sessionKind int

const (
	// kindIssued: an HTTP session issued by initialize; the caller sends its
	// secret back in Mhp-Session.
	kindIssued sessionKind = iota
	// kindHeader: an HTTP session keyed by the X-MHP-Client header (the
	// reference client's model, spec §9); the header is all the caller shows.
	kindHeader
	// kindStream: a stdio stream's session; holding the stream is the proof.
	kindStream
)

func (k sessionKind) String() string {
	switch k {
	case kindHeader:
		return "header"
	case kindStream:
		return "stream"
	}
	return "issued"
}

// event is one notification frame, marshalled once and shared by every
// session that receives it, numbered per session for SSE resume.
type event struct {
	id   uint64
	data []byte
}

// session is one client's identity: its secret (the credential, seen only by
// its owner), its public label (the name the device, other clients and the
// logs see), its subscriptions, its buffered notifications and when it was
// last heard from. Leases are held by the device under the label.
type session struct {
	secret string // the Mhp-Session credential; never leaves the initialize answer
	label  string // public and unique: device context, refusals, notifications, logs
	labelV any    // label as a context value (boxed once: deviceContext)
	client string // display name from clientInfo or X-MHP-Client, sanitised and capped
	kind   sessionKind
	header string // the key (owner, X-MHP-Client) of a kindHeader session or of an issued session's greeting
	owner  string // the identity that opened it ("" without credentials); only it finds the session

	mu        sync.Mutex
	subs      map[string]bool
	ring      []event // circular buffer of at most cap events and maxBytes bytes
	head      int     // index of the oldest event in ring
	count     int     // events in ring
	bytes     int     // bytes of the events in ring
	cap       int
	maxBytes  int
	nextID    uint64        // id of the next event
	delivered uint64        // highest id written to a stream
	wake      chan struct{} // closed at the next push; made by a stream waiting (since), nil while none waits
	lastSeen  time.Time
	leaseTill time.Time // the session holds a lease until then (as far as the transport saw)
	streams   int       // open SSE streams (they do not keep the session alive)
	closed    bool
}

func newSession(kind sessionKind, label, client string, capacity, maxBytes int, now time.Time) *session {
	return &session{secret: newSecret(), label: label, labelV: label, client: client, kind: kind, cap: capacity, maxBytes: maxBytes,
		nextID: 1, lastSeen: now}
}

// newSecret returns "s_" + 128 random bits in hex, from crypto/rand.
func newSecret() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("transport: crypto/rand failed: " + err.Error())
	}
	return "s_" + hex.EncodeToString(b[:])
}

// MaxLabelName caps the client-name part of a session label, in bytes.
const MaxLabelName = auth.MaxLabelPart

// labelName sanitises a client name for a label (auth.LabelPart: the
// in-process sessions of the MCP bridge are labelled by the same rule).
func labelName(name, def string) string { return auth.LabelPart(name, def) }

// newLabel returns name + "#" + 32 random bits in hex. The suffix only makes
// labels unique (the table also checks live ones; 32 bits keep a label of an
// ended session, which a watchdog device may still hold a lease under, from
// coming back); it is not secret and grants nothing.
func newLabel(name string) string {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("transport: crypto/rand failed: " + err.Error())
	}
	return name + "#" + hex.EncodeToString(b[:])
}

// touch records activity.
func (s *session) touch(now time.Time) {
	s.mu.Lock()
	if now.After(s.lastSeen) {
		s.lastSeen = now
	}
	s.mu.Unlock()
}

// idleSince reports when the session was last active. An open event stream
// is not activity: a client that only listens must still ping.
func (s *session) idleSince() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastSeen
}

// leased reports whether the session took a lease that has not run out by
// now (the transport's view: a lease the device dropped on its own, after an
// estop, still counts until its ttl ends, which errs on keeping the session).
func (s *session) leased(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return now.Before(s.leaseTill)
}

// setLease records a lease granted or renewed until till (zero: released).
func (s *session) setLease(till time.Time) {
	s.mu.Lock()
	s.leaseTill = till
	s.mu.Unlock()
}

func (s *session) subscribe(names []string) {
	s.mu.Lock()
	if s.subs == nil && len(names) > 0 {
		s.subs = map[string]bool{}
	}
	for _, n := range names {
		s.subs[n] = true
	}
	s.mu.Unlock()
}

func (s *session) unsubscribe(names []string) {
	s.mu.Lock()
	if len(names) == 0 {
		s.subs = nil
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

// push appends a notification to the ring and wakes the streams. The ring
// keeps at most cap events and at most maxBytes bytes of them (the newest
// event is always kept, whatever its size: frames are capped by the device's
// own limits and the truncated estop reason).
func (s *session) push(data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	e := event{id: s.nextID, data: data}
	s.nextID++
	for s.count > 0 && (s.count >= s.cap || s.bytes+len(data) > s.maxBytes) {
		s.dropOldestLocked()
	}
	if s.count < len(s.ring) {
		s.ring[(s.head+s.count)%len(s.ring)] = e
	} else { // grow lazily up to cap; the ring is empty or full and contiguous from head 0 here
		s.ring = append(s.ring[s.head:], s.ring[:s.head]...)
		s.head = 0
		s.ring = append(s.ring, e)
	}
	s.count++
	s.bytes += len(data)
	if s.wake != nil { // a stream waits: wake it (it asks since again, for a new channel)
		close(s.wake)
		s.wake = nil
	}
}

func (s *session) dropOldestLocked() {
	s.bytes -= len(s.ring[s.head].data)
	s.ring[s.head] = event{}
	s.head = (s.head + 1) % len(s.ring)
	s.count--
}

// buffered reports the events and bytes the ring holds.
func (s *session) buffered() (events, bytes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count, s.bytes
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
	} else if s.nextID > after+1 {
		lost = s.nextID - after - 1
	}
	if s.wake == nil {
		s.wake = make(chan struct{})
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

func (s *session) streamClosed() {
	s.mu.Lock()
	s.streams--
	s.mu.Unlock()
}

// close ends the session's streams.
func (s *session) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		if s.wake != nil {
			close(s.wake)
			s.wake = nil
		}
		s.ring, s.count, s.bytes = nil, 0, 0
	}
}
