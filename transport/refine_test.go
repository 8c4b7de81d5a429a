package transport_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/client"
	"github.com/openmhp/mhp-go/transport"
)

// TestDescribeOverHTTPShowsARefinement: the transport answers describe
// from an encoding cached per descriptor; a driver refined after it was
// described once (an OPC UA server's units and EURange read at a later
// connection) is described anew, at every tier, over HTTP.
func TestDescribeOverHTTPShowsARefinement(t *testing.T) {
	drv, err := binding.New(binding.Config{
		Device: mhp.DeviceInfo{ID: "plc-refine", Class: "plc"},
		Signals: []binding.Signal{{Spec: mhp.Signal{Name: "temperature", Type: mhp.TypeNumber},
			Read: func(context.Context) (binding.Sample, error) { return binding.Sample{Value: 21.5}, nil }}},
		Settings: []binding.Setting{{Spec: mhp.Setting{Name: "setpoint", Type: mhp.TypeNumber},
			Write: func(context.Context, any) (binding.WriteStatus, error) { return binding.Applied, nil }}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drv.Close() })
	hs := serveHTTP(t, newServer(t, drv, transport.Options{}))
	dev := dialHTTP(t, hs.URL, client.Options{})
	describe := func(detail string) string {
		d, err := dev.Describe(context.Background(), mhp.DescribeRequest{Detail: detail})
		if err != nil {
			t.Fatalf("describe %s: %v", detail, err)
		}
		b, _ := json.Marshal(d)
		return string(b)
	}
	for _, tier := range []string{"summary", "full"} {
		if got := describe(tier); strings.Contains(got, "degC") {
			t.Fatalf("describe %s before the refinement already has a unit: %s", tier, got)
		}
	}
	if _, err := drv.Refine(binding.Refinement{
		SignalUnits:  map[string]string{"temperature": "degC"},
		SettingUnits: map[string]string{"setpoint": "degC"},
		Limits:       map[string]*mhp.Limits{"setpoint": mhp.Range(0, 100)},
	}); err != nil {
		t.Fatal(err)
	}
	for _, tier := range []string{"summary", "full"} {
		got := describe(tier)
		if !strings.Contains(got, "degC") || !strings.Contains(got, `"max":100`) {
			t.Errorf("describe %s after the refinement: %s, want the unit degC and max 100", tier, got)
		}
	}
}
