package ros2

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go/conformance"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/clock"
	"github.com/openmhp/mhp-go/ros2/rosbridgetest"
)

const moveType = "arm_msgs/action/MoveTo"

func moveConfig(timeoutS float64) Config {
	cfg := baseConfig()
	cfg.Actions = []ActionConfig{{
		Action:    mhp.Action{Name: "move_to", Duration: mhp.DurationLong, Cancellable: true, Params: mhp.Params{{Name: "x", Shape: &mhp.Shape{Type: mhp.TypeNumber, Optional: true}}}},
		ROSAction: "/arm/move_to", ActionType: moveType, ProgressField: "percent", ProgressMax: 100,
		TimeoutS: timeoutS, CancelWaitS: 3,
	}}
	return cfg
}

// TestGoalTerminalStates drives a ROS 2 action through every way a goal can
// end and checks the job's state, outcome and the device state.
func TestGoalTerminalStates(t *testing.T) {
	type tc struct {
		name    string
		script  rosbridgetest.Script
		fn      rosbridgetest.ActionFunc // instead of script
		typ     string                   // action type in the config, default moveType
		timeout float64
		cancel  bool // jobs/cancel once the goal runs
		release bool // then let the robot finish
		state   mhp.JobState
		outcome string
		dev     mhp.DeviceState
		errText string
		opts    rosbridgetest.Options
		first   float64 // first_response_s
		server  string  // the action server's name, default /arm/move_to
	}
	for _, c := range []tc{
		{name: "succeeded", script: rosbridgetest.Script{Feedback: []any{map[string]any{"percent": 50.0}}, Result: map[string]any{"reached": true}},
			state: mhp.JobDone, dev: mhp.StateIdle},
		{name: "aborted", script: rosbridgetest.Script{Status: rosbridgetest.StatusAborted, Result: map[string]any{"error_code": 7}},
			state: mhp.JobFailed, outcome: mhp.OutcomeFailed, dev: mhp.StateIdle, errText: "aborted"},
		{name: "canceled on request", script: rosbridgetest.Script{Release: make(chan struct{})}, cancel: true,
			state: mhp.JobCancelled, dev: mhp.StateIdle},
		{name: "canceled by the robot", script: rosbridgetest.Script{Status: rosbridgetest.StatusCanceled},
			state: mhp.JobCancelled, dev: mhp.StateIdle},
		{name: "cancel refused, robot succeeds", script: rosbridgetest.Script{OnCancel: rosbridgetest.IgnoreCancel}, cancel: true, release: true,
			state: mhp.JobDone, dev: mhp.StateIdle},
		{name: "cancel refused, robot aborts", script: rosbridgetest.Script{OnCancel: rosbridgetest.IgnoreCancel, Status: rosbridgetest.StatusAborted}, cancel: true, release: true,
			state: mhp.JobFailed, outcome: mhp.OutcomeFailed, dev: mhp.StateIdle},
		{name: "non-terminal status", script: rosbridgetest.Script{Status: rosbridgetest.StatusExecuting},
			state: mhp.JobFailed, outcome: mhp.OutcomeUnknown, dev: mhp.StateFault, errText: "non-terminal status EXECUTING"},
		{name: "bridge failure result false", fn: func(g *rosbridgetest.Goal) { g.FailBridge("args do not fit") },
			state: mhp.JobFailed, outcome: mhp.OutcomeUnknown, dev: mhp.StateFault, errText: "args do not fit"},
		{name: "bridge refusal: unable to import", fn: func(g *rosbridgetest.Goal) { g.FailBridge("Unable to import arm_msgs.action from package arm_msgs") },
			state: mhp.JobFailed, outcome: mhp.OutcomeNotStarted, dev: mhp.StateIdle, errText: "Unable to import"},
		{name: "bridge refusal: no such field", fn: func(g *rosbridgetest.Goal) {
			g.FailBridge("Message type arm_msgs/action/MoveTo_Goal does not have a field speed")
		}, state: mhp.JobFailed, outcome: mhp.OutcomeNotStarted, dev: mhp.StateIdle, errText: "does not have a field"},
		// rosbridge answers nothing to these; rosapi says so before the goal.
		{name: "bad action type", typ: "arm_msgs/action/Wrong", script: rosbridgetest.Script{}, opts: rosbridgetest.Options{RosapiActionType: true},
			state: mhp.JobFailed, outcome: mhp.OutcomeNotStarted, dev: mhp.StateIdle, errText: "has type arm_msgs/action/MoveTo"},
		{name: "bad action type, hidden service types", typ: "arm_msgs/action/Wrong", script: rosbridgetest.Script{}, opts: rosbridgetest.Options{HiddenServiceTypes: true},
			state: mhp.JobFailed, outcome: mhp.OutcomeNotStarted, dev: mhp.StateIdle, errText: "has type arm_msgs/action/MoveTo"},
		{name: "no action server", server: "/arm/other", script: rosbridgetest.Script{},
			state: mhp.JobFailed, outcome: mhp.OutcomeNotStarted, dev: mhp.StateIdle, errText: "no action server /arm/move_to"},
		{name: "no action server, rosbridge 1.x", server: "/arm/other", script: rosbridgetest.Script{}, opts: rosbridgetest.Options{Version: rosbridgetest.Rosbridge1},
			state: mhp.JobFailed, outcome: mhp.OutcomeNotStarted, dev: mhp.StateIdle, errText: "no action server /arm/move_to"},
		{name: "rejected goal: silence bounded", script: rosbridgetest.Script{Silent: true}, first: 0.2,
			state: mhp.JobFailed, outcome: mhp.OutcomeUnknown, dev: mhp.StateFault, errText: "no action_feedback or action_result"},
		{name: "rosbridge 1.x: no action ops", script: rosbridgetest.Script{}, first: 0.2, opts: rosbridgetest.Options{Version: rosbridgetest.Rosbridge1},
			state: mhp.JobFailed, outcome: mhp.OutcomeUnknown, dev: mhp.StateFault, errText: "1.x has no action ops"},
		{name: "result without status", script: rosbridgetest.Script{}, opts: rosbridgetest.Options{ResultWithoutStatus: true},
			state: mhp.JobFailed, outcome: mhp.OutcomeUnknown, dev: mhp.StateFault, errText: "without a status"},
		{name: "no result before the deadline", script: rosbridgetest.Script{Silent: true}, timeout: 0.2,
			state: mhp.JobFailed, outcome: mhp.OutcomeUnknown, dev: mhp.StateFault, errText: "before the deadline"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := newServer(t, c.opts)
			release := make(chan struct{})
			if c.release || c.script.Release == nil && (c.cancel) {
				c.script.Release = release
			}
			fn := c.fn
			if fn == nil {
				fn = rosbridgetest.Scripted(c.script)
			}
			if c.server == "" {
				c.server = "/arm/move_to"
			}
			srv.AddAction(c.server, moveType, fn)
			cfg := moveConfig(c.timeout)
			cfg.Actions[0].FirstResponseS = c.first
			if c.typ != "" {
				cfg.Actions[0].ActionType = c.typ
			}
			r := newRig(t, srv, cfg, nil)
			start := time.Now()
			id := r.invoke("move_to", map[string]any{"x": 0.5})
			if c.cancel {
				g, ok := srv.WaitGoal(wait, "/arm/move_to")
				if !ok {
					t.Fatal("goal never reached the robot")
				}
				if _, err := r.dev.CancelJob(r.ctx(), id); err != nil {
					t.Fatal(err)
				}
				if _, ok := srv.WaitFor(wait, rosbridgetest.Op("cancel_action_goal", "/arm/move_to")); !ok {
					t.Fatal("no cancel_action_goal sent")
				}
				conformance.EventuallyWithin(t, "the robot to see the cancel", wait, func() bool { return g.Cancels() == 1 })
				if c.release {
					close(release)
				}
			}
			j := r.waitJob(id)
			wantJob(t, j, c.state, c.outcome, c.errText)
			if got := r.state(); got != c.dev {
				t.Fatalf("device %s, want %s", got, c.dev)
			}
			if c.name == "succeeded" {
				if res, _ := j.Result.(map[string]any); res["reached"] != true {
					t.Fatalf("result %v", j.Result)
				}
				var args struct {
					X float64 `json:"x"`
				}
				m, _ := srv.WaitFor(wait, rosbridgetest.Op("send_action_goal", "/arm/move_to"))
				var op struct {
					Args     json.RawMessage `json:"args"`
					Feedback bool            `json:"feedback"`
				}
				json.Unmarshal(m.Raw, &op)
				json.Unmarshal(op.Args, &args)
				if args.X != 0.5 || !op.Feedback || m.Type != moveType {
					t.Fatalf("goal sent %s", m.Raw)
				}
			}
			if c.timeout > 0 || (c.first > 0 && c.opts.Version == rosbridgetest.Rosbridge2) {
				if _, ok := srv.WaitFor(wait, rosbridgetest.Op("cancel_action_goal", "/arm/move_to")); !ok {
					t.Fatal("a goal past its deadline was not cancelled")
				}
			}
			if c.timeout > 0 || c.first > 0 {
				if el := time.Since(start); el > 2*time.Second {
					t.Fatalf("deadline 0.2s took %v", el)
				}
			}
			if c.outcome == mhp.OutcomeNotStarted && c.fn == nil && srv.Count(rosbridgetest.Op("send_action_goal", "")) != 0 {
				t.Fatal("a goal refused before sending reached the bridge")
			}
		})
	}
}

