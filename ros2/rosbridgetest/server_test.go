package rosbridgetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/openmhp/mhp-go/conformance"
)

const wait = 5 * time.Second

// raw is a bare WebSocket client: the wire as rosbridge clients see it.
type raw struct {
	t  *testing.T
	ws *websocket.Conn
}

func dialRaw(t *testing.T, s *Server) *raw {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, s.URL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	return &raw{t: t, ws: ws}
}

func (r *raw) send(v map[string]any) {
	r.t.Helper()
	b, _ := json.Marshal(v)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := r.ws.Write(ctx, websocket.MessageText, b); err != nil {
		r.t.Fatal(err)
	}
}

func (r *raw) recvText() string {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	_, b, err := r.ws.Read(ctx)
	if err != nil {
		r.t.Fatalf("read: %v", err)
	}
	return string(b)
}

func (r *raw) recv() map[string]any {
	r.t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(r.recvText()), &m); err != nil {
		r.t.Fatal(err)
	}
	return m
}

// sync makes a rosapi round trip: every message sent before it was handled
// by the time the answer arrives (one connection is handled in order).
func (r *raw) sync() {
	r.t.Helper()
	r.send(map[string]any{"op": "call_service", "id": "sync", "service": "/rosapi/topics"})
	for {
		if m := r.recv(); m["id"] == "sync" {
			return
		}
	}
}

func newTestServer(t *testing.T, o Options) *Server {
	o.Logf = t.Logf
	s := New(o)
	t.Cleanup(s.Close)
	return s
}

func TestThrottleQueueKeepsNewest(t *testing.T) {
	s := newTestServer(t, Options{})
	s.AddTopic("/x", "std_msgs/msg/Int32", false)
	c := dialRaw(t, s)
	c.send(map[string]any{"op": "subscribe", "id": "s1", "topic": "/x", "type": "std_msgs/msg/Int32", "throttle_rate": 50, "queue_length": 2})
	c.sync()
	for i := 0; i < 5; i++ {
		s.Publish("/x", map[string]any{"data": i})
	}
	var got []float64
	for len(got) < 3 {
		m := c.recv()
		got = append(got, m["msg"].(map[string]any)["data"].(float64))
	}
	if got[0] != 0 || got[1] != 3 || got[2] != 4 {
		t.Fatalf("got %v, want 0 then the newest two (3, 4)", got)
	}
}

func TestSilencesLikeRosbridge(t *testing.T) {
	s := newTestServer(t, Options{})
	s.AddTopic("/typed", "std_msgs/msg/Float64", true)
	s.Publish("/typed", map[string]any{"data": 1.5})
	c := dialRaw(t, s)
	c.send(map[string]any{"op": "subscribe", "id": "bad", "topic": "/typed", "type": "std_msgs/msg/String"})
	c.send(map[string]any{"op": "subscribe", "id": "unknown", "topic": "/nothing"})
	c.send(map[string]any{"op": "no_such_op"})
	c.send(map[string]any{"op": "advertise", "topic": "/typed", "type": "std_msgs/msg/Int8"})
	c.send(map[string]any{"op": "publish", "topic": "/typed", "msg": map[string]any{"data": 3}})
	c.sync() // nothing but the sync answer came back
	if s.Subscribers("/typed") != 0 || len(s.Published("/typed")) != 0 {
		t.Fatal("a wrongly typed subscribe or publish was accepted")
	}
	c.send(map[string]any{"op": "subscribe", "id": "good", "topic": "/typed", "type": "std_msgs/Float64"})
	if m := c.recv(); m["op"] != "publish" || m["msg"].(map[string]any)["data"] != 1.5 {
		t.Fatalf("latched message %v", m)
	}
}

