package onboard

import (
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/openmhp/mhp-go"
)

// Question is one question of the interview: the words to ask the person
// and the shape of the answer the agent sends back.
type Question struct {
	Key      string `json:"key"`
	Required bool   `json:"required"`
	// Ask is what to ask the person, in plain words.
	Ask string `json:"ask"`
	// Shape is the answer's shape: an example with every field, optional
	// ones marked in Ask.
	Shape any `json:"shape"`
}

// question is a Question with its check: decode the raw answer and return
// what is wrong with it, given the answers already in.
type question struct {
	Question
	check func(raw json.RawMessage, s *state) problems
}

// questions are the interview, in order.
func questions() []question {
	return []question{
		{Question{Key: "name", Required: true,
			Ask:   "What is the instrument? Its make and model, and the name the lab calls it (any one will do).",
			Shape: map[string]any{"make": "IKA", "model": "C-MAG HS 7", "nickname": "hotplate"}}, checkName},
		{Question{Key: "kind", Required: true,
			Ask: "How is it controlled: by hand (manual), over a serial/USB cable (serial: port, baud, data bits, parity, stop bits), " +
				"does it already speak MHP (mhp: url), or through an ecosystem (adapter: layer opcua|sila2|ros2|madsci|pylabrobot|mqtt and its address)?",
			Shape: map[string]any{"kind": "manual|serial|mhp|adapter", "port": "/dev/serial/by-id/...", "baud": 9600, "data_bits": 8,
				"parity": "none", "stop_bits": 1, "url": "http://host:18921", "layer": "opcua", "target": "opc.tcp://plc:4840"}}, checkKind},
		{Question{Key: "purpose", Required: true,
			Ask:   "What is it used for, when should the agent pick it, and what must it never be used for?",
			Shape: map[string]any{"description": "at least 60 characters", "use_for": "...", "never_for": "..."}}, checkPurpose},
		{Question{Key: "place", Required: true,
			Ask:   "Where does it stand, which 3 to 5 words would someone search to find it, and what class of instrument is it?",
			Shape: map[string]any{"location": "fume hood 2, bench 3", "tags": []string{"heating", "stirring", "beaker"}, "class": strings.Join(Classes[:6], "|") + "|..."}}, checkPlace},
		{Question{Key: "physical", Required: false,
			Ask:   "Optional: how heavy is it, what hazards does it have (hot surfaces, moving parts, pressure), and what must nobody touch?",
			Shape: map[string]any{"mass_kg": 5.2, "hazards": "plate up to 300 degC", "do_not_touch": "the plate while hot"}}, checkPhysical},
		{Question{Key: "signals", Required: true,
			Ask: "What can be read from it? Each value with its unit, and the yes/no states (lid closed, balanced). " +
				"For serial: the query command and the reply pattern (a regex with a (?P<value>...) group).",
			Shape: []any{map[string]any{"name": "plate_temperature", "type": "number|integer|boolean|string", "unit": "degC", "notes": "...",
				"query": "IN_PV_2", "reply": "^(?P<value>-?[0-9.]+) 2$"}}}, checkSignals},
		{Question{Key: "settings", Required: true,
			Ask: "What can be set (setpoints)? For each: the unit, the lowest and highest safe values, what goes wrong below and above them, " +
				"and whether a person must confirm each change (the default is yes: say so explicitly when no confirmation is needed). [] if none.",
			Shape: []any{map[string]any{"name": "target_temperature", "type": "number", "unit": "degC", "min": 20, "max": 300,
				"below_min": "...", "above_max": "...", "approval": "confirm|auto", "interlocks": []string{}, "command": "OUT_SP_1 {value}"}}}, checkSettings},
		{Question{Key: "actions", Required: true,
			Ask: "What operations does it do? For each: how long it takes, its inputs (with units and ranges), an example, what must be true " +
				"before it starts (yes/no signals), and whether a person must confirm it (default yes; forbid for never by the agent). [] if none.",
			Shape: []any{map[string]any{"name": "spin", "duration": "short|long", "duration_s": 300,
				"params":  map[string]any{"duration_s": map[string]any{"type": "number", "unit": "s", "min": 1, "max": 3600}},
				"example": map[string]any{"duration_s": 60}, "preconditions": "...", "interlocks": []string{"balanced"},
				"approval": "confirm|auto|forbid", "commands": []string{"START_1"}}}}, checkActions},
		{Question{Key: "procedure", Required: true,
			Ask:   "Walk me through a normal run, step by step, and what to watch while it runs.",
			Shape: map[string]any{"steps": []string{"...", "..."}, "watch": []string{"..."}}}, checkProcedure},
		{Question{Key: "stop", Required: true,
			Ask: "How is it stopped in an emergency (\"none\" if it cannot be), and how many seconds may it run with no word from the agent " +
				"before it should stop (0: no watchdog)? For serial: the stop commands.",
			Shape: map[string]any{"estop": "press the red STOP button", "commands": []string{"STOP_1"}, "watchdog_s": 30, "watchdog": "OUT_WD1@{seconds}"}}, checkStop},
		{Question{Key: "docs", Required: false,
			Ask:   "Optional: any SOP or manual excerpt the agent should be able to read (file name ending .md, and its text)?",
			Shape: map[string]any{"references": map[string]string{"sop.md": "..."}}}, checkDocs},
	}
}

