package madsci

import (
	"fmt"
	"net/url"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/clock"
)

// Kind is the adapter kind of madsci config files (`adapter: madsci`).
const Kind = "madsci"

// Config is a madsci config file ([Load] reads one, [New] serves it):
//
//	adapter: madsci
//	device: {id: liquidhandler-01, class: liquid_handler}
//	node_url: http://127.0.0.1:2000
//	layout: auto
//	files_dir: ./protocols
//	actions:
//	  run_protocol: {approval: confirm, timeout: 2h}
//
// Zero values take the defaults documented on each field (see [Config.Defaults]).
type Config struct {
	adapters.Common `yaml:",inline"`
	// Link says how the adapter treats a backend that is not there: start
	// anyway (default) or fail fast, the reconnect backoff, the descriptor
	// cache (see [adapters.LinkConfig]).
	Link adapters.LinkConfig `yaml:"link,omitempty"`

	// NodeURL is the node's base URL; default http://127.0.0.1:2000.
	NodeURL string `yaml:"node_url"`
	// Layout is auto (detect from /openapi.json), v5 (create/upload/start)
	// or legacy (v0.1-v0.4 single POST /action); default auto.
	Layout string `yaml:"layout,omitempty"`
	// RequestTimeout bounds every HTTP request; default 10s.
	RequestTimeout time.Duration `yaml:"request_timeout,omitempty"`
	// PollInterval is the first wait between status polls of a running
	// action; it grows by half each poll up to PollMax. Default 1s (nodes
	// rate-limit remote clients), PollMax default 5s.
	PollInterval time.Duration `yaml:"poll_interval,omitempty"`
	PollMax      time.Duration `yaml:"poll_max,omitempty"`
	// ActionTimeout bounds an action with no timeout of its own; default 1h.
	// No terminal state by then -> outcome unknown -> fault.
	ActionTimeout time.Duration `yaml:"action_timeout,omitempty"`
	// CancelWait bounds how long a cancelled job keeps polling for the
	// node's end state after the node's cancel was sent; default 60s.
	CancelWait time.Duration `yaml:"cancel_wait,omitempty"`
	// ResetWait bounds the wait for the node to recover after its reset; default 60s.
	ResetWait time.Duration `yaml:"reset_wait,omitempty"`
	// MaxRetryAfter caps a 429/503 Retry-After wait; default 30s.
	// MaxRetries bounds the retries of one request; default 5.
	MaxRetryAfter time.Duration `yaml:"max_retry_after,omitempty"`
	MaxRetries    int           `yaml:"max_retries,omitempty"`
	// PollRetry is the retry policy of failed action polls (see
	// [adapters.PollRetry]): a poll the node answered with an HTTP error
	// (a 500, a proxy's 502) or could not answer is retried after
	// poll_retry.backoff (250ms) doubling to poll_retry.max_backoff (5s),
	// for poll_retry.window (2m) from the first failure in a row; then the
	// outcome is unknown. 429 and 503 are first retried by the client after
	// their Retry-After (max_retries).
	PollRetry adapters.PollRetry `yaml:"poll_retry,omitempty"`
	// PollFailures is deprecated (poll_retry.window replaces it): when
	// set, the outcome is also given up as unknown after that many failed
	// polls in a row, and New logs a warning. Unset by default.
	PollFailures int `yaml:"poll_failures,omitempty"`
	// UnknownPolls is how many polls in a row may answer "unknown" before
	// the outcome is declared unknown; default 5.
	UnknownPolls int `yaml:"unknown_polls,omitempty"`
	// SignalCache is how long one /status or /state reply serves signal
	// reads; default 250ms (0 disables with a negative value).
	SignalCache time.Duration `yaml:"signal_cache,omitempty"`
	// FilesDir is the folder file params must name files in (relative paths
	// are taken inside it). Without it, actions with file args are refused.
	FilesDir string `yaml:"files_dir,omitempty"`
	// ResultsDir, when set, is where the result files of succeeded actions
	// are downloaded (GET /action/{name}/{id}/download, unzipped into
	// ResultsDir/<action_id>/); the job result lists them as local_files.
	ResultsDir string `yaml:"results_dir,omitempty"`
	// StatusSignals exposes the /status booleans as node.* signals; default true.
	StatusSignals *bool `yaml:"status_signals,omitempty"`
	// StateSignals limits the /state keys (flattened with ".") served as
	// signals; empty means every key the first /state reply has.
	StateSignals []string `yaml:"state_signals,omitempty"`
	// ReadyInterlock adds the node.ready signal as an interlock of every
	// blocking action, so the gates refuse while the node is not ready;
	// default true (needs status_signals).
	ReadyInterlock *bool `yaml:"ready_interlock,omitempty"`
	// StatusPoll is the period of the status watch: while the driver runs,
	// GET /status is read this often (besides every status read the
	// adapter makes anyway) so a node that reports itself errored or
	// stopped latches the device in fault even when nobody reads a signal.
	// Default 2s; 0s disables the watch (status reads still check).
	StatusPoll *time.Duration `yaml:"status_poll,omitempty"`
	// ResetNode posts the node's reset admin command on safety/reset when
	// the node is stopped, errored, locked or paused; default true.
	ResetNode *bool `yaml:"reset_node,omitempty"`
	// ConfigSettings exposes node config keys meant to be set at run time
	// as settings (POST /config); default true. A key is one when the
	// settings block below names it, or when the node's config_schema marks
	// its property "x-mhp-setting": true. The node's own wiring (node_url,
	// node_id, node_name, rate limiting, uvicorn options) never is.
	ConfigSettings *bool `yaml:"config_settings,omitempty"`

	// Result is the form of a done job's result: "envelope" (default:
	// {action_id, json_result, files?, datapoints?}) or "json_result" (the
	// action's raw return value only).
	Result string `yaml:"result,omitempty"`

	// Signals, Settings and Actions override what the node describes, by name.
	Signals  map[string]SignalOverride  `yaml:"signals,omitempty"`
	Settings map[string]SettingOverride `yaml:"settings,omitempty"`
	Actions  map[string]ActionOverride  `yaml:"actions,omitempty"`
}