// TestSilentGoalsBlockTheConnection: rosbridge 2.x answers nothing to a goal
// for an unknown action server, of a wrong action type or rejected, and on a
// sequential connection (the default) every later op waits behind it for
// good; with Concurrent the connection goes on.
func TestSilentGoalsBlockTheConnection(t *testing.T) {
	for _, concurrent := range []bool{false, true} {
		for _, goal := range []map[string]any{
			{"action": "/none", "action_type": "a/action/B"},
			{"action": "/fib", "action_type": "example_interfaces/action/Other"},
			{"action": "/reject", "action_type": "a/action/R"},
		} {
			name := fmt.Sprintf("%v concurrent=%v", goal["action"], concurrent)
			t.Run(name, func(t *testing.T) {
				s := newTestServer(t, Options{Concurrent: concurrent})
				s.AddAction("/fib", "example_interfaces/action/Fibonacci", Scripted(Script{}))
				s.AddAction("/reject", "a/action/R", Scripted(Script{Silent: true}))
				c := dialRaw(t, s)
				g := map[string]any{"op": "send_action_goal", "id": "g"}
				for k, v := range goal {
					g[k] = v
				}
				c.send(g)
				c.send(map[string]any{"op": "call_service", "id": "after", "service": "/rosapi/topics"})
				// Silence is checked over 300ms; an answer may take the
				// full wait on a loaded machine.
				window := 300 * time.Millisecond
				if concurrent {
					window = wait
				}
				ctx, cancel := context.WithTimeout(context.Background(), window)
				defer cancel()
				_, b, err := c.ws.Read(ctx)
				if concurrent {
					if err != nil || !strings.Contains(string(b), `"after"`) {
						t.Fatalf("concurrent: got %s %v, want the rosapi answer", b, err)
					}
					return
				}
				if err == nil {
					t.Fatalf("sequential: got %s, want silence (the goal blocks the connection)", b)
				}
				// Another connection is not blocked.
				dialRaw(t, s).sync()
			})
		}
	}
}

// TestSequentialGoalHoldsTheCancelOnItsConnection: a cancel sent on the
// goal's own connection waits until the goal ends; the same cancel from
// another connection reaches the goal at once (handles are global).
func TestSequentialGoalHoldsTheCancelOnItsConnection(t *testing.T) {
	s := newTestServer(t, Options{})
	release := make(chan struct{})
	s.AddAction("/move", "m/action/Move", Scripted(Script{Release: release}))
	c := dialRaw(t, s)
	c.send(map[string]any{"op": "send_action_goal", "id": "g1", "action": "/move", "action_type": "m/action/Move"})
	g, ok := s.WaitGoal(wait, "/move")
	if !ok {
		t.Fatal("no goal")
	}
	c.send(map[string]any{"op": "cancel_action_goal", "id": "g1", "action": "/move"})
	other := dialRaw(t, s)
	other.sync()
	if g.Cancels() != 0 || s.Count(Op("cancel_action_goal", "")) != 0 {
		t.Fatal("a cancel behind a running goal on its connection was handled")
	}
	other.send(map[string]any{"op": "cancel_action_goal", "id": "g1", "action": "/move"})
	if m := c.recv(); m["id"] != "g1" || m["status"] != float64(StatusCanceled) {
		t.Fatalf("goal after a cancel from another connection: %v, want CANCELED", m)
	}
}

