package opcua_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/opcua"
	"github.com/openmhp/mhp-go/opcua/opcuatest"
)

// An OPC UA server (here the fake of package opcuatest) served as an MHP
// device: Load a config file, New, Start, then use the driver as any device.
func Example() {
	srv, err := opcuatest.Start(conformance.NewInstrument())
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	file := `
adapter: opcua
device: {id: oven-01, class: oven}
endpoint: ` + srv.URL + `
signals:
  - {name: temperature, type: number, unit: degC, node: "ns=1;s=temperature"}
settings:
  - {name: setpoint, type: number, unit: degC, limits: {min: 0, max: 100}, node: "ns=1;s=setpoint"}
`
	cfg, err := opcua.Load(adapters.Source{Path: "oven.yaml", Data: []byte(file)})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	drv, err := opcua.New(ctx, cfg, opcua.Options{})
	if err != nil {
		log.Fatal(err)
	}
	if err := drv.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer drv.Close()

	dev := mhp.AsSession(drv, "example")
	w, err := dev.Write(ctx, mhp.WriteRequest{Name: "setpoint", Value: 42.0})
	if err != nil {
		log.Fatal(err)
	}
	v, _ := srv.In.Written("setpoint")
	fmt.Println("applied:", w.Applied, "server has:", v)
	_, err = dev.Write(ctx, mhp.WriteRequest{Name: "setpoint", Value: 150.0})
	fmt.Println("150 refused:", mhp.CodeOf(err) == mhp.CodeLimitViolation)
	// Output:
	// applied: true server has: 42
	// 150 refused: true
}
