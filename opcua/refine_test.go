package opcua

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/opcua/opcuatest"
)

// configFile is a config file for the fake at url: temperature without a
// unit (the server's EngineeringUnits say degC), setpoint without unit and
// limits (its EURange is 0..100) unless setting adds lines to it, and
// extra YAML appended.
func configFile(url, setting, extra string) adapters.Source {
	text := fmt.Sprintf(`adapter: opcua
device: {id: oven-1}
endpoint: %s
timeouts: {request_s: 2, dial_s: 1, start_s: 2, cancel_s: 5}
reconnect: {min_s: 0.05, max_s: 0.2}
signals:
  - {name: temperature, type: number, node: "%s"}
settings:
  - name: setpoint
    type: number
    node: "%s"
%s
%s`, url, opcuatest.NodeID(conformance.SignalTemperature), opcuatest.NodeID(conformance.SettingSetpoint), setting, extra)
	return adapters.Source{Path: "oven.yaml", Dir: ".", Data: []byte(text)}
}

// buildFile builds and starts the driver of src through the registry, as
// `mhp serve oven.yaml` does: Probe first, then New and Start.
func buildFile(t *testing.T, src adapters.Source) (*binding.Driver, error) {
	t.Helper()
	reg := adapters.NewRegistry()
	if err := Register(reg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := reg.Build(ctx, src)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = d.Close() })
	return d, d.Start(ctx)
}

// loadWithServer builds the driver of configFile(setting, extra) over a
// fake that is up when the file is loaded (Probe reads it) or, when
// upAtLoad is false, down until the driver is built and started (its first
// connection reads it).
func loadWithServer(t *testing.T, upAtLoad bool, setting, extra string) (*opcuatest.Server, *binding.Driver) {
	t.Helper()
	srv := startFake(t)
	if !upAtLoad {
		srv.Down()
	}
	d, err := buildFile(t, configFile(srv.URL, setting, extra))
	if err != nil {
		t.Fatal(err)
	}
	if !upAtLoad {
		if err := srv.Up(); err != nil {
			t.Fatal(err)
		}
	}
	return srv, d
}

// linkUp waits for the driver to report its link to the server up.
func linkUp(t *testing.T, d *binding.Driver) {
	t.Helper()
	conformance.EventuallyWithin(t, "the link to the server up", 10*time.Second, func() bool {
		l := d.Link()
		return l != nil && l.Connected
	})
}

// TestUnitsAndRangesFromALaterConnection: the server is down when the file
// is loaded (the probe fails) and comes up a moment later. The first
// connection reads the units and the EURange into the descriptor: describe
// and safety/limits show them, and a write outside the EURange is refused
// by the limits gate (dry run too) with nothing reaching the server. Before
// the fix they never showed for the life of the process, and the write was
// refused only by the adapter's own check inside the write hook.
func TestUnitsAndRangesFromALaterConnection(t *testing.T) {
	srv := startFake(t)
	srv.Down()
	d, err := buildFile(t, configFile(srv.URL, "", ""))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	dev := mhp.AsSession(d, "s1")
	desc, err := dev.Describe(ctx, mhp.DescribeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if sp, _ := desc.Setting(conformance.SettingSetpoint); sp.Limits != nil || sp.Unit != "" {
		t.Fatalf("with the server down the config's setting is described: %+v", sp)
	}
	if err := srv.Up(); err != nil {
		t.Fatal(err)
	}
	conformance.EventuallyWithin(t, "describe to show the server's units and EURange", 10*time.Second, func() bool {
		desc, err = dev.Describe(ctx, mhp.DescribeRequest{})
		if err != nil {
			return false
		}
		sp, _ := desc.Setting(conformance.SettingSetpoint)
		temp, _ := desc.Signal(conformance.SignalTemperature)
		return sp.Limits != nil && temp.Unit == "degC"
	})
	linkUp(t, d)
	sp, _ := desc.Setting(conformance.SettingSetpoint)
	if sp.Unit != "degC" || sp.Limits.Min == nil || *sp.Limits.Min != 0 || *sp.Limits.Max != 100 {
		t.Fatalf("setpoint described %+v %+v, want degC and the EURange 0..100", sp, sp.Limits)
	}
	if lim, err := dev.Limits(ctx); err != nil || lim.Settings[conformance.SettingSetpoint].Limits == nil {
		t.Fatalf("safety/limits: %+v %v", lim, err)
	}
	before, _ := srv.In.Written(conformance.SettingSetpoint)
	for _, dry := range []bool{true, false} {
		_, err := dev.Write(ctx, mhp.WriteRequest{Name: conformance.SettingSetpoint, Value: 150.0, DryRun: dry})
		if e, ok := mhp.AsError(err); !ok || e.Code != mhp.CodeLimitViolation || e.Data[mhp.DataGate] != mhp.GateLimits {
			t.Fatalf("write 150 outside the EURange (dry run %v): %v, want LimitViolation at the limits gate", dry, err)
		}
	}
	if after, _ := srv.In.Written(conformance.SettingSetpoint); after != before {
		t.Fatalf("the refused write reached the server: %v -> %v", before, after)
	}
	conformance.EventuallyWithin(t, "a write inside the EURange", 5*time.Second, func() bool {
		r, err := dev.Write(ctx, mhp.WriteRequest{Name: conformance.SettingSetpoint, Value: 55.0})
		return err == nil && r.Applied
	})
}

// TestUnitsAndRangesKeepTheConfigs: what the config states is never
// changed by the server: an explicit unit and limits narrower than the
// EURange stay as they are, whether the server was up at load (Probe) or
// came up later (the refinement), and a config range wider than the
// EURange is refused at load with the server up.
func TestUnitsAndRangesKeepTheConfigs(t *testing.T) {
	const stated = `    unit: F
    limits: {min: 10, max: 20}
`
	for _, upAtLoad := range []bool{true, false} {
		t.Run(fmt.Sprintf("server up at load %v", upAtLoad), func(t *testing.T) {
			_, d := loadWithServer(t, upAtLoad, stated, "")
			ctx := ctxT(t)
			conformance.EventuallyWithin(t, "the signal's unit from the server", 10*time.Second, func() bool {
				desc := d.Descriptor()
				return desc.Signals[0].Unit == "degC"
			})
			linkUp(t, d)
			sp := d.Descriptor().Settings[0]
			if sp.Unit != "F" || *sp.Limits.Min != 10 || *sp.Limits.Max != 20 {
				t.Fatalf("the config's unit and limits changed: %q %+v", sp.Unit, sp.Limits)
			}
			_, err := mhp.AsSession(d, "s").Write(ctx, mhp.WriteRequest{Name: conformance.SettingSetpoint, Value: 50.0, DryRun: true})
			if e, ok := mhp.AsError(err); !ok || e.Code != mhp.CodeLimitViolation {
				t.Fatalf("50 is outside the config's 10..20: %v", err)
			}
		})
	}
	srv := startFake(t)
	if _, err := buildFile(t, configFile(srv.URL, "    limits: {min: 0, max: 500}", "")); err == nil {
		t.Fatal("a config range wider than the EURange was accepted at load")
	}
}
