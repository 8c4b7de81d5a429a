package pylabrobot

import (
	"fmt"
	"net/url"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
)

// Kind is the adapter kind of pylabrobot config files (`adapter: pylabrobot`).
const Kind = "pylabrobot"

// Modes: which HTTP API the backend speaks.
const (
	ModeBridge = "bridge" // plrbridge.py
	ModeLegacy = "legacy" // PyLabRobot's liquid-handling server (lh-server)
)

// Config is a pylabrobot config file:
//
//	adapter: pylabrobot
//	device: {id: star-01, class: liquid_handler}
//	mode: bridge
//	url: http://127.0.0.1:5050
//	settings:
//	  target_temperature: {method: set_temperature, param: temperature, type: number, limits: {min: 4, max: 95}}
//
// Zero values take the defaults documented on each field.
type Config struct {
	adapters.Common `yaml:",inline"`
	// Link says how the adapter treats a backend that is not there: start
	// anyway (default) or fail fast, the reconnect backoff, the descriptor
	// cache (see [adapters.LinkConfig]).
	Link adapters.LinkConfig `yaml:"link,omitempty"`

	// Mode is bridge (default) or legacy.
	Mode string `yaml:"mode,omitempty"`
	// URL is the bridge's or server's base URL; default
	// http://127.0.0.1:5050 (bridge) or http://127.0.0.1:5001 (legacy).
	URL string `yaml:"url,omitempty"`
	// RequestTimeout bounds every HTTP request; default 10s.
	RequestTimeout time.Duration `yaml:"request_timeout,omitempty"`
	// PollInterval is the wait between task polls when the bridge does
	// not long-poll (an older bridge, long_poll: false, the legacy
	// server); default 200ms.
	PollInterval time.Duration `yaml:"poll_interval,omitempty"`
	// LongPoll lets the adapter wait for a task's change at the bridge
	// (GET /tasks/{id}?wait=) when the bridge's /describe says it can
	// (bridge.long_poll_s), so a task's end reaches the job at once instead
	// of up to poll_interval later; default true. false polls every
	// poll_interval.
	LongPoll *bool `yaml:"long_poll,omitempty"`
	// LongPollWait is the most one long-poll asks the bridge to hold its
	// answer (clamped to the bridge's long_poll_s): a change answers at
	// once, so this only bounds how long one request stays open; default
	// 5s. A cancel or estop never waits for it: the poll is cut at once.
	LongPollWait time.Duration `yaml:"long_poll_wait,omitempty"`
	// PollRetry is the retry policy of failed task polls (see
	// [adapters.PollRetry]): back-off from poll_retry.backoff (250ms)
	// doubling to poll_retry.max_backoff (5s), for poll_retry.window (2m)
	// from the first failure in a row before the outcome is unknown.
	PollRetry adapters.PollRetry `yaml:"poll_retry,omitempty"`
	// ActionTimeout bounds an action with no timeout of its own (and is sent
	// to the bridge as the task's timeout_s); default 1h.
	ActionTimeout time.Duration `yaml:"action_timeout,omitempty"`
	// CancelWait bounds how long a cancelled job keeps polling for the
	// task's end state after the cancel was sent; default 60s.
	CancelWait time.Duration `yaml:"cancel_wait,omitempty"`
	// PollFailures is deprecated (poll_retry.window replaces it): when
	// set, the outcome is also given up as unknown after that many failed
	// polls in a row, and New logs a warning. Unset by default.
	PollFailures int `yaml:"poll_failures,omitempty"`
	// SignalCache is how long one /state reply serves signal reads; default
	// 250ms; negative disables.
	SignalCache time.Duration `yaml:"signal_cache,omitempty"`

	// Signals, Actions override what the bridge describes; Settings map
	// setter methods onto settings (bridge mode only).
	Signals  map[string]SignalOverride `yaml:"signals,omitempty"`
	Settings map[string]SettingMapping `yaml:"settings,omitempty"`
	Actions  map[string]ActionOverride `yaml:"actions,omitempty"`
	// ResetSetup makes a reset run the machine's setup again when the
	// bridge serves setup_finished and it reads false (after the estop's
	// stop(), PyLabRobot refuses every command until setup); default true.
	// Off, such a reset is refused until the machine is set up.
	ResetSetup *bool `yaml:"reset_setup,omitempty"`
	// SetupTimeout bounds a reset's verification, setup included; default
	// 10m (actions.setup.timeout overrides it).
	SetupTimeout time.Duration `yaml:"setup_timeout,omitempty"`
	// SettingOrder lists the settings in the order they are described
	// (default: sorted by name).
	SettingOrder []string `yaml:"setting_order,omitempty"`
}

// SignalOverride adjusts one signal.
type SignalOverride struct {
	Type  string `yaml:"type,omitempty"`
	Unit  string `yaml:"unit,omitempty"`
	Notes string `yaml:"notes,omitempty"`
	Hide  bool   `yaml:"hide,omitempty"` // RequiredForRecovery: safety/reset refuses while this signal is
	// unreadable (interlock signals always are).
	RequiredForRecovery bool `yaml:"required_for_recovery,omitempty"`
}

