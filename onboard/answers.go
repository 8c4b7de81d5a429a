package onboard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/openmhp/mhp-go"
)

// The answers, one type per question. Every answer is decoded strictly
// (an unknown field is refused, so a misspelt "aproval" never silently
// becomes the default) and checked before it is kept.

// Name is who the instrument is.
type Name struct {
	Make     string `json:"make,omitempty"`
	Model    string `json:"model,omitempty"`
	Nickname string `json:"nickname,omitempty"`
}

// Kinds of control.
const (
	KindManual  = "manual"
	KindSerial  = "serial"
	KindMHP     = "mhp"
	KindAdapter = "adapter"
)

// Kind is how the instrument is controlled.
type Kind struct {
	Kind string `json:"kind"`
	// URL of an instrument that already speaks MHP.
	URL string `json:"url,omitempty"`
	// Serial line.
	Port       string  `json:"port,omitempty"`
	Baud       int     `json:"baud,omitempty"`
	DataBits   int     `json:"data_bits,omitempty"`
	Parity     string  `json:"parity,omitempty"`
	StopBits   float64 `json:"stop_bits,omitempty"`
	LineEnding string  `json:"line_ending,omitempty"`
	// Layer is the ecosystem of an adapter (opcua, sila2, ros2, madsci,
	// pylabrobot, mqtt), Target its address for discovery, Config the path
	// of an adapter config file when discovery is not available.
	Layer  string `json:"layer,omitempty"`
	Target string `json:"target,omitempty"`
	Config string `json:"config,omitempty"`
}

// Purpose is what it is for.
type Purpose struct {
	Description string `json:"description"`
	UseFor      string `json:"use_for,omitempty"`
	NeverFor    string `json:"never_for,omitempty"`
}

// Place is where it stands and how it is found.
type Place struct {
	Location string   `json:"location"`
	Tags     []string `json:"tags"`
	Class    string   `json:"class"`
}

// Physical is its body and its hazards.
type Physical struct {
	MassKg     float64 `json:"mass_kg,omitempty"`
	Hazards    string  `json:"hazards,omitempty"`
	DoNotTouch string  `json:"do_not_touch,omitempty"`
}

// Signal is one value a person (or the serial line) can read.
type Signal struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	Unit  string `json:"unit,omitempty"`
	Notes string `json:"notes,omitempty"`
	// Query and Reply read it over serial (Reply a regex with a value group).
	Query string `json:"query,omitempty"`
	Reply string `json:"reply,omitempty"`
}

// Setting is one setpoint.
type Setting struct {
	Name string   `json:"name"`
	Type string   `json:"type"`
	Unit string   `json:"unit,omitempty"`
	Min  *float64 `json:"min,omitempty"`
	Max  *float64 `json:"max,omitempty"`
	Enum []any    `json:"enum,omitempty"`
	// BelowMin and AboveMax say what goes wrong past each end.
	BelowMin string `json:"below_min,omitempty"`
	AboveMax string `json:"above_max,omitempty"`
	// Approval is auto only when the person said no confirmation is needed.
	Approval   string   `json:"approval,omitempty"`
	Interlocks []string `json:"interlocks,omitempty"`
	Notes      string   `json:"notes,omitempty"`
	// Command writes it over serial ("OUT_SP_1 {value}"), Ack matches the reply.
	Command string `json:"command,omitempty"`
	Ack     string `json:"ack,omitempty"`
}

// Param is one input of an action.
type Param struct {
	Type string   `json:"type"`
	Unit string   `json:"unit,omitempty"`
	Min  *float64 `json:"min,omitempty"`
	Max  *float64 `json:"max,omitempty"`
}

// Action is one operation.
type Action struct {
	Name          string           `json:"name"`
	Duration      string           `json:"duration"`
	DurationS     float64          `json:"duration_s,omitempty"`
	Params        map[string]Param `json:"params,omitempty"`
	Example       map[string]any   `json:"example,omitempty"`
	Preconditions string           `json:"preconditions,omitempty"`
	Interlocks    []string         `json:"interlocks,omitempty"`
	Approval      string           `json:"approval,omitempty"`
	Notes         string           `json:"notes,omitempty"`
	// Commands run it over serial, with {param} placeholders.
	Commands []string `json:"commands,omitempty"`
}

// Procedure is a normal run.
type Procedure struct {
	Steps []string `json:"steps"`
	Watch []string `json:"watch,omitempty"`
}

