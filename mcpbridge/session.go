package mcpbridge

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/auth"
	"github.com/openmhp/mhp-go/client"
)

// session is one MCP session's lab: its own device connections, hence its
// own MHP sessions and leases (client B never acts under client A's lease),
// and its own buffer of notifications. It is the script.Lab of its mhp_run
// scripts.
type session struct {
	b *Bridge

	mu      sync.Mutex
	devices map[string]*client.Device
	stops   map[string]func()
	sim     map[string]bool // devices the host says are simulated
	slots   chan struct{}   // one per tool call in flight
	updates []update
	dropped int
	closed  bool
	seen    time.Time  // the MCP session's last sign of life
	idled   bool       // its leases were released for silence since
	who     *auth.Pass // the MCP caller over HTTP with credentials; nil: none (roles.go)
}

type update struct {
	Device string         `json:"device"`
	Method string         `json:"method"`
	Params map[string]any `json:"params"`
}

func newSession(b *Bridge) *session {
	return &session{b: b, devices: map[string]*client.Device{}, stops: map[string]func(){}, sim: map[string]bool{},
		slots: make(chan struct{}, b.cfg.MaxInFlight), seen: b.cfg.Clock.Now()}
}

// session returns the lab of the MCP session of req, made on its first tool
// call and closed (leases released) when the MCP session ends.
func (b *Bridge) session(req *mcp.CallToolRequest) (*session, error) {
	if req == nil || req.Session == nil {
		return b.local, nil
	}
	ss := req.Session
	b.mu.Lock()
	defer b.mu.Unlock()
	who := callerOf(req)
	if s, ok := b.sessions[ss]; ok {
		if err := sameCaller(s.who, who); err != nil {
			return nil, err
		}
		return s, nil
	}
	if b.closed {
		return nil, errors.New("mcpbridge: closed")
	}
	if len(b.sessions) >= b.cfg.MaxSessions {
		return nil, mhp.Errorf(mhp.CodeServerError, "too many MCP sessions (%d); close one or raise the limit", b.cfg.MaxSessions).
			With(mhp.DataReason, "limit").With(mhp.DataLimit, b.cfg.MaxSessions)
	}
	s := newSession(b)
	s.who = who
	b.sessions[ss] = s
	go func() {
		_ = ss.Wait()
		b.mu.Lock()
		delete(b.sessions, ss)
		closed := b.closed // Close took it with the others and closes it itself
		if !closed {
			b.closing.Add(1) // Close waits for this close (its leases' release)
		}
		b.mu.Unlock()
		if !closed {
			s.close()
			b.closing.Done()
		}
	}()
	return s, nil
}

// allSessions returns the local session and every MCP session's lab.
func (b *Bridge) allSessions() []*session {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := []*session{b.local}
	for _, s := range b.sessions {
		out = append(out, s)
	}
	return out
}

// enter takes a slot for a tool call (release it with leave), or refuses
// when MaxInFlight calls already run.
func (s *session) enter() error {
	select {
	case s.slots <- struct{}{}:
		return nil
	default:
		return mhp.Errorf(mhp.CodeServerError, "too many tool calls in flight on this session (%d); wait for one to end", cap(s.slots)).
			With(mhp.DataReason, "limit").With(mhp.DataLimit, cap(s.slots))
	}
}

func (s *session) leave() {
	<-s.slots
	s.alive(s.b.cfg.Clock.Now()) // the call just ended: the session was there until now
}

func (s *session) close() error {
	s.mu.Lock()
	devs := s.devices
	s.devices = map[string]*client.Device{}
	for _, stop := range s.stops {
		stop()
	}
	s.stops = map[string]func(){}
	s.closed = true
	s.mu.Unlock()
	var errs []error
	for _, d := range devs {
		errs = append(errs, d.Close())
	}
	return errors.Join(errs...)
}

