package ros2

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go/conformance"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/ros2/rosbridgetest"
)

const examplePath = "../examples/ros2-arm/robot.yaml"

func TestRegister(t *testing.T) {
	r := adapters.NewRegistry()
	if err := Register(r); err != nil {
		t.Fatal(err)
	}
	if err := Register(r); err == nil {
		t.Fatal("registering ros2 twice succeeded")
	}
	if k := r.Kinds(); len(k) != 1 || k[0] != Kind {
		t.Fatalf("kinds %v", k)
	}
	d, err := r.Open(context.Background(), examplePath)
	if err != nil {
		t.Fatalf("open the example: %v", err)
	}
	desc := d.Descriptor()
	if desc.ID != "arm-01" || len(desc.Signals) != 3 || len(desc.Settings) != 2 || len(desc.Actions) != 2 || !desc.Safety.EStop {
		t.Fatalf("descriptor %+v", desc)
	}
	d.Close()

	// The file's Refine reaches the bindings (a device package's descriptor
	// merge), and its refusal is the open's error.
	d, err = r.OpenRefined(context.Background(), examplePath, func(bc *binding.Config) error {
		bc.Notes = "refined"
		return nil
	})
	if err != nil || d.Descriptor().Notes != "refined" {
		t.Fatalf("refined open: %v", err)
	}
	d.Close()
	refused := errors.New("descriptor does not match")
	if _, err := r.OpenRefined(context.Background(), examplePath, func(*binding.Config) error { return refused }); !errors.Is(err, refused) {
		t.Fatalf("refine refusal: %v", err)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []struct{ name, yaml, want string }{
		{"unknown field", "adapter: ros2\ndevice: {id: a}\nurl: ws://x:9090\nsignals:\n  - {name: s, topic: /s, max_age: 2}\n", "max_age"},
		{"no url", "adapter: ros2\ndevice: {id: a}\n", "url is required"},
		{"two targets", "adapter: ros2\ndevice: {id: a}\nurl: ws://x:9090\nactions:\n  - {name: a, service: /a, action: /a, action_type: t/T}\n", "exactly one"},
		{"bad path", "adapter: ros2\ndevice: {id: a}\nurl: ws://x:9090\nsignals:\n  - {name: s, topic: /s, field: 'a[x]'}\n", "bad index"},
		{"setting without msg_type", "adapter: ros2\ndevice: {id: a}\nurl: ws://x:9090\nsettings:\n  - {name: s, type: number, topic: /s}\n", "msg_type is required"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := adapters.NewRegistry()
			Register(r)
			_, err := r.Build(context.Background(), adapters.Source{Path: "robot.yaml", Data: []byte(c.yaml)})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want %q", err, c.want)
			}
		})
	}
}

// TestLoad: Load decodes strictly, refuses another adapter's file and
// validates, naming the field.
func TestLoad(t *testing.T) {
	for _, c := range []struct{ name, yaml, want string }{
		{"ok", "adapter: ros2\ndevice: {id: a}\nurl: ws://x:9090\n", ""},
		{"another adapter", "adapter: opcua\ndevice: {id: a}\nurl: ws://x:9090\n", `adapter is "opcua", not "ros2"`},
		{"unknown field", "adapter: ros2\ndevice: {id: a}\nurl: ws://x:9090\nretries: 3\n", "line 4: field retries not found"},
		{"not websocket", "adapter: ros2\ndevice: {id: a}\nurl: http://x:9090\n", "not ws:// or wss://"},
		{"negative time", "adapter: ros2\ndevice: {id: a}\nurl: ws://x:9090\nrequest_timeout_s: -1\n", "request_timeout_s -1 is negative"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Load(adapters.Source{Path: "robot.yaml", Data: []byte(c.yaml)})
			switch {
			case c.want == "" && err != nil:
				t.Fatal(err)
			case c.want == "" && (cfg.URL != "ws://x:9090" || cfg.Device.ID != "a"):
				t.Fatalf("loaded %+v", cfg)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("err %v, want %q", err, c.want)
			}
		})
	}
}

