package mqtt_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/mqtt"
)

// TestServeExampleBeforeBroker: `mhp serve sensor.yaml` with the broker
// down starts, serves, reports the backend down and refuses actuation
// not_started (no fault); when the broker comes up on its address the
// device connects without a restart. fail_fast refuses to start.
func TestServeExampleBeforeBroker(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	path := filepath.Join("..", "examples", "mqtt-sensor", "sensor.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(data), "mqtt://127.0.0.1:1883", "tcp://"+addr, 1)
	text = strings.Replace(text, "connect_timeout: 10s", "connect_timeout: 300ms", 1)
	text = strings.Replace(text, "retry_min: 1s", "retry_min: 50ms", 1)
	text = strings.Replace(text, "retry_max: 10s", "retry_max: 200ms", 1)
	if !strings.Contains(text, "tcp://"+addr) || !strings.Contains(text, "retry_min: 50ms") {
		t.Fatal("the example config changed: the test no longer points it at the test broker")
	}
	r := adapters.NewRegistry()
	if err := mqtt.Register(r); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	ff, err := r.Build(ctx, adapters.Source{Path: path, Data: []byte(strings.Replace(text, "retry_max: 200ms", "retry_max: 200ms\n  fail_fast: true", 1))})
	if err != nil {
		t.Fatal(err)
	}
	if err := ff.Start(ctx); err == nil || !strings.Contains(err.Error(), "fail_fast") {
		t.Fatalf("fail_fast start with the broker down: %v, want refused", err)
	}
	_ = ff.Close()

	d, err := r.Build(ctx, adapters.Source{Path: path, Data: []byte(text)})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Start(ctx); err != nil {
		t.Fatalf("start with the broker down: %v", err)
	}
	dev := mhp.AsSession(d, "s1")
	p, _ := dev.Ping(ctx)
	if p.Backend == nil || p.Backend.Connected || !strings.Contains(p.Backend.Error, addr) {
		t.Fatalf("ping backend %+v, want connected:false naming the broker", p.Backend)
	}
	_, err = dev.Write(ctx, mhp.WriteRequest{Name: "setpoint", Value: 37.0})
	if e, ok := mhp.AsError(err); !ok || e.Data["outcome"] != mhp.OutcomeNotStarted {
		t.Fatalf("write with the broker down: %v, want not_started", err)
	}
	if s := d.State(); s != mhp.StateIdle {
		t.Fatalf("state %s with the broker down, want idle", s)
	}
	newBroker(t, addr)
	conformance.Eventually(t, "the link up", func() bool { l := d.Link(); return l != nil && l.Connected })
}
