package sila2

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/binding"
	"gopkg.in/yaml.v3"
)

// Kind is the adapter kind of SiLA 2 config files (`adapter: sila2`).
const Kind = "sila2"

// Config is a SiLA 2 adapter config file:
//
//	adapter: sila2
//	device: {id: tc-01, class: incubator}
//	endpoint: 192.168.1.20:50052
//	tls: {ca: server-ca.pem}            # or pin_sha256: <hex>, or insecure_plaintext: true;
//	                                    # server_name: also checks the name (CN-only certificates by CN)
//	features: [TemperatureController]   # expose every property and command of these
//	commands:
//	  - command: TemperatureController/ControlTemperature
//	    approval: confirm
//	    params: {target_temperature: {limits: {max: 340}}}
//	estop: TemperatureController/EmergencyStop
//	lock: lease                         # or lifetime, none, {mode: lease, timeout_s: 30}
//
// Items are named by the snake_case of their SiLA identifiers unless an
// entry renames them.
type Config struct {
	adapters.Common `yaml:",inline"`
	// Link says how the adapter treats a backend that is not there: start
	// anyway (default) or fail fast, the reconnect backoff, the descriptor
	// cache (see [adapters.LinkConfig]).
	Link adapters.LinkConfig `yaml:"link,omitempty"`

	// Endpoint is the server's host:port.
	Endpoint string        `yaml:"endpoint"`
	TLS      TLSFileConfig `yaml:"tls"`
	// CallTimeoutS bounds each unary call; default 10.
	CallTimeoutS float64 `yaml:"call_timeout_s,omitempty"`

	// Features whose properties and commands are all exposed (identifiers or
	// fully qualified ids). When it and Properties/Commands are all empty,
	// every feature outside the core categories is exposed.
	Features   []string        `yaml:"features,omitempty"`
	Properties []PropertyEntry `yaml:"properties,omitempty"`
	Commands   []CommandEntry  `yaml:"commands,omitempty"`

	// DefaultApproval is the approval of commands no entry sets; default confirm.
	DefaultApproval mhp.Approval `yaml:"default_approval,omitempty"`
	// EStop names an unobservable command without parameters that stops the
	// instrument ("Feature/Command"); it becomes the estop hook, not an action.
	EStop string `yaml:"estop,omitempty"`
	// Metadata are values sent as SiLA metadata, keyed by fully qualified
	// metadata id (<feature>/Metadata/<Id>), on the calls the server says
	// each affects.
	Metadata map[string]any `yaml:"metadata,omitempty"`
	// Lock says how the server's LockController lock follows the driver:
	// per MHP lease (default when the server has LockController), for the
	// driver's lifetime, or never.
	Lock *LockConfig `yaml:"lock,omitempty"`

	// CancelledErrors are defined execution errors ("Feature/ErrorId" or
	// fully qualified) by which the server says a command stopped because it
	// was cancelled (by CancelCommand or by the estop command). After a job
	// cancel or estop, a command ending with one of them ends the job
	// cancelled; a command ending so after a successful CancelCommand ends
	// cancelled whatever the error.
	CancelledErrors []string `yaml:"cancelled_errors,omitempty"`

	// CancelWaitS bounds how long a cancelled observable command is followed
	// for its real end state; default 30.
	CancelWaitS float64 `yaml:"cancel_wait_s,omitempty"`
	// ResubscribeS is how long a broken _Info stream is retried (also bounded
	// by the lifetime of execution); default 10.
	ResubscribeS float64 `yaml:"resubscribe_s,omitempty"`
	// PollIntervalS is how often subscribed unobservable properties are read; default 1.
	PollIntervalS float64 `yaml:"poll_interval_s,omitempty"`
	// JobTimeoutS bounds actions that set no timeout; default 1 h.
	JobTimeoutS float64 `yaml:"job_timeout_s,omitempty"`
}

