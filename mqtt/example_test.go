package mqtt_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/mqtt"
	"github.com/openmhp/mhp-go/mqtt/mqtttest"
)

// An MQTT incubator from its config file: Load, New, Start, then read the
// temperature the device published (retained) on its topic. The broker and
// the device are the fakes of package mqtttest.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	broker, err := mqtttest.NewBroker("127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer broker.Close()
	dev, err := mqtttest.NewDevice(ctx, mqtttest.DeviceConfig{Broker: broker.Addr(), Prefix: "lab/ic",
		ClientID: "incubator", Instrument: conformance.NewInstrument()})
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()

	cfg, err := mqtt.Load(adapters.Source{Path: "incubator.yaml", Data: []byte(`
adapter: mqtt
device: {id: incubator-01, class: incubator}
broker: ` + broker.Addr() + `
availability: {topic: lab/ic/status}
signals:
  - {name: temperature, type: number, unit: degC, topic: lab/ic/signal/temperature, path: /value}
`)})
	if err != nil {
		log.Fatal(err)
	}
	drv, err := mqtt.New(ctx, cfg, mqtt.Options{})
	if err != nil {
		log.Fatal(err)
	}
	if err := drv.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer drv.Close()

	for { // the retained value arrives just after the subscription
		r, err := drv.Read(ctx, []string{"temperature"})
		if err != nil {
			log.Fatal(err)
		}
		if v, ok := r.Values["temperature"]; ok && v != nil {
			fmt.Println("temperature:", v, "degC")
			break
		}
		select {
		case <-ctx.Done():
			log.Fatal("no temperature: ", ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	// Output: temperature: 21.5 degC
}
