// Package rosbridgetest is a fake rosbridge v2 server for tests: an
// in-process WebSocket server (httptest + coder/websocket, 127.0.0.1 and a
// free port) that speaks the rosbridge JSON protocol the way
// rosbridge_suite does, including its silences. Use it to test code that
// talks to a robot through rosbridge without ROS installed:
//
//	srv := rosbridgetest.New(rosbridgetest.Options{})
//	defer srv.Close()
//	srv.AddTopic("/arm/temp", "std_msgs/msg/Float64", true)
//	srv.Publish("/arm/temp", map[string]any{"data": 31.5})
//	srv.AddService("/arm/enable", "std_srvs/srv/Trigger", func(ctx context.Context, c *rosbridgetest.Call) (any, error) {
//		return map[string]any{"success": true, "message": "enabled"}, nil
//	})
//	srv.AddAction("/arm/move", "arm_msgs/action/Move", rosbridgetest.Scripted(rosbridgetest.Script{
//		Feedback: []any{map[string]any{"progress": 0.5}},
//		Status:   rosbridgetest.StatusSucceeded,
//		Result:   map[string]any{"reached": true},
//	}))
//	client connects to srv.URL()
//
// What it serves:
//   - topics: advertise, unadvertise, publish, subscribe (with throttle_rate
//     and queue_length; several subscriptions on one connection merge like
//     rosbridge's: lowest throttle, highest queue), unsubscribe; server-side
//     Publish; a record of every client publish (Published, OnPublish);
//     optional latching (a new subscriber gets the last message);
//   - services: call_service answered by a ServiceFunc; result:false with
//     rosbridge's strings for a missing service, bad arguments (BadArgs) and a
//     raising handler (0.11 only; rosbridge on ROS 2 answers nothing); NoReply
//     for silence; Drop to cut the link after the call reached the robot;
//     rosapi's topics, topic_type, service_type, get_ros_version and
//     action_servers are built in (see Version);
//   - ROS 2 actions: send_action_goal, action_feedback, action_result with
//     any status (Options.ResultWithoutStatus: without it),
//     cancel_action_goal (no reply; the ActionFunc decides whether to
//     honour it; Options.DropEarlyCancel drops one that arrives before the
//     goal was accepted, as 2.1.0 does); silence, as rosbridge 2.x, for a
//     goal to an unknown action server, of another action type, or
//     rejected; goal handles shared by every connection (a cancel from
//     another connection reaches the goal, a reused id replaces the older
//     handle); goals survive a dropped client like on the real bridge, and
//     their later results are lost; an action's hidden
//     <action>/_action/cancel_goal service with a zero goal id cancels all
//     of its goals;
//   - one op at a time per connection (default; Options.Concurrent for the
//     new-thread settings): a goal or a service call blocks the ops behind
//     it until it ends, for good when it never gets an answer;
//   - versions (Options.Version): rosbridge 2.x and 1.x on ROS 2, 0.11 on
//     ROS 1, with their rosapi, type spellings, action ops and answers to a
//     raising service handler;
//   - ROS 1 actionlib over topics (AddActionlib): <ns>/goal, /cancel,
//     /status, /feedback, /result with actionlib GoalStatus codes;
//   - faults: Drop (cut every connection), Refuse (refuse new connections),
//     silent handling of bad ops, type conflicts and unknown topics (no
//     status messages, as rosbridge_suite sends none), fragments
//     (Options.FragmentSize), `\/` escaping and null for NaN/Inf
//     (Options.ROS1Quirks).
//
// Every message a client sends is recorded (Received, WaitFor) so tests can
// assert what went over the wire.
package rosbridgetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// ROS 2 action_msgs/GoalStatus codes.
const (
	StatusUnknown   = 0
	StatusAccepted  = 1
	StatusExecuting = 2
	StatusCanceling = 3
	StatusSucceeded = 4
	StatusCanceled  = 5
	StatusAborted   = 6
)

