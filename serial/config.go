package serial

import (
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"

	"go.bug.st/serial"
	"gopkg.in/yaml.v3"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
)

// Config is a serial ASCII instrument: the line settings and how each
// signal, setting, action and the estop map onto commands and replies. It
// is the `adapter: serial` config file (see examples/devices/ika-cmag-hs7).
type Config struct {
	adapters.Common `yaml:",inline"`

	// Port is the device node; prefer /dev/serial/by-id/... (stable across
	// re-enumeration) to /dev/ttyUSB0.
	Port string `yaml:"port"`
	// Baud is the line speed (required: the instrument's own setting).
	Baud int `yaml:"baud"`
	// DataBits is 5-8; default 8.
	DataBits int `yaml:"data_bits,omitempty"`
	// Parity is none|even|odd|mark|space; default none.
	Parity string `yaml:"parity,omitempty"`
	// StopBits is 1, 1.5 or 2; default 1.
	StopBits float64 `yaml:"stop_bits,omitempty"`
	// LineEnding is appended to every command; default "\r\n".
	LineEnding string `yaml:"line_ending,omitempty"`
	// ReplyEnding ends a reply; default LineEnding.
	ReplyEnding string `yaml:"reply_ending,omitempty"`
	// MaxReply caps a reply's length in bytes; default 256. A longer reply
	// is discarded as garbage.
	MaxReply int `yaml:"max_reply,omitempty"`
	// Timeouts bound replies, writes and the reconnect backoff.
	Timeouts Timeouts `yaml:"timeouts,omitempty"`
	// InterCommandDelayS is the least time between the end of one exchange
	// and the next command; default 0.
	InterCommandDelayS float64 `yaml:"inter_command_delay_s,omitempty"`
	// Identify, when set, is checked on every connect and reconnect: a port
	// whose device does not answer it is not used.
	Identify *Identify `yaml:"identify,omitempty"`

	Signals  []SignalConfig  `yaml:"signals,omitempty"`
	Settings []SettingConfig `yaml:"settings,omitempty"`
	Actions  []ActionConfig  `yaml:"actions,omitempty"`
	// EStop is the stop sequence; without it the device has no estop.
	EStop []Step `yaml:"estop,omitempty"`
	// Watchdog, when set, arms the instrument's own watchdog at every
	// connect and resends it every Seconds/2.
	Watchdog *Watchdog `yaml:"watchdog,omitempty"`
}

// Timeouts bound the line's waits, in seconds.
type Timeouts struct {
	// ReplyS is how long a reply may take; default 1.
	ReplyS float64 `yaml:"reply_s,omitempty"`
	// WriteS bounds one write; a write stuck longer is a fault; default 1.
	WriteS float64 `yaml:"write_s,omitempty"`
	// ReconnectMinS and ReconnectMaxS bound the reconnect backoff; default
	// 0.5 and 30.
	ReconnectMinS float64 `yaml:"reconnect_min_s,omitempty"`
	ReconnectMaxS float64 `yaml:"reconnect_max_s,omitempty"`
	// PresenceS is how often an idle adapter checks that the port's node
	// still exists (a USB adapter pulled while nothing is sent); default 1.
	PresenceS float64 `yaml:"presence_s,omitempty"`
	// EStopReplyS is how long the estop waits for a stop command's reply;
	// default 3*reply_s, at least 2.
	EStopReplyS float64 `yaml:"estop_reply_s,omitempty"`
	// EStopLockS is how long the estop waits for a command in flight to
	// give the line up before it closes the port; default 0.3.
	EStopLockS float64 `yaml:"estop_lock_s,omitempty"`
}

// Identify is the identity check of every connect: Command's reply must
// match the regular expression Reply.
type Identify struct {
	Command string `yaml:"command"`
	Reply   string `yaml:"reply"`
	// Attempts is how many times Command is sent before the port is
	// refused; default 1 (2 for a pump whose first reply after power-up is
	// an alarm).
	Attempts int `yaml:"attempts,omitempty"`
}

// SignalConfig maps a signal onto a query and a reply pattern.
type SignalConfig struct {
	mhp.Signal `yaml:",inline"`
	// Query is the command whose reply carries the value.
	Query string `yaml:"query"`
	// Reply is a regular expression with a named group `value`; a line not
	// matching it is not this query's reply (a stale or echoed line) and is
	// discarded.
	Reply string `yaml:"reply"`
	// Unavailable, a regular expression, is a reply saying the instrument
	// has no value now (MT-SICS `S I`, an overload): the signal reads
	// unavailable at once instead of waiting out the reply timeout.
	Unavailable string `yaml:"unavailable,omitempty"`
	// Values maps the captured text to a value (status letters, ON/OFF);
	// a token not listed reads unavailable. Without it the text is parsed
	// by the signal's type (booleans: 1/true/on/yes, 0/false/off/no).
	Values map[string]any `yaml:"values,omitempty"`
}