// TestGoalFeedbackProgress checks that feedback becomes progress through the
// configured field and scale.
func TestGoalFeedbackProgress(t *testing.T) {
	srv := newServer(t, rosbridgetest.Options{})
	release := make(chan struct{})
	srv.AddAction("/arm/move_to", moveType, rosbridgetest.Scripted(rosbridgetest.Script{
		Feedback: []any{map[string]any{"percent": 40.0}}, Release: release}))
	r := newRig(t, srv, moveConfig(0), nil)
	id := r.invoke("move_to", nil)
	conformance.EventuallyWithin(t, "progress 0.4", wait, func() bool {
		j, _ := r.dev.Job(r.ctx(), id)
		return j != nil && j.Progress == 0.4
	})
	j, _ := r.dev.Job(r.ctx(), id)
	if fb, _ := j.Extra["feedback"].(map[string]any); fb["percent"] != int64(40) {
		t.Fatalf("extra %v, want the feedback values", j.Extra)
	}
	close(release)
	wantJob(t, r.waitJob(id), mhp.JobDone, "", "")
}

// TestServiceActionStates covers a service as a short action.
func TestServiceActionStates(t *testing.T) {
	for _, c := range []struct {
		name    string
		fn      rosbridgetest.ServiceFunc // nil: the service does not exist
		timeout float64
		state   mhp.JobState
		outcome string
		dev     mhp.DeviceState
		errText string
	}{
		{"success", func(ctx context.Context, c *rosbridgetest.Call) (any, error) {
			return map[string]any{"success": true, "message": "homed"}, nil
		}, 0, mhp.JobDone, "", mhp.StateIdle, ""},
		{"application failure", func(ctx context.Context, c *rosbridgetest.Call) (any, error) {
			return map[string]any{"success": false, "message": "brakes engaged"}, nil
		}, 0, mhp.JobFailed, mhp.OutcomeFailed, mhp.StateIdle, "brakes engaged"},
		{"missing service", nil, 0, mhp.JobFailed, mhp.OutcomeNotStarted, mhp.StateIdle, "does not exist"},
		{"bad argument type", func(ctx context.Context, c *rosbridgetest.Call) (any, error) {
			return nil, rosbridgetest.BadArgs("std_srvs/SetBoolRequest", "data", "bool", "<class 'str'>")
		}, 0, mhp.JobFailed, mhp.OutcomeNotStarted, mhp.StateIdle, "requires a bool"},
		// rosbridge on ROS 2 answers nothing when the handler raises.
		{"handler raised", func(ctx context.Context, c *rosbridgetest.Call) (any, error) {
			return nil, errors.New("servo overcurrent")
		}, 0.2, mhp.JobFailed, mhp.OutcomeUnknown, mhp.StateFault, "no service_response"},
		{"no reply", func(ctx context.Context, c *rosbridgetest.Call) (any, error) {
			return nil, rosbridgetest.NoReply
		}, 0.2, mhp.JobFailed, mhp.OutcomeUnknown, mhp.StateFault, "no service_response"},
		{"link dropped", func(ctx context.Context, c *rosbridgetest.Call) (any, error) {
			return nil, rosbridgetest.Drop
		}, 0, mhp.JobFailed, mhp.OutcomeUnknown, mhp.StateFault, "connection to rosbridge lost"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := newServer(t, rosbridgetest.Options{})
			if c.fn != nil {
				srv.AddService("/arm/home", "std_srvs/srv/Trigger", c.fn)
			}
			cfg := baseConfig()
			cfg.Actions = []ActionConfig{{Action: mhp.Action{Name: "home"}, Service: "/arm/home", TimeoutS: c.timeout}}
			r := newRig(t, srv, cfg, nil)
			start := time.Now()
			j := r.waitJob(r.invoke("home", nil))
			wantJob(t, j, c.state, c.outcome, c.errText)
			if got := r.state(); got != c.dev {
				t.Fatalf("device %s, want %s", got, c.dev)
			}
			if c.timeout > 0 && time.Since(start) > 2*time.Second {
				t.Fatalf("deadline %vs took %v", c.timeout, time.Since(start))
			}
		})
	}
}