func TestServiceAnswers(t *testing.T) {
	for _, v := range []Version{Rosbridge2, Rosbridge011} {
		t.Run(v.String(), func(t *testing.T) {
			s := newTestServer(t, Options{Version: v})
			s.AddService("/bad", "std_srvs/srv/SetBool", func(ctx context.Context, c *Call) (any, error) {
				return nil, BadArgs("std_srvs/SetBoolRequest", "data", "bool", "<class 'str'>")
			})
			s.AddService("/raises", "std_srvs/srv/Trigger", func(ctx context.Context, c *Call) (any, error) { return nil, errors.New("boom") })
			s.AddService("/ok", "std_srvs/srv/Trigger", func(ctx context.Context, c *Call) (any, error) {
				return map[string]any{"success": true, "message": "fine"}, nil
			})
			c := dialRaw(t, s)
			cases := []struct {
				service string
				result  bool
				values  string
			}{
				{"/missing", false, `"Service /missing does not exist"`},
				{"/bad", false, `"std_srvs/SetBoolRequest message requires a bool for field data, but got a <class 'str'>"`},
				{"/ok", true, `{"message":"fine","success":true}`},
				{"/rosapi/service_type", true, `{"type":"std_srvs/srv/Trigger"}`},
			}
			if v == Rosbridge011 {
				cases = append(cases, struct {
					service string
					result  bool
					values  string
				}{"/raises", false, `"service [/raises] responded with an error: boom"`})
			}
			for _, tc := range cases {
				c.send(map[string]any{"op": "call_service", "id": "c" + tc.service, "service": tc.service, "args": map[string]any{"service": "/ok"}})
				m := c.recv()
				var want any
				json.Unmarshal([]byte(tc.values), &want)
				if m["op"] != "service_response" || m["id"] != "c"+tc.service || m["result"] != tc.result || !reflect.DeepEqual(m["values"], want) {
					t.Errorf("%s: %v", tc.service, m)
				}
			}
			if v == Rosbridge2 {
				// A raising handler on ROS 2: no answer, and the
				// connection is blocked behind it.
				c.send(map[string]any{"op": "call_service", "id": "r", "service": "/raises"})
				c.send(map[string]any{"op": "call_service", "id": "after", "service": "/ok"})
				ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				defer cancel()
				if _, b, err := c.ws.Read(ctx); err == nil {
					t.Fatalf("raising handler on ROS 2: got %s, want silence", b)
				}
			}
		})
	}
}

func TestActionWire(t *testing.T) {
	for _, noStatus := range []bool{false, true} {
		s := newTestServer(t, Options{ResultWithoutStatus: noStatus})
		s.AddAction("/fib", "example_interfaces/action/Fibonacci", Scripted(Script{
			Feedback: []any{map[string]any{"partial": []int{0, 1}}}, Status: StatusAborted, Result: map[string]any{"sequence": []int{}}}))
		c := dialRaw(t, s)
		c.send(map[string]any{"op": "send_action_goal", "id": "g1", "action": "/fib", "action_type": "example_interfaces/action/Fibonacci", "args": map[string]any{"order": 2}, "feedback": true})
		if m := c.recv(); m["op"] != "action_feedback" || m["id"] != "g1" {
			t.Fatalf("feedback %v", m)
		}
		m := c.recv()
		if _, has := m["status"]; m["op"] != "action_result" || m["result"] != true || has == noStatus {
			t.Fatalf("result %v (without status: %v)", m, noStatus)
		}
		if !noStatus && m["status"] != float64(StatusAborted) {
			t.Fatalf("result %v, want status 6 with result true (rosbridge 2.x)", m)
		}
	}
}

// TestVersions: what each release answers to rosapi and action ops.
func TestVersions(t *testing.T) {
	for _, v := range []Version{Rosbridge2, Rosbridge1, Rosbridge011} {
		t.Run(v.String(), func(t *testing.T) {
			s := newTestServer(t, Options{Version: v})
			s.AddAction("/fib", "example_interfaces/action/Fibonacci", Scripted(Script{}))
			s.AddTopic("/t", "std_msgs/Float64", true)
			s.Publish("/t", map[string]any{"data": 2.0})
			c := dialRaw(t, s)
			call := func(service string, args map[string]any) map[string]any {
				c.send(map[string]any{"op": "call_service", "id": service, "service": service, "args": args})
				return c.recv()
			}
			ver := call("/rosapi/get_ros_version", nil)
			if (ver["result"] == true) == (v == Rosbridge011) {
				t.Errorf("get_ros_version: %v", ver)
			}
			srv := call("/rosapi/action_servers", nil)
			if srv["result"] != true {
				t.Errorf("action_servers: %v", srv)
			}
			// rosapi omits hidden services: the send_goal service has no
			// type on every release, and 2.x serves no /rosapi/action_type.
			st := call("/rosapi/service_type", map[string]any{"service": "/fib/_action/send_goal"})
			if st["values"].(map[string]any)["type"] != "" {
				t.Errorf("send_goal type: %v, want \"\" as rosbridge 2.x answers", st)
			}
			if at := call("/rosapi/action_type", map[string]any{"action": "/fib"}); at["result"] == true {
				t.Errorf("action_type: %v, want no such service", at)
			}
			c.send(map[string]any{"op": "send_action_goal", "id": "g", "action": "/fib", "action_type": "example_interfaces/action/Fibonacci"})
			c.send(map[string]any{"op": "subscribe", "id": "s", "topic": "/t", "type": "std_msgs/msg/Float64"})
			c.send(map[string]any{"op": "call_service", "id": "sync", "service": "/rosapi/topics"})
			got := []string{}
			for {
				m := c.recv()
				if m["id"] == "sync" {
					break
				}
				got = append(got, m["op"].(string))
			}
			wantOps := "[action_result publish]"
			switch v {
			case Rosbridge1:
				wantOps = "[publish]" // no action ops
			case Rosbridge011:
				wantOps = "[]" // no action ops, no pkg/msg/Type spelling
			}
			if fmt.Sprint(got) != wantOps {
				t.Errorf("ops answered %v, want %s", got, wantOps)
			}
		})
	}
}

