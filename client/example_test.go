package client_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/client"
	"github.com/openmhp/mhp-go/clock"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/transport"
)

// A lab session: one device served over HTTP on loopback, reached by name.
func ExampleLab() {
	drv, _ := conformance.MemoryDriver(conformance.NewInstrument(), conformance.Options{}, clock.Real{})
	srv := transport.NewServer(drv, transport.Options{Logger: slog.New(slog.DiscardHandler)})
	hs := httptest.NewServer(srv.Handler())
	defer func() { hs.Close(); srv.Close(); drv.Close() }()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lab := client.NewLab(map[string]string{"incubator": hs.URL}, client.Options{})
	defer lab.Close()
	dev, err := lab.Device(ctx, "incubator") // dialled on first use
	if err != nil {
		panic(err)
	}
	res, err := dev.Set(ctx, conformance.SettingSetpoint, 37.0)
	fmt.Println("setpoint", res.Value, err)
	_, err = dev.Set(ctx, conformance.SettingSetpoint, 150.0)
	fmt.Println("refused:", mhp.CodeOf(err))

	job, _ := dev.Run(ctx, conformance.ActionQuick, nil)
	job, err = dev.Wait(ctx, job.ID)
	fmt.Println(job.Action, job.State, err)

	for name, o := range lab.EStopAll(ctx, "end of the day") {
		fmt.Println("estop", name, o.Status)
	}
	// Output:
	// setpoint 37 <nil>
	// refused: LimitViolation
	// quick done <nil>
	// estop incubator stopped
}