const ros1Type = "arm_msgs/MoveTo"

func actionlibConfig() Config {
	cfg := baseConfig()
	cfg.Actions = []ActionConfig{{
		Action:    mhp.Action{Name: "move_to", Duration: mhp.DurationLong, Cancellable: true, Params: mhp.Params{{Name: "x", Shape: &mhp.Shape{Type: mhp.TypeNumber, Optional: true}}}},
		Actionlib: "/arm/move_to", ActionType: ros1Type, ProgressField: "progress", CancelWaitS: 3,
	}}
	return cfg
}

// TestActionlibStates covers ROS 1 actionlib goals over topics.
func TestActionlibStates(t *testing.T) {
	for _, c := range []struct {
		name    string
		script  rosbridgetest.Script
		cancel  bool
		state   mhp.JobState
		outcome string
		dev     mhp.DeviceState
		errText string
	}{
		{name: "succeeded", script: rosbridgetest.Script{Feedback: []any{map[string]any{"progress": 0.5}}, Result: map[string]any{"ok": true}},
			state: mhp.JobDone, dev: mhp.StateIdle},
		{name: "aborted", script: rosbridgetest.Script{Status: rosbridgetest.ActionlibAborted, Text: "joint limit"},
			state: mhp.JobFailed, outcome: mhp.OutcomeFailed, dev: mhp.StateIdle, errText: "joint limit"},
		{name: "rejected", script: rosbridgetest.Script{Status: rosbridgetest.ActionlibRejected, Text: "target unreachable"},
			state: mhp.JobFailed, outcome: mhp.OutcomeNotStarted, dev: mhp.StateIdle, errText: "target unreachable"},
		{name: "preempted on cancel", script: rosbridgetest.Script{Release: make(chan struct{})}, cancel: true,
			state: mhp.JobCancelled, dev: mhp.StateIdle},
		{name: "recalled", script: rosbridgetest.Script{Status: rosbridgetest.ActionlibRecalled},
			state: mhp.JobCancelled, dev: mhp.StateIdle},
		{name: "lost", script: rosbridgetest.Script{Status: rosbridgetest.ActionlibLost},
			state: mhp.JobFailed, outcome: mhp.OutcomeUnknown, dev: mhp.StateFault, errText: "LOST"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := newServer(t, rosbridgetest.Options{ROS1Quirks: true})
			srv.AddActionlib("/arm/move_to", ros1Type, rosbridgetest.Scripted(c.script))
			r := newRig(t, srv, actionlibConfig(), nil)
			id := r.invoke("move_to", map[string]any{"x": 1.0})
			if c.cancel {
				g, ok := srv.WaitGoal(wait, "/arm/move_to")
				if !ok {
					t.Fatal("goal never reached the robot")
				}
				r.dev.CancelJob(r.ctx(), id)
				conformance.EventuallyWithin(t, "the cancel to reach the robot", wait, func() bool { return g.Cancels() == 1 })
			}
			wantJob(t, r.waitJob(id), c.state, c.outcome, c.errText)
			if got := r.state(); got != c.dev {
				t.Fatalf("device %s, want %s", got, c.dev)
			}
			goal := srv.Published("/arm/move_to/goal")
			if len(goal) != 1 || !strings.Contains(string(goal[0]), `"x":1`) || !strings.Contains(string(goal[0]), "mhp-arm-01-"+id) {
				t.Fatalf("goal messages %s", goal)
			}
		})
	}
}

