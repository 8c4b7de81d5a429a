package ros2

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/ros2/rosbridgetest"
)

// Each benchmark times the adapter path and a baseline in the same run and
// reports their ratio ("x-baseline"), so the figure does not depend on the
// machine.

func ratio(b *testing.B, what func(), baseline func()) {
	b.Helper()
	b.ResetTimer()
	// Alternate blocks of both so warm-up and drift hit them alike.
	block := max(1, b.N/20)
	var base, got time.Duration
	for done := 0; done < b.N; done += block {
		n := min(block, b.N-done)
		start := time.Now()
		for i := 0; i < n; i++ {
			baseline()
		}
		base += time.Since(start)
		start = time.Now()
		for i := 0; i < n; i++ {
			what()
		}
		got += time.Since(start)
	}
	b.StopTimer()
	b.ReportMetric(float64(got)/float64(base), "x-baseline")
	b.ReportMetric(float64(got.Nanoseconds())/float64(b.N), "ns/adapter-op")
	b.ReportMetric(float64(base.Nanoseconds())/float64(b.N), "ns/baseline-op")
}

// BenchmarkSignalRead: signals/read through the driver vs reading the
// adapter's last topic value directly.
func BenchmarkSignalRead(b *testing.B) {
	srv := rosbridgetest.New(rosbridgetest.Options{})
	defer srv.Close()
	srv.AddTopic("/temp", "std_msgs/msg/Float64", true)
	srv.Publish("/temp", map[string]any{"data": 21.5})
	cfg := baseConfig()
	cfg.Signals = []SignalConfig{{Signal: mhp.Signal{Name: "temp", Type: mhp.TypeNumber}, Topic: "/temp", MsgType: "std_msgs/msg/Float64", MaxAgeS: 60}}
	r := newRig(b, srv, cfg, nil)
	ctx := context.Background()
	if err := r.a.signals["temp"].waitSeq(ctx, 0); err != nil {
		b.Fatal(err)
	}
	read := r.a.signals["temp"].reader(time.Minute)
	ratio(b, func() {
		if res, err := r.dev.Read(ctx, []string{"temp"}); err != nil || res.Values["temp"] != 21.5 {
			b.Fatal(res, err)
		}
	}, func() {
		if s, err := read(ctx); err != nil || s.Value != 21.5 {
			b.Fatal(s, err)
		}
	})
}

// BenchmarkCallService: Client.CallService round trip vs the same request
// and answer over a bare WebSocket to the same fake server.
func BenchmarkCallService(b *testing.B) {
	srv := rosbridgetest.New(rosbridgetest.Options{})
	defer srv.Close()
	ctx := context.Background()
	c, err := Dial(ctx, srv.URL(), ClientOptions{Logger: quiet()})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ws, _, err := websocket.Dial(ctx, srv.URL(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer ws.CloseNow()
	req, _ := json.Marshal(map[string]any{"op": "call_service", "id": "raw", "service": "/rosapi/topic_type", "args": map[string]any{"topic": "/x"}})
	ratio(b, func() {
		if _, err := c.CallService(ctx, "/rosapi/topic_type", map[string]any{"topic": "/x"}); err != nil {
			b.Fatal(err)
		}
	}, func() {
		if err := ws.Write(ctx, websocket.MessageText, req); err != nil {
			b.Fatal(err)
		}
		if _, _, err := ws.Read(ctx); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkInvokeService: a short action (invoke, job, jobs/finished)
// vs calling its service directly on the same connection.
func BenchmarkInvokeService(b *testing.B) {
	srv := rosbridgetest.New(rosbridgetest.Options{})
	defer srv.Close()
	srv.AddService("/home", "std_srvs/srv/Trigger", func(ctx context.Context, c *rosbridgetest.Call) (any, error) {
		return map[string]any{"success": true}, nil
	})
	cfg := baseConfig()
	cfg.Actions = []ActionConfig{{Action: mhp.Action{Name: "home"}, Service: "/home"}}
	r := newRig(b, srv, cfg, nil)
	finished := make(chan struct{}, 1)
	stop := r.d.Listen(func(n mhp.Notification) {
		if n.Method == mhp.NotifyJobsFinished {
			finished <- struct{}{}
		}
	})
	defer stop()
	ctx := context.Background()
	conn := r.a.connection()
	ratio(b, func() {
		if _, err := r.dev.Invoke(ctx, mhp.InvokeRequest{Name: "home"}); err != nil {
			b.Fatal(err)
		}
		<-finished
	}, func() {
		if _, err := conn.CallService(ctx, "/home", map[string]any{}); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkSendGoal: a goal through the client, which opens a connection of
// its own per goal (so nothing waits behind it), vs the same goal written on
// one already open raw connection.
func BenchmarkSendGoal(b *testing.B) {
	srv := rosbridgetest.New(rosbridgetest.Options{})
	defer srv.Close()
	srv.AddAction("/fib", "example_interfaces/action/Fibonacci", rosbridgetest.Scripted(rosbridgetest.Script{Result: map[string]any{"sequence": []int{0, 1}}}))
	ctx := context.Background()
	c, err := Dial(ctx, srv.URL(), ClientOptions{Logger: quiet()})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ws, _, err := websocket.Dial(ctx, srv.URL(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer ws.CloseNow()
	n := 0
	ratio(b, func() {
		h, err := c.SendGoal(ctx, GoalRequest{Action: "/fib", Type: "example_interfaces/action/Fibonacci"}, nil)
		if err != nil {
			b.Fatal(err)
		}
		if r := <-h.Result; r.Err != nil {
			b.Fatal(r.Err)
		}
	}, func() {
		n++
		req, _ := json.Marshal(map[string]any{"op": "send_action_goal", "id": "raw-" + strconv.Itoa(n), "action": "/fib", "action_type": "example_interfaces/action/Fibonacci"})
		if err := ws.Write(ctx, websocket.MessageText, req); err != nil {
			b.Fatal(err)
		}
		if _, _, err := ws.Read(ctx); err != nil {
			b.Fatal(err)
		}
	})
}