// SettingConfig maps a setting onto a command with {value}.
type SettingConfig struct {
	mhp.Setting `yaml:",inline"`
	// Command is sent with {value} replaced by the checked value.
	Command string `yaml:"command"`
	// Ack, a regular expression, is the reply that confirms the write
	// (applied); without Ack and Readback the write answers `sent`.
	Ack string `yaml:"ack,omitempty"`
	// Error, a regular expression, is a reply saying the instrument refused
	// the command: the write fails and nothing took effect.
	Error string `yaml:"error,omitempty"`
	// Readback names a signal read after the write: showing the value
	// written makes the write applied; any other value or no reply is an
	// unknown outcome (fault).
	Readback string `yaml:"readback,omitempty"`
	// Below names a signal read before every write: a value not below its
	// reading is refused (LimitViolation) and never sent (an IKA plate's
	// safety temperature IN_SP_3); an unreadable signal refuses too.
	Below string `yaml:"below,omitempty"`
	// Decimals rounds a number to this many decimals before sending
	// (instruments limit digits); default as many as needed. Never an
	// exponent.
	Decimals *int `yaml:"decimals,omitempty"`
	// True and False are the texts of a boolean value; default 1 and 0.
	True  string `yaml:"true,omitempty"`
	False string `yaml:"false,omitempty"`
}

// ActionConfig maps an action onto a command sequence.
type ActionConfig struct {
	mhp.Action `yaml:",inline"`
	// Commands are sent in order; {param} is replaced by the param's value
	// and {job} by the MHP job id.
	Commands []Step `yaml:"commands"`
	// Cancel is the sequence that stops the work (needs Completion); with
	// it the action is cancellable.
	Cancel []Step `yaml:"cancel,omitempty"`
	// Completion, when set, is polled after the commands until it says the
	// work ended; without it the job is done when the commands are sent.
	Completion *Completion `yaml:"completion,omitempty"`
	// TimeoutS bounds the job; default the driver's job timeout.
	TimeoutS float64 `yaml:"timeout_s,omitempty"`
}

// Step is one command of a sequence: a bare string is fire-and-forget; the
// long form reads a reply when Ack or Error is set.
type Step struct {
	Send string `yaml:"send"`
	// Ack is the reply that confirms the command; a missing or other reply
	// is an unknown outcome.
	Ack string `yaml:"ack,omitempty"`
	// Error is a reply saying the instrument refused the command. With
	// only Error set, silence counts as accepted.
	Error string `yaml:"error,omitempty"`
}

// UnmarshalYAML takes a bare string or {send, ack, error}.
func (s *Step) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		return n.Decode(&s.Send)
	}
	type plain Step
	var p plain
	dec := n.Decode
	if err := dec(&p); err != nil {
		return err
	}
	*s = Step(p)
	return nil
}

// Completion is the query polled while an action runs.
type Completion struct {
	// Query is sent every IntervalS ({job} and {param} placeholders too).
	Query string `yaml:"query"`
	// Reply is a regular expression with a named group `value` (and an
	// optional `progress`, a fraction 0-1 or a percent when above 1, and an
	// optional `result`, JSON or text, that becomes the done job's result).
	Reply string `yaml:"reply"`
	// Done, Failed and Cancelled are regular expressions over the captured
	// value; any other value means the work still runs.
	Done      string `yaml:"done"`
	Failed    string `yaml:"failed,omitempty"`
	Cancelled string `yaml:"cancelled,omitempty"`
	// IntervalS is the poll interval; default 1.
	IntervalS float64 `yaml:"interval_s,omitempty"`
	// MaxMisses is how many polls in a row may go unanswered before the
	// outcome is unknown; default 3.
	MaxMisses int `yaml:"max_misses,omitempty"`
}

// Watchdog is the instrument's own watchdog: Command with {seconds}.
type Watchdog struct {
	Command string  `yaml:"command"`
	Seconds float64 `yaml:"seconds"`
	// Ack, when set, must match the instrument's answer (IKA echoes).
	Ack string `yaml:"ack,omitempty"`
}