// TestActionlibDropEndsUnknownAndCancelsOnReconnect: a ROS 1 goal in flight
// when the link drops ends unknown, and its cancel goes out once it is back.
func TestActionlibDropEndsUnknownAndCancelsOnReconnect(t *testing.T) {
	srv := newServer(t, rosbridgetest.Options{})
	release := make(chan struct{})
	defer close(release)
	srv.AddActionlib("/arm/move_to", ros1Type, rosbridgetest.Scripted(rosbridgetest.Script{Release: release}))
	r := newRig(t, srv, actionlibConfig(), nil)
	id := r.invoke("move_to", nil)
	g, ok := srv.WaitGoal(wait, "/arm/move_to")
	if !ok {
		t.Fatal("goal never reached the robot")
	}
	srv.Drop()
	wantJob(t, r.waitJob(id), mhp.JobFailed, mhp.OutcomeUnknown, "lost")
	select {
	case <-g.Done():
	case <-time.After(wait):
		t.Fatal("the robot's goal was never cancelled after the reconnect")
	}
	if g.Status() != rosbridgetest.ActionlibPreempted {
		t.Fatalf("robot goal status %d", g.Status())
	}
}

// TestReconnectResubscribesAndGoalsEndUnknown: a drop makes signals
// unavailable and the goal in flight end unknown (fault); the client redials,
// resubscribes (fresh values read again) and cancels the orphaned goal.
func TestReconnectResubscribesAndGoalsEndUnknown(t *testing.T) {
	srv := newServer(t, rosbridgetest.Options{})
	srv.AddTopic("/arm/temp", "std_msgs/msg/Float64", false)
	release := make(chan struct{})
	defer close(release)
	srv.AddAction("/arm/move_to", moveType, rosbridgetest.Scripted(rosbridgetest.Script{Release: release}))
	cfg := moveConfig(0)
	cfg.Signals = []SignalConfig{{Signal: mhp.Signal{Name: "temp", Type: mhp.TypeNumber}, Topic: "/arm/temp", MsgType: "std_msgs/msg/Float64"}}
	r := newRig(t, srv, cfg, nil)
	srv.WaitFor(wait, rosbridgetest.Op("subscribe", "/arm/temp"))
	srv.Publish("/arm/temp", map[string]any{"data": 30.5})
	conformance.EventuallyWithin(t, "the first value", wait, func() bool { v, _ := r.read("temp"); return v == 30.5 })

	id := r.invoke("move_to", nil)
	g, ok := srv.WaitGoal(wait, "/arm/move_to")
	if !ok {
		t.Fatal("goal never reached the robot")
	}
	goalMsg, _ := srv.WaitFor(wait, rosbridgetest.Op("send_action_goal", "/arm/move_to"))
	srv.Refuse(true)
	before := srv.Accepted()
	srv.Drop()
	j := r.waitJob(id)
	wantJob(t, j, mhp.JobFailed, mhp.OutcomeUnknown, "lost")
	if st := r.state(); st != mhp.StateFault {
		t.Fatalf("device %s after a goal ended unknown, want fault", st)
	}
	// The goal had a connection of its own: its loss may be seen before
	// the main connection's.
	conformance.EventuallyWithin(t, "temp unavailable while the link is down", wait, func() bool {
		v, why := r.read("temp")
		return v == nil && why != ""
	})
	srv.Refuse(false)
	if _, ok := srv.WaitFor(wait, func(m rosbridgetest.Message) bool {
		return m.Op == "cancel_action_goal" && m.ID == goalMsg.ID && m.Conn > before
	}); !ok {
		t.Fatal("the orphaned goal was not cancelled after the reconnect")
	}
	select {
	case <-g.Done():
	case <-time.After(wait):
		t.Fatal("the robot's goal never ended")
	}
	if _, ok := srv.WaitFor(wait, func(m rosbridgetest.Message) bool {
		return m.Op == "subscribe" && m.Topic == "/arm/temp" && m.Conn > before
	}); !ok {
		t.Fatal("no resubscribe")
	}
	srv.Publish("/arm/temp", map[string]any{"data": 31.0})
	conformance.EventuallyWithin(t, "a fresh value after the reconnect", wait, func() bool { v, _ := r.read("temp"); return v == 31.0 })
}

