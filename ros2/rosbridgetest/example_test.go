package rosbridgetest_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/openmhp/mhp-go/ros2"
	"github.com/openmhp/mhp-go/ros2/rosbridgetest"
)

// A fake robot with a Trigger service and a ROS 2 action, reached through
// the ros2 client as a real robot would be.
func Example() {
	srv := rosbridgetest.New(rosbridgetest.Options{})
	defer srv.Close()
	srv.AddService("/arm/home", "std_srvs/srv/Trigger", func(ctx context.Context, c *rosbridgetest.Call) (any, error) {
		return map[string]any{"success": true, "message": "homed"}, nil
	})
	srv.AddAction("/arm/move_to", "arm_msgs/action/MoveTo", rosbridgetest.Scripted(rosbridgetest.Script{
		Status: rosbridgetest.StatusAborted,
		Result: map[string]any{"error": "joint 3 limit"},
	}))

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := ros2.Dial(ctx, srv.URL(), ros2.ClientOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	values, err := c.CallService(ctx, "/arm/home", nil)
	fmt.Println(string(values), err)

	h, _ := c.SendGoal(ctx, ros2.GoalRequest{Action: "/arm/move_to", Type: "arm_msgs/action/MoveTo", Args: map[string]any{"z": 0.3}}, nil)
	r := <-h.Result
	fmt.Println(ros2.StatusName(r.Status), string(r.Values))
	// Output:
	// {"message":"homed","success":true} <nil>
	// ABORTED {"error":"joint 3 limit"}
}