// TestExampleRobot runs the example config against a fake arm that has its
// topics, services and action: the README's walkthrough as a test.
func TestExampleRobot(t *testing.T) {
	data, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(adapters.Source{Path: examplePath, Dir: filepath.Dir(examplePath), Data: data})
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, rosbridgetest.Options{})
	srv.AddTopic("/cell/door_closed", "std_msgs/msg/Bool", true)
	srv.AddTopic("/arm/joint1/temperature", "sensor_msgs/msg/Temperature", true)
	srv.AddTopic("/arm/tool_pose", "geometry_msgs/msg/PoseStamped", true)
	srv.AddTopic("/arm/speed_scale", "std_msgs/msg/Float64", false)
	srv.AddTopic("/arm/speed_scale_state", "std_msgs/msg/Float64", false)
	srv.Publish("/cell/door_closed", map[string]any{"data": true})
	srv.Publish("/arm/joint1/temperature", map[string]any{"temperature": 41.5, "variance": 0})
	srv.Publish("/arm/tool_pose", map[string]any{"pose": map[string]any{"position": map[string]any{"x": 0, "y": 0, "z": 0.42}}})
	srv.OnPublish("/arm/speed_scale", func(msg json.RawMessage) { srv.Publish("/arm/speed_scale_state", json.RawMessage(msg)) })
	srv.AddService("/arm/gripper/enable", "std_srvs/srv/SetBool", func(ctx context.Context, c *rosbridgetest.Call) (any, error) {
		return map[string]any{"success": true, "message": "gripper on"}, nil
	})
	srv.AddService("/arm/home", "std_srvs/srv/Trigger", func(ctx context.Context, c *rosbridgetest.Call) (any, error) {
		return map[string]any{"success": true, "message": "homed"}, nil
	})
	srv.AddService("/arm/estop", "std_srvs/srv/Trigger", func(ctx context.Context, c *rosbridgetest.Call) (any, error) {
		return map[string]any{"success": true, "message": "brakes engaged"}, nil
	})
	goals := make(chan json.RawMessage, 1)
	srv.AddAction("/arm/move_to", "arm_msgs/action/MoveTo", func(g *rosbridgetest.Goal) {
		goals <- g.Args
		g.Feedback(map[string]any{"progress": 0.5})
		g.Finish(rosbridgetest.StatusSucceeded, map[string]any{"final_z": 0.3}, "")
	})

	r := newRig(t, srv, cfg, nil)
	if _, err := r.dev.Acquire(r.ctx(), time.Minute); err != nil { // the example declares a watchdog
		t.Fatal(err)
	}
	conformance.EventuallyWithin(t, "the door value", wait, func() bool { v, _ := r.read("cell_door_closed"); return v == true })
	conformance.EventuallyWithin(t, "tool_z 0.42 (pose.position.z)", wait, func() bool { v, _ := r.read("tool_z"); return v == 0.42 })
	conformance.EventuallyWithin(t, "joint1_temperature 41.5", wait, func() bool { v, _ := r.read("joint1_temperature"); return v == 41.5 })
	res, err := r.dev.Write(r.ctx(), mhp.WriteRequest{Name: "speed_scale", Value: 0.5})
	if err != nil || !res.Applied {
		t.Fatalf("speed_scale write %+v %v, want applied (confirmed by the state topic)", res, err)
	}
	if _, err := r.dev.Write(r.ctx(), mhp.WriteRequest{Name: "gripper_enabled", Value: true}); err == nil {
		t.Fatal("a confirm-level setting was written without approval")
	}
	wantJob(t, r.waitJob(r.invoke("home", nil)), mhp.JobDone, "", "")
	j := r.waitJob(r.invoke("move_to", map[string]any{"x": 0.1, "y": 0.2, "z": 0.3}))
	wantJob(t, j, mhp.JobDone, "", "")
	goalArgs := recv(t, goals)
	if !strings.Contains(string(goalArgs), `"frame_id":"base_link"`) || !strings.Contains(string(goalArgs), `"z":0.3`) {
		t.Fatalf("goal args %s, want the fixed args and the params", goalArgs)
	}
	if _, err := r.dev.Invoke(r.ctx(), mhp.InvokeRequest{Name: "move_to", Params: map[string]any{"x": 0.1, "y": 0.2, "z": 2.0}}); mhp.CodeOf(err) != mhp.CodeLimitViolation {
		t.Fatalf("z=2.0: %v, want LimitViolation", err)
	}
	e, err := r.dev.EStop(r.ctx(), "test")
	if err != nil || !e.Stopped {
		t.Fatalf("estop %+v %v", e, err)
	}
}

// TestExampleRobotBridgeDown: `mhp serve` of the example config with the
// arm's bridge down (built through the registry, as the CLI does) starts,
// reports the backend down, and works once the bridge answers.
func TestExampleRobotBridgeDown(t *testing.T) {
	srv := newServer(t, rosbridgetest.Options{})
	srv.Refuse(true)
	data, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(data), "ws://arm-01.lab.local:9090", srv.URL(), 1)
	text = strings.Replace(text, "check_types: true", "check_types: false", 1)
	text = strings.Replace(text, "reconnect: {initial_s: 0.5, max_s: 10}", "reconnect: {initial_s: 0.01, max_s: 0.1}", 1)
	src := adapters.Source{Path: examplePath, Dir: filepath.Dir(examplePath), Data: []byte(text)}
	reg := adapters.NewRegistry()
	if err := Register(reg); err != nil {
		t.Fatal(err)
	}
	d, err := reg.Build(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := d.Start(ctx); err != nil {
		t.Fatalf("start with the bridge down: %v", err)
	}
	defer d.Close()
	dev := mhp.AsSession(d, "test")
	desc, err := dev.Describe(ctx, mhp.DescribeRequest{})
	if err != nil || desc.Backend == nil || desc.Backend.Connected {
		t.Fatalf("describe while down: %+v %v", desc.Backend, err)
	}
	srv.Refuse(false)
	conformance.EventuallyWithin(t, "the backend to come up", wait, func() bool {
		p, _ := dev.Ping(ctx)
		return p.Backend != nil && p.Backend.Connected
	})
}
