package opcua

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/opcua/opcuatest"
)

// startPlant starts the fake with the plant, its namespace moved to index
// 3 by two namespaces registered before it.
func startPlant(t testing.TB) *opcuatest.Server {
	t.Helper()
	srv, err := opcuatest.StartWith(conformance.NewInstrument(), opcuatest.Options{Plant: true,
		ExtraNamespaces: []string{"urn:example:first", "urn:example:second"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.In.ReleaseAll(); _ = srv.Close() })
	return srv
}

func discoverRegistry(t testing.TB) *adapters.Registry {
	t.Helper()
	r := adapters.NewRegistry()
	if err := Register(r); err != nil {
		t.Fatal(err)
	}
	return r
}

func nsu(key string) string { return "nsu=" + opcuatest.Namespace + ";s=" + key }

func findSignal(c Config, node string) *SignalItem {
	for i := range c.Signals {
		if c.Signals[i].Node == node {
			return &c.Signals[i]
		}
	}
	return nil
}

func findSetting(c Config, node string) *SettingItem {
	for i := range c.Settings {
		if c.Settings[i].Node == node {
			return &c.Settings[i]
		}
	}
	return nil
}

func findAction(c Config, name string) *ActionItem {
	for i := range c.Actions {
		if c.Actions[i].Name == name {
			return &c.Actions[i]
		}
	}
	return nil
}

// TestDiscoverPlant: the nested address space becomes a config that
// round-trips (Load, Validate, New) and serves the server's values.
func TestDiscoverPlant(t *testing.T) {
	srv := startPlant(t)
	ctx := ctxT(t)
	g, err := discoverRegistry(t).Discover(ctx, Kind, srv.URL, adapters.DiscoverOptions{DeviceID: "oven-01", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	text := string(g.YAML)
	cfg, err := Load(adapters.Source{Path: "plc.yaml", Data: g.YAML})
	if err != nil {
		t.Fatalf("Load of the generated file: %v\n%s", err, text)
	}
	if cfg.Device.ID != "oven-01" || cfg.Device.Class != "plc" {
		t.Fatalf("device %+v", cfg.Device)
	}
	// Signals: unit from EngineeringUnits; names snake_case, collisions
	// resolved by the parent; every node id written with nsu=.
	temp := findSignal(cfg, nsu("Plant.Line1.Oven.Temperature"))
	temp2 := findSignal(cfg, nsu("Plant.Line2.Oven.Temperature"))
	dev := findSignal(cfg, nsu("temperature"))
	if temp == nil || temp2 == nil || dev == nil || temp.Unit != "degC" || temp.Type != mhp.TypeNumber {
		t.Fatalf("temperatures not mapped: %+v %+v %+v\n%s", temp, temp2, dev, text)
	}
	if names := map[string]bool{temp.Name: true, temp2.Name: true, dev.Name: true}; len(names) != 3 {
		t.Fatalf("colliding names not resolved: %s %s %s", temp.Name, temp2.Name, dev.Name)
	}
	if !strings.Contains(temp2.Name, "oven") || !strings.Contains(text, "browse path Objects/Plant/Line2/Oven/Temperature") {
		t.Fatalf("collision %q or its browse path comment missing\n%s", temp2.Name, text)
	}
	for _, s := range cfg.Signals {
		if !strings.HasPrefix(s.Node, "nsu=") {
			t.Errorf("signal %s node %q not written with nsu=", s.Name, s.Node)
		}
	}
	// Settings: writable per AccessLevel; limits from EURange; approval
	// confirm; no range means no limits and a loud comment.
	sp := findSetting(cfg, nsu("Plant.Line1.Oven.Setpoint"))
	if sp == nil || sp.Limits == nil || *sp.Limits.Min != 0 || *sp.Limits.Max != 250 || sp.Unit != "degC" || sp.Approval != mhp.ApprovalConfirm {
		t.Fatalf("setpoint %+v", sp)
	}
	power := findSetting(cfg, nsu("Plant.Line1.Oven.Power"))
	if power == nil || power.Limits != nil || !strings.Contains(text, "WARNING: NO LIMITS") {
		t.Fatalf("power %+v, or no loud comment", power)
	}
	if findSetting(cfg, nsu("Plant.Line1.Oven.DoorClosed")) != nil || findSignal(cfg, nsu("Plant.Line1.Oven.DoorClosed")) == nil {
		t.Fatal("a read-only boolean became a setting")
	}
	for _, s := range cfg.Settings {
		if s.Approval != mhp.ApprovalConfirm {
			t.Errorf("setting %s approval %q", s.Name, s.Approval)
		}
	}
	// Interlocks are proposed, never applied.
	if !strings.Contains(text, "PROPOSED INTERLOCK") || len(g.Report.Proposals) < 2 {
		t.Fatalf("no interlock proposals: %v", g.Report.Proposals)
	}
	for _, a := range cfg.Actions {
		if len(a.Interlocks) > 0 || a.Approval != mhp.ApprovalConfirm {
			t.Errorf("action %s: interlocks %v approval %q", a.Name, a.Interlocks, a.Approval)
		}
	}
	// Methods: params from InputArguments, outputs from OutputArguments.
	add := findAction(cfg, "add")
	if add == nil || add.Method == nil || add.Method.Object != nsu("Plant.Line1.Oven") || strings.Join(add.Params.Names(), ",") != "a,b" ||
		strings.Join(add.Method.Outputs, ",") != "sum" {
		t.Fatalf("add %+v", add)
	}
	// An emergency stop is proposed, not an action; the TODOs are in the file.
	if findAction(cfg, "emergency_stop") != nil || !strings.Contains(text, "Proposed: method Objects/Plant/Line1/Oven/EmergencyStop") {
		t.Fatalf("emergency stop mapped as an action, or not proposed\n%s", text)
	}
	if cfg.EStop != nil || !strings.Contains(text, "TODO(integrator): estop") || !strings.Contains(text, "TODO(integrator): watchdog") {
		t.Fatal("estop applied, or the TODOs missing")
	}
	// LADS units: the program action and the unit's state signal.
	run := findAction(cfg, "fu_run")
	if run == nil || run.LADS == nil || run.LADS.Start != "StartProgram" || run.LADS.CancelWith != "Stop" || run.LADS.FunctionalUnit != nsu("FU_run") {
		t.Fatalf("FU_run %+v", run)
	}
	if tpl, _ := run.Params.Get("program_template"); tpl == nil || tpl.Limits == nil || len(tpl.Limits.Enum) != 2 {
		t.Fatalf("program templates not read: %+v", tpl)
	}
	if findSignal(cfg, nsu("FU_run.FunctionalUnitState.CurrentState")) == nil {
		t.Fatal("no unit state signal")
	}
	if b := findAction(cfg, "batch"); b == nil || b.Program == nil || b.Program.Result != nsu("Batch.Result") {
		t.Fatalf("Part 10 program %+v", b)
	}
	// Skipped with reasons: the custom DataType, the server's own nodes.
	why := map[string]string{}
	for _, s := range g.Report.Skipped {
		why[s.Source] = s.Why
	}
	if !strings.Contains(why["Objects/Plant/Line1/Oven/Recipe"], "custom type") || why["Objects/Server"] == "" {
		t.Fatalf("skips %v", why)
	}
	if sum := g.Report.Summary(); !strings.Contains(sum, "skipped") || !strings.Contains(sum, "setting") {
		t.Fatalf("summary %s", sum)
	}

	// The file serves unchanged: New, Start, and reads match the server.
	d := startDriver(t, cfg, nil)
	conformance.EventuallyWithin(t, "the oven's values", 5*time.Second, func() bool {
		res, err := d.Read(context.Background(), []string{temp.Name})
		return err == nil && res.Values[temp.Name] == 180.5
	})
	if got := d.Descriptor(); len(got.Settings) != len(cfg.Settings) || len(got.Actions) != len(cfg.Actions) {
		t.Fatalf("served %d settings, %d actions; the file has %d, %d", len(got.Settings), len(got.Actions), len(cfg.Settings), len(cfg.Actions))
	}
}

// TestDiscoverIncludeExclude: --include and --exclude select by browse path.
func TestDiscoverIncludeExclude(t *testing.T) {
	srv := startPlant(t)
	cfg, rep, err := Discover(ctxT(t), srv.URL, DiscoverOptions{DiscoverOptions: adapters.DiscoverOptions{
		Include: []string{"Objects/Plant"}, Exclude: []string{"Objects/Plant/Line2"}, Logger: quietLogger()}})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range cfg.Signals {
		if !strings.Contains(s.Node, "Plant.Line1") {
			t.Errorf("signal %s (%s) outside the include", s.Name, s.Node)
		}
	}
	if findSignal(cfg, nsu("Plant.Line1.Oven.Temperature")) == nil || findSignal(cfg, nsu("Plant.Line1.Oven.Temperature")).Name != "temperature" {
		t.Fatalf("included temperature not mapped under its own name: %+v", cfg.Signals)
	}
	excluded := false
	for _, s := range rep.Skipped {
		excluded = excluded || (s.Source == "Objects/Plant/Line2" && strings.Contains(s.Why, "--exclude"))
	}
	if !excluded {
		t.Fatalf("exclusion not reported: %+v", rep.Skipped)
	}
	// --root starts the walk below Objects; --depth bounds it.
	cfg, rep, err = Discover(ctxT(t), srv.URL, DiscoverOptions{Root: "Objects/Plant", DiscoverOptions: adapters.DiscoverOptions{Depth: 2, Logger: quietLogger()}})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Signals)+len(cfg.Settings)+len(cfg.Actions) != 0 || !strings.Contains(rep.Summary(), "deeper than --depth 2") {
		t.Fatalf("depth 2 from Objects/Plant reached the ovens: %+v\n%s", cfg.Signals, rep.Summary())
	}
}

// TestDiscoverMatchesTheFixtureMapping: discovery of the fake's fixture
// nodes, with the integrator's edits (names, approvals, limits, params,
// interlocks: the fixture's item specs), maps every fixture item onto the
// node the hand-written fixtureConfig does, which TestConformance runs the
// whole conformance suite over.
func TestDiscoverMatchesTheFixtureMapping(t *testing.T) {
	srv := startPlant(t)
	cfg, _, err := Discover(ctxT(t), srv.URL, DiscoverOptions{DiscoverOptions: adapters.DiscoverOptions{
		Include: []string{"Objects/Device", "Objects/FU_run", "Objects/FU_monitor"}, Logger: quietLogger()}})
	if err != nil {
		t.Fatal(err)
	}
	want := fixtureConfig(srv.URL, conformance.Options{})
	rename := map[string]string{"fu_run": conformance.ActionRun, "fu_monitor": conformance.ActionMonitor}
	for _, s := range want.Signals {
		got := findSignal(cfg, nsu(strings.TrimPrefix(s.Node, "ns=1;s=")))
		if got == nil || got.Name != s.Name || got.Type != s.Type || got.Unit != s.Unit {
			t.Errorf("signal %s: discovered %+v", s.Name, got)
		}
	}
	for _, s := range want.Settings {
		got := findSetting(cfg, nsu(strings.TrimPrefix(s.Node, "ns=1;s=")))
		if got == nil || got.Name != s.Name || got.Type != s.Type {
			t.Errorf("setting %s: discovered %+v", s.Name, got)
		}
	}
	for _, a := range want.Actions {
		var got *ActionItem
		for i := range cfg.Actions {
			if n := cfg.Actions[i].Name; n == a.Name || rename[n] == a.Name {
				got = &cfg.Actions[i]
			}
		}
		switch {
		case got == nil:
			t.Errorf("action %s not discovered", a.Name)
		case a.Method != nil:
			if got.Method == nil || got.Method.Method != nsu(a.Name) || got.Method.Object != nsu("Device") ||
				strings.Join(got.Method.Outputs, ",") != strings.Join(a.Method.Outputs, ",") {
				t.Errorf("action %s: discovered %+v, want %+v", a.Name, got.Method, a.Method)
			}
			if a.Name == conformance.ActionProfile && strings.Join(got.Params.Names(), ",") != "steps,cycles" {
				t.Errorf("profile params %v", got.Params.Names())
			}
		case a.LADS != nil:
			if got.LADS == nil || got.LADS.FunctionalUnit != nsu("FU_"+a.Name) || got.LADS.Start != "StartProgram" {
				t.Errorf("action %s: discovered %+v", a.Name, got.LADS)
			}
		}
	}
	// The integrator's estop edit: the method discovery proposed.
	if len(cfg.Actions) != len(want.Actions) {
		t.Errorf("discovered %d actions, the fixture has %d (estop proposed, not mapped)", len(cfg.Actions), len(want.Actions))
	}
}

// TestDiscoverConfigHook: the onboarding interview's hook returns the file
// and the summary to confirm, and the file loads.
func TestDiscoverConfigHook(t *testing.T) {
	srv := startPlant(t)
	var hook func(ctx context.Context, kind, target string) ([]byte, string, error) = discoverRegistry(t).DiscoverConfig
	b, summary, err := hook(ctxT(t), Kind, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Load(adapters.Source{Path: "hook.yaml", Data: b}); err != nil {
		t.Fatalf("Load of the hook's file: %v", err)
	}
	if !strings.Contains(summary, "mapped") || !strings.Contains(summary, "proposal: interlock") {
		t.Fatalf("summary %q", summary)
	}
	if _, _, err := hook(ctxT(t), "plc9000", srv.URL); err == nil || !strings.Contains(err.Error(), "no discovery for kind") {
		t.Fatalf("unknown kind: %v", err)
	}
}