// Device implements script.Lab: the device, behind the host policy's
// hardware gate (a script actuates) and, for reset, its operator_tools flag.
func (s *session) Device(ctx context.Context, name string) (mhp.Device, error) {
	d, err := s.gated(ctx, name)
	if err != nil {
		return nil, err
	}
	if s.b.policy.OperatorTools {
		return d, nil
	}
	return noReset{d}, nil
}

// noReset is a device whose Reset is refused by the host policy: a reset
// after an estop is a person's decision, in a script as in mhp_lab.
type noReset struct{ mhp.Device }

// Unwrap returns the device (mhp.Unwrapper), so its own interfaces stay findable.
func (n noReset) Unwrap() mhp.Device { return n.Device }

func (noReset) Reset(context.Context) (*mhp.ResetResult, error) {
	return nil, forbidden("operator_tools", "reset (a person's decision)")
}

// Names implements script.Lab: the devices this session connected so far.
func (s *session) Names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.devices))
	for n := range s.devices {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// connected returns the session's connections by device id.
func (s *session) connected() map[string]*client.Device {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]*client.Device, len(s.devices))
	for k, v := range s.devices {
		out[k] = v
	}
	return out
}

// gated is device behind the host policy's allow_hardware flag.
func (s *session) gated(ctx context.Context, id string) (*client.Device, error) {
	d, err := s.device(ctx, id)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	sim := s.sim[id]
	s.mu.Unlock()
	if !s.b.policy.AllowHardware && !sim {
		return nil, forbidden("allow_hardware", fmt.Sprintf("using hardware device %q (the host does not list it as simulated)", id)).
			With("device", id)
	}
	return d, nil
}

// device returns this session's connection to the device with the id,
// resolving its target through the finder and dialling on first use.
func (s *session) device(ctx context.Context, id string) (*client.Device, error) {
	if id == "" {
		return nil, mhp.Errorf(mhp.CodeInvalidParams, "name a device (its id from mhp_find)").With(mhp.DataField, "device")
	}
	s.mu.Lock()
	if d, ok := s.devices[id]; ok {
		s.mu.Unlock()
		return d, nil
	}
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, errors.New("mcpbridge: session closed")
	}
	res, err := s.b.cfg.Finder.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if res == nil || res.Target == "" {
		return nil, mhp.Errorf(mhp.CodeUnknownName, "device %q has no target in the directory", id).With(mhp.DataName, id)
	}
	d, err := s.dial(ctx, res.Target)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s at %s: %w", mhp.Truncate(id, 120), mhp.Truncate(res.Target, 120), err)
	}
	sim := s.b.simulated(id) // the host's word, never the device's tags
	s.mu.Lock()
	defer s.mu.Unlock()
	if prev, ok := s.devices[id]; ok { // lost a race with another call
		d.Close()
		return prev, nil
	}
	if s.closed {
		d.Close()
		return nil, errors.New("mcpbridge: session closed")
	}
	s.devices[id] = d
	s.sim[id] = sim
	s.stops[id] = d.Listen(func(n mhp.Notification) { s.record(id, n) })
	return d, nil
}

// record keeps a bounded buffer of notifications for mhp_lab op=updates.
func (s *session) record(id string, n mhp.Notification) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.updates = append(s.updates, update{Device: id, Method: n.Method, Params: n.Params})
	if over := len(s.updates) - s.b.cfg.Updates; over > 0 {
		s.updates = append(s.updates[:0], s.updates[over:]...)
		s.dropped += over
	}
}

// takeUpdates removes and returns the oldest updates whose JSON fits in
// budget bytes (at least one, shrunk if it alone is too big), how many stay
// buffered and how many were dropped since the last call.
func (s *session) takeUpdates(budget int) (out []any, more, dropped int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	used := 0
	n := 0
	for _, u := range s.updates {
		v := shrink(toJSONValue(u), budget/2)
		size := len(jsonText(v)) + 1
		if n > 0 && used+size > budget {
			break
		}
		out = append(out, v)
		used += size
		n++
	}
	s.updates = append(s.updates[:0], s.updates[n:]...)
	dropped = s.dropped
	s.dropped = 0
	return out, len(s.updates), dropped
}
