package opcua

import (
	"context"
	"testing"

	"github.com/gopcua/opcua"
	"github.com/gopcua/opcua/ua"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/opcua/internal/fakeua"
)

// The read benchmarks run against the in-process fake server: a signal
// read through the adapter's driver (served from the subscription's latest
// value), the same read when the signal is an interlock (read live, one
// round trip), and a direct gopcua Read of the same node (the baseline).

func BenchmarkReadAdapter(b *testing.B) {
	srv := startFake(b)
	d := startDriver(b, fixtureConfig(srv.URL, conformance.Options{}), nil)
	waitSignals(b, d)
	ctx := context.Background()
	names := []string{conformance.SignalTemperature}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := d.Read(ctx, names)
		if err != nil || res.Values[conformance.SignalTemperature] != 21.5 {
			b.Fatalf("%+v %v", res, err)
		}
	}
}

func BenchmarkReadAdapterLive(b *testing.B) {
	srv := startFake(b)
	d := startDriver(b, fixtureConfig(srv.URL, conformance.Options{}), nil)
	waitSignals(b, d)
	ctx := context.Background()
	names := []string{conformance.SignalDoorClosed} // the interlock of run: read live
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := d.Read(ctx, names)
		if err != nil || res.Values[conformance.SignalDoorClosed] != true {
			b.Fatalf("%+v %v", res, err)
		}
	}
}

func BenchmarkReadDirect(b *testing.B) {
	srv := startFake(b)
	ctx := context.Background()
	c, err := opcua.NewClient(srv.URL, opcua.AutoReconnect(false))
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Connect(ctx); err != nil {
		b.Fatal(err)
	}
	defer c.Close(ctx)
	req := &ua.ReadRequest{NodesToRead: []*ua.ReadValueID{{NodeID: ua.MustParseNodeID(fakeua.NodeID(conformance.SignalTemperature)), AttributeID: ua.AttributeIDValue}},
		TimestampsToReturn: ua.TimestampsToReturnBoth}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := c.Read(ctx, req)
		if err != nil || res.Results[0].Value.Value() != 21.5 {
			b.Fatalf("%+v %v", res, err)
		}
	}
}

var _ = mhp.StateIdle
