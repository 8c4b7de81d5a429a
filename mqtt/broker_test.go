package mqtt_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/openmhp/mhp-go/mqtt/mqtttest"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newBroker starts an embedded broker on addr ("127.0.0.1:0": a random
// port) for the test.
func newBroker(t testing.TB, addr string) *mqtttest.Broker {
	t.Helper()
	b, err := mqtttest.NewBroker(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

// newDevice connects a fake device for the test.
func newDevice(t testing.TB, cfg mqtttest.DeviceConfig) *mqtttest.Device {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d, err := mqtttest.NewDevice(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d
}
