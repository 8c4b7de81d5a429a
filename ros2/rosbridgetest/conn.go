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
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// blockUntilClosed is what a sequential connection does for a request that
// never gets an answer: it waits, and every later op waits behind it.
func (c *conn) blockUntilClosed() { <-c.ctx.Done() }

// conn is one client connection.
type conn struct {
	s      *Server
	ws     *websocket.Conn
	n      int
	ctx    context.Context
	cancel context.CancelFunc
	once   sync.Once
	wmu    sync.Mutex
	fragN  int

	mu         sync.Mutex
	subs       map[string]map[string]subOpts // topic -> subscription id -> options
	advertised map[string]string
	conflicts  map[string]bool // topics this connection advertised with a conflicting type
	streams    map[string]*stream
}

type subOpts struct {
	throttle time.Duration
	queue    int
}

// stream is the throttle/queue state of one topic on one connection.
type stream struct {
	last  time.Time
	queue []json.RawMessage
	timer *time.Timer
}

func (c *conn) close() {
	c.once.Do(func() {
		c.cancel()
		c.ws.CloseNow()
		c.mu.Lock()
		for _, st := range c.streams {
			if st.timer != nil {
				st.timer.Stop()
			}
		}
		c.mu.Unlock()
	})
}

func (c *conn) closed() bool { return c.ctx.Err() != nil }

