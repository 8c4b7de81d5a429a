package onboard

import (
	"fmt"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/devicepkg"
)

// SerialFile is the serial adapter config a serial package names.
const SerialFile = "serial.yaml"

// ManualFile is a manual package's optional driver file.
const ManualFile = "manual.yaml"

func composeDescription(p Purpose) string {
	d := strings.TrimSpace(p.Description)
	if u := strings.TrimSpace(p.UseFor); u != "" {
		d += " Use for " + strings.TrimSuffix(u, ".") + "."
	}
	if n := strings.TrimSpace(p.NeverFor); n != "" {
		d += " Never for " + strings.TrimSuffix(n, ".") + "."
	}
	return d
}

// answers is every answer of a finished interview, decoded.
type answers struct {
	name      Name
	kind      Kind
	purpose   Purpose
	place     Place
	physical  Physical
	signals   []Signal
	settings  []Setting
	actions   []Action
	procedure Procedure
	stop      Stop
	docs      Docs
}

func (s *state) all() answers {
	var a answers
	s.decode("name", &a.name)
	s.decode("kind", &a.kind)
	s.decode("purpose", &a.purpose)
	s.decode("place", &a.place)
	s.decode("physical", &a.physical)
	s.decode("signals", &a.signals)
	s.decode("settings", &a.settings)
	s.decode("actions", &a.actions)
	s.decode("procedure", &a.procedure)
	s.decode("stop", &a.stop)
	s.decode("docs", &a.docs)
	return a
}

// approvalOf is the conservative default: confirm unless the person said.
func approvalOf(a string) mhp.Approval {
	if a == "" {
		return mhp.ApprovalConfirm
	}
	return mhp.Approval(a)
}

func limitsOf(lo, hi *float64, enum []any) *mhp.Limits {
	if lo == nil && hi == nil && len(enum) == 0 {
		return nil
	}
	return &mhp.Limits{Min: lo, Max: hi, Enum: enum}
}

func settingNotes(x Setting) string {
	var parts []string
	if x.Notes != "" {
		parts = append(parts, x.Notes)
	}
	if x.BelowMin != "" {
		parts = append(parts, "Below the minimum: "+x.BelowMin)
	}
	if x.AboveMax != "" {
		parts = append(parts, "Above the maximum: "+x.AboveMax)
	}
	return strings.Join(parts, " ")
}

func actionNotes(x Action) string {
	var parts []string
	if x.Notes != "" {
		parts = append(parts, x.Notes)
	}
	if x.Preconditions != "" {
		parts = append(parts, "Before it starts: "+x.Preconditions)
	}
	if x.DurationS > 0 {
		parts = append(parts, fmt.Sprintf("Takes about %g s.", x.DurationS))
	}
	return strings.Join(parts, " ")
}

func paramsOf(x Action) mhp.Params {
	names := make([]string, 0, len(x.Params))
	for n := range x.Params {
		names = append(names, n)
	}
	sort.Strings(names)
	var ps mhp.Params
	for _, n := range names {
		p := x.Params[n]
		ps = append(ps, mhp.Param{Name: n, Shape: &mhp.Shape{Type: p.Type, Unit: p.Unit, Limits: limitsOf(p.Min, p.Max, nil)}})
	}
	return ps
}

// driverName is the DEVICE.md driver of the interview's kind.
func driverName(a answers) string {
	switch a.kind.Kind {
	case KindSerial:
		return SerialFile
	case KindAdapter:
		return a.kind.Layer + ".yaml"
	}
	return "manual"
}

func none(s string) bool { return strings.EqualFold(strings.TrimSpace(s), "none") }

