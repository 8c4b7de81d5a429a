package ros2

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go/conformance"

	"github.com/openmhp/mhp-go/ros2/rosbridgetest"
)

const wait = 15 * time.Second

// quiet discards logs unless ROS2_TEST_LOG is set.
func quiet() *slog.Logger {
	if os.Getenv("ROS2_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func dialTest(t *testing.T, srv *rosbridgetest.Server, opts ClientOptions) *Client {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quiet()
	}
	if opts.BackoffInitial == 0 {
		opts.BackoffInitial = 10 * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	c, err := Dial(ctx, srv.URL(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func newServer(t *testing.T, opts rosbridgetest.Options) *rosbridgetest.Server {
	opts.Logf = t.Logf
	srv := rosbridgetest.New(opts)
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		if t.Failed() {
			for _, m := range srv.Received() {
				t.Logf("wire: conn %d %s %s%s%s id=%s", m.Conn, m.Op, m.Topic, m.Service, m.Action, m.ID)
			}
		}
	})
	return srv
}

func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(wait):
		t.Fatal("timed out waiting")
	}
	var zero T
	return zero
}

func TestClientTopicsRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts rosbridgetest.Options
	}{
		{"plain", rosbridgetest.Options{}},
		{"fragments", rosbridgetest.Options{FragmentSize: 16}},
		{"ros1 quirks", rosbridgetest.Options{ROS1Quirks: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, tc.opts)
			srv.AddTopic("/arm/state", "std_msgs/msg/String", false)
			c := dialTest(t, srv, ClientOptions{})
			got := make(chan TopicEvent, 10)
			if _, err := c.Subscribe(context.Background(), Subscription{Topic: "/arm/state", Type: "std_msgs/msg/String"}, func(e TopicEvent) { got <- e }); err != nil {
				t.Fatal(err)
			}
			if _, ok := srv.WaitFor(wait, rosbridgetest.Op("subscribe", "/arm/state")); !ok {
				t.Fatal("no subscribe op")
			}
			srv.Publish("/arm/state", map[string]any{"data": "a/b", "nan": math.NaN()})
			e := recv(t, got)
			var m struct {
				Data string   `json:"data"`
				NaN  *float64 `json:"nan"`
			}
			if err := json.Unmarshal(e.Msg, &m); err != nil || m.Data != "a/b" || m.NaN != nil {
				t.Fatalf("got %s (%v), want data a/b and nan null", e.Msg, err)
			}
			if err := c.Publish(context.Background(), "/arm/state", "std_msgs/msg/String", map[string]any{"data": "from client"}); err != nil {
				t.Fatal(err)
			}
			e = recv(t, got) // loopback through the bridge
			if !strings.Contains(string(e.Msg), "from client") {
				t.Fatalf("loopback %s", e.Msg)
			}
			if n := srv.Count(rosbridgetest.Op("advertise", "/arm/state")); n != 1 {
				t.Fatalf("advertise sent %d times, want 1", n)
			}
		})
	}
}

func TestClientThrottleDropsInsideWindow(t *testing.T) {
	srv := newServer(t, rosbridgetest.Options{})
	srv.AddTopic("/fast", "std_msgs/msg/Int32", false)
	srv.AddTopic("/marker", "std_msgs/msg/Int32", false)
	c := dialTest(t, srv, ClientOptions{})
	got := make(chan TopicEvent, 100)
	marker := make(chan TopicEvent, 1)
	c.Subscribe(context.Background(), Subscription{Topic: "/fast", Type: "std_msgs/msg/Int32", ThrottleMs: 60000}, func(e TopicEvent) { got <- e })
	c.Subscribe(context.Background(), Subscription{Topic: "/marker", Type: "std_msgs/msg/Int32"}, func(e TopicEvent) { marker <- e })
	srv.WaitFor(wait, rosbridgetest.Op("subscribe", "/marker"))
	for i := 0; i < 20; i++ {
		srv.Publish("/fast", map[string]any{"data": i})
	}
	srv.Publish("/marker", map[string]any{"data": 1})
	recv(t, marker) // one connection delivers in order: every /fast message was handled before it
	if len(got) != 1 {
		t.Fatalf("throttle 60s let %d messages through, want 1", len(got))
	}
	if e := <-got; string(e.Msg) != `{"data":0}` {
		t.Fatalf("first message %s", e.Msg)
	}
}

