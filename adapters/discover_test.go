package adapters_test

import (
	"strings"
	"testing"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
)

func TestSnakeNameAndNamer(t *testing.T) {
	for in, want := range map[string]string{
		"TemperatureSetpoint": "temperature_setpoint", "EURange": "eu_range", "Door Closed": "door_closed",
		"motor/1/speed": "motor_1_speed", "FU_run": "fu_run", "1st": "x_1st", "ProgramTemplateId": "program_template_id",
		"__x__": "x", "CO2Level": "co2_level",
	} {
		if got := adapters.SnakeName(in); got != want {
			t.Errorf("SnakeName(%q) = %q, want %q", in, got, want)
		}
	}
	var n adapters.Namer
	a, b, c := n.Name("Temperature", "Device"), n.Name("Temperature", "Oven"), n.Name("Temperature", "Oven")
	if a != "temperature" || b != "oven_temperature" || c != "oven_temperature_2" {
		t.Fatalf("collisions: %s %s %s", a, b, c)
	}
	if !adapters.InterlockCandidate("DoorClosed") || !adapters.InterlockCandidate("lid_locked") || adapters.InterlockCandidate("Readiness") {
		t.Fatal("interlock candidates by word")
	}
}

func TestSelected(t *testing.T) {
	o := adapters.DiscoverOptions{Include: []string{"Objects/Plant/Line1"}, Exclude: []string{"Objects/Plant/Line1/Oven/Power", "*/Debug"}}
	for p, want := range map[string][2]bool{ // selected (walked), included (mapped)
		"Objects":                        {true, false},
		"Objects/Plant":                  {true, false},
		"Objects/Plant/Line1/Oven/Temp":  {true, true},
		"Objects/Plant/Line1/Oven/Power": {false, false},
		"Objects/Plant/Line2":            {false, false},
		"Objects/Debug":                  {false, false},
	} {
		if got := [2]bool{o.Selected(p), o.Included(p)}; got != want {
			t.Errorf("%s: selected/included %v, want %v", p, got, want)
		}
	}
}

type renderCfg struct {
	adapters.Common `yaml:",inline"`
	Endpoint        string        `yaml:"endpoint"`
	Settings        []mhp.Setting `yaml:"settings"`
}

func TestRender(t *testing.T) {
	c := renderCfg{Common: adapters.Common{Adapter: "fake", Device: mhp.DeviceInfo{ID: "f-1", Class: "plc", Tags: []string{"a", "b"}},
		Safety: mhp.Safety{Notes: "n"}}, Endpoint: "x://y",
		Settings: []mhp.Setting{{Name: "sp", Type: mhp.TypeNumber, Limits: mhp.Range(0, 100), Approval: mhp.ApprovalConfirm}}}
	b, err := adapters.Render(c, map[string]string{"": "head", "settings.sp": "browse path A/B", "settings.sp.type#": "from DataType", "safety": adapters.TODOEStop})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"# head\n", "\nadapter: fake\n", "tags: [a, b]", "# TODO(integrator): estop.", "  # browse path A/B\n  - name: sp",
		"type: number # from DataType", "limits: {min: 0, max: 100}", "\n\nendpoint: x://y\n"}
	for _, w := range want {
		if !strings.Contains(string(b), w) {
			t.Errorf("rendered file lacks %q:\n%s", w, b)
		}
	}
	if strings.Index(string(b), "adapter:") > strings.Index(string(b), "endpoint:") {
		t.Error("fields out of the Config's order")
	}
	if _, err := adapters.Render(c, map[string]string{"settings.nope": "x"}); err == nil {
		t.Fatal("a comment naming nothing was dropped silently")
	}
}