// SettingMapping makes a setter method a setting: a write runs the method
// with {param: value} as a task and waits for it to end.
type SettingMapping struct {
	Method string `yaml:"method"`
	// Param is the method's parameter that takes the value; default the
	// method's only required parameter.
	Param      string       `yaml:"param,omitempty"`
	Type       string       `yaml:"type"`
	Unit       string       `yaml:"unit,omitempty"`
	Limits     *mhp.Limits  `yaml:"limits,omitempty"`
	Approval   mhp.Approval `yaml:"approval,omitempty"`
	Interlocks []string     `yaml:"interlocks,omitempty"`
	DuringJob  bool         `yaml:"during_job,omitempty"`
	Notes      string       `yaml:"notes,omitempty"`
}

// ActionOverride adjusts one action the bridge or the legacy server offers.
// Pausable is refused (neither API can pause); Cancellable is refused on
// the legacy server, which has no cancel.
type ActionOverride = adapters.ActionOverride

// Defaults returns c with every zero option at its default: the one place
// the defaults are set ([Load] and [New] apply them).
func (c Config) Defaults() Config {
	if c.Adapter == "" {
		c.Adapter = Kind
	}
	if c.Mode == "" {
		c.Mode = ModeBridge
	}
	if c.URL == "" {
		c.URL = "http://127.0.0.1:5050"
		if c.Mode == ModeLegacy {
			c.URL = "http://127.0.0.1:5001"
		}
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.RequestTimeout, 10*time.Second)
	def(&c.PollInterval, 200*time.Millisecond)
	def(&c.LongPollWait, 5*time.Second)
	def(&c.ActionTimeout, time.Hour)
	def(&c.CancelWait, time.Minute)
	def(&c.SignalCache, 250*time.Millisecond)
	def(&c.SetupTimeout, 10*time.Minute)
	if c.ResetSetup == nil {
		t := true
		c.ResetSetup = &t
	}
	if c.LongPoll == nil {
		t := true
		c.LongPoll = &t
	}
	c.PollRetry = c.PollRetry.Defaults()
	return c
}

// Validate reports the first problem of the config, naming the field and
// why; zero fields are taken at their defaults ([Config.Defaults]). It does
// no I/O: whether the bridge serves the methods the config names is checked
// by [New].
func (c Config) Validate() error {
	c = c.Defaults()
	if c.Adapter != Kind {
		return fmt.Errorf("pylabrobot: adapter is %q, want %q", c.Adapter, Kind)
	}
	if c.Device.ID == "" {
		return fmt.Errorf("pylabrobot: device.id is required")
	}
	if c.Mode != ModeBridge && c.Mode != ModeLegacy {
		return fmt.Errorf("pylabrobot: mode %q is not bridge or legacy", c.Mode)
	}
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("pylabrobot: url %q is not an http(s) URL", c.URL)
	}
	for name, d := range map[string]time.Duration{"request_timeout": c.RequestTimeout, "poll_interval": c.PollInterval, "long_poll_wait": c.LongPollWait,
		"action_timeout": c.ActionTimeout, "cancel_wait": c.CancelWait} {
		if d <= 0 {
			return fmt.Errorf("pylabrobot: %s must be positive, got %v", name, d)
		}
	}
	if c.PollFailures < 0 {
		return fmt.Errorf("pylabrobot: poll_failures (deprecated: use poll_retry.window) must be >= 1 when set, got %d", c.PollFailures)
	}
	if err := c.PollRetry.Validate(); err != nil {
		return fmt.Errorf("pylabrobot: %w", err)
	}
	if err := c.Link.Validate(); err != nil {
		return fmt.Errorf("pylabrobot: %w", err)
	}
	if c.Mode == ModeLegacy && len(c.Settings) > 0 {
		return fmt.Errorf("pylabrobot: the legacy server has no setter methods; settings need mode bridge")
	}
	for name, s := range c.Settings {
		if s.Method == "" {
			return fmt.Errorf("pylabrobot: setting %q: method is required", name)
		}
		if !mhp.IsType(s.Type) {
			return fmt.Errorf("pylabrobot: setting %q: type %q is not a value type", name, s.Type)
		}
	}
	for name, a := range c.Actions {
		if a.Timeout < 0 {
			return fmt.Errorf("pylabrobot: action %q: timeout %v is negative", name, a.Timeout)
		}
	}
	return nil
}

// pollRetry is the config's poll policy on the options' poll clock, with
// the deprecated poll_failures as its count bound.
func (c Config) pollRetry(opt Options) adapters.PollRetry {
	p := c.PollRetry
	p.MaxFailures = c.PollFailures
	if opt.PollClock != nil {
		p.Clock = opt.PollClock
	}
	return p.Defaults()
}