// files renders the package: DEVICE.md, descriptor.yaml, the driver file
// (manual.yaml, serial.yaml or the adapter's config) and references.
func (s *state) files() (map[string][]byte, error) {
	a := s.all()
	out := map[string][]byte{}
	card := devicepkg.Card{MHP: mhp.ProtocolVersion, Driver: driverName(a), DeviceInfo: mhp.DeviceInfo{ID: s.ID, Class: a.place.Class,
		Make: a.name.Make, Model: a.name.Model, Location: a.place.Location, Tags: a.place.Tags, Description: composeDescription(a.purpose)}}
	front, err := yaml.Marshal(card)
	if err != nil {
		return nil, err
	}
	out[devicepkg.CardFile] = []byte("---\n" + string(front) + "---\n\n" + s.body(a))
	desc := devicepkg.Descriptor{Device: devicepkg.DeviceNotes{Notes: composeDescription(a.purpose)}}
	if a.physical != (Physical{}) {
		desc.Physical = &mhp.Physical{MassKg: a.physical.MassKg, Notes: strings.TrimSpace(strings.Join([]string{a.physical.Hazards,
			prefixed("Do not touch: ", a.physical.DoNotTouch)}, " "))}
	}
	for _, x := range a.signals {
		desc.Signals = append(desc.Signals, devicepkg.SignalRef{Name: x.Name, Type: x.Type, Unit: x.Unit, Notes: x.Notes})
	}
	for _, x := range a.settings {
		desc.Settings = append(desc.Settings, devicepkg.SettingRef{Name: x.Name, Type: x.Type, Unit: x.Unit,
			Limits: limitsOf(x.Min, x.Max, x.Enum), Approval: approvalOf(x.Approval), Interlocks: x.Interlocks, Notes: settingNotes(x)})
	}
	for _, x := range a.actions {
		ref := devicepkg.ActionRef{Name: x.Name, Duration: x.Duration, Approval: approvalOf(x.Approval), Interlocks: x.Interlocks,
			Params: paramsOf(x), Notes: actionNotes(x)}
		if len(x.Example) > 0 {
			ref.Examples = []map[string]any{x.Example}
		}
		desc.Actions = append(desc.Actions, ref)
	}
	safety := &devicepkg.SafetyRef{Notes: a.stop.EStop}
	switch a.kind.Kind {
	case KindManual:
		on := true // the manual driver asks the person to stop it
		safety.EStop = &on
	case KindSerial:
		on := len(a.stop.Commands) > 0
		safety.EStop = &on
	}
	if a.stop.WatchdogS > 0 {
		w := a.stop.WatchdogS
		safety.WatchdogS = &w
	}
	desc.Safety = safety
	db, err := yaml.Marshal(desc)
	if err != nil {
		return nil, err
	}
	out[devicepkg.DescriptorFile] = db
	switch a.kind.Kind {
	case KindManual:
		out[ManualFile], err = manualFile(a)
	case KindSerial:
		out[SerialFile], err = serialFile(s.ID, card.DeviceInfo, a)
	case KindAdapter:
		out[driverName(a)] = []byte(s.Discovered)
	}
	if err != nil {
		return nil, err
	}
	for name, text := range a.docs.References {
		out["references/"+name] = []byte(text)
	}
	return out, nil
}

func prefixed(p, s string) string {
	if s == "" {
		return ""
	}
	return p + s
}

