package mqtttest_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/mqtt"
	"github.com/openmhp/mhp-go/mqtt/mqtttest"
)

// The fakes refuse what they cannot do, with an error, and the device's
// availability behaves as the adapter expects: "online" retained at every
// connect, "offline" (its will) when its link is cut, nothing on a clean
// Close.
func TestBrokerAndDevice(t *testing.T) {
	b, err := mqtttest.NewBroker("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := mqtttest.NewBroker(strings.TrimPrefix(b.Addr(), "tcp://")); err == nil {
		t.Fatal("a second broker on a port in use started")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := mqtttest.NewDevice(ctx, mqtttest.DeviceConfig{Broker: b.Addr(), ClientID: "x"}); err == nil || !strings.Contains(err.Error(), "Instrument") {
		t.Fatalf("a device without an instrument: %v, want refused naming the Instrument", err)
	}
	if b.Drop("nobody") {
		t.Fatal("Drop of a client that is not connected reported a cut")
	}

	var mu sync.Mutex
	var status []string
	if err := b.Subscribe("lab/d/status", func(m mqtt.Message) {
		mu.Lock()
		status = append(status, string(m.Payload))
		mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	last := func() string {
		mu.Lock()
		defer mu.Unlock()
		if len(status) == 0 {
			return ""
		}
		return status[len(status)-1]
	}
	dev, err := mqtttest.NewDevice(ctx, mqtttest.DeviceConfig{Broker: b.Addr(), Prefix: "lab/d", ClientID: "dev",
		Instrument: conformance.NewInstrument()})
	if err != nil {
		t.Fatal(err)
	}
	conformance.Eventually(t, "online", func() bool { return last() == "online" && b.Retained("lab/d/status") == 1 })
	if got := string(dev.SignalPayload(conformance.SignalTemperature)); got != `{"value":21.5}` {
		t.Fatalf("temperature payload %s", got)
	}
	b.Ban("dev", true)
	if !b.Kick("dev") {
		t.Fatal("Kick found no device")
	}
	conformance.Eventually(t, "the will", func() bool { return last() == "offline" })
	if !b.Gone("dev") {
		t.Fatal("the broker never forgot the kicked device")
	}
	b.Ban("dev", false)
	conformance.Eventually(t, "online again after the reconnect", func() bool { return last() == "online" })
	dev.Close()
	dev.Close() // idempotent
	conformance.Eventually(t, "the device gone", func() bool { return b.Subscribers("lab/d/estop") == 0 })
	if got := last(); got != "online" {
		t.Fatalf("a clean Close published %q", got)
	}
}
