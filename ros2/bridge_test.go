package ros2

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openmhp/mhp-go/conformance"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/clock"
	"github.com/openmhp/mhp-go/ros2/rosbridgetest"
)

// TestEStopNeverWaitsBehindAGoal: with rosbridge's shipped thread settings
// (the fake's default sequential mode) a goal blocks its connection until it
// ends, and a rejected goal blocks it for good; the estop, over a topic or a
// service, is still answered within its bound while a goal runs, while a
// goal hangs forever, and while a service call hangs.
func TestEStopNeverWaitsBehindAGoal(t *testing.T) {
	for _, via := range []string{"service", "topic"} {
		for _, busy := range []string{"goal runs", "goal hangs forever", "service call hangs"} {
			t.Run(via+", "+busy, func(t *testing.T) {
				srv := newServer(t, rosbridgetest.Options{})
				release := make(chan struct{})
				defer close(release)
				script := rosbridgetest.Script{Release: release, OnCancel: rosbridgetest.IgnoreCancel}
				if busy == "goal hangs forever" {
					script = rosbridgetest.Script{Silent: true}
				}
				srv.AddAction("/arm/move_to", moveType, rosbridgetest.Scripted(script))
				srv.AddService("/arm/slow", "std_srvs/srv/Trigger", func(ctx context.Context, c *rosbridgetest.Call) (any, error) {
					<-ctx.Done()
					return nil, rosbridgetest.NoReply
				})
				stops := make(chan struct{}, 4)
				srv.AddService("/arm/estop", "std_srvs/srv/Trigger", func(ctx context.Context, c *rosbridgetest.Call) (any, error) {
					stops <- struct{}{}
					return map[string]any{"success": true}, nil
				})
				srv.AddTopic("/arm/estop_topic", "std_msgs/msg/Empty", false)
				srv.OnPublish("/arm/estop_topic", func(json.RawMessage) { stops <- struct{}{} })
				cfg := moveConfig(0)
				cfg.Actions = append(cfg.Actions, ActionConfig{Action: mhp.Action{Name: "slow"}, Service: "/arm/slow", TimeoutS: 60})
				if via == "service" {
					cfg.EStop = &EStopConfig{Service: "/arm/estop", TimeoutS: 2}
				} else {
					cfg.EStop = &EStopConfig{Topic: "/arm/estop_topic", MsgType: "std_msgs/msg/Empty", TimeoutS: 2}
				}
				r := newRig(t, srv, cfg, nil)
				if busy == "service call hangs" {
					r.invoke("slow", nil)
					srv.WaitFor(wait, rosbridgetest.Op("call_service", "/arm/slow"))
				} else {
					r.invoke("move_to", nil)
					if _, ok := srv.WaitGoal(wait, "/arm/move_to"); !ok {
						t.Fatal("goal never reached the robot")
					}
				}
				start := time.Now()
				res, err := r.dev.EStop(r.ctx(), "test")
				if err != nil || !res.Stopped {
					t.Fatalf("estop %+v %v after %v", res, err, time.Since(start))
				}
				select {
				case <-stops:
				case <-time.After(wait):
					t.Fatal("the stop never reached the robot")
				}
			})
		}
	}
}

// TestCancelResentAfterTheGoalIsKnown: rosbridge 2.1.0 drops a cancel that
// arrives before the goal response; the adapter sends it again on the
// goal's first feedback and the robot cancels.
func TestCancelResentAfterTheGoalIsKnown(t *testing.T) {
	srv := newServer(t, rosbridgetest.Options{DropEarlyCancel: true})
	accept := make(chan struct{})
	srv.AddAction("/arm/move_to", moveType, rosbridgetest.Scripted(rosbridgetest.Script{
		AcceptAfter: accept, Feedback: []any{map[string]any{"percent": 10}}, Release: make(chan struct{})}))
	r := newRig(t, srv, moveConfig(0), nil)
	id := r.invoke("move_to", nil)
	g, ok := srv.WaitGoal(wait, "/arm/move_to")
	if !ok {
		t.Fatal("goal never reached the robot")
	}
	if _, err := r.dev.CancelJob(r.ctx(), id); err != nil {
		t.Fatal(err)
	}
	conformance.EventuallyWithin(t, "the early cancel to be dropped", wait, func() bool { return g.DroppedCancels() == 1 })
	close(accept)
	wantJob(t, r.waitJob(id), mhp.JobCancelled, "", "")
	if g.Cancels() != 1 || g.Status() != rosbridgetest.StatusCanceled {
		t.Fatalf("cancels %d status %d", g.Cancels(), g.Status())
	}
}