// Result forms.
const (
	ResultEnvelope = "envelope"
	ResultJSON     = "json_result"
)

// SignalOverride adjusts one signal.
type SignalOverride struct {
	Type  string `yaml:"type,omitempty"`
	Unit  string `yaml:"unit,omitempty"`
	Notes string `yaml:"notes,omitempty"`
	Hide  bool   `yaml:"hide,omitempty"` // RequiredForRecovery: safety/reset refuses while this signal is
	// unreadable (interlock signals always are).
	RequiredForRecovery bool `yaml:"required_for_recovery,omitempty"`
}

// SettingOverride adjusts one setting (a node config key).
type SettingOverride struct {
	Type       string       `yaml:"type,omitempty"`
	Unit       string       `yaml:"unit,omitempty"`
	Limits     *mhp.Limits  `yaml:"limits,omitempty"`
	Approval   mhp.Approval `yaml:"approval,omitempty"`
	Interlocks []string     `yaml:"interlocks,omitempty"`
	DuringJob  bool         `yaml:"during_job,omitempty"`
	Notes      string       `yaml:"notes,omitempty"`
	Hide       bool         `yaml:"hide,omitempty"`
}

// ActionOverride adjusts one action the node's /info reports (see
// [adapters.ActionOverride]).
type ActionOverride = adapters.ActionOverride