// TestStaleTopicOpensInterlock: a signal older than max_age reads
// unavailable and its interlock refuses the action; a fresh message closes it.
func TestStaleTopicOpensInterlock(t *testing.T) {
	srv := newServer(t, rosbridgetest.Options{})
	srv.AddTopic("/cell/door_closed", "std_msgs/msg/Bool", false)
	srv.AddService("/arm/home", "std_srvs/srv/Trigger", func(ctx context.Context, c *rosbridgetest.Call) (any, error) {
		return map[string]any{"success": true}, nil
	})
	cfg := baseConfig()
	cfg.Signals = []SignalConfig{{Signal: mhp.Signal{Name: "door_closed", Type: mhp.TypeBoolean}, Topic: "/cell/door_closed",
		MsgType: "std_msgs/msg/Bool", MaxAgeS: 2, ThrottleMs: 100, QueueLength: 1}}
	cfg.Actions = []ActionConfig{{Action: mhp.Action{Name: "home", Interlocks: []string{"door_closed"}}, Service: "/arm/home"}}
	clk := clock.NewManual(time.Now())
	r := newRig(t, srv, cfg, clk)
	sub, _ := srv.WaitFor(wait, rosbridgetest.Op("subscribe", "/cell/door_closed"))
	if !strings.Contains(string(sub.Raw), `"throttle_rate":100`) || !strings.Contains(string(sub.Raw), `"queue_length":1`) {
		t.Fatalf("subscribe op %s lacks throttle_rate/queue_length", sub.Raw)
	}
	if v, why := r.read("door_closed"); v != nil || !strings.Contains(why, "no message") {
		t.Fatalf("before any message: %v %q", v, why)
	}
	srv.Publish("/cell/door_closed", map[string]any{"data": true})
	conformance.EventuallyWithin(t, "door closed", wait, func() bool { v, _ := r.read("door_closed"); return v == true })
	wantJob(t, r.waitJob(r.invoke("home", nil)), mhp.JobDone, "", "")

	clk.Advance(2500 * time.Millisecond)
	v, why := r.read("door_closed")
	if v != nil || !strings.Contains(why, "stale") {
		t.Fatalf("after 2.5s without messages: %v %q, want stale", v, why)
	}
	_, err := r.dev.Invoke(r.ctx(), mhp.InvokeRequest{Name: "home"})
	if e, ok := mhp.AsError(err); !ok || e.Code != mhp.CodeInterlockOpen {
		t.Fatalf("invoke with a stale interlock: %v, want InterlockOpen", err)
	}
	srv.Publish("/cell/door_closed", map[string]any{"data": true})
	conformance.EventuallyWithin(t, "a fresh door value", wait, func() bool { v, _ := r.read("door_closed"); return v == true })
	wantJob(t, r.waitJob(r.invoke("home", nil)), mhp.JobDone, "", "")
}

