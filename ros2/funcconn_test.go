package ros2

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/ros2/rosbridgetest"
)

// funcConn is a Conn made of funcs: the mapping tested without any socket.
type funcConn struct {
	subscribe  func(ctx context.Context, sub Subscription, fn func(TopicEvent)) (func(), error)
	publish    func(ctx context.Context, topic, typ string, msg any) error
	call       func(ctx context.Context, service string, args any) (json.RawMessage, error)
	sendGoal   func(ctx context.Context, req GoalRequest, feedback func(json.RawMessage)) (GoalHandle, error)
	cancelGoal func(ctx context.Context, action, id string) error
}

func (f *funcConn) Subscribe(ctx context.Context, sub Subscription, fn func(TopicEvent)) (func(), error) {
	if f.subscribe == nil {
		return func() {}, nil
	}
	return f.subscribe(ctx, sub, fn)
}
func (f *funcConn) Publish(ctx context.Context, topic, typ string, msg any) error {
	return f.publish(ctx, topic, typ, msg)
}
func (f *funcConn) CallService(ctx context.Context, service string, args any) (json.RawMessage, error) {
	if f.call == nil {
		return nil, &ServiceError{Service: service, Message: "Service " + service + " does not exist"}
	}
	return f.call(ctx, service, args)
}
func (f *funcConn) SendGoal(ctx context.Context, req GoalRequest, feedback func(json.RawMessage)) (GoalHandle, error) {
	return f.sendGoal(ctx, req, feedback)
}
func (f *funcConn) CancelGoal(ctx context.Context, action, id string) error {
	return f.cancelGoal(ctx, action, id)
}

func funcRig(t *testing.T, cfg Config, conn Conn) mhp.Device {
	t.Helper()
	cfg.URL = "ws://unused:9090"
	d, err := New(context.Background(), cfg, Options{Options: adapters.Options{Logger: quiet(), Refine: jobGrace(time.Second)}, Conn: conn})
	if err != nil {
		t.Fatal(err)
	}
	start(t, d)
	return mhp.AsSession(d, "test")
}

