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