// TestEStopThroughService: the robot's Trigger service is the stop; a
// refusal or no answer leaves the device in estop with stopped:false.
func TestEStopThroughService(t *testing.T) {
	for _, c := range []struct {
		name    string
		fn      rosbridgetest.ServiceFunc
		stopped bool
		errText string
	}{
		{"stopped", func(ctx context.Context, c *rosbridgetest.Call) (any, error) {
			return map[string]any{"success": true, "message": "brakes on"}, nil
		}, true, ""},
		{"refused", func(ctx context.Context, c *rosbridgetest.Call) (any, error) {
			return map[string]any{"success": false, "message": "controller offline"}, nil
		}, false, "controller offline"},
		{"no answer", func(ctx context.Context, c *rosbridgetest.Call) (any, error) {
			return nil, rosbridgetest.NoReply
		}, false, "no service_response"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := newServer(t, rosbridgetest.Options{})
			srv.AddService("/arm/estop", "std_srvs/srv/Trigger", c.fn)
			cfg := baseConfig()
			cfg.EStop = &EStopConfig{Service: "/arm/estop", TimeoutS: 0.3}
			r := newRig(t, srv, cfg, nil)
			start := time.Now()
			res, err := r.dev.EStop(r.ctx(), "test")
			if err != nil {
				t.Fatal(err)
			}
			if res.State != mhp.StateEStop || res.Stopped != c.stopped || !strings.Contains(res.StopError, c.errText) {
				t.Fatalf("estop %+v, want stopped %v with %q", res, c.stopped, c.errText)
			}
			if time.Since(start) > 2*time.Second {
				t.Fatalf("estop took %v with a 0.3s deadline", time.Since(start))
			}
			if n := srv.Count(rosbridgetest.Op("call_service", "/arm/estop")); n != 1 {
				t.Fatalf("estop service called %d times", n)
			}
			if st := r.state(); st != mhp.StateEStop {
				t.Fatalf("state %s", st)
			}
		})
	}
}

// TestEStopThroughTopic publishes the configured stop message.
func TestEStopThroughTopic(t *testing.T) {
	srv := newServer(t, rosbridgetest.Options{})
	srv.AddTopic("/arm/estop", "std_msgs/msg/Bool", false)
	cfg := baseConfig()
	cfg.EStop = &EStopConfig{Topic: "/arm/estop", MsgType: "std_msgs/msg/Bool", Msg: map[string]any{"data": true}}
	r := newRig(t, srv, cfg, nil)
	res, err := r.dev.EStop(r.ctx(), "test")
	if err != nil || !res.Stopped {
		t.Fatalf("estop %+v %v", res, err)
	}
	if _, ok := srv.WaitFor(wait, rosbridgetest.Op("publish", "/arm/estop")); !ok {
		t.Fatal("no stop published")
	}
	if p := srv.Published("/arm/estop"); len(p) != 1 || msgField(t, p[0], "data") != true {
		t.Fatalf("published %s", p)
	}
}

// TestSettingTopicSentOrConfirmed: a plain publish reports "sent"; with a
// state topic echoing the value it reports "applied".
func TestSettingTopicSentOrConfirmed(t *testing.T) {
	srv := newServer(t, rosbridgetest.Options{})
	srv.AddTopic("/arm/speed", "std_msgs/msg/Float64", false)
	srv.AddTopic("/arm/speed_state", "std_msgs/msg/Float64", false)
	srv.AddTopic("/arm/led", "std_msgs/msg/Bool", false)
	srv.OnPublish("/arm/speed", func(msg json.RawMessage) { // the robot applies and reports
		var m map[string]any
		json.Unmarshal(msg, &m)
		srv.Publish("/arm/speed_state", map[string]any{"data": m["cmd"].(map[string]any)["value"]})
	})
	cfg := baseConfig()
	cfg.Settings = []SettingConfig{
		{Setting: mhp.Setting{Name: "speed", Type: mhp.TypeNumber, Limits: mhp.Range(0, 1)}, Topic: "/arm/speed", MsgType: "std_msgs/msg/Float64",
			Field: "cmd.value", Template: map[string]any{"cmd": map[string]any{"unit": "ratio"}},
			Confirm: &ConfirmConfig{Topic: "/arm/speed_state", MsgType: "std_msgs/msg/Float64", Tolerance: 0.001, TimeoutS: 2}},
		{Setting: mhp.Setting{Name: "led", Type: mhp.TypeBoolean}, Topic: "/arm/led", MsgType: "std_msgs/msg/Bool"},
	}
	r := newRig(t, srv, cfg, nil)
	res, err := r.dev.Write(r.ctx(), mhp.WriteRequest{Name: "led", Value: true})
	if err != nil || res.Applied || res.Status != mhp.WriteSent {
		t.Fatalf("unconfirmed write %+v %v, want status sent", res, err)
	}
	if _, ok := srv.WaitFor(wait, rosbridgetest.Op("publish", "/arm/led")); !ok {
		t.Fatal("led not published")
	}
	if adv := srv.Count(rosbridgetest.Op("advertise", "/arm/led")); adv != 1 {
		t.Fatalf("advertised %d times", adv)
	}
	res, err = r.dev.Write(r.ctx(), mhp.WriteRequest{Name: "speed", Value: 0.25})
	if err != nil || !res.Applied {
		t.Fatalf("confirmed write %+v %v, want applied", res, err)
	}
	p := srv.Published("/arm/speed")
	if len(p) != 1 || !strings.Contains(string(p[0]), `"unit":"ratio"`) || !strings.Contains(string(p[0]), `"value":0.25`) {
		t.Fatalf("published %s, want the template with the value at cmd.value", p)
	}
}