// ROS 1 actionlib_msgs/GoalStatus codes.
const (
	ActionlibPending   = 0
	ActionlibActive    = 1
	ActionlibPreempted = 2
	ActionlibSucceeded = 3
	ActionlibAborted   = 4
	ActionlibRejected  = 5
	ActionlibRecalled  = 8
	ActionlibLost      = 9
)

// Version is the rosbridge_suite release the fake behaves as.
type Version int

// Versions the fake can play.
const (
	// Rosbridge2 is rosbridge_suite 2.0.0/2.1.0 on ROS 2 (humble, jazzy,
	// rolling): action ops, rosapi /rosapi/get_ros_version and
	// /rosapi/action_servers, both type spellings ("std_msgs/Float64" and
	// "std_msgs/msg/Float64"), a raising service handler gets no reply.
	Rosbridge2 Version = iota
	// Rosbridge1 is rosbridge_suite 1.x on ROS 2 (humble 1.3.x): as
	// Rosbridge2 but without action ops (send_action_goal and
	// cancel_action_goal are logged as unknown operations, no reply). Its
	// rosapi looks like 2.x's: nothing tells the two apart before a goal.
	Rosbridge1
	// Rosbridge011 is rosbridge_suite 0.11.17 on ROS 1 (noetic): no action
	// ops, no /rosapi/get_ros_version, only "pkg/Type" spellings (an advertise
	// or subscribe with "pkg/msg/Type" is dropped silently), every service
	// call runs in its own thread and a raising handler answers result:false
	// "service [name] responded with an error: ...".
	Rosbridge011
)

// String names the release.
func (v Version) String() string {
	switch v {
	case Rosbridge1:
		return "rosbridge 1.x (ROS 2)"
	case Rosbridge011:
		return "rosbridge 0.11 (ROS 1)"
	}
	return "rosbridge 2.x (ROS 2)"
}

// Options tune the server. The zero value is rosbridge 2.x on ROS 2 with the
// server's default settings.
type Options struct {
	// Version is the release the fake plays; default Rosbridge2.
	Version Version
	// Concurrent runs every call_service and send_action_goal in its own
	// goroutine, as rosbridge does with call_services_in_new_thread and
	// send_action_goals_in_new_thread set true. By default (both false, as
	// shipped) one connection's ops are handled one at a time in order, as
	// rosbridge's IncomingQueue does: while a goal runs or a service call
	// waits for its answer, every later op of that connection (a cancel, a
	// publish, an estop) waits, and a goal or call that never gets an answer
	// (rejected goal, unknown action server, wrong action type, raising ROS 2
	// service handler) blocks the connection until it closes. Version
	// Rosbridge011 always runs service calls in their own thread.
	Concurrent bool
	// DropEarlyCancel drops a cancel_action_goal that arrives before the
	// action server accepted the goal, as rosbridge 2.1.0 does (the goal
	// handle is stored only once the goal response arrives).
	DropEarlyCancel bool
	// ResultWithoutStatus sends action_result without a top-level status,
	// as rosbridge builds between Nov 2023 and Oct 2024 did.
	ResultWithoutStatus bool
	// FragmentSize, when positive, splits every outgoing message longer than
	// this many bytes into "fragment" ops, as rosbridge does for a client
	// that asked for fragment_size.
	FragmentSize int
	// ROS1Quirks makes the server write like rosbridge 0.11 (ROS 1): `/`
	// escaped as `\/` in strings. NaN and Inf always go out as null.
	ROS1Quirks bool
	// RosapiActionType serves /rosapi/action_type ({action} -> {type}), as
	// newer rosapi builds do. Off (as in 2.0.0 and 2.1.0), the type of an
	// action server cannot be learnt through rosapi: /rosapi/service_type
	// answers "" for the hidden <action>/_action/send_goal service, since
	// rosapi omits hidden services.
	RosapiActionType bool
	// HiddenServiceTypes makes /rosapi/service_type answer the type of an
	// action server's hidden <action>/_action/send_goal service
	// ("<pkg>/action/<Type>_SendGoal"), as a rosapi that lists hidden
	// services would; no rosbridge 2.x release does.
	HiddenServiceTypes bool
	// Logf, when set, receives what the real server would only log (bad ops,
	// type conflicts, unknown topics). Pass t.Logf.
	Logf func(format string, args ...any)
}