// Defaults returns c with every zero option at its default; [Load],
// [Config.Validate] and [New] apply it.
func (c Config) Defaults() Config {
	if c.Adapter == "" {
		c.Adapter = Kind
	}
	if c.NodeURL == "" {
		c.NodeURL = "http://127.0.0.1:2000"
	}
	if c.Layout == "" {
		c.Layout = LayoutAuto
	}
	if c.Result == "" {
		c.Result = ResultEnvelope
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.RequestTimeout, 10*time.Second)
	def(&c.PollInterval, time.Second)
	def(&c.PollMax, 5*time.Second)
	def(&c.ActionTimeout, time.Hour)
	def(&c.CancelWait, time.Minute)
	def(&c.ResetWait, time.Minute)
	def(&c.MaxRetryAfter, 30*time.Second)
	def(&c.SignalCache, 250*time.Millisecond)
	if c.StatusPoll == nil {
		p := 2 * time.Second
		c.StatusPoll = &p
	}
	if c.PollMax < c.PollInterval {
		c.PollMax = c.PollInterval
	}
	if c.MaxRetries == 0 {
		c.MaxRetries = 5
	}
	c.PollRetry = c.PollRetry.Defaults()
	if c.UnknownPolls == 0 {
		c.UnknownPolls = 5
	}
	t := true
	for _, b := range []**bool{&c.StatusSignals, &c.ReadyInterlock, &c.ResetNode, &c.ConfigSettings} {
		if *b == nil {
			*b = &t
		}
	}
	return c
}

// Validate reports the first problem of c, naming the field and why; zero
// options are taken at their defaults first ([Config.Defaults]), so it
// accepts what a config file leaves out. It does no I/O: whether the node
// answers is New's business.
func (c Config) Validate() error {
	c = c.Defaults()
	if c.Adapter != Kind {
		return fmt.Errorf("madsci: adapter is %q, want %q", c.Adapter, Kind)
	}
	if c.Device.ID == "" {
		return fmt.Errorf("madsci: device.id is required")
	}
	u, err := url.Parse(c.NodeURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("madsci: node_url %q is not an http(s) URL", c.NodeURL)
	}
	switch c.Layout {
	case LayoutAuto, LayoutV5, LayoutLegacy:
	default:
		return fmt.Errorf("madsci: layout %q is not auto, v5 or legacy", c.Layout)
	}
	if c.Result != ResultEnvelope && c.Result != ResultJSON {
		return fmt.Errorf("madsci: result %q is not envelope or json_result", c.Result)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"request_timeout", c.RequestTimeout}, {"poll_interval", c.PollInterval}, {"poll_max", c.PollMax},
		{"action_timeout", c.ActionTimeout}, {"cancel_wait", c.CancelWait}, {"reset_wait", c.ResetWait},
		{"max_retry_after", c.MaxRetryAfter}} {
		if d.v <= 0 {
			return fmt.Errorf("madsci: %s must be positive, got %v", d.name, d.v)
		}
	}
	if *c.StatusPoll < 0 {
		return fmt.Errorf("madsci: status_poll must be >= 0 (0s disables the status watch), got %v", *c.StatusPoll)
	}
	if err := c.Link.Validate(); err != nil {
		return fmt.Errorf("madsci: %w", err)
	}
	if c.MaxRetries < 0 {
		return fmt.Errorf("madsci: max_retries must be >= 0, got %d", c.MaxRetries)
	}
	if c.PollFailures < 0 {
		return fmt.Errorf("madsci: poll_failures (deprecated: use poll_retry.window) must be >= 1 when set, got %d", c.PollFailures)
	}
	if err := c.PollRetry.Validate(); err != nil {
		return fmt.Errorf("madsci: %w", err)
	}
	if c.UnknownPolls < 1 {
		return fmt.Errorf("madsci: unknown_polls must be >= 1, got %d", c.UnknownPolls)
	}
	if *c.ReadyInterlock && !*c.StatusSignals {
		return fmt.Errorf("madsci: ready_interlock needs status_signals")
	}
	for _, name := range sortedNames(c.Actions) {
		if t := c.Actions[name].Timeout; t < 0 {
			return fmt.Errorf("madsci: actions.%s.timeout %v is negative", name, t)
		}
	}
	return nil
}

// pollRetry is the config's poll policy on the poll clock, with the
// deprecated poll_failures as its count bound.
func (c Config) pollRetry(clk clock.Clock) adapters.PollRetry {
	p := c.PollRetry
	p.MaxFailures = c.PollFailures
	if clk != nil {
		p.Clock = clk
	}
	return p.Defaults()
}