// TestSettingServiceRefusal: a service-backed setting's success:false is a
// refusal that leaves the device idle; a missing service too.
func TestSettingServiceRefusal(t *testing.T) {
	srv := newServer(t, rosbridgetest.Options{})
	srv.AddService("/arm/set_mode", "arm_msgs/srv/SetMode", func(ctx context.Context, c *rosbridgetest.Call) (any, error) {
		var a struct{ Mode string }
		c.Decode(&a)
		return map[string]any{"success": a.Mode != "turbo", "message": "mode " + a.Mode + " not allowed"}, nil
	})
	cfg := baseConfig()
	cfg.Settings = []SettingConfig{
		{Setting: mhp.Setting{Name: "mode", Type: mhp.TypeString}, Service: "/arm/set_mode", Field: "mode"},
		{Setting: mhp.Setting{Name: "gone", Type: mhp.TypeString}, Service: "/arm/gone"},
	}
	r := newRig(t, srv, cfg, nil)
	res, err := r.dev.Write(r.ctx(), mhp.WriteRequest{Name: "mode", Value: "slow"})
	if err != nil || !res.Applied {
		t.Fatalf("write %+v %v", res, err)
	}
	for _, w := range []struct{ name, value, text string }{{"mode", "turbo", "not allowed"}, {"gone", "x", "does not exist"}} {
		_, err = r.dev.Write(r.ctx(), mhp.WriteRequest{Name: w.name, Value: w.value})
		e, ok := mhp.AsError(err)
		if !ok || e.Code == mhp.CodeDeviceFault || !strings.Contains(e.Message, w.text) {
			t.Fatalf("write %s=%s: %v, want a refusal naming %q", w.name, w.value, err, w.text)
		}
	}
	if st := r.state(); st != mhp.StateIdle {
		t.Fatalf("state %s after refusals", st)
	}
}

// TestBadTypeClearErrorWithinDeadline: rosbridge answers nothing to a wrong
// type; the adapter turns each case into a clear error within its deadline.
func TestBadTypeClearErrorWithinDeadline(t *testing.T) {
	setup := func(t *testing.T) *rosbridgetest.Server {
		srv := newServer(t, rosbridgetest.Options{})
		srv.AddTopic("/arm/speed", "std_msgs/msg/Float64", false)
		srv.AddTopic("/arm/speed_state", "std_msgs/msg/Float64", true)
		srv.AddTopic("/arm/temp", "std_msgs/msg/Float64", true)
		srv.Publish("/arm/temp", map[string]any{"data": 20.0})
		return srv
	}
	t.Run("setting publish with the wrong msg_type", func(t *testing.T) {
		srv := setup(t)
		cfg := baseConfig()
		cfg.Settings = []SettingConfig{{Setting: mhp.Setting{Name: "speed", Type: mhp.TypeNumber}, Topic: "/arm/speed", MsgType: "std_msgs/msg/Int32",
			Confirm: &ConfirmConfig{Topic: "/arm/speed_state", TimeoutS: 0.3}}}
		r := newRig(t, srv, cfg, nil)
		start := time.Now()
		_, err := r.dev.Write(r.ctx(), mhp.WriteRequest{Name: "speed", Value: 0.5})
		e, ok := mhp.AsError(err)
		if !ok || e.Code != mhp.CodeDeviceFault || !strings.Contains(e.Message, "msg_type") || !strings.Contains(e.Message, "/arm/speed_state") {
			t.Fatalf("write: %v, want DeviceFault naming the state topic and msg_type", err)
		}
		if el := time.Since(start); el > 2*time.Second {
			t.Fatalf("took %v with a 0.3s confirm deadline", el)
		}
		if len(srv.Published("/arm/speed")) != 0 {
			t.Fatal("the fake accepted a wrongly typed publish")
		}
	})
	t.Run("signal subscribed with the wrong msg_type", func(t *testing.T) {
		srv := setup(t)
		cfg := baseConfig()
		cfg.Signals = []SignalConfig{{Signal: mhp.Signal{Name: "temp", Type: mhp.TypeNumber}, Topic: "/arm/temp", MsgType: "std_msgs/msg/String"}}
		r := newRig(t, srv, cfg, nil)
		srv.WaitFor(wait, rosbridgetest.Op("subscribe", "/arm/temp"))
		if v, why := r.read("temp"); v != nil || !strings.Contains(why, "wrong msg_type") {
			t.Fatalf("read %v %q, want unavailable explaining the silence", v, why)
		}
	})
	t.Run("check_types refuses to start", func(t *testing.T) {
		srv := setup(t)
		cfg := baseConfig()
		cfg.URL = srv.URL()
		cfg.CheckTypes = true
		cfg.Signals = []SignalConfig{{Signal: mhp.Signal{Name: "temp", Type: mhp.TypeNumber}, Topic: "/arm/temp", MsgType: "std_msgs/msg/String"}}
		d, err := New(context.Background(), cfg, Options{Options: adapters.Options{Logger: quiet()}})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		err = d.Start(ctx)
		if err == nil || !strings.Contains(err.Error(), "std_msgs/msg/Float64") || !strings.Contains(err.Error(), "std_msgs/msg/String") {
			t.Fatalf("start: %v, want the mismatch named", err)
		}
	})
	t.Run("check_types passes matching types", func(t *testing.T) {
		srv := setup(t)
		cfg := baseConfig()
		cfg.CheckTypes = true
		cfg.Signals = []SignalConfig{{Signal: mhp.Signal{Name: "temp", Type: mhp.TypeNumber}, Topic: "/arm/temp", MsgType: "std_msgs/Float64"}}
		r := newRig(t, srv, cfg, nil)
		conformance.EventuallyWithin(t, "temp", wait, func() bool { v, _ := r.read("temp"); return v == 20.0 })
	})
}

