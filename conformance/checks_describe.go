package conformance

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/openmhp/mhp-go"
)

// tierJSON describes at a tier and returns the answer as it travels on the wire.
func (c *C) tierJSON(req mhp.DescribeRequest) (*mhp.Description, map[string]any) {
	c.Helper()
	d, err := c.describe(c.Dev, req)
	if err != nil {
		c.Fatalf("describe %+v: %v", req, err)
	}
	b, err := json.Marshal(d)
	if err != nil {
		c.Fatalf("describe answer does not marshal: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		c.Fatalf("describe answer is not an object: %v", err)
	}
	return d, m
}

func itemNames(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, x := range l {
		switch it := x.(type) {
		case string:
			out = append(out, it)
		case map[string]any:
			if n, ok := it["name"].(string); ok {
				out = append(out, n)
			}
		}
	}
	return out
}

func sameNames(got []string, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

// fixtureNames are the names the device must serve: FixtureDescriptor's,
// then those of FixtureExtras it serves (a harness may predate them).
func (c *C) fixtureNames() (signals, settings, actions []string) {
	d := FixtureDescriptor()
	es, ea := FixtureExtras()
	for _, s := range es {
		if c.serves("setting", s.Name) {
			d.Settings = append(d.Settings, s)
		}
	}
	for _, a := range ea {
		if c.serves("action", a.Name) {
			d.Actions = append(d.Actions, a)
		}
	}
	for _, s := range d.Signals {
		signals = append(signals, s.Name)
	}
	for _, s := range d.Settings {
		settings = append(settings, s.Name)
	}
	for _, a := range d.Actions {
		actions = append(actions, a.Name)
	}
	return
}

func describeChecks() []check {
	return []check{
		{name: "describe/card", run: func(c *C) {
			d, m := c.tierJSON(mhp.DescribeRequest{Detail: mhp.DetailCard})
			if d.State != mhp.StateIdle || m["state"] != string(mhp.StateIdle) {
				c.Fatalf("card state %q / %v, want idle", d.State, m["state"])
			}
			if m["detail"] != mhp.DetailCard {
				c.Fatalf("detail %v, want card", m["detail"])
			}
			if m["id"] != FixtureDescriptor().ID {
				c.Fatalf("card id %v, want %s", m["id"], FixtureDescriptor().ID)
			}
			sig, set, act := c.fixtureNames()
			for key, want := range map[string][]string{"signals": sig, "settings": set, "actions": act} {
				l, _ := m[key].([]any)
				for _, x := range l {
					if _, isName := x.(string); !isName {
						c.Fatalf("card %s must be bare names, got %v", key, x)
					}
				}
				if got := itemNames(m[key]); !sameNames(got, want) {
					c.Fatalf("card %s %v, want %v", key, got, want)
				}
			}
			for _, heavy := range []string{"safety", "instructions", "physical", "mhp"} {
				if _, ok := m[heavy]; ok {
					c.Fatalf("card carries %q; a card is identity, state and names only", heavy)
				}
			}
		}},
		{name: "describe/summary_slim", run: func(c *C) {
			_, m := c.tierJSON(mhp.DescribeRequest{Detail: mhp.DetailSummary})
			if m["detail"] != mhp.DetailSummary || m["state"] != string(mhp.StateIdle) {
				c.Fatalf("summary detail %v state %v", m["detail"], m["state"])
			}
			if _, ok := m["safety"].(map[string]any); !ok {
				c.Fatalf("summary has no safety block: %v", m["safety"])
			}
			settings, _ := m["settings"].([]any)
			_, set, _ := c.fixtureNames()
			if got := itemNames(m["settings"]); !sameNames(got, set) {
				c.Fatalf("summary settings %v, want %v", got, set)
			}
			for _, x := range settings {
				s, _ := x.(map[string]any)
				if s == nil {
					c.Fatalf("summary setting is not a slim table row: %v", x)
				}
				if s["name"] == SettingSetpoint {
					lim, _ := s["limits"].(map[string]any)
					if f, _ := num(lim["max"]); f != 100 {
						c.Fatalf("summary setpoint limits %v, want max 100", s["limits"])
					}
				}
				if _, ok := s["notes"]; ok {
					c.Fatalf("summary setting carries notes: %v", s)
				}
			}
			actions, _ := m["actions"].([]any)
			for _, x := range actions {
				a, _ := x.(map[string]any)
				if a == nil {
					c.Fatalf("summary action is not a slim table row: %v", x)
				}
				if _, ok := a["examples"]; ok {
					c.Fatalf("summary action carries examples: %v", a)
				}
				if a["name"] == ActionProfile {
					if ps, ok := a["params"].([]any); !ok || len(ps) != 2 {
						c.Fatalf("summary profile params %v, want the list of names [steps cycles]", a["params"])
					}
				}
			}
		}},
		{name: "describe/full_has_version", run: func(c *C) {
			for _, detail := range []string{mhp.DetailFull, ""} {
				d, m := c.tierJSON(mhp.DescribeRequest{Detail: detail})
				if m["mhp"] != mhp.ProtocolVersion {
					c.Fatalf("describe detail %q: mhp %v, want %s", detail, m["mhp"], mhp.ProtocolVersion)
				}
				if d.State != mhp.StateIdle {
					c.Fatalf("full state %q", d.State)
				}
				sp, ok := d.Setting(SettingSetpoint)
				if !ok || sp.Limits == nil || sp.Limits.Max == nil || *sp.Limits.Max != 100 {
					c.Fatalf("full setpoint spec %+v lacks limits max 100", sp)
				}
				pr, ok := d.Action(ActionProfile)
				if !ok {
					c.Fatalf("full has no action %s", ActionProfile)
				}
				steps, ok := pr.Params.Get("steps")
				if !ok || steps.Items == nil || steps.Items.Properties["temp"] == nil ||
					steps.Items.Properties["temp"].Limits == nil || *steps.Items.Properties["temp"].Limits.Max != 99 {
					c.Fatalf("full profile params lack the nested shape steps[].temp 4..99: %+v", pr.Params)
				}
				if run, _ := d.Action(ActionRun); run == nil || !run.Cancellable || len(run.Interlocks) != 1 {
					c.Fatalf("full run spec %+v: want cancellable with interlock %s", run, SignalDoorClosed)
				}
				if !d.Safety.EStop {
					c.Fatalf("full safety.estop false")
				}
			}
		}},
		{name: "describe/defaults_within_own_shape", run: func(c *C) {
			// A default its own shape refuses (an enum default published by
			// value, not by name) makes the parameter unusable unless sent.
			d, _ := c.tierJSON(mhp.DescribeRequest{Detail: mhp.DetailFull})
			for _, a := range d.Actions {
				for _, p := range a.Params {
					if bad := defaultOutsideShape(a.Name+"."+p.Name, p.Shape); bad != "" {
						c.Fatalf("action %s: %s", a.Name, bad)
					}
				}
			}
		}},
		{name: "describe/select", run: func(c *C) {
			d, err := c.describe(c.Dev, mhp.DescribeRequest{Select: &mhp.Selection{
				Settings: []string{SettingSetpoint}, Actions: []string{ActionRun}}})
			c.ok(err, "describe select")
			if d.Detail != mhp.DetailSelect || d.State != mhp.StateIdle {
				c.Fatalf("select detail %q state %q", d.Detail, d.State)
			}
			if len(d.Signals) != 0 || len(d.Settings) != 1 || len(d.Actions) != 1 {
				c.Fatalf("select returned %d signals, %d settings, %d actions; want 0, 1, 1",
					len(d.Signals), len(d.Settings), len(d.Actions))
			}
			if s := d.Settings[0]; s.Name != SettingSetpoint || s.Limits == nil || s.Limits.Max == nil || *s.Limits.Max != 100 {
				c.Fatalf("selected setting is not the full spec: %+v", s)
			}
			if a := d.Actions[0]; a.Name != ActionRun || len(a.Interlocks) == 0 || len(a.Params) != 1 {
				c.Fatalf("selected action is not the full spec: %+v", a)
			}
		}},
		{name: "describe/select_unknown_name", run: func(c *C) {
			for _, sel := range []mhp.Selection{
				{Settings: []string{SettingSetpoint, "no_such_setting"}},
				{Signals: []string{"no_such_signal"}},
				{Actions: []string{ActionRun, "no_such_action"}},
			} {
				_, err := c.describe(c.Dev, mhp.DescribeRequest{Select: &sel})
				e := c.expect(err, mhp.CodeUnknownName)
				if !strings.Contains(e.Message, "no_such") {
					c.Fatalf("UnknownName message %q does not name the unknown item", e.Message)
				}
			}
		}},
		{name: "describe/unknown_detail", run: func(c *C) {
			_, err := c.describe(c.Dev, mhp.DescribeRequest{Detail: "everything"})
			c.expect(err, mhp.CodeInvalidParams)
		}},
	}
}

func readChecks() []check {
	return []check{
		{name: "read/all", run: func(c *C) {
			ctx, cancel := c.call()
			defer cancel()
			r, err := c.Dev.Read(ctx, nil)
			c.ok(err, "read all")
			if len(r.Values) != 2 {
				c.Fatalf("read all returned %v, want both signals", r.Values)
			}
			if f, _ := num(r.Values[SignalTemperature]); f != 21.5 {
				c.Fatalf("temperature %v, want 21.5", r.Values[SignalTemperature])
			}
			if r.Values[SignalDoorClosed] != true {
				c.Fatalf("door_closed %v, want true", r.Values[SignalDoorClosed])
			}
			if r.TS <= 0 {
				c.Fatalf("read carries no device-clock ts: %v", r.TS)
			}
		}},
		{name: "read/named", run: func(c *C) {
			c.B.SetSignal(SignalTemperature, 37.25)
			ctx, cancel := c.call()
			defer cancel()
			r, err := c.Dev.Read(ctx, []string{SignalTemperature})
			c.ok(err, "read temperature")
			if len(r.Values) != 1 {
				c.Fatalf("read [temperature] returned %v, want exactly that signal", r.Values)
			}
			if f, _ := num(r.Values[SignalTemperature]); f != 37.25 {
				c.Fatalf("temperature %v, want the backend's live 37.25", r.Values[SignalTemperature])
			}
		}},
		{name: "read/unknown_name", run: func(c *C) {
			ctx, cancel := c.call()
			defer cancel()
			_, err := c.Dev.Read(ctx, []string{SignalTemperature, "no_such_signal"})
			e := c.expect(err, mhp.CodeUnknownName)
			if !strings.Contains(e.Message, "no_such_signal") {
				c.Fatalf("message %q does not name the unknown signal", e.Message)
			}
		}},
		{name: "read/unavailable_is_null_with_reason", run: func(c *C) {
			c.B.SetUnavailable(SignalTemperature, true)
			ctx, cancel := c.call()
			defer cancel()
			r, err := c.Dev.Read(ctx, nil)
			c.ok(err, "read with one signal unavailable")
			v, present := r.Values[SignalTemperature]
			if !present || v != nil {
				c.Fatalf("unavailable temperature reads %v (present %v), want null", v, present)
			}
			if r.Unavailable[SignalTemperature] == "" {
				c.Fatalf("no reason given for the unavailable signal: %+v", r.Unavailable)
			}
			if r.Values[SignalDoorClosed] != true {
				c.Fatalf("the readable signal was lost: %v", r.Values)
			}
			c.wantState(mhp.StateIdle, "an unreadable signal does not fault the device")
		}},
	}
}

func limitsChecks() []check {
	return []check{
		{name: "limits/report", opt: Options{WatchdogS: WatchdogS}, run: func(c *C) {
			ctx, cancel := c.call()
			defer cancel()
			r, err := c.Other.Limits(ctx)
			c.ok(err, mhp.MethodSafetyLimits)
			sp := r.Settings[SettingSetpoint]
			if sp.Limits == nil || sp.Limits.Min == nil || sp.Limits.Max == nil || *sp.Limits.Min != 0 || *sp.Limits.Max != 100 {
				c.Fatalf("setpoint envelope %+v, want limits 0..100", sp)
			}
			if sp.Approval != mhp.ApprovalAuto || r.Settings[SettingConfirmed].Approval != mhp.ApprovalConfirm ||
				r.Settings[SettingForbidden].Approval != mhp.ApprovalForbid {
				c.Fatalf("approval levels wrong in %+v", r.Settings)
			}
			if !r.Settings[SettingFan].DuringJob {
				c.Fatalf("fan envelope lost during_job: %+v", r.Settings[SettingFan])
			}
			run := r.Actions[ActionRun]
			if len(run.Interlocks) != 1 || run.Interlocks[0] != SignalDoorClosed {
				c.Fatalf("run envelope interlocks %v, want [%s]", run.Interlocks, SignalDoorClosed)
			}
			if r.Actions[ActionForbidden].Approval != mhp.ApprovalForbid {
				c.Fatalf("forbidden_action approval %q", r.Actions[ActionForbidden].Approval)
			}
			if !r.EStop || r.WatchdogS != WatchdogS {
				c.Fatalf("estop %v watchdog_s %v, want true and %v", r.EStop, r.WatchdogS, WatchdogS)
			}
		}},
	}
}

// defaultOutsideShape names the first default under s (nested through
// items and properties) that s itself refuses, or "".
func defaultOutsideShape(path string, s *mhp.Shape) string {
	if s == nil {
		return ""
	}
	if s.Default != nil {
		if _, err := s.Check(path, s.Default); err != nil {
			return fmt.Sprintf("the default of %s is outside its own shape: %v", path, err)
		}
	}
	if bad := defaultOutsideShape(path+"[]", s.Items); bad != "" {
		return bad
	}
	for _, k := range slices.Sorted(maps.Keys(s.Properties)) {
		if bad := defaultOutsideShape(path+"."+k, s.Properties[k]); bad != "" {
			return bad
		}
	}
	return ""
}