func required() int {
	n := 0
	for _, q := range questions() {
		if q.Required {
			n++
		}
	}
	return n
}

func checkName(raw json.RawMessage, _ *state) problems {
	var a Name
	if err := decodeStrict(raw, &a); err != nil {
		return problems{err.Error()}
	}
	var p problems
	p.text("make", a.Make, false)
	p.text("model", a.Model, false)
	p.text("nickname", a.Nickname, false)
	if strings.TrimSpace(a.Make+a.Model+a.Nickname) == "" {
		p.add("give at least one of make, model or nickname")
	} else if slug(a) == "" {
		p.add("the name has no letters or digits to make an id from")
	}
	return p
}

func checkKind(raw json.RawMessage, _ *state) problems {
	var a Kind
	if err := decodeStrict(raw, &a); err != nil {
		return problems{err.Error()}
	}
	var p problems
	switch a.Kind {
	case KindManual:
	case KindSerial:
		if a.Port == "" {
			p.add("a serial instrument needs its port (/dev/serial/by-id/... is stable across reboots, /dev/ttyUSB0 is not)")
		}
		if a.Baud < 0 || a.Baud > 4_000_000 {
			p.add("baud %d is not a serial speed", a.Baud)
		}
		if a.DataBits != 0 && (a.DataBits < 5 || a.DataBits > 8) {
			p.add("data_bits %d: 5 to 8", a.DataBits)
		}
		if a.Parity != "" && !slices.Contains([]string{"none", "even", "odd", "mark", "space"}, a.Parity) {
			p.add("parity %q: none, even, odd, mark or space", a.Parity)
		}
		if a.StopBits != 0 && a.StopBits != 1 && a.StopBits != 1.5 && a.StopBits != 2 {
			p.add("stop_bits %v: 1, 1.5 or 2", a.StopBits)
		}
	case KindMHP:
		if !strings.HasPrefix(a.URL, "http://") && !strings.HasPrefix(a.URL, "https://") {
			p.add("an instrument that speaks MHP needs its url (http://host:port)")
		}
	case KindAdapter:
		if a.Layer == "" {
			p.add("an adapter needs its layer (opcua, sila2, ros2, madsci, pylabrobot, mqtt)")
		}
		if a.Target == "" && a.Config == "" {
			p.add("an adapter needs the address to discover (target) or an adapter config file (config)")
		}
	default:
		p.add("kind %q: one of manual, serial, mhp, adapter", a.Kind)
	}
	for _, f := range []string{a.Port, a.LineEnding, a.Layer, a.Target, a.Config, a.URL} {
		p.text("kind", f, false)
	}
	return p
}

func checkPurpose(raw json.RawMessage, _ *state) problems {
	var a Purpose
	if err := decodeStrict(raw, &a); err != nil {
		return problems{err.Error()}
	}
	var p problems
	p.text("description", a.Description, true)
	p.text("use_for", a.UseFor, false)
	p.text("never_for", a.NeverFor, false)
	if n := utf8.RuneCountInString(strings.TrimSpace(a.Description)); n > 0 && n < 60 {
		p.add("description is %d characters: say in at least 60 what it is, when to pick it and what not to use it for", n)
	}
	if n := utf8.RuneCountInString(composeDescription(a)); n >= 1000 {
		p.add("description, use_for and never_for come to %d characters: keep them under 1000", n)
	}
	return p
}

func checkPlace(raw json.RawMessage, _ *state) problems {
	var a Place
	if err := decodeStrict(raw, &a); err != nil {
		return problems{err.Error()}
	}
	var p problems
	p.text("location", a.Location, true)
	if strings.ContainsAny(a.Location, "\n\r") {
		p.add("location: one line")
	}
	if len(a.Tags) < 1 || len(a.Tags) > 8 {
		p.add("tags: give 3 to 5 search words")
	}
	for _, t := range a.Tags {
		if strings.TrimSpace(t) == "" || len(t) > 64 {
			p.add("tag %q: a word or two", t)
		}
	}
	p.name("class", a.Class)
	return p
}

func checkPhysical(raw json.RawMessage, _ *state) problems {
	var a Physical
	if err := decodeStrict(raw, &a); err != nil {
		return problems{err.Error()}
	}
	var p problems
	if a.MassKg < 0 {
		p.add("mass_kg is negative")
	}
	p.text("hazards", a.Hazards, false)
	p.text("do_not_touch", a.DoNotTouch, false)
	return p
}

func checkSignals(raw json.RawMessage, s *state) problems {
	var a []Signal
	if err := decodeStrict(raw, &a); err != nil {
		return problems{err.Error()}
	}
	var p problems
	if len(a) == 0 || len(a) > maxItems {
		p.add("give 1 to %d signals: something a person or the line can read", maxItems)
	}
	names := make([]string, 0, len(a))
	for _, x := range a {
		p.name("signal", x.Name)
		p.typ("signal "+x.Name+" type", x.Type)
		p.text("signal "+x.Name+" notes", x.Notes, false)
		if s.kind() == KindSerial && x.Query == "" {
			p.add("signal %s: a serial signal needs its query command", x.Name)
		}
		p.regex("signal "+x.Name+" reply", x.Reply)
		names = append(names, x.Name)
	}
	p.unique("signals", names)
	return p
}