// Message is one message a client sent, as received.
type Message struct {
	Op      string
	ID      string
	Topic   string
	Service string
	Action  string
	Type    string
	// Raw is the whole message.
	Raw json.RawMessage
	// Conn numbers the connection it came on (1, 2, ... in accept order).
	Conn int
}

// Server is a fake rosbridge server. Its methods are safe for concurrent use.
type Server struct {
	opts Options
	hs   *httptest.Server

	mu       sync.Mutex
	conns    map[*conn]bool
	nconn    int
	drops    int // Drop calls: a connection accepted across one is cut too
	refuse   bool
	topics   map[string]*topic
	services map[string]*service
	actions  map[string]*action
	goals    map[string]*Goal // ROS 2 goals by the client's goal id
	received []Message
	changed  chan struct{} // closed and replaced on every received message
	// Restart: while dying, what clients send is swallowed (swallowed
	// counts it); forgotten holds the goal ids whose rosbridge handles the
	// restart lost.
	dying     bool
	swallowed int
	forgotten map[string]bool
}

type topic struct {
	name, typ string
	latch     bool
	last      json.RawMessage
	published []json.RawMessage
	observers []func(json.RawMessage)
}

type service struct {
	name, typ string
	fn        ServiceFunc
}

type action struct {
	name, typ string
	fn        ActionFunc
}

// New starts a server on 127.0.0.1 with a free port.
func New(opts Options) *Server {
	s := &Server{
		opts:      opts,
		conns:     map[*conn]bool{},
		topics:    map[string]*topic{},
		services:  map[string]*service{},
		actions:   map[string]*action{},
		goals:     map[string]*Goal{},
		changed:   make(chan struct{}),
		forgotten: map[string]bool{},
	}
	s.hs = httptest.NewServer(http.HandlerFunc(s.serveHTTP))
	return s
}

// URL is the server's WebSocket address, "ws://127.0.0.1:port".
func (s *Server) URL() string { return "ws" + strings.TrimPrefix(s.hs.URL, "http") }

// Close cuts every connection and stops the server.
func (s *Server) Close() {
	s.Drop()
	s.hs.Close()
}

func (s *Server) logf(format string, args ...any) {
	if s.opts.Logf != nil {
		s.opts.Logf("rosbridgetest: "+format, args...)
	}
}

// Drop cuts every open connection at once, as a network failure would,
// including one whose handshake is under way.
// Goals keep running; their results are lost.
func (s *Server) Drop() {
	s.mu.Lock()
	s.drops++
	cs := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		cs = append(cs, c)
	}
	s.mu.Unlock()
	for _, c := range cs {
		c.close()
	}
}

// Restart plays the bridge process restarting mid-work (roslaunch
// respawning rosbridge_server): the dying process handles nothing more
// (what clients send is swallowed unanswered), the connections carrying
// ROS 2 goals close first and the rest once a client wrote to one of them
// (its reaction to the goal's loss) or after a second; the goal handles are
// lost — the action servers, other processes, keep executing their goals,
// but a cancel_action_goal by id no longer reaches them (their own
// <action>/_action/cancel_goal still does) — and new connections are
// refused until Refuse(false) brings the new process up.
func (s *Server) Restart() {
	s.mu.Lock()
	s.dying, s.refuse = true, true
	s.drops++
	heard := s.swallowed
	withGoal := map[*conn]bool{}
	for id, g := range s.goals {
		if !g.ROS1 {
			withGoal[g.c] = true
			s.forgotten[id] = true
		}
	}
	var first, rest []*conn
	for c := range s.conns {
		if withGoal[c] {
			first = append(first, c)
		} else {
			rest = append(rest, c)
		}
	}
	s.mu.Unlock()
	for _, c := range first {
		c.close()
	}
	deadline := time.Now().Add(time.Second)
	for {
		s.mu.Lock()
		got, ch := s.swallowed > heard, s.changed
		s.mu.Unlock()
		left := time.Until(deadline)
		if got || len(first) == 0 || left <= 0 {
			break
		}
		t := time.NewTimer(left)
		select {
		case <-ch:
		case <-t.C:
		}
		t.Stop()
	}
	for _, c := range rest {
		c.close()
	}
	s.mu.Lock()
	s.dying = false
	s.mu.Unlock()
}

