package binding_test

import (
	"context"
	"fmt"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
)

// A hotplate wrapped as an MHP device: three bindings, and every gate comes with them.
func Example() {
	var setpoint float64
	dev, err := binding.New(binding.Config{
		Device: mhp.DeviceInfo{ID: "hotplate-01", Class: "hotplate"},
		Signals: []binding.Signal{{
			Spec: mhp.Signal{Name: "plate_temperature", Type: mhp.TypeNumber, Unit: "degC"},
			Read: func(ctx context.Context) (binding.Sample, error) { return binding.Sample{Value: 21.5}, nil },
		}},
		Settings: []binding.Setting{{
			Spec: mhp.Setting{Name: "target_temperature", Type: mhp.TypeNumber, Unit: "degC", Limits: mhp.Range(20, 300)},
			Write: func(ctx context.Context, v any) (binding.WriteStatus, error) {
				setpoint = v.(float64) // the vendor call goes here
				return binding.Applied, nil
			},
		}},
		EStop: func(ctx context.Context) error { setpoint = 0; return nil },
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	res, _ := dev.Write(ctx, mhp.WriteRequest{Name: "target_temperature", Value: 150.0})
	fmt.Println("wrote", res.Value, "applied:", res.Applied, "setpoint:", setpoint)

	_, err = dev.Write(ctx, mhp.WriteRequest{Name: "target_temperature", Value: 500.0})
	fmt.Println(err.(*mhp.Error).Code, "-", err.(*mhp.Error).Message)

	stop, _ := dev.EStop(ctx, "smoke")
	_, err = dev.Write(ctx, mhp.WriteRequest{Name: "target_temperature", Value: 100.0})
	fmt.Println(stop.State, stop.Stopped, "-", mhp.CodeOf(err))
	// Output:
	// wrote 150 applied: true setpoint: 150
	// LimitViolation - target_temperature=500 above max 300
	// estop true - EStopActive
}

// A shaker with one signal, one setting with limits and one action: start
// it, write, read, run the action to its end, and see a refused write.
func ExampleNew() {
	rpm := 0.0
	speed := binding.Signal{Spec: mhp.Signal{Name: "speed", Type: mhp.TypeNumber, Unit: "rpm"},
		Read: func(ctx context.Context) (binding.Sample, error) { return binding.Sample{Value: rpm}, nil }}
	target := binding.Setting{Spec: mhp.Setting{Name: "target_speed", Type: mhp.TypeNumber, Limits: mhp.Range(0, 3000)},
		Write: func(ctx context.Context, v any) (binding.WriteStatus, error) {
			rpm = v.(float64)
			return binding.Applied, nil
		}}
	spinDown := binding.Action{Spec: mhp.Action{Name: "spin_down"},
		Run: func(ctx context.Context, job *binding.Job) (any, error) { rpm = 0; return "stopped", nil }}
	dev, err := binding.New(binding.Config{Device: mhp.DeviceInfo{ID: "shaker-01", Class: "shaker"},
		Signals: []binding.Signal{speed}, Settings: []binding.Setting{target}, Actions: []binding.Action{spinDown}})
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	ctx := context.Background()
	if err := dev.Start(ctx); err != nil {
		panic(err)
	}
	finished := make(chan mhp.Job, 1)
	defer dev.Listen(func(n mhp.Notification) {
		if n.Method == mhp.NotifyJobsFinished {
			finished <- n.Params["job"].(mhp.Job)
		}
	})()

	_, err = dev.Write(ctx, mhp.WriteRequest{Name: "target_speed", Value: 1200.0})
	read, _ := dev.Read(ctx, []string{"speed"})
	fmt.Println("write:", err, "- speed:", read.Values["speed"])

	started, _ := dev.Invoke(ctx, mhp.InvokeRequest{Name: "spin_down"})
	job := <-finished
	fmt.Println(started.Job.Action, job.State, job.Result)

	_, err = dev.Write(ctx, mhp.WriteRequest{Name: "target_speed", Value: 9000.0})
	fmt.Println(mhp.CodeOf(err), int(mhp.CodeOf(err)))
	// Output:
	// write: <nil> - speed: 1200
	// spin_down done stopped
	// LimitViolation -32010
}