// TLSFileConfig is the tls block: a CA file, a certificate pin or plaintext.
type TLSFileConfig struct {
	// CA is a PEM file (relative to the config file) the server's chain must end in.
	CA string `yaml:"ca,omitempty"`
	// PinSHA256 is the hex SHA-256 of the server certificate.
	PinSHA256 string `yaml:"pin_sha256,omitempty"`
	// ServerName, when set, is checked against the server certificate's
	// names once its chain (ca) or pin is verified: a certificate with DNS
	// or IP SANs by its SANs only (server_name "SiLA2" never matches a
	// certificate whose SANs lack it, whatever its CN); a certificate with
	// no SAN — what SiLA 2 servers usually have, CN=SiLA2 and nothing else
	// — by its CN, exactly (case-insensitive, no wildcards; an IP literal
	// compared as an IP). A mismatch refuses the connection naming the
	// expected name and the certificate's CN and SANs.
	ServerName string `yaml:"server_name,omitempty"`
	// InsecurePlaintext talks plaintext (legacy v1.0 servers only).
	InsecurePlaintext bool `yaml:"insecure_plaintext,omitempty"`

	caPEM []byte
}

// Lock modes: how the adapter uses the server's LockController feature.
const (
	// LockLease locks the server while a session holds the MHP lease: each
	// lease takes a fresh lock identifier, and releasing the lease (or its
	// expiry, the watchdog, Close) unlocks. The default when the server
	// implements LockController and no lock block is given.
	LockLease = "lease"
	// LockLifetime locks the server from Start to Close, whatever the leases.
	LockLifetime = "lifetime"
	// LockNone never locks the server.
	LockNone = "none"
)

// DefaultLeaseLockTimeoutS is the LockServer timeout of lease locks when
// the config sets none: a driver that dies without unlocking leaves the
// server locked at most this long.
const DefaultLeaseLockTimeoutS = 60

// LockConfig is the lock block. It is either a mode alone
// (`lock: lease`, `lock: lifetime`, `lock: none`) or a mapping
// (`lock: {mode: lease, timeout_s: 30}`); a mapping without mode is the
// lifetime lock (the meaning of lock blocks before modes existed).
type LockConfig struct {
	// Mode is lease, lifetime or none; see [LockLease], [LockLifetime], [LockNone].
	Mode string `yaml:"mode,omitempty"`
	// Identifier is the lock secret of the lifetime lock; default a random
	// UUID. Lease locks always take a fresh random identifier per lease.
	Identifier string `yaml:"identifier,omitempty"`
	// TimeoutS is passed to LockServer: the server ends the lock after this
	// much inactivity. 0 means the lock never times out; lifetime locks
	// default to 0, lease locks to [DefaultLeaseLockTimeoutS]. With a timeout
	// the driver checks the lock every third of it (with a call that
	// carries the lock identifier, which keeps the lock active) and locks
	// again if the server let it go.
	TimeoutS int64 `yaml:"timeout_s,omitempty"`
}

// UnmarshalYAML reads the scalar (mode) or mapping form, strictly.
func (l *LockConfig) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		*l = LockConfig{Mode: strings.TrimSpace(n.Value)}
		return nil
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			switch k := n.Content[i].Value; k {
			case "mode", "identifier", "timeout_s":
			default:
				return fmt.Errorf("line %d: lock: field %s not found (want mode, identifier, timeout_s)", n.Content[i].Line, k)
			}
		}
		type plain LockConfig
		var p plain
		if err := n.Decode(&p); err != nil {
			return err
		}
		*l = LockConfig(p)
		if l.Mode == "" {
			l.Mode = LockLifetime
		}
		return nil
	}
	return fmt.Errorf("line %d: lock: want lease, lifetime, none or a mapping", n.Line)
}

// validate checks the lock block alone.
func (l *LockConfig) validate() error {
	switch l.Mode {
	case LockLease, LockLifetime, LockNone:
	case "":
		// A LockConfig built in Go with fields but no mode: the lifetime lock.
	default:
		return fmt.Errorf("sila2: lock: mode %q is not lease, lifetime or none", l.Mode)
	}
	if l.TimeoutS < 0 {
		return fmt.Errorf("sila2: lock: timeout_s %d is negative", l.TimeoutS)
	}
	if l.Mode == LockLease && l.Identifier != "" {
		return fmt.Errorf("sila2: lock: identifier applies to the lifetime lock; lease locks take a fresh identifier per lease")
	}
	if l.Mode == LockNone && (l.Identifier != "" || l.TimeoutS != 0) {
		return fmt.Errorf("sila2: lock: mode none takes no identifier or timeout_s")
	}
	return nil
}

// lockMode is the mode the config asks for: "" when it names none (the
// adapter then picks lease if the server implements LockController).
func (c Config) lockMode() string {
	if c.Lock == nil {
		return ""
	}
	if c.Lock.Mode == "" {
		return LockLifetime
	}
	return c.Lock.Mode
}