// TestExactIntegersAndByteArrays: int64/uint64 arrive as exact JSON
// integers; uint8[] and char[] arrive as base64 strings.
func TestExactIntegersAndByteArrays(t *testing.T) {
	srv := newServer(t, rosbridgetest.Options{})
	srv.AddTopic("/cam/info", "cam_msgs/msg/Info", false)
	cfg := baseConfig()
	sig := func(name, typ, field string) SignalConfig {
		return SignalConfig{Signal: mhp.Signal{Name: name, Type: typ}, Topic: "/cam/info", MsgType: "cam_msgs/msg/Info", Field: field}
	}
	cfg.Signals = []SignalConfig{
		sig("big", mhp.TypeInteger, "big"),
		sig("max_u64", mhp.TypeInteger, "u"),
		sig("neg", mhp.TypeInteger, "neg"),
		sig("bytes", mhp.TypeArray, "bytes"),
		sig("byte3", mhp.TypeInteger, "bytes[3]"),
		sig("bytes_raw", mhp.TypeString, "bytes"),
		sig("stamp_ns", mhp.TypeInteger, "stamp.nanosec"),
	}
	r := newRig(t, srv, cfg, nil)
	srv.WaitFor(wait, rosbridgetest.Op("subscribe", "/cam/info"))
	srv.Publish("/cam/info", json.RawMessage(`{"big":9007199254740993,"u":18446744073709551615,"neg":-9223372036854775808,"bytes":"AAEC/w==","stamp":{"sec":1,"nanosec":999999999}}`))
	conformance.EventuallyWithin(t, "the message", wait, func() bool { v, _ := r.read("big"); return v != nil })
	for name, want := range map[string]string{
		"big": "9007199254740993", "max_u64": "18446744073709551615", "neg": "-9223372036854775808",
		"bytes": "[0,1,2,255]", "byte3": "255", "bytes_raw": `"AAEC/w=="`, "stamp_ns": "999999999",
	} {
		v, why := r.read(name)
		b, _ := json.Marshal(v)
		if string(b) != want {
			t.Errorf("%s = %s (%q), want %s", name, b, why, want)
		}
	}
}