// Defaults returns c with zero fields at their defaults.
func (c Config) Defaults() Config {
	if c.DataBits == 0 {
		c.DataBits = 8
	}
	if c.Parity == "" {
		c.Parity = "none"
	}
	if c.StopBits == 0 {
		c.StopBits = 1
	}
	if c.LineEnding == "" {
		c.LineEnding = "\r\n"
	}
	if c.ReplyEnding == "" {
		c.ReplyEnding = c.LineEnding
	}
	if c.MaxReply <= 0 {
		c.MaxReply = 256
	}
	t := &c.Timeouts
	def := func(f *float64, v float64) {
		if *f <= 0 {
			*f = v
		}
	}
	def(&t.ReplyS, 1)
	def(&t.WriteS, 1)
	def(&t.ReconnectMinS, 0.5)
	def(&t.ReconnectMaxS, 30)
	def(&t.EStopLockS, 0.3)
	def(&t.PresenceS, 1)
	def(&t.EStopReplyS, math.Max(2, 3*t.ReplyS))
	return c
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

var parities = map[string]serial.Parity{"none": serial.NoParity, "even": serial.EvenParity, "odd": serial.OddParity,
	"mark": serial.MarkParity, "space": serial.SpaceParity}

// Mode is the line setting of c (defaults applied) for serial.Open.
func (c Config) Mode() (*serial.Mode, error) {
	c = c.Defaults()
	if c.Baud <= 0 {
		return nil, fmt.Errorf("baud: required, a positive line speed (got %d)", c.Baud)
	}
	if c.DataBits < 5 || c.DataBits > 8 {
		return nil, fmt.Errorf("data_bits: %d, want 5-8", c.DataBits)
	}
	p, ok := parities[strings.ToLower(c.Parity)]
	if !ok {
		return nil, fmt.Errorf("parity: %q, want none, even, odd, mark or space", c.Parity)
	}
	var sb serial.StopBits
	switch c.StopBits {
	case 1:
		sb = serial.OneStopBit
	case 1.5:
		sb = serial.OnePointFiveStopBits
	case 2:
		sb = serial.TwoStopBits
	default:
		return nil, fmt.Errorf("stop_bits: %v, want 1, 1.5 or 2", c.StopBits)
	}
	return &serial.Mode{BaudRate: c.Baud, DataBits: c.DataBits, Parity: p, StopBits: sb}, nil
}

// placeholder is a {name} in a command.
var placeholder = regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// placeholders lists the names a command template uses.
func placeholders(tmpl string) []string {
	var out []string
	for _, m := range placeholder.FindAllStringSubmatch(tmpl, -1) {
		out = append(out, m[1])
	}
	return out
}

// compileValue compiles a reply pattern that must capture `value`.
func compileValue(what, expr string) (*regexp.Regexp, error) {
	re, err := compile(what, expr)
	if err != nil {
		return nil, err
	}
	if re.SubexpIndex("value") < 0 {
		return nil, fmt.Errorf("%s: %q has no named group (?P<value>...)", what, expr)
	}
	return re, nil
}

func compile(what, expr string) (*regexp.Regexp, error) {
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return re, nil
}

func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return true
		}
	}
	return false
}