// TestSignalValues: field paths, integer coercion, null and type mismatch.
func TestSignalValues(t *testing.T) {
	srv := newServer(t, rosbridgetest.Options{})
	srv.AddTopic("/joint_states", "sensor_msgs/msg/JointState", false)
	cfg := baseConfig()
	cfg.Signals = []SignalConfig{
		{Signal: mhp.Signal{Name: "j2", Type: mhp.TypeNumber}, Topic: "/joint_states", Field: "position[1]"},
		{Signal: mhp.Signal{Name: "count", Type: mhp.TypeInteger}, Topic: "/joint_states", Field: "header.seq"},
		{Signal: mhp.Signal{Name: "name", Type: mhp.TypeBoolean}, Topic: "/joint_states", Field: "name[0]"},
		{Signal: mhp.Signal{Name: "whole", Type: mhp.TypeObject}, Topic: "/joint_states", Field: "."},
	}
	r := newRig(t, srv, cfg, nil)
	srv.WaitFor(wait, rosbridgetest.Op("subscribe", "/joint_states"))
	srv.Publish("/joint_states", map[string]any{"header": map[string]any{"seq": 7}, "name": []any{"j1"}, "position": []any{0.1, 0.2}})
	conformance.EventuallyWithin(t, "j2", wait, func() bool { v, _ := r.read("j2"); return v == 0.2 })
	// Each signal has its own subscription: wait for each handler.
	conformance.EventuallyWithin(t, "count as int64 7", wait, func() bool { v, _ := r.read("count"); return v == int64(7) })
	conformance.EventuallyWithin(t, "name unavailable: not a boolean", wait, func() bool {
		v, why := r.read("name")
		return v == nil && strings.Contains(why, "not a boolean")
	})
	conformance.EventuallyWithin(t, "the whole message", wait, func() bool {
		v, _ := r.read("whole")
		m, _ := v.(map[string]any)
		return m["header"] != nil
	})
}

// TestAdvertiseAheadAndAfterReconnect: the estop topic is advertised at start
// and again right after a reconnect, so the stop is never the first message
// after its own advertise (ROS 1 can lose that one).
func TestAdvertiseAheadAndAfterReconnect(t *testing.T) {
	srv := newServer(t, rosbridgetest.Options{})
	srv.AddTopic("/arm/estop", "std_msgs/msg/Empty", false)
	cfg := baseConfig()
	cfg.EStop = &EStopConfig{Topic: "/arm/estop", MsgType: "std_msgs/msg/Empty"}
	r := newRig(t, srv, cfg, nil)
	first, ok := srv.WaitFor(wait, func(m rosbridgetest.Message) bool { return m.Op == "advertise" && m.Topic == "/arm/estop" })
	if !ok {
		t.Fatal("estop topic not advertised at start")
	}
	before := srv.Accepted()
	srv.Drop()
	again, ok := srv.WaitFor(wait, func(m rosbridgetest.Message) bool {
		return m.Op == "advertise" && m.Topic == "/arm/estop" && m.Conn > before
	})
	if !ok {
		t.Fatal("estop topic not advertised again after the reconnect")
	}
	conformance.EventuallyWithin(t, "the link", wait, func() bool { return r.a.client.Connected() })
	if st := r.state(); st != mhp.StateIdle {
		t.Fatalf("state %s after a drop with nothing in flight, want idle (no fault)", st)
	}
	res, err := r.dev.EStop(r.ctx(), "test")
	if err != nil || !res.Stopped {
		t.Fatalf("estop %+v %v", res, err)
	}
	pub, ok := srv.WaitFor(wait, func(m rosbridgetest.Message) bool { return m.Op == "publish" && m.Topic == "/arm/estop" })
	if !ok {
		t.Fatal("no stop published")
	}
	if pub.Conn != again.Conn || pub.Conn == first.Conn {
		t.Fatalf("stop published on connection %d, advertised on %d (before the drop %d)", pub.Conn, again.Conn, first.Conn)
	}
	// The estop connection carries nothing but the estop.
	if n := srv.Count(func(m rosbridgetest.Message) bool { return m.Conn == pub.Conn && m.Topic != "/arm/estop" }); n != 0 {
		t.Fatalf("%d other messages on the estop connection", n)
	}
	if n := srv.Count(func(m rosbridgetest.Message) bool { return m.Op == "advertise" && m.Conn == pub.Conn }); n != 1 {
		t.Fatalf("%d advertises on the estop connection, want 1 (the publish must not re-advertise)", n)
	}
}