// TestStartsWithTheBridgeDown: the device starts and serves while rosbridge
// is unreachable (backend connected:false, reads unavailable, writes and
// invokes refused not_started), and works once the bridge answers; with
// fail_fast the start fails as it used to.
func TestStartsWithTheBridgeDown(t *testing.T) {
	srv := newServer(t, rosbridgetest.Options{})
	srv.AddTopic("/arm/temp", "std_msgs/msg/Float64", true)
	srv.AddService("/arm/home", "std_srvs/srv/Trigger", func(ctx context.Context, c *rosbridgetest.Call) (any, error) {
		return map[string]any{"success": true}, nil
	})
	cfg := baseConfig()
	cfg.ConnectTimeoutS = 0.2
	cfg.CheckTypes = true
	cfg.Signals = []SignalConfig{{Signal: mhp.Signal{Name: "temp", Type: mhp.TypeNumber}, Topic: "/arm/temp", MsgType: "std_msgs/msg/Float64"}}
	cfg.Settings = []SettingConfig{{Setting: mhp.Setting{Name: "speed", Type: mhp.TypeNumber}, Topic: "/arm/speed", MsgType: "std_msgs/msg/Float64"}}
	cfg.Actions = []ActionConfig{{Action: mhp.Action{Name: "home"}, Service: "/arm/home"}}
	srv.Refuse(true)

	ff := cfg
	ff.FailFast = true
	ff.URL = srv.URL()
	d, err := New(context.Background(), ff, Options{Options: adapters.Options{Logger: quiet()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err == nil {
		d.Close()
		t.Fatal("fail_fast started without the bridge")
	}

	r := newRig(t, srv, cfg, nil)
	ctx := r.ctx()
	p, err := r.dev.Ping(ctx)
	if err != nil || p.Backend == nil || p.Backend.Connected || p.Backend.Error == "" {
		t.Fatalf("ping while the bridge is down: %+v %v", p, err)
	}
	if v, why := r.read("temp"); v != nil || why == "" {
		t.Fatalf("temp while down: %v", v)
	}
	_, err = r.dev.Write(ctx, mhp.WriteRequest{Name: "speed", Value: 0.5})
	if e, ok := mhp.AsError(err); !ok || e.Data["outcome"] != mhp.OutcomeNotStarted {
		t.Fatalf("write while down: %v", err)
	}
	if _, err := r.dev.Invoke(ctx, mhp.InvokeRequest{Name: "home"}); err == nil {
		t.Fatal("invoke while down was accepted")
	}
	srv.Refuse(false)
	conformance.EventuallyWithin(t, "the link to come up", wait, func() bool {
		p, _ := r.dev.Ping(ctx)
		return p.Backend != nil && p.Backend.Connected
	})
	srv.Publish("/arm/temp", map[string]any{"data": 21.5})
	conformance.EventuallyWithin(t, "a value", wait, func() bool { v, _ := r.read("temp"); return v == 21.5 })
	if _, err := r.dev.Write(ctx, mhp.WriteRequest{Name: "speed", Value: 0.5}); err != nil {
		t.Fatal(err)
	}
	wantJob(t, r.waitJob(r.invoke("home", nil)), mhp.JobDone, "", "")
	if b := r.a.bridgeInfo(); !b.ActionServers || b.ROS != 2 {
		t.Fatalf("bridge not probed after it came up: %+v", b)
	}
}

// TestCheckTypesLaterKeepsTheLinkDown: a mismatch found when the bridge
// comes up after the start keeps the link reported down with the reason.
func TestCheckTypesLaterKeepsTheLinkDown(t *testing.T) {
	srv := newServer(t, rosbridgetest.Options{Version: rosbridgetest.Rosbridge011})
	srv.AddTopic("/arm/temp", "std_msgs/Float64", false)
	cfg := baseConfig()
	cfg.ConnectTimeoutS = 0.1
	cfg.CheckTypes = true
	cfg.Signals = []SignalConfig{{Signal: mhp.Signal{Name: "temp", Type: mhp.TypeNumber}, Topic: "/arm/temp", MsgType: "std_msgs/msg/Float64"}}
	srv.Refuse(true)
	r := newRig(t, srv, cfg, nil)
	srv.Refuse(false)
	conformance.EventuallyWithin(t, "the mismatch to be reported", wait, func() bool {
		p, _ := r.dev.Ping(r.ctx())
		return p.Backend != nil && !p.Backend.Connected && strings.Contains(p.Backend.Error, "ROS 2 spelling")
	})
}

// syncBuffer is a log sink safe for the adapter's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestCheckTypesAgainstTheBridge: check_types refuses spellings of the other
// ROS version and action types the robot does not have, and warns (starting)
// where the bridge cannot tell an action's type.
func TestCheckTypesAgainstTheBridge(t *testing.T) {
	signal := func(typ string) []SignalConfig {
		return []SignalConfig{{Signal: mhp.Signal{Name: "temp", Type: mhp.TypeNumber}, Topic: "/arm/temp", MsgType: typ}}
	}
	for _, c := range []struct {
		name       string
		version    rosbridgetest.Version
		cfg        func(*Config)
		errText    string // "" starts
		actionType bool   // rosapi serves /rosapi/action_type
		warn       string // logged on a start that succeeds
	}{
		{"ROS 2 spelling on ROS 1", rosbridgetest.Rosbridge011, func(c *Config) { c.Signals = signal("std_msgs/msg/Float64") }, "ROS 2 spelling", false, ""},
		{"ROS 1 spelling on ROS 1", rosbridgetest.Rosbridge011, func(c *Config) { c.Signals = signal("std_msgs/Float64") }, "", false, ""},
		{"either spelling on ROS 2", rosbridgetest.Rosbridge2, func(c *Config) { c.Signals = signal("std_msgs/Float64") }, "", false, ""},
		{"misspelt actionlib type", rosbridgetest.Rosbridge011, func(c *Config) {
			*c = actionlibConfig()
			c.Actions[0].ActionType = "arm_msgs/MoveTwo"
		}, "has type arm_msgs/MoveToActionGoal", false, ""},
		{"actionlib type right", rosbridgetest.Rosbridge011, func(c *Config) { *c = actionlibConfig() }, "", false, ""},
		{"ROS 2 action on ROS 1", rosbridgetest.Rosbridge011, func(c *Config) { *c = moveConfig(0) }, "no action ops", false, ""},
		{"wrong ROS 2 action type", rosbridgetest.Rosbridge2, func(c *Config) {
			*c = moveConfig(0)
			c.Actions[0].ActionType = "arm_msgs/action/Wrong"
		}, "has type arm_msgs/action/MoveTo", true, ""},
		// rosbridge 2.0.0/2.1.0: the hidden send_goal service has no type
		// and there is no /rosapi/action_type. Before the fix the start was
		// refused "rosapi lists /arm/move_to but has no type for ...".
		{"ROS 2 action, 2.x cannot tell the type", rosbridgetest.Rosbridge2, func(c *Config) { *c = moveConfig(0) }, "", false,
			"the type cannot be checked"},
		{"ROS 2 action type right", rosbridgetest.Rosbridge2, func(c *Config) { *c = moveConfig(0) }, "", true, ""},
		{"missing ROS 2 action server", rosbridgetest.Rosbridge2, func(c *Config) {
			*c = moveConfig(0)
			c.Actions[0].ROSAction = "/arm/nowhere"
		}, "no action server /arm/nowhere", false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := newServer(t, rosbridgetest.Options{Version: c.version, RosapiActionType: c.actionType})
			tt := "std_msgs/msg/Float64"
			if c.version == rosbridgetest.Rosbridge011 {
				tt = "std_msgs/Float64"
			}
			srv.AddTopic("/arm/temp", tt, false)
			srv.AddAction("/arm/move_to", moveType, rosbridgetest.Scripted(rosbridgetest.Script{}))
			srv.AddActionlib("/arm/move_to", ros1Type, rosbridgetest.Scripted(rosbridgetest.Script{}))
			cfg := baseConfig()
			c.cfg(&cfg)
			cfg.CheckTypes = true
			cfg.URL = srv.URL()
			var logged syncBuffer
			d, err := New(context.Background(), cfg, Options{Options: adapters.Options{Logger: slog.New(slog.NewTextHandler(&logged, nil))}})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			err = d.Start(context.Background())
			if c.errText == "" && err != nil {
				t.Fatalf("start: %v", err)
			}
			if c.errText != "" && (err == nil || !strings.Contains(err.Error(), c.errText)) {
				t.Fatalf("start: %v, want an error with %q", err, c.errText)
			}
			if c.warn != "" && !strings.Contains(logged.String(), c.warn) {
				t.Fatalf("start logged %q, want a warning with %q", logged.String(), c.warn)
			}
		})
	}
}

// TestActionlibGoalWithoutStatusEndsBounded: a goal the actionlib server
// never takes (a misspelt action_type is dropped by rosbridge without a
// word) ends after first_response_s: not_started when the server's status
// kept coming without it, unknown when no status came at all.
func TestActionlibGoalWithoutStatusEndsBounded(t *testing.T) {
	for _, statusFlows := range []bool{true, false} {
		t.Run(map[bool]string{true: "status without the goal", false: "no status at all"}[statusFlows], func(t *testing.T) {
			srv := newServer(t, rosbridgetest.Options{})
			srv.AddActionlib("/arm/move_to", ros1Type, rosbridgetest.Scripted(rosbridgetest.Script{}))
			cfg := actionlibConfig()
			cfg.Actions[0].ActionType = "arm_msgs/MoveTwo" // the goal publish is dropped (type conflict)
			cfg.Actions[0].FirstResponseS = 0.3
			r := newRig(t, srv, cfg, nil)
			srv.WaitFor(wait, rosbridgetest.Op("subscribe", "/arm/move_to/status"))
			done := make(chan struct{})
			defer close(done)
			if statusFlows {
				go func() {
					tk := time.NewTicker(20 * time.Millisecond)
					defer tk.Stop()
					for {
						select {
						case <-done:
							return
						case <-tk.C:
							srv.Publish("/arm/move_to/status", map[string]any{"status_list": []any{}})
						}
					}
				}()
			}
			start := time.Now()
			j := r.waitJob(r.invoke("move_to", nil))
			if statusFlows {
				wantJob(t, j, mhp.JobFailed, mhp.OutcomeNotStarted, "never took the goal")
			} else {
				wantJob(t, j, mhp.JobFailed, mhp.OutcomeUnknown, "no status, feedback or result")
			}
			if el := time.Since(start); el > 3*time.Second {
				t.Fatalf("first_response_s 0.3 took %v", el)
			}
		})
	}
}

// TestActionlibCancelFirstAfterReconnect: the cancel of an actionlib goal
// orphaned by a drop is the first publish on the new connection.
func TestActionlibCancelFirstAfterReconnect(t *testing.T) {
	srv := newServer(t, rosbridgetest.Options{})
	release := make(chan struct{})
	defer close(release)
	srv.AddActionlib("/arm/move_to", ros1Type, rosbridgetest.Scripted(rosbridgetest.Script{Release: release}))
	srv.AddTopic("/arm/temp", "std_msgs/Float64", false)
	cfg := actionlibConfig()
	cfg.Signals = []SignalConfig{{Signal: mhp.Signal{Name: "temp", Type: mhp.TypeNumber}, Topic: "/arm/temp", MsgType: "std_msgs/Float64"}}
	r := newRig(t, srv, cfg, nil)
	id := r.invoke("move_to", nil)
	if _, ok := srv.WaitGoal(wait, "/arm/move_to"); !ok {
		t.Fatal("goal never reached the robot")
	}
	srv.Refuse(true)
	srv.Drop()
	wantJob(t, r.waitJob(id), mhp.JobFailed, mhp.OutcomeUnknown, "lost")
	before := srv.Accepted()
	srv.Refuse(false)
	cancel, ok := srv.WaitFor(wait, func(m rosbridgetest.Message) bool {
		return m.Op == "publish" && m.Topic == "/arm/move_to/cancel" && m.Conn > before
	})
	if !ok {
		t.Fatal("no cancel after the reconnect")
	}
	for _, m := range srv.Received() {
		if m.Conn != cancel.Conn {
			continue
		}
		if m.Op == "subscribe" {
			t.Fatalf("a subscribe went out before the owed cancel on connection %d", m.Conn)
		}
		if m.Op == "publish" {
			break
		}
	}
}

// logRecorder keeps log records for assertions.
type logRecorder struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r.Clone())
	return nil
}
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }

func (l *logRecorder) find(msg string) (slog.Record, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.recs {
		if strings.Contains(r.Message, msg) {
			return r, true
		}
	}
	return slog.Record{}, false
}

// TestLinkLostLogCountsGoals: the link-lost log counts the goals in flight,
// ROS 2 and actionlib alike.
func TestLinkLostLogCountsGoals(t *testing.T) {
	srv := newServer(t, rosbridgetest.Options{})
	release := make(chan struct{})
	defer close(release)
	srv.AddActionlib("/arm/move_to", ros1Type, rosbridgetest.Scripted(rosbridgetest.Script{Release: release}))
	rec := &logRecorder{}
	cfg := actionlibConfig()
	cfg.URL = srv.URL()
	cfg.Reconnect = Reconnect{InitialS: 0.01, MaxS: 0.1}
	_, d, err := build(cfg, Options{Options: adapters.Options{Logger: slog.New(rec), Refine: jobGrace(3 * time.Second)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	dev := mhp.AsSession(d, "test")
	if _, err := dev.Invoke(context.Background(), mhp.InvokeRequest{Name: "move_to"}); err != nil {
		t.Fatal(err)
	}
	if _, ok := srv.WaitGoal(wait, "/arm/move_to"); !ok {
		t.Fatal("no goal")
	}
	srv.Drop()
	var r slog.Record
	conformance.EventuallyWithin(t, "the link-lost log", wait, func() bool { var ok bool; r, ok = rec.find("link to rosbridge lost"); return ok })
	n := int64(-1)
	r.Attrs(func(at slog.Attr) bool {
		if at.Key == "goals_in_flight" {
			n = at.Value.Int64()
		}
		return true
	})
	if n != 1 {
		t.Fatalf("goals_in_flight = %d, want 1", n)
	}
}

// TestBridgeSaysWhatItIs: the probe states the bridge's version plainly.
func TestBridgeSaysWhatItIs(t *testing.T) {
	for v, want := range map[rosbridgetest.Version]string{
		rosbridgetest.Rosbridge2:   "ROS 2 jazzy (ROS 2 actions need rosbridge_suite 2.0.0 or later",
		rosbridgetest.Rosbridge1:   "ROS 2 jazzy (ROS 2 actions need rosbridge_suite 2.0.0 or later",
		rosbridgetest.Rosbridge011: "ROS 1 (0.11.x: no ROS 2 action ops",
	} {
		t.Run(v.String(), func(t *testing.T) {
			srv := newServer(t, rosbridgetest.Options{Version: v})
			srv.AddTopic("/rosout", map[bool]string{true: "rosgraph_msgs/Log", false: "rcl_interfaces/msg/Log"}[v == rosbridgetest.Rosbridge011], false)
			r := newRig(t, srv, baseConfig(), nil)
			if got := r.a.bridgeInfo().String(); !strings.Contains(got, want) {
				t.Fatalf("bridge %q, want %q", got, want)
			}
		})
	}
}

// TestLinkClockTimesTheRedial: Options.LinkClock, not the wall clock, times
// the wait before a redial. With an hour's backoff the link comes back as
// soon as the link clock has moved an hour.
func TestLinkClockTimesTheRedial(t *testing.T) {
	srv := newServer(t, rosbridgetest.Options{})
	link := clock.NewManual(time.Now())
	cfg := baseConfig()
	cfg.URL = srv.URL()
	cfg.Reconnect = Reconnect{InitialS: 3600, MaxS: 3600}
	d, err := New(context.Background(), cfg, Options{Options: adapters.Options{LinkClock: link, Logger: quiet()}})
	if err != nil {
		t.Fatal(err)
	}
	start(t, d)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	dev := mhp.AsSession(d, "test")
	up := func() bool {
		p, err := dev.Ping(ctx)
		return err == nil && p.Backend != nil && p.Backend.Connected
	}
	conformance.EventuallyWithin(t, "the link to come up", wait, up)
	srv.Drop()
	conformance.EventuallyWithin(t, "the redial to wait on the link clock", wait, func() bool { return link.Pending() == 1 })
	if up() {
		t.Fatal("the link is reported up while the redial waits")
	}
	link.Advance(time.Hour)
	conformance.EventuallyWithin(t, "the link to come back after an hour on the link clock", wait, up)
}
