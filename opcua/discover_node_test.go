package opcua

import (
	"context"
	"testing"
	"time"

	"github.com/gopcua/opcua/ua"

	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/conformance"
)

// TestDiscoverNodeOPCUA (MHP_PEER_OPCUA): discovery of the real server
// (testdata/server.mjs) reproduces examples/opcua-plc/plc.yaml apart from
// the integrator's edits: every item of the example is discovered at its
// node, with its type, unit and EURange limits, and its estop method is
// proposed. The generated file serves and reads what a direct read reads.
func TestDiscoverNodeOPCUA(t *testing.T) {
	t0 := time.Now()
	p := startNode(t)
	t.Logf("node up after %v", time.Since(t0))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := discoverRegistry(t)
	g, err := r.Discover(ctx, Kind, p.url, adapters.DiscoverOptions{Include: []string{"Objects/Plant", "Objects/Unit1"}, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("discovered after %v", time.Since(t0))
	got, err := Load(adapters.Source{Path: "generated.yaml", Data: g.YAML})
	if err != nil {
		t.Fatalf("Load: %v\n%s", err, g.YAML)
	}
	src, err := adapters.ReadSource("../examples/opcua-plc/plc.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want, err := Load(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range want.Signals {
		d := findSignal(got, s.Node)
		// A unit the server does not give (no EngineeringUnits) is the
		// integrator's edit.
		if d == nil || d.Type != s.Type || (d.Unit != s.Unit && d.Unit != "") {
			t.Errorf("example signal %s (%s): discovered %+v", s.Name, s.Node, d)
		}
	}
	for _, s := range want.Settings {
		d := findSetting(got, s.Node)
		if d == nil || d.Type != s.Type || d.Unit != s.Unit {
			t.Errorf("example setting %s (%s): discovered %+v", s.Name, s.Node, d)
			continue
		}
		if s.Name == "setpoint" && (d.Limits == nil || *d.Limits.Min != 0 || *d.Limits.Max != 100) {
			t.Errorf("setpoint limits from EURange: %+v", d.Limits)
		}
	}
	for _, a := range want.Actions {
		found := false
		for _, d := range got.Actions {
			switch {
			case a.Method != nil && d.Method != nil:
				found = found || (d.Method.Object == a.Method.Object && d.Method.Method == a.Method.Method &&
					len(d.Method.Outputs) == len(a.Method.Outputs) && d.Params.Names()[0] == a.Params.Names()[0])
			case a.LADS != nil && d.LADS != nil:
				found = found || (d.LADS.FunctionalUnit == a.LADS.FunctionalUnit && d.LADS.Start == a.LADS.Start)
			}
		}
		if !found {
			t.Errorf("example action %s not discovered: %+v", a.Name, got.Actions)
		}
	}
	estop := false
	for _, s := range g.Report.Skipped {
		estop = estop || s.Source == "Objects/Plant/EStop"
	}
	if !estop {
		t.Errorf("Plant.EStop not proposed for estop: %+v", g.Report.Skipped)
	}
	// Acceptance: the generated file serves the values a direct read reads.
	drv := startDriver(t, got, nil)
	waitSignals(t, drv)
	t.Logf("served after %v", time.Since(t0))
	c, err := Dial(ctx, got, DialOptions{KeepAlive: -1, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ns, _ := namespaceArray(ctx, c)
	for _, s := range got.Signals {
		res, err := c.Read(ctx, []*ua.ReadValueID{{NodeID: resolveNode(s.Node, ns), AttributeID: ua.AttributeIDValue}})
		if err != nil || len(res) != 1 || res[0].Value == nil {
			t.Fatalf("direct read %s: %v", s.Node, err)
		}
		direct := normalise(fromValue(res[0].Value.Value()))
		conformance.EventuallyWithin(t, "served "+s.Name+" = the direct read", 5*time.Second, func() bool {
			v, err := drv.Read(ctx, []string{s.Name})
			return err == nil && v.Values[s.Name] == direct
		})
	}
}