// TestMappingWithFuncConn checks the hook contract of each Conn error
// without a socket: nothing sent -> refusal, state idle; sent then lost ->
// fault; a goal handle's result decides the job.
func TestMappingWithFuncConn(t *testing.T) {
	cfg := baseConfig()
	cfg.Settings = []SettingConfig{{Setting: mhp.Setting{Name: "speed", Type: mhp.TypeNumber}, Topic: "/speed", MsgType: "std_msgs/msg/Float64"}}
	cfg.Actions = []ActionConfig{{Action: mhp.Action{Name: "move", Cancellable: true}, ROSAction: "/move", ActionType: moveType}}

	t.Run("publish not connected is a refusal", func(t *testing.T) {
		dev := funcRig(t, cfg, &funcConn{publish: func(ctx context.Context, topic, typ string, msg any) error { return ErrNotConnected }})
		ctx := context.Background()
		_, err := dev.Write(ctx, mhp.WriteRequest{Name: "speed", Value: 1.0})
		if e, ok := mhp.AsError(err); !ok || e.Code == mhp.CodeDeviceFault || !strings.Contains(e.Message, "not connected") {
			t.Fatalf("write: %v, want a refusal naming the link", err)
		}
		if p, _ := dev.Ping(ctx); p.State != mhp.StateIdle {
			t.Fatalf("state %s", p.State)
		}
	})
	t.Run("publish lost is unknown", func(t *testing.T) {
		dev := funcRig(t, cfg, &funcConn{publish: func(ctx context.Context, topic, typ string, msg any) error { return ErrConnLost }})
		_, err := dev.Write(context.Background(), mhp.WriteRequest{Name: "speed", Value: 1.0})
		if e, ok := mhp.AsError(err); !ok || !e.OutcomeUnknown() {
			t.Fatalf("write: %v, want outcome unknown", err)
		}
	})
	t.Run("goal statuses through the handle", func(t *testing.T) {
		for _, c := range []struct {
			res     GoalResult
			state   mhp.JobState
			outcome string
		}{
			{GoalResult{Status: StatusSucceeded, Result: true, Values: json.RawMessage(`{"ok":true}`)}, mhp.JobDone, ""},
			{GoalResult{Status: StatusCanceled, Result: true}, mhp.JobCancelled, ""},
			{GoalResult{Status: StatusAborted, Result: true, Values: json.RawMessage(`{"why":"collision"}`)}, mhp.JobFailed, mhp.OutcomeFailed},
			{GoalResult{Status: StatusCanceling, Result: true}, mhp.JobFailed, mhp.OutcomeUnknown},
			{GoalResult{Status: 0, Result: false, Values: json.RawMessage(`"bad args"`)}, mhp.JobFailed, mhp.OutcomeUnknown},
			{GoalResult{Err: ErrConnLost}, mhp.JobFailed, mhp.OutcomeUnknown},
		} {
			res := c.res
			dev := funcRig(t, cfg, &funcConn{sendGoal: func(ctx context.Context, req GoalRequest, fb func(json.RawMessage)) (GoalHandle, error) {
				ch := make(chan GoalResult, 1)
				ch <- res
				return GoalHandle{ID: "g1", Result: ch}, nil
			}})
			inv, err := dev.Invoke(context.Background(), mhp.InvokeRequest{Name: "move"})
			if err != nil {
				t.Fatal(err)
			}
			r := &rig{t: t, dev: dev}
			wantJob(t, r.waitJob(inv.Job.ID), c.state, c.outcome, "")
		}
	})
	t.Run("send goal not connected never starts", func(t *testing.T) {
		dev := funcRig(t, cfg, &funcConn{sendGoal: func(ctx context.Context, req GoalRequest, fb func(json.RawMessage)) (GoalHandle, error) {
			return GoalHandle{}, ErrNotConnected
		}})
		inv, err := dev.Invoke(context.Background(), mhp.InvokeRequest{Name: "move"})
		if err != nil {
			t.Fatal(err)
		}
		r := &rig{t: t, dev: dev}
		wantJob(t, r.waitJob(inv.Job.ID), mhp.JobFailed, mhp.OutcomeNotStarted, "not connected")
	})
	t.Run("estop error propagates", func(t *testing.T) {
		c := baseConfig()
		c.EStop = &EStopConfig{Service: "/estop"}
		dev := funcRig(t, c, &funcConn{call: func(ctx context.Context, service string, args any) (json.RawMessage, error) {
			return nil, errors.New("boom")
		}})
		res, err := dev.EStop(context.Background(), "test")
		if err != nil || res.Stopped || !strings.Contains(res.StopError, "boom") {
			t.Fatalf("estop %+v %v", res, err)
		}
	})
}

// TestOrphanCancelAfterReconnect: rosbridge 2.x keeps goal handles for all
// connections, so the cancel_action_goal sent on the new connection after a
// drop reaches the goal sent on the old one; cancel_all_on_reconnect also
// calls the action server's own cancel service.
func TestOrphanCancelAfterReconnect(t *testing.T) {
	for _, all := range []bool{false, true} {
		t.Run(map[bool]string{false: "cancel by id", true: "cancel all"}[all], func(t *testing.T) {
			srv := newServer(t, rosbridgetest.Options{})
			release := make(chan struct{})
			defer close(release)
			srv.AddAction("/arm/move_to", moveType, rosbridgetest.Scripted(rosbridgetest.Script{Release: release}))
			cfg := moveConfig(0)
			cfg.Actions[0].CancelAllOnReconnect = all
			r := newRig(t, srv, cfg, nil)
			id := r.invoke("move_to", nil)
			g, ok := srv.WaitGoal(wait, "/arm/move_to")
			if !ok {
				t.Fatal("goal never reached the robot")
			}
			before := srv.Accepted()
			srv.Drop()
			wantJob(t, r.waitJob(id), mhp.JobFailed, mhp.OutcomeUnknown, "lost")
			if _, ok := srv.WaitFor(wait, func(m rosbridgetest.Message) bool {
				return m.Op == "cancel_action_goal" && m.ID == g.ID && m.Conn > before
			}); !ok {
				t.Fatal("no cancel_action_goal after the reconnect")
			}
			if all {
				if _, ok := srv.WaitFor(wait, rosbridgetest.Op("call_service", "/arm/move_to/_action/cancel_goal")); !ok {
					t.Fatal("no cancel_goal service call")
				}
			}
			select {
			case <-g.Done():
			case <-time.After(wait):
				t.Fatal("the goal was not cancelled")
			}
			if g.Status() != rosbridgetest.StatusCanceled {
				t.Fatalf("status %d", g.Status())
			}
		})
	}
}
