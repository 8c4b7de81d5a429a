package ros2_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/ros2"
	"github.com/openmhp/mhp-go/ros2/rosbridgetest"
)

// A robot arm as an MHP device: its config file loaded with Load, its driver
// built with New and started against a fake rosbridge, then a setting
// written through a ROS service and the arm's own e-stop called.
func Example() {
	robot := rosbridgetest.New(rosbridgetest.Options{})
	defer robot.Close()
	robot.AddService("/arm/set_speed", "arm_msgs/srv/SetSpeed", func(ctx context.Context, c *rosbridgetest.Call) (any, error) {
		var req struct {
			Scale float64 `json:"scale"`
		}
		_ = c.Decode(&req)
		fmt.Println("robot: speed scale", req.Scale)
		return map[string]any{"success": true}, nil
	})
	robot.AddService("/arm/estop", "std_srvs/srv/Trigger", func(ctx context.Context, c *rosbridgetest.Call) (any, error) {
		fmt.Println("robot: brakes engaged")
		return map[string]any{"success": true, "message": "stopped"}, nil
	})

	file := `
adapter: ros2
device: {id: arm-01, class: robot_arm}
url: ` + robot.URL() + `
settings:
  - {name: speed_scale, type: number, limits: {min: 0, max: 1}, service: /arm/set_speed, field: scale}
estop: {service: /arm/estop}
`
	cfg, err := ros2.Load(adapters.Source{Path: "robot.yaml", Data: []byte(file)})
	if err != nil {
		panic(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	drv, err := ros2.New(context.Background(), cfg, ros2.Options{Options: adapters.Options{Logger: quiet}})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := drv.Start(ctx); err != nil {
		panic(err)
	}
	defer drv.Close()

	res, err := drv.Write(ctx, mhp.WriteRequest{Name: "speed_scale", Value: 0.5})
	fmt.Println("applied:", res.Applied, err)
	_, err = drv.Write(ctx, mhp.WriteRequest{Name: "speed_scale", Value: 2.0})
	fmt.Println(mhp.CodeOf(err))
	stop, err := drv.EStop(ctx, "example")
	fmt.Println("stopped:", stop.Stopped, err)
	// Output:
	// robot: speed scale 0.5
	// applied: true <nil>
	// LimitViolation
	// robot: brakes engaged
	// stopped: true <nil>
}
