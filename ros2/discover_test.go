package ros2_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/ros2"
	"github.com/openmhp/mhp-go/ros2/rosbridgetest"
)

// robotFake is a robot as rosapi lists it: sensor topics, services and an
// action server.
func robotFake(t *testing.T, v rosbridgetest.Version) *rosbridgetest.Server {
	t.Helper()
	s := rosbridgetest.New(rosbridgetest.Options{Version: v, RosapiActionType: true})
	t.Cleanup(s.Close)
	spell := func(pkg, kind, typ string) string {
		if v == rosbridgetest.Rosbridge011 {
			return pkg + "/" + typ
		}
		return pkg + "/" + kind + "/" + typ
	}
	s.AddTopic("/cell/door_closed", spell("std_msgs", "msg", "Bool"), true)
	s.AddTopic("/arm/joint1/temperature", spell("sensor_msgs", "msg", "Temperature"), true)
	s.AddTopic("/arm/tool_pose", spell("geometry_msgs", "msg", "PoseStamped"), false)
	s.AddTopic("/gripper/temperature", spell("sensor_msgs", "msg", "Temperature"), false)
	s.AddTopic("/rosout", spell("rcl_interfaces", "msg", "Log"), false)
	ok := func(context.Context, *rosbridgetest.Call) (any, error) { return map[string]any{"success": true}, nil }
	s.AddService("/arm/home", spell("std_srvs", "srv", "Trigger"), ok)
	s.AddService("/arm/gripper/enable", spell("std_srvs", "srv", "SetBool"), ok)
	s.AddService("/arm/estop", spell("std_srvs", "srv", "Trigger"), ok)
	s.AddService("/arm/set_parameters", spell("rcl_interfaces", "srv", "SetParameters"), ok)
	s.AddService("/arm/plan", spell("arm_msgs", "srv", "Plan"), ok)
	if v == rosbridgetest.Rosbridge011 {
		s.AddActionlib("/arm/move_to", "arm_msgs/MoveToAction", func(g *rosbridgetest.Goal) {})
	} else {
		s.AddAction("/arm/move_to", "arm_msgs/action/MoveTo", func(g *rosbridgetest.Goal) {})
	}
	return s
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func discoverCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func signalOf(c ros2.Config, topic string) *ros2.SignalConfig {
	for i := range c.Signals {
		if c.Signals[i].Topic == topic {
			return &c.Signals[i]
		}
	}
	return nil
}

// TestDiscover: rosapi's topics, services and action servers become a
// config that round-trips (Load, Validate, New), starts and reads the
// robot's values.
func TestDiscover(t *testing.T) {
	s := robotFake(t, rosbridgetest.Rosbridge2)
	r := adapters.NewRegistry()
	if err := ros2.Register(r); err != nil {
		t.Fatal(err)
	}
	ctx := discoverCtx(t)
	g, err := r.Discover(ctx, ros2.Kind, s.URL(), adapters.DiscoverOptions{DeviceID: "arm-01", Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	cfg := g.Config.(ros2.Config)
	door := signalOf(cfg, "/cell/door_closed")
	temp := signalOf(cfg, "/arm/joint1/temperature")
	gtemp := signalOf(cfg, "/gripper/temperature")
	pose := signalOf(cfg, "/arm/tool_pose")
	if door == nil || door.Type != mhp.TypeBoolean || door.Field != "data" || door.MsgType != "std_msgs/msg/Bool" ||
		temp == nil || temp.Unit != "degC" || temp.Field != "temperature" || pose == nil || pose.Type != mhp.TypeObject ||
		gtemp == nil || gtemp.Name == temp.Name || signalOf(cfg, "/rosout") != nil {
		t.Fatalf("signals %+v", cfg.Signals)
	}
	if len(cfg.Settings) != 1 || cfg.Settings[0].Service != "/arm/gripper/enable" || cfg.Settings[0].Type != mhp.TypeBoolean ||
		cfg.Settings[0].Approval != mhp.ApprovalConfirm {
		t.Fatalf("settings %+v", cfg.Settings)
	}
	acts := map[string]ros2.ActionConfig{}
	for _, a := range cfg.Actions {
		acts[a.Name] = a
		if a.Approval != mhp.ApprovalConfirm {
			t.Errorf("action %s approval %q", a.Name, a.Approval)
		}
	}
	if acts["home"].Service != "/arm/home" || acts["move_to"].ROSAction != "/arm/move_to" || acts["move_to"].ActionType != "arm_msgs/action/MoveTo" ||
		acts["plan"].Service != "/arm/plan" || len(acts) != 3 {
		t.Fatalf("actions %+v", acts)
	}
	text := string(g.YAML)
	for _, w := range []string{"Proposed: service /arm/estop", "PROPOSED INTERLOCK", "TODO(integrator): params", "rosbridge on ROS 2 jazzy"} {
		if !strings.Contains(text, w) {
			t.Errorf("file lacks %q\n%s", w, text)
		}
	}
	loaded, err := ros2.Load(adapters.Source{Path: "robot.yaml", Data: g.YAML})
	if err != nil {
		t.Fatalf("Load: %v\n%s", err, text)
	}
	d, err := ros2.New(ctx, loaded, ros2.Options{Options: adapters.Options{Logger: quiet()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(ctx); err != nil {
		t.Fatalf("Start (check_types against rosapi): %v", err)
	}
	defer d.Close()
	s.Publish("/cell/door_closed", map[string]any{"data": true})
	conformance.EventuallyWithin(t, "the door signal", 5*time.Second, func() bool {
		res, err := d.Read(ctx, []string{door.Name})
		return err == nil && res.Values[door.Name] == true
	})
}

// TestDiscoverROS1: on a ROS 1 bridge the types are spelt pkg/Type and
// action servers are actionlib namespaces, their topics not signals.
func TestDiscoverROS1(t *testing.T) {
	s := robotFake(t, rosbridgetest.Rosbridge011)
	s.AddTopic("/arm/move_to/goal", "arm_msgs/MoveToActionGoal", false)
	cfg, _, err := ros2.Discover(discoverCtx(t), s.URL(), ros2.DiscoverOptions{DiscoverOptions: adapters.DiscoverOptions{Logger: quiet()}})
	if err != nil {
		t.Fatal(err)
	}
	if d := signalOf(cfg, "/cell/door_closed"); d == nil || d.MsgType != "std_msgs/Bool" {
		t.Fatalf("ROS 1 spelling: %+v", d)
	}
	var move *ros2.ActionConfig
	for i := range cfg.Actions {
		if cfg.Actions[i].Actionlib == "/arm/move_to" {
			move = &cfg.Actions[i]
		}
	}
	if move == nil || move.ActionType != "arm_msgs/MoveTo" || signalOf(cfg, "/arm/move_to/goal") != nil {
		t.Fatalf("actionlib: %+v, goal topic as signal: %v", move, signalOf(cfg, "/arm/move_to/goal") != nil)
	}
}

// untyped answers as rosbridge 2.x's rosapi does for an action server's
// hidden services: no type; the hidden feedback topic has one.
type untyped struct{ ros2.Conn }

func (u untyped) CallService(ctx context.Context, service string, args any) (json.RawMessage, error) {
	b, _ := json.Marshal(args)
	switch {
	case service == "/rosapi/action_type": // rosbridge 2.0/2.1: no such service
		return nil, &ros2.ServiceError{Service: service, Message: "service /rosapi/action_type does not exist"}
	case service == "/rosapi/service_type" && strings.Contains(string(b), "/_action/"):
		return json.RawMessage(`{"type":""}`), nil
	case service == "/rosapi/topic_type" && strings.Contains(string(b), "/arm/move_to/_action/feedback"):
		return json.RawMessage(`{"type":"arm_msgs/action/MoveTo_FeedbackMessage"}`), nil
	}
	return u.Conn.CallService(ctx, service, args)
}

// TestDiscoverUntypedActionServices: the action type falls back to the
// hidden feedback topic's; without that too, the action is skipped and
// the report says why.
func TestDiscoverUntypedActionServices(t *testing.T) {
	s := robotFake(t, rosbridgetest.Rosbridge2)
	c, err := ros2.Dial(discoverCtx(t), s.URL(), ros2.ClientOptions{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cfg, rep, err := ros2.Discover(discoverCtx(t), s.URL(), ros2.DiscoverOptions{Conn: untyped{c}, DiscoverOptions: adapters.DiscoverOptions{Logger: quiet()}})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, a := range cfg.Actions {
		found = found || (a.ROSAction == "/arm/move_to" && a.ActionType == "arm_msgs/action/MoveTo")
	}
	if !found {
		t.Fatalf("no fallback type: %+v", cfg.Actions)
	}
	s.AddAction("/arm/wave", "arm_msgs/action/Wave", func(g *rosbridgetest.Goal) {})
	_, rep, err = ros2.Discover(discoverCtx(t), s.URL(), ros2.DiscoverOptions{Conn: untyped{c}, DiscoverOptions: adapters.DiscoverOptions{Logger: quiet()}})
	if err != nil {
		t.Fatal(err)
	}
	skipped := false
	for _, sk := range rep.Skipped {
		skipped = skipped || (sk.Source == "/arm/wave" && strings.Contains(sk.Why, "no type"))
	}
	if !skipped {
		t.Fatalf("untyped action not reported: %+v", rep.Skipped)
	}
}