// PropertyEntry exposes (or hides) one property as a signal.
type PropertyEntry struct {
	// Property is "Feature/Property" (identifier or fully qualified feature id).
	Property string `yaml:"property"`
	Signal   string `yaml:"signal,omitempty"`
	Unit     string `yaml:"unit,omitempty"`
	Notes    string `yaml:"notes,omitempty"`
	Hide     bool   `yaml:"hide,omitempty"` // RequiredForRecovery: safety/reset refuses while this signal is
	// unreadable (interlock signals always are).
	RequiredForRecovery bool `yaml:"required_for_recovery,omitempty"`
}

// ParamEntry narrows one action parameter.
type ParamEntry struct {
	Limits *mhp.Limits `yaml:"limits,omitempty"`
	Unit   string      `yaml:"unit,omitempty"`
	Notes  string      `yaml:"notes,omitempty"`
}

// CommandEntry exposes (or hides) one command as an action, or a
// one-parameter unobservable command as a setting.
type CommandEntry struct {
	// Command is "Feature/Command".
	Command string `yaml:"command"`
	// Action names the action (default snake_case of the identifier).
	Action string `yaml:"action,omitempty"`
	// Setting makes the command a setting of this name.
	Setting    string       `yaml:"setting,omitempty"`
	Hide       bool         `yaml:"hide,omitempty"`
	Approval   mhp.Approval `yaml:"approval,omitempty"`
	Interlocks []string     `yaml:"interlocks,omitempty"`
	Notes      string       `yaml:"notes,omitempty"`
	// Limits narrow a setting's value.
	Limits *mhp.Limits `yaml:"limits,omitempty"`
	// Unit overrides a setting's unit.
	Unit string `yaml:"unit,omitempty"`
	// DuringJob lets a setting be written while a job runs.
	DuringJob bool `yaml:"during_job,omitempty"`
	// Params narrow an action's parameters, by MHP parameter name.
	Params map[string]ParamEntry `yaml:"params,omitempty"`
	// Duration overrides short (unobservable) / long (observable).
	Duration   string `yaml:"duration,omitempty"`
	Concurrent bool   `yaml:"concurrent,omitempty"`
	// TimeoutS bounds the action's job.
	TimeoutS float64 `yaml:"timeout_s,omitempty"`
}

func approvalOK(a mhp.Approval) bool {
	switch a {
	case "", mhp.ApprovalAuto, mhp.ApprovalConfirm, mhp.ApprovalForbid:
		return true
	}
	return false
}

// Validate checks what can be checked without the server (no I/O): each
// error names the field and why. [New] calls it again.
func (c Config) Validate() error {
	if c.Device.ID == "" {
		return fmt.Errorf("sila2: device.id is required")
	}
	if strings.TrimSpace(c.Endpoint) == "" {
		return fmt.Errorf("sila2: endpoint (host:port) is required")
	}
	t := c.TLS
	if t.InsecurePlaintext && (t.CA != "" || t.PinSHA256 != "") {
		return fmt.Errorf("sila2: tls: insecure_plaintext excludes ca and pin_sha256")
	}
	if !t.InsecurePlaintext && t.CA == "" && t.PinSHA256 == "" && len(t.caPEM) == 0 {
		return fmt.Errorf("sila2: tls: give ca or pin_sha256 (SiLA 2 v1.1 requires TLS), or insecure_plaintext: true for a legacy server")
	}
	if !approvalOK(c.DefaultApproval) {
		return fmt.Errorf("sila2: default_approval %q is not auto, confirm or forbid", c.DefaultApproval)
	}
	for _, v := range []float64{c.CallTimeoutS, c.CancelWaitS, c.ResubscribeS, c.PollIntervalS, c.JobTimeoutS} {
		if v < 0 {
			return fmt.Errorf("sila2: timeouts and intervals must not be negative")
		}
	}
	for i, p := range c.Properties {
		if _, _, err := splitRef(p.Property); err != nil {
			return fmt.Errorf("sila2: properties[%d]: %w", i, err)
		}
	}
	for i, e := range c.Commands {
		if _, _, err := splitRef(e.Command); err != nil {
			return fmt.Errorf("sila2: commands[%d]: %w", i, err)
		}
		if e.Action != "" && e.Setting != "" {
			return fmt.Errorf("sila2: commands[%d] %s: action and setting exclude each other", i, e.Command)
		}
		if !approvalOK(e.Approval) {
			return fmt.Errorf("sila2: commands[%d] %s: approval %q is not auto, confirm or forbid", i, e.Command, e.Approval)
		}
		if e.Duration != "" && e.Duration != mhp.DurationShort && e.Duration != mhp.DurationLong {
			return fmt.Errorf("sila2: commands[%d] %s: duration %q is not short or long", i, e.Command, e.Duration)
		}
		if e.Setting == "" && (e.Limits != nil || e.DuringJob || e.Unit != "") {
			return fmt.Errorf("sila2: commands[%d] %s: limits, unit and during_job apply to settings; use params for an action", i, e.Command)
		}
		if e.Setting != "" && len(e.Params) > 0 {
			return fmt.Errorf("sila2: commands[%d] %s: params apply to actions; use limits for a setting", i, e.Command)
		}
	}
	if c.EStop != "" {
		if _, _, err := splitRef(c.EStop); err != nil {
			return fmt.Errorf("sila2: estop: %w", err)
		}
	}
	if err := c.Link.Validate(); err != nil {
		return fmt.Errorf("sila2: %w", err)
	}
	if c.Lock != nil {
		if err := c.Lock.validate(); err != nil {
			return err
		}
	}
	for k := range c.Metadata {
		if !strings.Contains(strings.ToLower(k), "/metadata/") {
			return fmt.Errorf("sila2: metadata key %q is not <feature id>/Metadata/<Identifier>", k)
		}
	}
	return nil
}