// TestEarlyCancelDropped: with DropEarlyCancel (2.1.0) a cancel before the
// goal response is lost; once the goal is accepted it works.
func TestEarlyCancelDropped(t *testing.T) {
	s := newTestServer(t, Options{DropEarlyCancel: true, Concurrent: true})
	accept := make(chan struct{})
	s.AddAction("/move", "m/action/Move", Scripted(Script{AcceptAfter: accept, Feedback: []any{map[string]any{}}, Release: make(chan struct{})}))
	c := dialRaw(t, s)
	c.send(map[string]any{"op": "send_action_goal", "id": "g1", "action": "/move", "action_type": "m/action/Move", "feedback": true})
	g, ok := s.WaitGoal(wait, "/move")
	if !ok {
		t.Fatal("no goal")
	}
	c.send(map[string]any{"op": "cancel_action_goal", "id": "g1", "action": "/move"})
	c.sync()
	if g.DroppedCancels() != 1 || g.Cancels() != 0 {
		t.Fatalf("early cancel: dropped %d, cancels %d", g.DroppedCancels(), g.Cancels())
	}
	close(accept)
	if m := c.recv(); m["op"] != "action_feedback" {
		t.Fatalf("feedback %v", m)
	}
	c.send(map[string]any{"op": "cancel_action_goal", "id": "g1", "action": "/move"})
	if m := c.recv(); m["status"] != float64(StatusCanceled) {
		t.Fatalf("goal after the re-sent cancel: %v", m)
	}
}

func TestRefusedCancelAndCancelAll(t *testing.T) {
	s := newTestServer(t, Options{})
	release := make(chan struct{})
	s.AddAction("/move", "m/action/Move", Scripted(Script{Release: release, OnCancel: IgnoreCancel}))
	c := dialRaw(t, s)
	ctl := dialRaw(t, s)
	c.send(map[string]any{"op": "send_action_goal", "id": "g1", "action": "/move", "action_type": "m/action/Move"})
	g, ok := s.WaitGoal(wait, "/move")
	if !ok {
		t.Fatal("no goal")
	}
	ctl.send(map[string]any{"op": "cancel_action_goal", "id": "g1", "action": "/move"})
	ctl.sync()
	if g.Cancels() != 1 {
		t.Fatalf("cancels %d", g.Cancels())
	}
	close(release)
	if m := c.recv(); m["status"] != float64(StatusSucceeded) {
		t.Fatalf("a refused cancel ended %v, want SUCCEEDED", m)
	}

	// The action server's own cancel service with a zero goal id (roslib's
	// cancelAllGoals sends {}) cancels every goal, from any connection.
	s.AddAction("/hold", "m/action/Hold", Scripted(Script{Release: make(chan struct{})}))
	c.send(map[string]any{"op": "send_action_goal", "id": "h1", "action": "/hold", "action_type": "m/action/Hold"})
	if _, ok := s.WaitGoal(wait, "/hold"); !ok {
		t.Fatal("no goal")
	}
	other := dialRaw(t, s)
	other.send(map[string]any{"op": "call_service", "id": "all", "service": "/hold/_action/cancel_goal", "args": map[string]any{}})
	if m := other.recv(); m["result"] != true || len(m["values"].(map[string]any)["goals_canceling"].([]any)) != 1 {
		t.Fatalf("cancel_goal answer %v", m)
	}
	if m := c.recv(); m["id"] != "h1" || m["status"] != float64(StatusCanceled) {
		t.Fatalf("goal after cancel-all %v, want CANCELED", m)
	}
}

