package opcua

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gopcua/opcua/ua"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/opcua/opcuatest"
)

// The server's EngineeringUnits and EURange complete the config (units,
// limits) and overrule it: a config range wider than the server's is
// refused, naming node, config range and server range.
func TestEngineeringUnitsAndRange(t *testing.T) {
	srv := startFake(t)
	ctx := ctxT(t)
	cfg := extraConfig(srv.URL)
	cfg.Settings = append(cfg.Settings, SettingItem{Setting: mhp.Setting{Name: "setpoint_free", Type: mhp.TypeNumber},
		Node: opcuatest.NodeID(conformance.SettingSetpoint)})
	for i := range cfg.Signals {
		if cfg.Signals[i].Name == conformance.SignalTemperature {
			cfg.Signals[i].Unit = ""
		}
	}

	// Probe: units and limits the file leaves out come from the server.
	got, err := Probe(ctx, cfg, DialOptions{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	var unit string
	for _, s := range got.Signals {
		if s.Name == conformance.SignalTemperature {
			unit = s.Unit
		}
	}
	if unit != "degC" {
		t.Fatalf("temperature unit from the server: %q", unit)
	}
	for _, s := range got.Settings {
		if s.Name == "setpoint_free" && (s.Limits == nil || *s.Limits.Min != 0 || *s.Limits.Max != 100) {
			t.Fatalf("setpoint_free limits from the EURange: %+v", s.Limits)
		}
	}

	// The driver holds a setting without limits to the server's range: its
	// first connection refines the descriptor, so the limits gate refuses
	// before sending, nothing written.
	d := startDriver(t, cfg, nil)
	dev := mhp.AsSession(d, "s1")
	before, _ := srv.In.Written(conformance.SettingSetpoint)
	_, err = dev.Write(ctx, mhp.WriteRequest{Name: "setpoint_free", Value: 150.0})
	if e, ok := mhp.AsError(err); !ok || e.Code != mhp.CodeLimitViolation || e.Data[mhp.DataGate] != mhp.GateLimits {
		t.Fatalf("write outside the EURange: %v", err)
	}
	// Behind the gate, the adapter's own check still names the EURange (a
	// server whose range narrowed after the descriptor was refined).
	item := SettingItem{Setting: mhp.Setting{Name: "setpoint_free", Type: mhp.TypeNumber}, Node: opcuatest.NodeID(conformance.SettingSetpoint)}
	a := &adapter{info: map[string]nodeInfo{item.Node: {dataType: ua.TypeIDDouble, hasRange: true, low: 0, high: 100}}, badRange: map[string]string{}}
	if e, ok := mhp.AsError(a.rangeGate(item, 150.0)); !ok || e.Code != mhp.CodeLimitViolation || !strings.Contains(e.Message, "EURange 0..100") {
		t.Fatalf("the adapter's range check: %v", e)
	}
	if after, _ := srv.In.Written(conformance.SettingSetpoint); after != before {
		t.Fatalf("the refused write reached the server: %v -> %v", before, after)
	}
	if r, err := dev.Write(ctx, mhp.WriteRequest{Name: "setpoint_free", Value: 55.0}); err != nil || !r.Applied {
		t.Fatalf("write inside the EURange: %+v %v", r, err)
	}

	// A config range wider than the server's: refused by Probe and at start.
	wide := cfg
	wide.Settings = append([]SettingItem(nil), cfg.Settings...)
	lo, hi := -10.0, 150.0
	for i := range wide.Settings {
		if wide.Settings[i].Name == conformance.SettingSetpoint {
			wide.Settings[i].Limits = &mhp.Limits{Min: &lo, Max: &hi}
		}
	}
	want := []string{"setting setpoint", "-10..150", opcuatest.NodeID(conformance.SettingSetpoint), "EURange 0..100"}
	_, err = Probe(ctx, wide, DialOptions{Logger: quietLogger()})
	var re *RangeError
	if !errors.As(err, &re) {
		t.Fatalf("Probe of a wider range: %v", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("%q does not name %q", err, w)
		}
	}
	d2, err := New(context.Background(), wide, quietOptions(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	err = d2.Start(context.Background())
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "EURange 0..100") {
		t.Fatalf("start with a wider range: %v", err)
	}
}