// body is DEVICE.md's operating instructions.
func (s *state) body(a answers) string {
	var b strings.Builder
	title := a.name.Nickname
	if m := strings.TrimSpace(a.name.Make + " " + a.name.Model); m != "" {
		title = strings.TrimSpace(title + " (" + m + ")")
	}
	fmt.Fprintf(&b, "# %s: %s\n\n%s\n\nWritten by the onboarding interview; %s.\n", s.ID, title, composeDescription(a.purpose), controlWords(a.kind))
	if a.physical.Hazards != "" || a.physical.DoNotTouch != "" {
		fmt.Fprintf(&b, "\n## Hazards\n%s\n", strings.TrimSpace(a.physical.Hazards+" "+prefixed("Do not touch: ", a.physical.DoNotTouch)))
	}
	b.WriteString("\n## Operating procedure\n")
	for i, st := range a.procedure.Steps {
		fmt.Fprintf(&b, "%d. %s\n", i+1, st)
	}
	if len(a.procedure.Watch) > 0 {
		b.WriteString("\n## Watch while it runs\n")
		for _, w := range a.procedure.Watch {
			fmt.Fprintf(&b, "- %s\n", w)
		}
	}
	if len(a.settings) > 0 {
		b.WriteString("\n## Settings and their limits\n")
		for _, x := range a.settings {
			fmt.Fprintf(&b, "- `%s`", x.Name)
			if x.Min != nil && x.Max != nil {
				fmt.Fprintf(&b, ": %g to %g %s", *x.Min, *x.Max, x.Unit)
			}
			fmt.Fprintf(&b, " (approval: %s). %s\n", approvalOf(x.Approval), settingNotes(x))
		}
	}
	b.WriteString("\n## Stopping\n")
	if none(a.stop.EStop) {
		b.WriteString("There is no emergency stop.")
	} else {
		b.WriteString(a.stop.EStop)
	}
	if a.stop.WatchdogS > 0 {
		fmt.Fprintf(&b, " Watchdog: stopped after %g s without a word from the lease holder.", a.stop.WatchdogS)
	}
	b.WriteString("\n")
	if len(a.docs.References) > 0 {
		b.WriteString("\n## References\n")
		names := make([]string, 0, len(a.docs.References))
		for n := range a.docs.References {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			fmt.Fprintf(&b, "- references/%s\n", n)
		}
	}
	return b.String()
}

func controlWords(k Kind) string {
	switch k.Kind {
	case KindSerial:
		return "controlled over the serial line " + k.Port
	case KindAdapter:
		return "reached through the " + k.Layer + " adapter"
	}
	return "operated by a person: the agent asks, the person acts and answers"
}

func manualFile(a answers) ([]byte, error) {
	type instr struct {
		Instruction string `yaml:"instruction"`
	}
	m := struct {
		Actions map[string]instr `yaml:"actions,omitempty"`
		EStop   string           `yaml:"estop,omitempty"`
	}{Actions: map[string]instr{}}
	for _, x := range a.actions {
		if x.Preconditions != "" {
			m.Actions[x.Name] = instr{fmt.Sprintf("Check first: %s. Then %s; report done, failed or could not.", x.Preconditions,
				strings.ReplaceAll(x.Name, "_", " "))}
		}
	}
	if !none(a.stop.EStop) {
		m.EStop = a.stop.EStop
	}
	return yaml.Marshal(m)
}