// Validate reports the first problem of the config: missing port or
// device id, a bad line setting, a pattern that does not compile or lacks
// `value`, a placeholder naming no param, an unknown readback signal.
func (c Config) Validate() error {
	if c.Adapter != "" && c.Adapter != Kind {
		return fmt.Errorf("adapter is %q, not %q", c.Adapter, Kind)
	}
	if c.Device.ID == "" {
		return fmt.Errorf("device.id: required")
	}
	if c.Port == "" {
		return fmt.Errorf("port: required (e.g. /dev/serial/by-id/usb-...)")
	}
	if _, err := c.Mode(); err != nil {
		return err
	}
	d := c.Defaults()
	if d.MaxReply > 1<<16 {
		return fmt.Errorf("max_reply: %d is more than 65536", d.MaxReply)
	}
	for _, v := range []float64{c.Timeouts.ReplyS, c.Timeouts.WriteS, c.Timeouts.ReconnectMinS, c.Timeouts.ReconnectMaxS,
		c.Timeouts.EStopLockS, c.Timeouts.EStopReplyS, c.Timeouts.PresenceS, c.InterCommandDelayS} {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("timeouts and inter_command_delay_s must be finite and not negative")
		}
	}
	if c.Identify != nil {
		if c.Identify.Command == "" {
			return fmt.Errorf("identify.command: required")
		}
		if _, err := compile("identify.reply", c.Identify.Reply); err != nil {
			return err
		}
	}
	signals := map[string]bool{}
	for i, s := range c.Signals {
		what := fmt.Sprintf("signals[%d] %s", i, s.Name)
		if s.Name == "" || signals[s.Name] {
			return fmt.Errorf("%s: name missing or repeated", what)
		}
		signals[s.Name] = true
		if s.Query == "" {
			return fmt.Errorf("%s: query: required", what)
		}
		if _, err := compileValue(what+": reply", s.Reply); err != nil {
			return err
		}
		if _, err := compile(what+": unavailable", s.Unavailable); s.Unavailable != "" && err != nil {
			return err
		}
		if len(placeholders(s.Query)) > 0 {
			return fmt.Errorf("%s: query %q: a query takes no {placeholders}", what, s.Query)
		}
	}
	names := map[string]bool{}
	for i, s := range c.Settings {
		what := fmt.Sprintf("settings[%d] %s", i, s.Name)
		if s.Name == "" || names[s.Name] {
			return fmt.Errorf("%s: name missing or repeated", what)
		}
		names[s.Name] = true
		if err := checkTemplate(what+": command", s.Command, map[string]bool{"value": true}); err != nil {
			return err
		}
		if !strings.Contains(s.Command, "{value}") {
			return fmt.Errorf("%s: command %q has no {value}", what, s.Command)
		}
		if _, err := compile(what+": ack", s.Ack); s.Ack != "" && err != nil {
			return err
		}
		if _, err := compile(what+": error", s.Error); s.Error != "" && err != nil {
			return err
		}
		if s.Readback != "" && !signals[s.Readback] {
			return fmt.Errorf("%s: readback %q names no signal", what, s.Readback)
		}
		if s.Below != "" && !signals[s.Below] {
			return fmt.Errorf("%s: below %q names no signal", what, s.Below)
		}
		if s.Decimals != nil && (*s.Decimals < 0 || *s.Decimals > 15) {
			return fmt.Errorf("%s: decimals %d, want 0-15", what, *s.Decimals)
		}
	}
	for i, a := range c.Actions {
		what := fmt.Sprintf("actions[%d] %s", i, a.Name)
		if a.Name == "" || names[a.Name] {
			return fmt.Errorf("%s: name missing or repeated", what)
		}
		names[a.Name] = true
		if len(a.Commands) == 0 {
			return fmt.Errorf("%s: commands: at least one", what)
		}
		params := map[string]bool{"job": true}
		for _, p := range a.Params {
			params[p.Name] = true
		}
		for j, st := range append(append([]Step(nil), a.Commands...), a.Cancel...) {
			if err := st.check(fmt.Sprintf("%s: step %d", what, j), params); err != nil {
				return err
			}
		}
		if len(a.Cancel) > 0 && a.Completion == nil {
			return fmt.Errorf("%s: cancel needs a completion query (nothing else could show the work stopped)", what)
		}
		if cp := a.Completion; cp != nil {
			if err := checkTemplate(what+": completion.query", cp.Query, params); err != nil {
				return err
			}
			if _, err := compileValue(what+": completion.reply", cp.Reply); err != nil {
				return err
			}
			if cp.Done == "" {
				return fmt.Errorf("%s: completion.done: required", what)
			}
			for k, e := range map[string]string{"done": cp.Done, "failed": cp.Failed, "cancelled": cp.Cancelled} {
				if _, err := compile(what+": completion."+k, e); e != "" && err != nil {
					return err
				}
			}
		}
		if a.TimeoutS < 0 {
			return fmt.Errorf("%s: timeout_s must not be negative", what)
		}
	}
	for j, st := range c.EStop {
		if err := st.check(fmt.Sprintf("estop step %d", j), nil); err != nil {
			return err
		}
	}
	if w := c.Watchdog; w != nil {
		if w.Seconds <= 0 {
			return fmt.Errorf("watchdog.seconds: must be positive")
		}
		if err := checkTemplate("watchdog.command", w.Command, map[string]bool{"seconds": true}); err != nil {
			return err
		}
		if _, err := compile("watchdog.ack", w.Ack); w.Ack != "" && err != nil {
			return err
		}
	}
	return nil
}

func (s Step) check(what string, params map[string]bool) error {
	if err := checkTemplate(what, s.Send, params); err != nil {
		return err
	}
	if _, err := compile(what+": ack", s.Ack); s.Ack != "" && err != nil {
		return err
	}
	if _, err := compile(what+": error", s.Error); s.Error != "" && err != nil {
		return err
	}
	return nil
}

// checkTemplate refuses an empty command, control characters, and a
// placeholder that names nothing in allowed.
func checkTemplate(what, tmpl string, allowed map[string]bool) error {
	if strings.TrimSpace(tmpl) == "" {
		return fmt.Errorf("%s: empty command", what)
	}
	if hasControl(tmpl) {
		return fmt.Errorf("%s: %q has control characters (the line ending is added by the adapter)", what, tmpl)
	}
	for _, p := range placeholders(tmpl) {
		if !allowed[p] {
			return fmt.Errorf("%s: {%s} names no param", what, p)
		}
	}
	return nil
}
