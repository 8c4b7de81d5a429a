package serialtest

import (
	"fmt"
	"strings"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/serial"
)

// FixtureConfig is the serial config of the conformance fixture spoken by
// [Fixture] on port: every item of [conformance.FixtureDescriptor] (and
// the extras when extras is set) mapped onto the Fixture's commands.
func FixtureConfig(port string, extras bool) serial.Config {
	d := conformance.FixtureDescriptor()
	if extras {
		d = conformance.WithExtras(d)
	}
	cfg := serial.Config{Common: adapters.Common{Adapter: serial.Kind, Device: d.DeviceInfo, Safety: d.Safety},
		Port: port, Baud: 115200,
		Timeouts: serial.Timeouts{ReplyS: 0.5, WriteS: 1, ReconnectMinS: 0.02, ReconnectMaxS: 0.2},
		EStop:    []serial.Step{{Send: "STOP", Ack: `^STOPPED$`, Error: `^ERR stop$`}}}
	for _, s := range d.Signals {
		sc := serial.SignalConfig{Signal: s, Query: "GET " + s.Name,
			Reply: fmt.Sprintf(`^VAL %s (?P<value>\S+)$`, s.Name), Unavailable: fmt.Sprintf(`^UNAVAIL %s$`, s.Name)}
		if s.Type == mhp.TypeBoolean {
			sc.Values = map[string]any{"b:1": true, "b:0": false}
		}
		cfg.Signals = append(cfg.Signals, sc)
	}
	for _, s := range d.Settings {
		cfg.Settings = append(cfg.Settings, serial.SettingConfig{Setting: s, Command: "SET " + s.Name + " {value}",
			Ack: fmt.Sprintf(`^OK %s$`, s.Name), Error: fmt.Sprintf(`^ERR %s `, s.Name)})
	}
	for _, a := range d.Actions {
		run := []string{"RUN", a.Name, "{job}"}
		for _, p := range a.Params {
			run = append(run, p.Name+"={"+p.Name+"}")
		}
		ac := serial.ActionConfig{Action: a,
			Commands: []serial.Step{{Send: strings.Join(run, " "), Ack: `^OK \S+$`, Error: `^ERR \S+ refused$`}},
			Completion: &serial.Completion{Query: "STATUS {job}", Reply: `^JOB \S+ (?P<value>\w+) (?P<progress>\S+) (?P<result>.*)$`,
				Done: `^done$`, Failed: `^failed$`, Cancelled: `^cancelled$`, IntervalS: 0.02, MaxMisses: 2}}
		if a.Cancellable {
			ac.Cancel = []serial.Step{{Send: "CANCEL {job}", Ack: `^OK \S+$`}}
		}
		if a.Duration == "" {
			a.Duration = mhp.DurationShort
		}
		cfg.Actions = append(cfg.Actions, ac)
	}
	return cfg
}
