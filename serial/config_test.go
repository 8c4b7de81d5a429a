package serial_test

import (
	"strings"
	"testing"

	bugst "go.bug.st/serial"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/serial"
)

func base() serial.Config {
	return serial.Config{Common: adapters.Common{Adapter: serial.Kind, Device: mhp.DeviceInfo{ID: "x-01"}}, Port: "/dev/ttyUSB0", Baud: 9600,
		Signals: []serial.SignalConfig{{Signal: mhp.Signal{Name: "t", Type: mhp.TypeNumber}, Query: "IN_PV_2", Reply: `^(?P<value>\S+) 2$`}}}
}

// The pty ignores the line settings, so the Mode is checked here.
func TestMode(t *testing.T) {
	c := base()
	c.DataBits, c.Parity, c.StopBits = 7, "even", 1
	m, err := c.Mode()
	if err != nil {
		t.Fatal(err)
	}
	want := bugst.Mode{BaudRate: 9600, DataBits: 7, Parity: bugst.EvenParity, StopBits: bugst.OneStopBit}
	if *m != want {
		t.Fatalf("7E1: %+v, want %+v", *m, want)
	}
	c = base()
	if m, _ := c.Mode(); m.DataBits != 8 || m.Parity != bugst.NoParity || m.StopBits != bugst.OneStopBit {
		t.Fatalf("defaults: %+v, want 8N1", *m)
	}
	for _, p := range []struct {
		parity string
		want   bugst.Parity
	}{{"odd", bugst.OddParity}, {"mark", bugst.MarkParity}, {"space", bugst.SpaceParity}} {
		c.Parity = p.parity
		if m, _ := c.Mode(); m.Parity != p.want {
			t.Fatalf("%s: %v", p.parity, m.Parity)
		}
	}
	c.Parity, c.StopBits = "none", 1.5
	if m, _ := c.Mode(); m.StopBits != bugst.OnePointFiveStopBits {
		t.Fatal("1.5 stop bits")
	}
	c.StopBits = 2
	if m, _ := c.Mode(); m.StopBits != bugst.TwoStopBits {
		t.Fatal("2 stop bits")
	}
}

func TestValidateNamesTheProblem(t *testing.T) {
	cases := []struct {
		edit func(*serial.Config)
		want string
	}{
		{func(c *serial.Config) { c.Parity = "evn" }, "parity"},
		{func(c *serial.Config) { c.DataBits = 9 }, "data_bits"},
		{func(c *serial.Config) { c.StopBits = 3 }, "stop_bits"},
		{func(c *serial.Config) { c.Baud = 0 }, "baud"},
		{func(c *serial.Config) { c.Port = "" }, "port"},
		{func(c *serial.Config) { c.Signals[0].Reply = `^(\S+) 2$` }, "(?P<value>"},
		{func(c *serial.Config) { c.Signals[0].Reply = `^(?P<value>\S+ 2$` }, "reply"},
		{func(c *serial.Config) {
			c.Settings = []serial.SettingConfig{{Setting: mhp.Setting{Name: "sp", Type: mhp.TypeNumber}, Command: "OUT_SP_1"}}
		}, "no {value}"},
		{func(c *serial.Config) {
			c.Actions = []serial.ActionConfig{{Action: mhp.Action{Name: "go"}, Commands: []serial.Step{{Send: "RUN {speed}"}}}}
		}, "{speed} names no param"},
		{func(c *serial.Config) {
			c.Actions = []serial.ActionConfig{{Action: mhp.Action{Name: "go"}, Commands: []serial.Step{{Send: "RUN\r"}}}}
		}, "control characters"},
		{func(c *serial.Config) {
			c.Actions = []serial.ActionConfig{{Action: mhp.Action{Name: "go"}, Commands: []serial.Step{{Send: "RUN"}}, Cancel: []serial.Step{{Send: "STP"}}}}
		}, "cancel needs a completion"},
		{func(c *serial.Config) {
			c.Settings = []serial.SettingConfig{{Setting: mhp.Setting{Name: "sp", Type: mhp.TypeNumber}, Command: "S {value}", Readback: "nope"}}
		}, "readback"},
		{func(c *serial.Config) { c.Watchdog = &serial.Watchdog{Command: "OUT_WD1@{seconds}"} }, "watchdog.seconds"},
	}
	for _, tc := range cases {
		c := base()
		tc.edit(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want an error naming %q, got %v", tc.want, err)
		}
	}
	if err := base().Validate(); err != nil {
		t.Fatalf("base: %v", err)
	}
}

// Step takes a bare string or the long form.
func TestLoadSteps(t *testing.T) {
	src := adapters.Source{Path: "x.yaml", Data: []byte(`adapter: serial
device: {id: p-01}
port: /dev/ttyUSB0
baud: 19200
actions:
  - {name: go, commands: [RUN, {send: "DIR INF", ack: '^OK$'}]}
estop: [STP]
`)}
	c, err := serial.Load(src)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Actions[0].Commands; len(got) != 2 || got[0].Send != "RUN" || got[1].Ack != "^OK$" || c.EStop[0].Send != "STP" {
		t.Fatalf("steps %+v estop %+v", got, c.EStop)
	}
}

func TestFormatValueNoExponent(t *testing.T) {
	two := 2
	for _, tc := range []struct {
		v    any
		dec  *int
		want string
	}{{0.00001, nil, "0.00001"}, {1e21, nil, "1000000000000000000000"}, {2.345, &two, "2.35"}, {int64(7), nil, "7"}, {true, nil, "1"}} {
		got, err := serial.FormatValue(tc.v, tc.dec, "", "")
		if err != nil || got != tc.want {
			t.Errorf("%v: %q %v, want %q", tc.v, got, err, tc.want)
		}
	}
	if _, err := serial.FormatValue("a\rb", nil, "", ""); err == nil {
		t.Error("a control character was formatted")
	}
}