// Refuse makes the server refuse (true) or accept (false) new connections.
func (s *Server) Refuse(refuse bool) {
	s.mu.Lock()
	s.refuse = refuse
	s.mu.Unlock()
}

// Connections is the number of open connections.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Accepted is the number of connections accepted (or being accepted) since
// New: every connection made later has a higher Message.Conn.
func (s *Server) Accepted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nconn
}

// Received returns every message the clients sent, in order. A message is
// recorded once the server handled it (a subscription is registered, a goal
// started, a publish delivered).
func (s *Server) Received() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.received...)
}

// Count is the number of received messages that match.
func (s *Server) Count(match func(Message) bool) int {
	n := 0
	for _, m := range s.Received() {
		if match(m) {
			n++
		}
	}
	return n
}

// WaitFor waits until a received message matches, and returns it. It looks
// at messages already received too. It gives up after timeout.
func (s *Server) WaitFor(timeout time.Duration, match func(Message) bool) (Message, bool) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	seen := 0
	for {
		s.mu.Lock()
		msgs := s.received[seen:]
		seen = len(s.received)
		ch := s.changed
		s.mu.Unlock()
		for _, m := range msgs {
			if match(m) {
				return m, true
			}
		}
		select {
		case <-ch:
		case <-deadline.C:
			return Message{}, false
		}
	}
}

// Op matches messages with the op and, when name is not empty, the topic,
// service or action name.
func Op(op, name string) func(Message) bool {
	return func(m Message) bool {
		return m.Op == op && (name == "" || m.Topic == name || m.Service == name || m.Action == name)
	}
}

// Call is one call_service request.
type Call struct {
	ID      string
	Service string
	Args    json.RawMessage
	// Conn numbers the connection it came on.
	Conn int
	c    *conn
}

// Decode decodes the call's arguments into v.
func (c *Call) Decode(v any) error { return json.Unmarshal(c.Args, v) }

// ServiceFunc answers a service call. It runs in the connection's worker
// (the connection's later ops wait for it), or in its own goroutine with
// Options.Concurrent or Version Rosbridge011; ctx ends when the calling
// connection closes. Return the response's values, or an error: BadArgs
// (result:false, nothing executed), NoReply (silence; a sequential
// connection stays blocked), Drop (cut the connection without answering),
// any other error: a raising handler (Rosbridge011: result:false "service
// [name] responded with an error: ..."; ROS 2 versions: silence, like
// NoReply).
type ServiceFunc func(ctx context.Context, call *Call) (values any, err error)

// Sentinel errors of a ServiceFunc.
var (
	// NoReply makes the server never answer the call.
	NoReply = errors.New("rosbridgetest: no reply")
	// Drop makes the server cut the caller's connection without answering.
	Drop = errors.New("rosbridgetest: drop the connection")
)

// BadArgsError is a result:false answer for arguments that do not fit the
// service type; nothing was executed.
type BadArgsError struct{ Text string }

// Error returns rosbridge's text.
func (e *BadArgsError) Error() string { return e.Text }