// serialFile is the serial adapter config (the shape agreed with the
// serial driver: adapter, device, port, line settings, items, estop,
// watchdog).
func serialFile(id string, info mhp.DeviceInfo, a answers) ([]byte, error) {
	type limits struct {
		Min  *float64 `yaml:"min,omitempty"`
		Max  *float64 `yaml:"max,omitempty"`
		Enum []any    `yaml:"enum,omitempty"`
	}
	type signal struct {
		Name   string         `yaml:"name"`
		Type   string         `yaml:"type"`
		Unit   string         `yaml:"unit,omitempty"`
		Query  string         `yaml:"query"`
		Reply  string         `yaml:"reply"`
		Values map[string]any `yaml:"values,omitempty"`
	}
	type setting struct {
		Name     string  `yaml:"name"`
		Type     string  `yaml:"type"`
		Unit     string  `yaml:"unit,omitempty"`
		Limits   *limits `yaml:"limits,omitempty"`
		Approval string  `yaml:"approval"`
		Command  string  `yaml:"command"`
		Ack      string  `yaml:"ack,omitempty"`
	}
	type action struct {
		Name     string     `yaml:"name"`
		Duration string     `yaml:"duration,omitempty"`
		Approval string     `yaml:"approval"`
		Params   mhp.Params `yaml:"params,omitempty"`
		Commands []string   `yaml:"commands"`
	}
	type watchdog struct {
		Command string  `yaml:"command"`
		Seconds float64 `yaml:"seconds"`
	}
	cfg := struct {
		Adapter    string         `yaml:"adapter"`
		Device     mhp.DeviceInfo `yaml:"device"`
		Port       string         `yaml:"port"`
		Baud       int            `yaml:"baud"`
		DataBits   int            `yaml:"data_bits,omitempty"`
		Parity     string         `yaml:"parity,omitempty"`
		StopBits   float64        `yaml:"stop_bits,omitempty"`
		LineEnding string         `yaml:"line_ending,omitempty"`
		Signals    []signal       `yaml:"signals,omitempty"`
		Settings   []setting      `yaml:"settings,omitempty"`
		Actions    []action       `yaml:"actions,omitempty"`
		EStop      []string       `yaml:"estop,omitempty"`
		Watchdog   *watchdog      `yaml:"watchdog,omitempty"`
	}{Adapter: "serial", Device: info, Port: a.kind.Port, Baud: a.kind.Baud, DataBits: a.kind.DataBits, Parity: a.kind.Parity,
		StopBits: a.kind.StopBits, LineEnding: a.kind.LineEnding, EStop: a.stop.Commands}
	cfg.Device.ID = id
	if cfg.Baud == 0 {
		cfg.Baud = 9600
	}
	for _, x := range a.signals {
		sg := signal{Name: x.Name, Type: x.Type, Unit: x.Unit, Query: x.Query, Reply: x.Reply}
		if sg.Reply == "" {
			sg.Reply = map[string]string{mhp.TypeBoolean: `^(?P<value>\S+)$`, mhp.TypeString: `^(?P<value>.*)$`}[x.Type]
			if sg.Reply == "" {
				sg.Reply = `(?P<value>-?[0-9]+(?:\.[0-9]+)?)`
			}
		}
		if x.Type == mhp.TypeBoolean {
			sg.Values = map[string]any{"1": true, "0": false, "ON": true, "OFF": false}
		}
		cfg.Signals = append(cfg.Signals, sg)
	}
	for _, x := range a.settings {
		st := setting{Name: x.Name, Type: x.Type, Unit: x.Unit, Approval: string(approvalOf(x.Approval)), Command: x.Command, Ack: x.Ack}
		if x.Min != nil || x.Max != nil || len(x.Enum) > 0 {
			st.Limits = &limits{Min: x.Min, Max: x.Max, Enum: x.Enum}
		}
		cfg.Settings = append(cfg.Settings, st)
	}
	for _, x := range a.actions {
		cfg.Actions = append(cfg.Actions, action{Name: x.Name, Duration: x.Duration, Approval: string(approvalOf(x.Approval)),
			Params: paramsOf(x), Commands: x.Commands})
	}
	if a.stop.Watchdog != "" && a.stop.WatchdogS > 0 {
		cfg.Watchdog = &watchdog{Command: a.stop.Watchdog, Seconds: a.stop.WatchdogS}
	}
	return yaml.Marshal(cfg)
}

// summary is what the package says, one line an item, for the person.
func (s *state) summary() []string {
	a := s.all()
	out := []string{fmt.Sprintf("%s (%s), %s; driver %s", s.ID, a.place.Class, controlWords(a.kind), driverName(a))}
	for _, x := range a.signals {
		out = append(out, strings.TrimSpace(fmt.Sprintf("signal %s: %s %s", x.Name, x.Type, x.Unit)))
	}
	for _, x := range a.settings {
		l := ""
		if x.Min != nil && x.Max != nil {
			l = fmt.Sprintf(" %g..%g %s", *x.Min, *x.Max, x.Unit)
		}
		out = append(out, fmt.Sprintf("setting %s:%s, approval %s", x.Name, l, approvalOf(x.Approval)))
	}
	for _, x := range a.actions {
		line := fmt.Sprintf("action %s: %s, approval %s", x.Name, x.Duration, approvalOf(x.Approval))
		if len(x.Interlocks) > 0 {
			line += ", only when " + strings.Join(x.Interlocks, " and ") + " is true"
		}
		out = append(out, line)
	}
	stop := "no emergency stop"
	if !none(a.stop.EStop) {
		stop = "stop: " + a.stop.EStop
	}
	if a.stop.WatchdogS > 0 {
		stop += fmt.Sprintf("; watchdog %g s", a.stop.WatchdogS)
	}
	return append(out, stop)
}
