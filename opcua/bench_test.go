package opcua

import (
	"context"
	"testing"
	"time"

	"github.com/gopcua/opcua"
	"github.com/gopcua/opcua/ua"

	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/opcua/opcuatest"
)

// BenchmarkRead measures, in one run against the in-process fake server,
// a direct gopcua Read of a node (the baseline), a signal read through the
// adapter's driver (served from the subscription), an interlock signal read
// live (the default) and served from a fresh subscription
// (interlock_max_age_s set), and a read through the adapter's Client (one
// round trip), and reports each as a ratio of the direct read
// ("x_direct").
func BenchmarkRead(b *testing.B) {
	srv := startFake(b)
	cfg := fixtureConfig(srv.URL, conformance.Options{})
	d := startDriver(b, cfg, nil)
	cfg.Timeouts.InterlockMaxAgeS = 5
	dFresh := startDriver(b, cfg, nil)
	waitSignals(b, dFresh)
	waitSignals(b, d)
	ctx := context.Background()
	c, err := opcua.NewClient(srv.URL, opcua.AutoReconnect(false))
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Connect(ctx); err != nil {
		b.Fatal(err)
	}
	defer c.Close(ctx)
	node := ua.MustParseNodeID(opcuatest.NodeID(conformance.SignalTemperature))
	req := &ua.ReadRequest{NodesToRead: []*ua.ReadValueID{{NodeID: node, AttributeID: ua.AttributeIDValue}},
		TimestampsToReturn: ua.TimestampsToReturnBoth}
	direct := func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			res, err := c.Read(ctx, req)
			if err != nil || res.Results[0].Value.Value() != 21.5 {
				b.Fatalf("%+v %v", res, err)
			}
		}
	}
	signal := func(d *binding.Driver, name string, want any) func(*testing.B) {
		names := []string{name}
		return func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				res, err := d.Read(ctx, names)
				if err != nil || res.Values[name] != want {
					b.Fatalf("%+v %v", res, err)
				}
			}
		}
	}
	conn, err := Dial(ctx, fixtureConfig(srv.URL, conformance.Options{}), DialOptions{Logger: quietLogger(), KeepAlive: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	live := func(b *testing.B) {
		rv := []*ua.ReadValueID{{NodeID: node, AttributeID: ua.AttributeIDValue}}
		for i := 0; i < b.N; i++ {
			res, err := conn.Read(ctx, rv)
			if err != nil || res[0].Value.Value() != 21.5 {
				b.Fatalf("%+v %v", res, err)
			}
		}
	}
	// Sub-benchmarks run in order; direct's last (largest) run is the
	// baseline of the others' ratios.
	var baseNs float64
	for _, v := range []struct {
		name string
		fn   func(*testing.B)
	}{
		{"direct", direct},
		{"cached_signal", signal(d, conformance.SignalTemperature, 21.5)},
		{"interlock_live", signal(d, conformance.SignalDoorClosed, true)},
		{"interlock_fresh", signal(dFresh, conformance.SignalDoorClosed, true)},
		{"client_read", live},
	} {
		b.Run(v.name, func(b *testing.B) {
			start := time.Now()
			v.fn(b)
			ns := float64(time.Since(start).Nanoseconds()) / float64(b.N)
			if v.name == "direct" {
				baseNs = ns
			}
			if baseNs > 0 {
				b.ReportMetric(ns/baseNs, "x_direct")
			}
		})
	}
}