// BadArgs returns rosbridge's answer for an argument of the wrong type, e.g.
// BadArgs("std_srvs/SetBoolRequest", "data", "bool", "<class 'str'>").
func BadArgs(requestType, field, want, got string) error {
	return &BadArgsError{Text: fmt.Sprintf("%s message requires a %s for field %s, but got a %s", requestType, want, field, got)}
}

// AddService declares a service of a type answered by fn.
func (s *Server) AddService(name, typ string, fn ServiceFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.services[name] = &service{name: name, typ: typ, fn: fn}
}

// RemoveService removes a service; later calls get "does not exist".
func (s *Server) RemoveService(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.services, name)
}

func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	refuse := s.refuse
	s.mu.Unlock()
	if refuse {
		http.Error(w, "rosbridgetest: refusing connections", http.StatusServiceUnavailable)
		return
	}
	// Numbered before the handshake completes: connections are numbered in
	// the order the clients dialled them.
	s.mu.Lock()
	s.nconn++
	n, gen := s.nconn, s.drops
	s.mu.Unlock()
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	ws.SetReadLimit(64 << 20)
	ctx, cancel := context.WithCancel(context.Background())
	c := &conn{s: s, ws: ws, ctx: ctx, cancel: cancel, subs: map[string]map[string]subOpts{},
		advertised: map[string]string{}, conflicts: map[string]bool{}, streams: map[string]*stream{}, n: n}
	s.mu.Lock()
	s.conns[c] = true
	dropped := s.drops != gen // a Drop came during the handshake: it cuts this one too
	s.notifyLocked()
	s.mu.Unlock()
	if dropped {
		c.close()
	}
	defer func() {
		c.close()
		s.mu.Lock()
		delete(s.conns, c)
		s.notifyLocked()
		s.mu.Unlock()
	}()
	// One reader fills the connection's queue; one worker handles it in
	// order, like rosbridge's IncomingQueue: a blocked op blocks the ops
	// behind it, not the reading (so a close is still seen).
	queue := make(chan []byte, 1024)
	go func() {
		defer close(queue)
		for {
			typ, data, err := ws.Read(ctx)
			if err != nil {
				c.close()
				return
			}
			if typ != websocket.MessageText {
				s.logf("binary message ignored")
				continue
			}
			select {
			case queue <- data:
			case <-ctx.Done():
				return
			}
		}
	}()
	for data := range queue {
		if c.closed() {
			continue
		}
		if run := c.handle(data); run != nil {
			run()
		}
	}
}

// inline reports whether a handler runs in the connection's worker (the
// shipped thread settings) rather than in its own goroutine.
func (s *Server) inline(isService bool) bool {
	if s.opts.Concurrent {
		return false
	}
	return !(isService && s.opts.Version == Rosbridge011)
}

// marshal encodes v as rosbridge would: NaN and Inf become null.
func marshal(v any) (json.RawMessage, error) {
	if raw, ok := v.(json.RawMessage); ok {
		return raw, nil
	}
	return json.Marshal(sanitize(reflect.ValueOf(v)))
}

func sanitize(v reflect.Value) any {
	if !v.IsValid() {
		return nil
	}
	switch v.Kind() {
	case reflect.Float32, reflect.Float64:
		f := v.Float()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil
		}
		return f
	case reflect.Map:
		if v.IsNil() {
			return nil
		}
		out := make(map[string]any, v.Len())
		it := v.MapRange()
		for it.Next() {
			out[fmt.Sprint(it.Key().Interface())] = sanitize(it.Value())
		}
		return out
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() {
			return nil
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return v.Interface()
		}
		out := make([]any, v.Len())
		for i := range out {
			out[i] = sanitize(v.Index(i))
		}
		return out
	case reflect.Interface, reflect.Pointer:
		if v.IsNil() {
			return nil
		}
		if _, ok := v.Interface().(json.Marshaler); ok {
			return v.Interface()
		}
		return sanitize(v.Elem())
	}
	return v.Interface()
}