func checkSettings(raw json.RawMessage, s *state) problems {
	var a []Setting
	if err := decodeStrict(raw, &a); err != nil {
		return problems{err.Error()}
	}
	var p problems
	if len(a) > maxItems {
		p.add("at most %d settings", maxItems)
	}
	names := make([]string, 0, len(a))
	for _, x := range a {
		f := "setting " + x.Name
		p.name("setting", x.Name)
		p.typ(f+" type", x.Type)
		p.rng(f, x.Type, x.Min, x.Max)
		p.approval(f+" approval", x.Approval, string(mhp.ApprovalAuto), string(mhp.ApprovalConfirm), string(mhp.ApprovalForbid))
		p.interlocks(f, x.Interlocks, s.signals())
		p.text(f+" below_min", x.BelowMin, false)
		p.text(f+" above_max", x.AboveMax, false)
		p.text(f+" notes", x.Notes, false)
		if s.kind() == KindSerial && !strings.Contains(x.Command, "{value}") {
			p.add("%s: a serial setting needs its command with {value} (OUT_SP_1 {value})", f)
		}
		p.regex(f+" ack", x.Ack)
		names = append(names, x.Name)
	}
	p.unique("settings", names)
	return p
}

func checkActions(raw json.RawMessage, s *state) problems {
	var a []Action
	if err := decodeStrict(raw, &a); err != nil {
		return problems{err.Error()}
	}
	var p problems
	if len(a) > maxItems {
		p.add("at most %d actions", maxItems)
	}
	names := make([]string, 0, len(a))
	for _, x := range a {
		f := "action " + x.Name
		p.name("action", x.Name)
		if x.Duration != mhp.DurationShort && x.Duration != mhp.DurationLong {
			p.add("%s duration %q: short (seconds) or long (a job to follow)", f, x.Duration)
		}
		if x.DurationS < 0 {
			p.add("%s duration_s is negative", f)
		}
		for n, pr := range x.Params {
			p.name(f+" param", n)
			p.typ(f+" param "+n+" type", pr.Type)
			p.rng(f+" param "+n, pr.Type, pr.Min, pr.Max)
		}
		for k := range x.Example {
			if _, ok := x.Params[k]; !ok {
				p.add("%s: the example gives %q, which is not one of its params", f, k)
			}
		}
		p.approval(f+" approval", x.Approval, string(mhp.ApprovalAuto), string(mhp.ApprovalConfirm), string(mhp.ApprovalForbid))
		p.interlocks(f, x.Interlocks, s.signals())
		p.text(f+" preconditions", x.Preconditions, false)
		p.text(f+" notes", x.Notes, false)
		if s.kind() == KindSerial && len(x.Commands) == 0 {
			p.add("%s: a serial action needs its commands", f)
		}
		names = append(names, x.Name)
	}
	p.unique("actions", names)
	return p
}

func checkProcedure(raw json.RawMessage, _ *state) problems {
	var a Procedure
	if err := decodeStrict(raw, &a); err != nil {
		return problems{err.Error()}
	}
	var p problems
	if len(a.Steps) == 0 || len(a.Steps) > maxItems {
		p.add("give the steps of a normal run (1 to %d)", maxItems)
	}
	for _, x := range append(append([]string(nil), a.Steps...), a.Watch...) {
		p.text("step", x, true)
	}
	return p
}

func checkStop(raw json.RawMessage, s *state) problems {
	var a Stop
	if err := decodeStrict(raw, &a); err != nil {
		return problems{err.Error()}
	}
	var p problems
	p.text("estop", a.EStop, true)
	if a.WatchdogS < 0 || a.WatchdogS > 86400 {
		p.add("watchdog_s %v: 0 (none) to 86400 seconds", a.WatchdogS)
	}
	if a.Watchdog != "" && !strings.Contains(a.Watchdog, "{seconds}") {
		p.add("watchdog: the command arming the hardware watchdog needs {seconds}")
	}
	if s.kind() == KindSerial && strings.EqualFold(strings.TrimSpace(a.EStop), "none") && len(a.Commands) > 0 {
		p.add("estop says none but stop commands are given: say how a person stops it")
	}
	return p
}

func checkDocs(raw json.RawMessage, _ *state) problems {
	var a Docs
	if err := decodeStrict(raw, &a); err != nil {
		return problems{err.Error()}
	}
	var p problems
	if len(a.References) > maxDocs {
		p.add("at most %d references", maxDocs)
	}
	for name, text := range a.References {
		if !refName.MatchString(name) {
			p.add("reference %q: a file name like sop.md (lowercase, ends .md)", name)
		}
		if len(text) > maxDoc || !utf8.ValidString(text) {
			p.add("reference %s: UTF-8 text of at most %d bytes", name, maxDoc)
		}
	}
	return p
}