func TestClientServiceAnswers(t *testing.T) {
	srv := newServer(t, rosbridgetest.Options{Version: rosbridgetest.Rosbridge011})
	srv.AddService("/ok", "std_srvs/srv/Trigger", func(ctx context.Context, c *rosbridgetest.Call) (any, error) {
		return map[string]any{"success": true, "message": "fine"}, nil
	})
	srv.AddService("/bad", "std_srvs/srv/SetBool", func(ctx context.Context, c *rosbridgetest.Call) (any, error) {
		return nil, rosbridgetest.BadArgs("std_srvs/SetBoolRequest", "data", "bool", "<class 'str'>")
	})
	srv.AddService("/raises", "std_srvs/srv/Trigger", func(ctx context.Context, c *rosbridgetest.Call) (any, error) {
		return nil, errors.New("motor driver exploded")
	})
	srv.AddService("/silent", "std_srvs/srv/Trigger", func(ctx context.Context, c *rosbridgetest.Call) (any, error) {
		return nil, rosbridgetest.NoReply
	})
	for name, text := range map[string]string{
		"/no_field":   "Message type std_srvs/srv/SetBool_Request does not have a field speed",
		"/no_import":  "Unable to import srv class Foo from package bar",
		"/not_object": "Expected a JSON object for type std_srvs/srv/SetBool_Request but received a list",
	} {
		srv.AddService(name, "std_srvs/srv/SetBool", func(ctx context.Context, c *rosbridgetest.Call) (any, error) {
			return nil, &rosbridgetest.BadArgsError{Text: text}
		})
	}
	c := dialTest(t, srv, ClientOptions{})
	ctx := context.Background()

	v, err := c.CallService(ctx, "/ok", nil)
	if err != nil || !strings.Contains(string(v), "fine") {
		t.Fatalf("ok: %s %v", v, err)
	}
	for _, tc := range []struct {
		service  string
		nothing  bool
		contains string
	}{
		{"/missing", true, "does not exist"},
		{"/bad", true, "requires a bool"},
		{"/raises", false, "responded with an error"},
		// rosbridge 2.x texts for a request it could not build
		{"/no_field", true, "does not have a field"},
		{"/no_import", true, "Unable to import"},
		{"/not_object", true, "Expected a JSON object"},
	} {
		_, err := c.CallService(ctx, tc.service, map[string]any{"data": "x"})
		var se *ServiceError
		if !errors.As(err, &se) || se.NothingExecuted() != tc.nothing || !strings.Contains(se.Message, tc.contains) {
			t.Errorf("%s: err %v, want ServiceError containing %q, nothing executed %v", tc.service, err, tc.contains, tc.nothing)
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = c.CallService(cctx, "/silent", nil)
	if !errors.Is(err, ErrNoReply) || time.Since(start) > 2*time.Second {
		t.Fatalf("silent: %v after %v, want ErrNoReply near the deadline", err, time.Since(start))
	}
}

func TestClientGoalFeedbackAndResult(t *testing.T) {
	srv := newServer(t, rosbridgetest.Options{})
	srv.AddAction("/fib", "example_interfaces/action/Fibonacci", rosbridgetest.Scripted(rosbridgetest.Script{
		Feedback: []any{map[string]any{"sequence": []int{0, 1}}},
		Result:   map[string]any{"sequence": []int{0, 1, 1}},
	}))
	c := dialTest(t, srv, ClientOptions{})
	fb := make(chan json.RawMessage, 4)
	h, err := c.SendGoal(context.Background(), GoalRequest{Action: "/fib", Type: "example_interfaces/action/Fibonacci", Args: map[string]any{"order": 3}, Feedback: true},
		func(v json.RawMessage) { fb <- v })
	if err != nil {
		t.Fatal(err)
	}
	if v := recv(t, fb); !strings.Contains(string(v), "sequence") {
		t.Fatalf("feedback %s", v)
	}
	r := recv(t, h.Result)
	if r.Err != nil || r.Status != StatusSucceeded || !r.Result {
		t.Fatalf("result %+v", r)
	}
	// Goal ids carry the client's random prefix: unique across processes.
	other := dialTest(t, srv, ClientOptions{})
	h2, err := other.SendGoal(context.Background(), GoalRequest{Action: "/fib", Type: "example_interfaces/action/Fibonacci"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if h2.ID == h.ID || !strings.Contains(h.ID, c.prefix) || c.prefix == other.prefix {
		t.Fatalf("goal ids %s and %s of two clients", h.ID, h2.ID)
	}
	recv(t, h2.Result)
}

// TestClientNothingWaitsBehindAGoal: rosbridge handles a connection's ops one
// at a time, so a goal that hangs forever blocks its connection; the client
// keeps goals, calls and the estop path on connections of their own.
func TestClientNothingWaitsBehindAGoal(t *testing.T) {
	srv := newServer(t, rosbridgetest.Options{})
	srv.AddAction("/hang", "a/action/Hang", rosbridgetest.Scripted(rosbridgetest.Script{Silent: true}))
	srv.AddService("/slow", "std_srvs/srv/Trigger", func(ctx context.Context, c *rosbridgetest.Call) (any, error) {
		<-ctx.Done()
		return nil, rosbridgetest.NoReply
	})
	srv.AddService("/stop", "std_srvs/srv/Trigger", func(ctx context.Context, c *rosbridgetest.Call) (any, error) {
		return map[string]any{"success": true}, nil
	})
	srv.AddTopic("/t", "std_msgs/msg/Float64", false)
	c := dialTest(t, srv, ClientOptions{})
	events := make(chan TopicEvent, 4)
	c.Subscribe(context.Background(), Subscription{Topic: "/t", Type: "std_msgs/msg/Float64"}, func(e TopicEvent) { events <- e })
	h, err := c.SendGoal(context.Background(), GoalRequest{Action: "/hang", Type: "a/action/Hang"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := srv.WaitGoal(wait, "/hang"); !ok {
		t.Fatal("no goal")
	}
	go c.CallService(context.Background(), "/slow", nil)
	srv.WaitFor(wait, rosbridgetest.Op("call_service", "/slow"))
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if _, err := c.CallService(StopPath(ctx), "/stop", nil); err != nil {
		t.Fatalf("estop call behind a hanging goal and a slow call: %v", err)
	}
	if _, err := c.CallService(ctx, "/stop", nil); err != nil {
		t.Fatalf("a call behind a hanging goal and a slow call: %v", err)
	}
	if err := c.CancelGoal(ctx, "/hang", h.ID); err != nil {
		t.Fatal(err)
	}
	if _, ok := srv.WaitFor(wait, rosbridgetest.Op("cancel_action_goal", "/hang")); !ok {
		t.Fatal("the cancel waited behind the goal")
	}
	if srv.WaitFor(wait, rosbridgetest.Op("subscribe", "/t")); true {
		srv.Publish("/t", map[string]any{"data": 1.0})
	}
	if e := recv(t, events); e.Err != nil {
		t.Fatalf("topic while a goal hangs: %+v", e)
	}
	h.Release()
	conformance.EventuallyWithin(t, "the goal's connection to close", wait, func() bool { return srv.Connections() <= 4 })
}

func TestClientReconnectRestoresSubscriptionsAndCancelsOrphans(t *testing.T) {
	srv := newServer(t, rosbridgetest.Options{})
	srv.AddTopic("/temp", "std_msgs/msg/Float64", false)
	release := make(chan struct{})
	defer close(release)
	srv.AddAction("/move", "arm/action/Move", rosbridgetest.Scripted(rosbridgetest.Script{Release: release}))
	c := dialTest(t, srv, ClientOptions{})
	events := make(chan TopicEvent, 10)
	c.Subscribe(context.Background(), Subscription{Topic: "/temp", Type: "std_msgs/msg/Float64"}, func(e TopicEvent) { events <- e })
	h, _ := c.SendGoal(context.Background(), GoalRequest{Action: "/move", Type: "arm/action/Move"}, nil)
	g, ok := srv.WaitGoal(wait, "/move")
	if !ok {
		t.Fatal("goal never reached the server")
	}
	before := srv.Accepted()
	srv.Refuse(true)
	srv.Drop()
	if r := recv(t, h.Result); !errors.Is(r.Err, ErrConnLost) {
		t.Fatalf("goal result after drop: %+v", r)
	}
	if e := recv(t, events); !errors.Is(e.Err, ErrConnLost) {
		t.Fatalf("subscriber event after drop: %+v", e)
	}
	if err := c.Publish(context.Background(), "/temp", "std_msgs/msg/Float64", map[string]any{"data": 1}); !errors.Is(err, ErrNotConnected) {
		t.Fatalf("publish while down: %v", err)
	}
	srv.Refuse(false)
	sub, ok := srv.WaitFor(wait, func(m rosbridgetest.Message) bool { return m.Op == "subscribe" && m.Conn > before })
	if !ok {
		t.Fatal("no resubscribe on the new connection")
	}
	cancelMsg, ok := srv.WaitFor(wait, func(m rosbridgetest.Message) bool {
		return m.Op == "cancel_action_goal" && m.ID == h.ID && m.Conn > before
	})
	if !ok {
		t.Fatal("orphaned goal not cancelled after reconnect")
	}
	// The cancel goes out first on the new main connection, before the
	// subscriptions are restored.
	if cancelMsg.Conn == sub.Conn {
		for _, m := range srv.Received() {
			if m.Conn == sub.Conn {
				if m.Op != "cancel_action_goal" {
					t.Fatalf("first message on the new connection is %s, want the owed cancel", m.Op)
				}
				break
			}
		}
	}
	select {
	case <-g.Done():
	case <-time.After(wait):
		t.Fatal("the robot's goal did not end after the cancel")
	}
	if g.Status() != StatusCanceled || g.Delivered() {
		t.Fatalf("goal status %d delivered %v: want canceled, result lost", g.Status(), g.Delivered())
	}
	srv.Publish("/temp", map[string]any{"data": 42.0})
	if e := recv(t, events); e.Err != nil || string(e.Msg) != `{"data":42}` {
		t.Fatalf("after reconnect: %+v", e)
	}
	if c.Reconnects() != 1 {
		t.Fatalf("reconnects %d", c.Reconnects())
	}
}

func TestClientClose(t *testing.T) {
	srv := newServer(t, rosbridgetest.Options{})
	srv.AddService("/silent", "std_srvs/srv/Trigger", func(ctx context.Context, c *rosbridgetest.Call) (any, error) {
		return nil, rosbridgetest.NoReply
	})
	c := dialTest(t, srv, ClientOptions{})
	errc := make(chan error, 1)
	go func() {
		_, err := c.CallService(context.Background(), "/silent", nil)
		errc <- err
	}()
	srv.WaitFor(wait, rosbridgetest.Op("call_service", "/silent"))
	c.Close()
	if err := recv(t, errc); !errors.Is(err, ErrClosed) {
		t.Fatalf("pending call after close: %v", err)
	}
	if _, err := c.CallService(context.Background(), "/silent", nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("call after close: %v", err)
	}
}

// TestClientPoolStaysBounded: concurrent calls each get a connection; once
// answered at most MaxIdle stay open, and a call that got no answer takes
// its connection down (rosbridge would hold every later op behind it).
func TestClientPoolStaysBounded(t *testing.T) {
	srv := newServer(t, rosbridgetest.Options{})
	release := make(chan struct{})
	srv.AddService("/slow", "std_srvs/srv/Trigger", func(ctx context.Context, c *rosbridgetest.Call) (any, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return map[string]any{"success": true}, nil
	})
	srv.AddService("/silent", "std_srvs/srv/Trigger", func(ctx context.Context, c *rosbridgetest.Call) (any, error) {
		return nil, rosbridgetest.NoReply
	})
	c := dialTest(t, srv, ClientOptions{MaxIdle: 2})
	conformance.EventuallyWithin(t, "the estop connection", wait, func() bool { return srv.Connections() == 2 })
	const n = 6
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() {
			_, err := c.CallService(context.Background(), "/slow", nil)
			errs <- err
		}()
	}
	conformance.EventuallyWithin(t, "every call on a connection of its own", wait, func() bool {
		return srv.Count(rosbridgetest.Op("call_service", "/slow")) == n
	})
	close(release)
	for i := 0; i < n; i++ {
		if err := recv(t, errs); err != nil {
			t.Fatal(err)
		}
	}
	// main + estop + MaxIdle
	conformance.EventuallyWithin(t, "the pool to shrink to MaxIdle", wait, func() bool { return srv.Connections() == 4 })
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := c.CallService(ctx, "/silent", nil); !errors.Is(err, ErrNoReply) {
		t.Fatalf("silent: %v", err)
	}
	conformance.EventuallyWithin(t, "the unanswered call's connection to close", wait, func() bool { return srv.Connections() == 3 })
	if _, err := c.CallService(context.Background(), "/rosapi/topics", nil); err != nil {
		t.Fatalf("a call after an unanswered one: %v", err)
	}
}