func TestActionlibOverTopics(t *testing.T) {
	s := newTestServer(t, Options{})
	s.AddActionlib("/arm/move", "arm_msgs/Move", Scripted(Script{Feedback: []any{map[string]any{"p": 1}}, Status: ActionlibAborted, Text: "collision"}))
	c := dialRaw(t, s)
	c.send(map[string]any{"op": "subscribe", "id": "r", "topic": "/arm/move/result", "type": "arm_msgs/MoveActionResult"})
	c.send(map[string]any{"op": "advertise", "topic": "/arm/move/goal", "type": "arm_msgs/MoveActionGoal"})
	c.sync()
	c.send(map[string]any{"op": "publish", "topic": "/arm/move/goal", "msg": map[string]any{"goal_id": map[string]any{"id": "G1"}, "goal": map[string]any{"x": 1}}})
	m := c.recv()
	st := m["msg"].(map[string]any)["status"].(map[string]any)
	if m["topic"] != "/arm/move/result" || st["status"] != float64(ActionlibAborted) || st["text"] != "collision" || st["goal_id"].(map[string]any)["id"] != "G1" {
		t.Fatalf("result %v", m)
	}
}

func TestROS1QuirksAndFragments(t *testing.T) {
	s := newTestServer(t, Options{ROS1Quirks: true, FragmentSize: 20})
	s.AddTopic("/a/b", "std_msgs/msg/Float64", false)
	c := dialRaw(t, s)
	c.send(map[string]any{"op": "subscribe", "id": "s", "topic": "/a/b"})
	// Every answer is fragmented here, so wait on the server's side.
	if _, ok := s.WaitFor(wait, Op("subscribe", "/a/b")); !ok {
		t.Fatal("no subscribe")
	}
	conformance.EventuallyWithin(t, "the subscription to register", wait, func() bool { return s.Subscribers("/a/b") > 0 })
	s.Publish("/a/b", map[string]any{"data": math.NaN()})
	var whole strings.Builder
	for {
		var f struct {
			Op    string `json:"op"`
			Data  string `json:"data"`
			Num   int    `json:"num"`
			Total int    `json:"total"`
		}
		text := c.recvText()
		if err := json.Unmarshal([]byte(text), &f); err != nil || f.Op != "fragment" {
			t.Fatalf("frame %s, want a fragment", text)
		}
		whole.WriteString(f.Data)
		if f.Num == f.Total-1 {
			break
		}
	}
	if got := whole.String(); !strings.Contains(got, `"topic":"\/a\/b"`) || !strings.Contains(got, `"data":null`) {
		t.Fatalf("reassembled %s, want escaped slashes and null for NaN", got)
	}
}

func TestDropAndRefuse(t *testing.T) {
	s := newTestServer(t, Options{})
	c := dialRaw(t, s)
	c.sync()
	s.Refuse(true)
	s.Drop()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if _, _, err := c.ws.Read(ctx); err == nil {
		t.Fatal("the connection survived Drop")
	}
	if _, _, err := websocket.Dial(ctx, s.URL(), nil); err == nil {
		t.Fatal("a refusing server accepted a connection")
	}
	s.Refuse(false)
	c2 := dialRaw(t, s)
	c2.sync()
	if s.Accepted() != 2 {
		t.Fatalf("accepted %d", s.Accepted())
	}
}