// splitRef splits "Feature/Item", "org/cat/Feature/v1/Item" or a fully
// qualified ".../Command/Item" / ".../Property/Item" into feature and item.
func splitRef(ref string) (feature, item string, err error) {
	ref = strings.TrimSpace(ref)
	for _, kind := range []string{"/Command/", "/Property/"} {
		if i := strings.Index(ref, kind); i > 0 {
			return ref[:i], ref[i+len(kind):], nil
		}
	}
	i := strings.LastIndexByte(ref, '/')
	if i <= 0 || i == len(ref)-1 {
		return "", "", fmt.Errorf("%q is not Feature/Item", ref)
	}
	return ref[:i], ref[i+1:], nil
}

func seconds(s float64, def time.Duration) time.Duration {
	if s <= 0 {
		return def
	}
	return time.Duration(s * float64(time.Second))
}

// Load decodes a config file strictly (an unknown field is an error naming
// its line), resolves link.descriptor_cache against the file's folder,
// reads the tls.ca file from there and validates the result.
func Load(src adapters.Source) (Config, error) {
	var c Config
	if err := src.Decode(&c); err != nil {
		return Config{}, err
	}
	if c.Adapter != "" && c.Adapter != Kind {
		return Config{}, fmt.Errorf("%s: adapter %q is not %s", src.Path, c.Adapter, Kind)
	}
	c.Link.DescriptorCache = src.Resolve(c.Link.DescriptorCache)
	if c.TLS.CA != "" {
		pem, err := os.ReadFile(src.Resolve(c.TLS.CA))
		if err != nil {
			return Config{}, fmt.Errorf("%s: tls.ca: %w", src.Path, err)
		}
		c.TLS.caPEM = pem
	}
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("%s: %w", src.Path, err)
	}
	return c, nil
}

// WithCAPEM sets the CA certificates directly (instead of the ca file
// [Load] reads), for a [Config] built in Go.
func (t *TLSFileConfig) WithCAPEM(pem []byte) { t.caPEM = pem }

func (t TLSFileConfig) client() TLSConfig {
	return TLSConfig{CAPEM: t.caPEM, PinSHA256: t.PinSHA256, ServerName: t.ServerName, InsecurePlaintext: t.InsecurePlaintext}
}

// Register registers the [Kind] of SiLA 2 config files with r: [Load],
// then [New] with the file's Refine (`mhp serve instrument.yaml`).
func Register(r *adapters.Registry) error {
	if err := r.RegisterDiscovery(Kind, discoveryEntry); err != nil { // mhp init (discoverconfig.go)
		return err
	}
	return r.Register(Kind, func(ctx context.Context, src adapters.Source) (*binding.Driver, error) {
		cfg, err := Load(src)
		if err != nil {
			return nil, err
		}
		return New(ctx, cfg, Options{Options: adapters.Options{Refine: src.Refine}})
	})
}