// send writes one message; it reports whether it went out.
func (c *conn) send(v any) bool {
	if c.closed() {
		return false
	}
	b, err := marshal(v)
	if err != nil {
		c.s.logf("cannot encode %T: %v", v, err)
		return false
	}
	if c.s.opts.ROS1Quirks {
		b = bytes.ReplaceAll(b, []byte("/"), []byte(`\/`))
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	ctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
	defer cancel()
	size := c.s.opts.FragmentSize
	if size <= 0 || len(b) <= size {
		return c.ws.Write(ctx, websocket.MessageText, b) == nil
	}
	c.fragN++
	id := "fragment:" + strconv.Itoa(c.fragN)
	total := (len(b) + size - 1) / size
	for i := 0; i < total; i++ {
		end := min((i+1)*size, len(b))
		f, _ := json.Marshal(map[string]any{"op": "fragment", "id": id, "data": string(b[i*size : end]), "num": i, "total": total})
		if c.ws.Write(ctx, websocket.MessageText, f) != nil {
			return false
		}
	}
	return true
}

type clientMsg struct {
	Op           string          `json:"op"`
	ID           string          `json:"id"`
	Topic        string          `json:"topic"`
	Type         string          `json:"type"`
	Msg          json.RawMessage `json:"msg"`
	ThrottleRate int             `json:"throttle_rate"`
	QueueLength  int             `json:"queue_length"`
	Service      string          `json:"service"`
	Args         json.RawMessage `json:"args"`
	Action       string          `json:"action"`
	ActionType   string          `json:"action_type"`
	Feedback     bool            `json:"feedback"`
}

// handle handles one op. A returned func is the op's long work (a service
// handler, a goal): the caller runs it in the worker (sequential) or the
// handle arranged a goroutine for it (Concurrent).
func (c *conn) handle(data []byte) (inlineRun func()) {
	var m clientMsg
	if err := json.Unmarshal(data, &m); err != nil {
		c.s.logf("unparsable message: %v", err) // rosbridge only logs it
		return nil
	}
	s := c.s
	s.mu.Lock()
	if s.dying {
		s.swallowed++
		s.notifyLocked()
		s.mu.Unlock()
		s.logf("%s from a client while the bridge restarts: swallowed", m.Op)
		return nil
	}
	s.mu.Unlock()
	// Recorded once handled, so a test that saw a subscribe in WaitFor can
	// publish and reach it; work that answers (a service handler, a goal)
	// starts only after the record.
	var after func()
	inline := false
	defer func() {
		typ := m.Type
		if m.Op == "send_action_goal" {
			typ = m.ActionType
		}
		s.mu.Lock()
		s.received = append(s.received, Message{Op: m.Op, ID: m.ID, Topic: m.Topic, Service: m.Service, Action: m.Action, Type: typ,
			Raw: append(json.RawMessage(nil), data...), Conn: c.n})
		s.notifyLocked()
		s.mu.Unlock()
		switch {
		case after == nil:
		case inline:
			inlineRun = after
		default:
			go after()
		}
	}()
	ros1 := s.opts.Version == Rosbridge011
	if ros1 && (m.Op == "advertise" || m.Op == "subscribe") && strings.Count(m.Type, "/") == 2 {
		s.logf("%s %s: type %s cannot be loaded on ROS 1 (dropped silently)", m.Op, m.Topic, m.Type)
		return nil
	}
	if s.opts.Version != Rosbridge2 && (m.Op == "send_action_goal" || m.Op == "cancel_action_goal") {
		s.logf("unknown operation %q on %s (no reply)", m.Op, s.opts.Version)
		return nil
	}

	switch m.Op {
	case "advertise":
		s.mu.Lock()
		t, ok := s.topics[m.Topic]
		if ok && t.typ != "" && !sameType(t.typ, m.Type) {
			s.mu.Unlock()
			s.logf("advertise %s as %s: topic already has type %s (dropped silently)", m.Topic, m.Type, t.typ)
			c.mu.Lock()
			c.conflicts[m.Topic] = true
			c.mu.Unlock()
			return nil
		}
		t = s.topicLocked(m.Topic, m.Type)
		if t.typ == "" {
			t.typ = m.Type
		}
		s.mu.Unlock()
		c.mu.Lock()
		c.advertised[m.Topic] = m.Type
		delete(c.conflicts, m.Topic)
		c.mu.Unlock()
	case "unadvertise":
		c.mu.Lock()
		delete(c.advertised, m.Topic)
		c.mu.Unlock()
	case "publish":
		c.mu.Lock()
		conflict := c.conflicts[m.Topic]
		_, adv := c.advertised[m.Topic]
		c.mu.Unlock()
		s.mu.Lock()
		t, exists := s.topics[m.Topic]
		if conflict || (!adv && (!exists || t.typ == "")) {
			s.mu.Unlock()
			s.logf("publish on %s dropped silently (not advertised or type conflict)", m.Topic)
			return nil
		}
		t.published = append(t.published, m.Msg)
		t.last = m.Msg
		obs := slices.Clone(t.observers)
		cs := s.connList()
		s.mu.Unlock()
		for _, fn := range obs {
			fn(m.Msg)
		}
		for _, other := range cs {
			other.deliver(m.Topic, m.Msg)
		}
	case "subscribe":
		s.mu.Lock()
		t, ok := s.topics[m.Topic]
		switch {
		case !ok && m.Type == "":
			s.mu.Unlock()
			s.logf("subscribe %s: unknown topic and no type (dropped silently)", m.Topic)
			return nil
		case ok && m.Type != "" && t.typ != "" && !sameType(t.typ, m.Type):
			s.mu.Unlock()
			s.logf("subscribe %s as %s: topic has type %s (dropped silently)", m.Topic, m.Type, t.typ)
			return nil
		case !ok:
			t = s.topicLocked(m.Topic, m.Type)
		}
		if t.typ == "" {
			t.typ = m.Type
		}
		var latched json.RawMessage
		if t.latch {
			latched = t.last
		}
		s.mu.Unlock()
		c.mu.Lock()
		if c.subs[m.Topic] == nil {
			c.subs[m.Topic] = map[string]subOpts{}
		}
		c.subs[m.Topic][m.ID] = subOpts{throttle: time.Duration(m.ThrottleRate) * time.Millisecond, queue: m.QueueLength}
		c.mu.Unlock()
		if latched != nil {
			c.send(map[string]any{"op": "publish", "topic": m.Topic, "msg": latched})
		}
	case "unsubscribe":
		c.mu.Lock()
		if m.ID == "" {
			delete(c.subs, m.Topic)
		} else {
			delete(c.subs[m.Topic], m.ID)
		}
		c.mu.Unlock()
	case "call_service":
		inline = s.inline(true)
		after = c.callService(m, inline)
	case "send_action_goal":
		inline = s.inline(false)
		after = c.sendGoal(m, inline)
	case "cancel_action_goal":
		s.cancelGoal(m.ID)
	default:
		s.logf("unknown op %q (no reply)", m.Op)
	}
	return nil
}

// sameType compares ROS type names, treating "pkg/msg/T", "pkg/srv/T" and
// "pkg/action/T" as "pkg/T".
func sameType(a, b string) bool {
	norm := func(t string) string {
		p := strings.Split(t, "/")
		if len(p) == 3 {
			return p[0] + "/" + p[2]
		}
		return t
	}
	return norm(a) == norm(b)
}

// callService answers built-in services at once and returns the handler
// run of a declared one (nil when answered).
func (c *conn) callService(m clientMsg, inline bool) func() {
	s := c.s
	reply := func(values any, ok bool) {
		c.send(map[string]any{"op": "service_response", "id": m.ID, "service": m.Service, "values": values, "result": ok})
	}
	if values, ok := s.rosapi(m.Service, m.Args); ok {
		reply(values, true)
		return nil
	}
	if name, ok := strings.CutSuffix(m.Service, "/_action/cancel_goal"); ok {
		if n, handled := s.cancelGoalService(name, m.Args); handled {
			reply(map[string]any{"return_code": 0, "goals_canceling": n}, true)
			return nil
		}
	}
	s.mu.Lock()
	sv, ok := s.services[m.Service]
	s.mu.Unlock()
	if !ok {
		reply("Service "+m.Service+" does not exist", false)
		return nil
	}
	call := &Call{ID: m.ID, Service: m.Service, Args: m.Args, Conn: c.n, c: c}
	silent := func() {
		if inline {
			c.blockUntilClosed()
		}
	}
	return func() {
		values, err := sv.fn(c.ctx, call)
		var bad *BadArgsError
		switch {
		case err == nil:
			reply(values, true)
		case errors.Is(err, NoReply):
			silent()
		case errors.Is(err, Drop):
			c.close()
		case errors.As(err, &bad):
			reply(bad.Text, false)
		case s.opts.Version == Rosbridge011:
			reply(fmt.Sprintf("service [%s] responded with an error: %v", m.Service, err), false)
		default:
			// rosbridge 2.x on ROS 2: the handler's exception never
			// reaches the caller and there is no timeout.
			s.logf("service %s: handler raised %v (no reply)", m.Service, err)
			silent()
		}
	}
}