// Stop is how to stop it and how long it may go unattended.
type Stop struct {
	// EStop is how a person stops it ("none" when there is no way).
	EStop string `json:"estop"`
	// Commands stop it over serial.
	Commands []string `json:"commands,omitempty"`
	// WatchdogS is how many seconds of silence from the agent are allowed
	// before the device is stopped; 0: no watchdog.
	WatchdogS float64 `json:"watchdog_s,omitempty"`
	// Watchdog is the serial command arming a hardware watchdog ({seconds}).
	Watchdog string `json:"watchdog,omitempty"`
}

// Docs are references: file name (name.md) to text.
type Docs struct {
	References map[string]string `json:"references"`
}

// Bounds of answers.
const (
	maxText   = 4 << 10
	maxItems  = 64
	maxAnswer = 64 << 10
	maxDocs   = 8
	maxDoc    = 32 << 10
)

var (
	itemName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)
	refName  = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}\.md$`)
	types    = []string{mhp.TypeNumber, mhp.TypeInteger, mhp.TypeBoolean, mhp.TypeString}
)

// Classes the interview suggests (any lowercase snake_case class is taken).
var Classes = []string{"thermocycler", "hotplate_stirrer", "balance", "pump", "centrifuge", "incubator", "shaker",
	"plate_reader", "microscope", "liquid_handler", "robot_arm", "spectrometer", "ph_meter", "vortexer", "oven",
	"freezer", "chromatograph", "potentiostat", "camera", "sensor", "generic"}

// decodeStrict decodes one answer into v, refusing unknown fields.
func decodeStrict(raw json.RawMessage, v any) error {
	if len(raw) > maxAnswer {
		return fmt.Errorf("the answer is %d bytes, above %d", len(raw), maxAnswer)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("does not match the shape: %v", err)
	}
	return nil
}

// problems collects what is wrong with one answer.
type problems []string

func (p *problems) add(format string, args ...any) { *p = append(*p, fmt.Sprintf(format, args...)) }

func (p *problems) text(field, s string, required bool) {
	switch {
	case required && strings.TrimSpace(s) == "":
		p.add("%s is missing", field)
	case len(s) > maxText:
		p.add("%s is %d bytes, above %d", field, len(s), maxText)
	case !utf8.ValidString(s) || strings.ContainsRune(s, 0):
		p.add("%s is not text", field)
	}
}

func (p *problems) name(field, n string) {
	if !itemName.MatchString(n) {
		p.add("%s %q: use lowercase snake_case (a letter first, at most 64)", field, n)
	}
}

func (p *problems) typ(field, t string) {
	if !slices.Contains(types, t) {
		p.add("%s %q: one of %s", field, t, strings.Join(types, ", "))
	}
}

func (p *problems) approval(field, a string, allowed ...string) {
	if a != "" && !slices.Contains(allowed, a) {
		p.add("%s %q: one of %s", field, a, strings.Join(allowed, ", "))
	}
}

func (p *problems) rng(field, typ string, lo, hi *float64) {
	numeric := typ == mhp.TypeNumber || typ == mhp.TypeInteger
	if !numeric {
		if lo != nil || hi != nil {
			p.add("%s: min and max are for numbers, not %s", field, typ)
		}
		return
	}
	if lo == nil || hi == nil {
		p.add("%s: a number needs its allowed range: give min and max", field)
		return
	}
	if math.IsNaN(*lo) || math.IsNaN(*hi) || math.IsInf(*lo, 0) || math.IsInf(*hi, 0) {
		p.add("%s: min and max must be finite", field)
	} else if *lo > *hi {
		p.add("%s: min %v is above max %v", field, *lo, *hi)
	}
}

// interlocks checks that each names a boolean signal.
func (p *problems) interlocks(field string, locks []string, signals []Signal) {
	for _, l := range locks {
		i := slices.IndexFunc(signals, func(s Signal) bool { return s.Name == l })
		switch {
		case i < 0:
			p.add("%s: interlock %q names no signal (the signals are %s): an interlock must be a yes/no signal", field, l, signalNames(signals))
		case signals[i].Type != mhp.TypeBoolean:
			p.add("%s: interlock %q is a %s signal; an interlock must be a yes/no (boolean) signal", field, l, signals[i].Type)
		}
	}
}

func signalNames(ss []Signal) string {
	names := make([]string, len(ss))
	for i, s := range ss {
		names[i] = s.Name
	}
	return strings.Join(names, ", ")
}

func (p *problems) unique(field string, names []string) {
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			p.add("%s: %q is given twice", field, n)
		}
		seen[n] = true
	}
}

func (p *problems) regex(field, re string) {
	if re == "" {
		return
	}
	if _, err := regexp.Compile(re); err != nil {
		p.add("%s: not a regular expression: %v", field, err)
	}
}
