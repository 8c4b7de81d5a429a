package opcua

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/gopcua/opcua/ua"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
)

// Security policies and modes the adapter speaks.
const (
	PolicyNone           = "None"
	PolicyBasic256Sha256 = "Basic256Sha256"
	ModeNone             = "None"
	ModeSignAndEncrypt   = "SignAndEncrypt"
	AuthAnonymous        = "anonymous"
	AuthUsername         = "username"
)

// Config is the whole `adapter: opcua` config file: the shared MHP part
// (device, safety: interlocks, watchdog_s) plus the connection and the item
// lists. Items embed the MHP item spec inline, so `limits:`, `approval:`,
// `interlocks:` read exactly as in a descriptor.
type Config struct {
	adapters.Common `yaml:",inline"`

	// Endpoint is the server's URL, opc.tcp://host:port[/path].
	Endpoint string    `yaml:"endpoint"`
	Security Security  `yaml:"security,omitempty"`
	Auth     Auth      `yaml:"auth,omitempty"`
	Timeouts Timeouts  `yaml:"timeouts,omitempty"`
	Reconn   Reconnect `yaml:"reconnect,omitempty"`

	Signals  []SignalItem  `yaml:"signals,omitempty"`
	Settings []SettingItem `yaml:"settings,omitempty"`
	Actions  []ActionItem  `yaml:"actions,omitempty"`
	// EStop is what safety/estop does at the server: a method call, writes
	// of safe values, or both (method first).
	EStop *EStopSpec `yaml:"estop,omitempty"`
}

// Security selects the secure channel and pins the server's certificate.
type Security struct {
	// Policy is None (default) or Basic256Sha256.
	Policy string `yaml:"policy,omitempty"`
	// Mode is None (with policy None) or SignAndEncrypt (with Basic256Sha256).
	Mode string `yaml:"mode,omitempty"`
	// ServerCertificate pins the server: "sha256:<hex>" (colons allowed) or a
	// path to the server's certificate (DER or PEM). gopcua does not check the
	// server certificate; the adapter refuses to connect when it differs.
	ServerCertificate string `yaml:"server_certificate,omitempty"`
	// ClientCertificate and ClientKey are this client's certificate and RSA
	// key (DER or PEM). Without them a Basic256Sha256 connection uses an
	// ephemeral self-signed certificate (the server must accept it).
	ClientCertificate string `yaml:"client_certificate,omitempty"`
	ClientKey         string `yaml:"client_key,omitempty"`
	// ApplicationURI is this client's application URI; it must match the
	// URI in the client certificate. Default urn:openmhp:mhp-go:opcua.
	ApplicationURI string `yaml:"application_uri,omitempty"`
}

// Auth is the user identity of the session.
type Auth struct {
	// Type is anonymous (default) or username.
	Type     string `yaml:"type,omitempty"`
	Username string `yaml:"username,omitempty"`
	Password string `yaml:"password,omitempty"`
	// PasswordEnv names an environment variable holding the password, so
	// that it stays out of the file.
	PasswordEnv string `yaml:"password_env,omitempty"`
}

// Timeouts bound the requests to the server, in seconds.
type Timeouts struct {
	// RequestS bounds each read, write and call; default 10.
	RequestS float64 `yaml:"request_s,omitempty"`
	// DialS bounds connecting; default 5.
	DialS float64 `yaml:"dial_s,omitempty"`
	// StartS is how long a program or function has to reach Running after
	// its start call was accepted; default 10.
	StartS float64 `yaml:"start_s,omitempty"`
	// CancelS is how long a job keeps waiting for the server's final state
	// after it sent Stop/Abort/Halt; default 30.
	CancelS float64 `yaml:"cancel_s,omitempty"`
	// PublishS is the subscription's publishing interval; default 0.05.
	PublishS float64 `yaml:"publish_s,omitempty"`
	// KeepAliveS is the subscription's keep-alive period (the server
	// answers a publish at least this often) and the connection probe
	// interval; default half of request_s, at most 5. It must stay below
	// request_s: gopcua waits for a publish answer max(keep-alive,
	// request_s), and a wait equal to the keep-alive races the server's
	// keep-alive and drops a healthy link.
	KeepAliveS float64 `yaml:"keepalive_s,omitempty"`
	// MaxAgeS is how old (since the subscription last heard from the
	// server) a served value may be before it reads unavailable; default
	// two keep-alive periods plus a publishing interval.
	MaxAgeS float64 `yaml:"max_age_s,omitempty"`
	// InterlockMaxAgeS, when set, serves an interlock from the subscription
	// when its value is known current within this bound (time since the
	// subscription last heard from the server plus a sampling interval);
	// older, it is read live. Default 0: interlocks are always read live,
	// since a subscription lags a change at the server (the conformance
	// suite's interlocks/read_live refuses an action right after the
	// backend opened the interlock).
	InterlockMaxAgeS float64 `yaml:"interlock_max_age_s,omitempty"`
}

// Reconnect is the backoff between connection attempts after a loss, in seconds.
type Reconnect struct {
	// MinS is the first wait; default 0.5.
	MinS float64 `yaml:"min_s,omitempty"`
	// MaxS caps the doubling waits; default 30.
	MaxS float64 `yaml:"max_s,omitempty"`
	// FailFast makes the driver's start fail when the server cannot be
	// reached. Default false: the driver starts and serves with the backend
	// reported down (ping, describe), and connects as soon as it can.
	FailFast bool `yaml:"fail_fast,omitempty"`
}

// SignalItem maps a variable onto a signal.
type SignalItem struct {
	mhp.Signal `yaml:",inline"`
	// Node is the variable's node id, e.g. "ns=2;s=Line1.Temperature".
	Node string `yaml:"node"`
	// StaleAfterS makes the signal unavailable when its value (by source
	// timestamp, else arrival) is older than this; zero: never stale while
	// the subscription is alive. Use it for values the server refreshes.
	StaleAfterS float64 `yaml:"stale_after_s,omitempty"`
}

// SettingItem maps a writable variable onto a setting.
type SettingItem struct {
	mhp.Setting `yaml:",inline"`
	Node        string `yaml:"node"`
	// DataType forces the variant type of writes (Boolean, SByte, Byte,
	// Int16, UInt16, Int32, UInt32, Int64, UInt64, Float, Double, String,
	// DateTime, LocalizedText) when the node's DataType is abstract or
	// custom; default: the DataType read from the server at connect.
	DataType string `yaml:"data_type,omitempty"`
	// ReadBack reads the value after a Good write to confirm it (applied);
	// default true. Off: a Good write is still "applied" (the server said so).
	ReadBack *bool `yaml:"read_back,omitempty"`
}

// ActionItem maps a method, a LADS program/function or a Part 10 program
// onto an action. Exactly one of Method, LADS, Program is set.
type ActionItem struct {
	mhp.Action `yaml:",inline"`
	Method     *MethodSpec  `yaml:"method,omitempty"`
	LADS       *LADSSpec    `yaml:"lads,omitempty"`
	Program    *ProgramSpec `yaml:"program,omitempty"`
	// TimeoutS bounds the whole job; zero: the driver's default.
	TimeoutS float64 `yaml:"timeout_s,omitempty"`
}

// MethodSpec is a method call: the action's params become the input
// arguments in declared order; the output arguments become the job result
// under Outputs' names (out0, out1, ... when unnamed).
type MethodSpec struct {
	Object  string   `yaml:"object"`
	Method  string   `yaml:"method"`
	Outputs []string `yaml:"outputs,omitempty"`
}

// LADSSpec runs a LADS functional unit's program (StartProgram) or plain
// Start as a job whose end comes from FunctionalUnitState/CurrentState.
type LADSSpec struct {
	// FunctionalUnit is the functional unit object (LADS FunctionalUnitType).
	FunctionalUnit string `yaml:"functional_unit"`
	// Start is the start method's browse name: StartProgram (default when
	// ProgramTemplate is set) or Start.
	Start string `yaml:"start,omitempty"`
	// ProgramTemplate is StartProgram's ProgramTemplateId; a param named
	// program_template overrides it.
	ProgramTemplate string `yaml:"program_template,omitempty"`
	// CancelWith is the method a cancel calls: Stop (default) or Abort.
	CancelWith string `yaml:"cancel_with,omitempty"`
}

// ProgramSpec runs an OPC UA Part 10 program (ProgramStateMachineType).
type ProgramSpec struct {
	// Node is the program state machine object.
	Node string `yaml:"node"`
	// Result is a variable the server sets when the program ends: a Boolean
	// (true = success), a StatusCode (Good = success) or a value compared
	// with Success. It resolves a Running -> Halted end we did not ask for.
	Result string `yaml:"result,omitempty"`
	// Success is the Result value meaning success when it is not a Boolean or StatusCode.
	Success any `yaml:"success,omitempty"`
	// Outputs are variables read into the job result when the program completes.
	Outputs map[string]string `yaml:"outputs,omitempty"`
}

// EStopSpec is the server-side emergency stop.
type EStopSpec struct {
	Method *MethodSpec `yaml:"method,omitempty"`
	Write  []SafeWrite `yaml:"write,omitempty"`
}

// SafeWrite is one node written with a safe value on estop.
type SafeWrite struct {
	Node  string `yaml:"node"`
	Value any    `yaml:"value"`
}

// Validate checks the config: endpoint, security combination, auth, every
// node id parses, one binding per action, estop present.
func (c Config) Validate() error {
	if c.Device.ID == "" {
		return fmt.Errorf("opcua: device.id is required")
	}
	if !strings.HasPrefix(c.Endpoint, "opc.tcp://") {
		return fmt.Errorf("opcua: endpoint %q is not an opc.tcp:// URL", c.Endpoint)
	}
	switch c.Security.Policy {
	case "", PolicyNone:
		if c.Security.Mode != "" && c.Security.Mode != ModeNone {
			return fmt.Errorf("opcua: security.mode %q needs policy %s", c.Security.Mode, PolicyBasic256Sha256)
		}
	case PolicyBasic256Sha256:
		if c.Security.Mode != "" && c.Security.Mode != ModeSignAndEncrypt {
			return fmt.Errorf("opcua: security.mode %q: %s is only used with SignAndEncrypt", c.Security.Mode, PolicyBasic256Sha256)
		}
	default:
		return fmt.Errorf("opcua: security.policy %q is not None or Basic256Sha256", c.Security.Policy)
	}
	if (c.Security.ClientCertificate == "") != (c.Security.ClientKey == "") {
		return fmt.Errorf("opcua: security.client_certificate and client_key go together")
	}
	if p := c.Security.ServerCertificate; strings.HasPrefix(strings.ToLower(p), "sha256:") {
		if _, err := parseFingerprint(p); err != nil {
			return fmt.Errorf("opcua: security.server_certificate: %w", err)
		}
	}
	switch c.Auth.Type {
	case "", AuthAnonymous:
		if c.Auth.Username != "" {
			return fmt.Errorf("opcua: auth.username given but auth.type is anonymous")
		}
	case AuthUsername:
		if c.Auth.Username == "" {
			return fmt.Errorf("opcua: auth.type username needs auth.username")
		}
		if c.Auth.Password == "" && c.Auth.PasswordEnv == "" {
			return fmt.Errorf("opcua: auth.type username needs auth.password or auth.password_env")
		}
	default:
		return fmt.Errorf("opcua: auth.type %q is not anonymous or username", c.Auth.Type)
	}
	for _, v := range []float64{c.Timeouts.RequestS, c.Timeouts.DialS, c.Timeouts.StartS, c.Timeouts.CancelS, c.Reconn.MinS, c.Reconn.MaxS,
		c.Timeouts.PublishS, c.Timeouts.KeepAliveS, c.Timeouts.MaxAgeS, c.Timeouts.InterlockMaxAgeS} {
		if v < 0 {
			return fmt.Errorf("opcua: negative timeout or backoff %v", v)
		}
	}
	if t := c.withDefaults().Timeouts; t.KeepAliveS >= t.RequestS || t.KeepAliveS < t.PublishS {
		return fmt.Errorf("opcua: timeouts.keepalive_s %g must be at least publish_s %g and below request_s %g (gopcua's publish wait is max(keep-alive, request_s); equal to the keep-alive it races the server and drops healthy links)",
			t.KeepAliveS, t.PublishS, t.RequestS)
	}
	node := func(what, s string) error {
		if s == "" {
			return fmt.Errorf("opcua: %s: node id is required", what)
		}
		if err := checkNodeID(s); err != nil {
			return fmt.Errorf("opcua: %s: node id %q: %w", what, s, err)
		}
		return nil
	}
	for _, s := range c.Signals {
		if err := node("signal "+s.Name, s.Node); err != nil {
			return err
		}
		if s.StaleAfterS < 0 {
			return fmt.Errorf("opcua: signal %s: stale_after_s is negative", s.Name)
		}
	}
	for _, s := range c.Settings {
		if err := node("setting "+s.Name, s.Node); err != nil {
			return err
		}
		if _, ok := typeNames[s.DataType]; s.DataType != "" && !ok {
			return fmt.Errorf("opcua: setting %s: data_type %q is not a built-in type this adapter writes", s.Name, s.DataType)
		}
	}
	for _, a := range c.Actions {
		n := 0
		if a.Method != nil {
			n++
			if err := node("action "+a.Name+" method.object", a.Method.Object); err != nil {
				return err
			}
			if err := node("action "+a.Name+" method.method", a.Method.Method); err != nil {
				return err
			}
		}
		if a.LADS != nil {
			n++
			if err := node("action "+a.Name+" lads.functional_unit", a.LADS.FunctionalUnit); err != nil {
				return err
			}
			switch a.LADS.Start {
			case "", "Start", "StartProgram":
			default:
				return fmt.Errorf("opcua: action %s: lads.start %q is not Start or StartProgram", a.Name, a.LADS.Start)
			}
			switch a.LADS.CancelWith {
			case "", "Stop", "Abort":
			default:
				return fmt.Errorf("opcua: action %s: lads.cancel_with %q is not Stop or Abort", a.Name, a.LADS.CancelWith)
			}
		}
		if a.Program != nil {
			n++
			if err := node("action "+a.Name+" program.node", a.Program.Node); err != nil {
				return err
			}
			if a.Program.Result != "" {
				if err := node("action "+a.Name+" program.result", a.Program.Result); err != nil {
					return err
				}
			}
			for k, v := range a.Program.Outputs {
				if err := node("action "+a.Name+" program.outputs."+k, v); err != nil {
					return err
				}
			}
		}
		if n != 1 {
			return fmt.Errorf("opcua: action %s: give exactly one of method, lads, program", a.Name)
		}
		if a.TimeoutS < 0 {
			return fmt.Errorf("opcua: action %s: timeout_s is negative", a.Name)
		}
	}
	if c.EStop != nil {
		if c.EStop.Method == nil && len(c.EStop.Write) == 0 {
			return fmt.Errorf("opcua: estop needs a method or writes")
		}
		if m := c.EStop.Method; m != nil {
			if err := node("estop method.object", m.Object); err != nil {
				return err
			}
			if err := node("estop method.method", m.Method); err != nil {
				return err
			}
		}
		for _, w := range c.EStop.Write {
			if err := node("estop write", w.Node); err != nil {
				return err
			}
			if w.Value == nil {
				return fmt.Errorf("opcua: estop write %s: value is required", w.Node)
			}
		}
	}
	return nil
}

// checkNodeID parses a node id of the config: "ns=<index>;..." or
// "nsu=<namespace URI>;..." (resolved against the server's namespace array
// at connect, so a file does not depend on namespace indexes).
func checkNodeID(s string) error {
	if rest, ok := strings.CutPrefix(s, "nsu="); ok {
		i := strings.Index(rest, ";")
		if i <= 0 {
			return fmt.Errorf("want nsu=<uri>;<id>")
		}
		_, err := ua.ParseNodeID("ns=1;" + rest[i+1:])
		return err
	}
	_, err := ua.ParseNodeID(s)
	return err
}

// withDefaults fills every zero option with its default.
func (c Config) withDefaults() Config {
	if c.Security.Policy == "" {
		c.Security.Policy = PolicyNone
	}
	if c.Security.Mode == "" {
		c.Security.Mode = ModeNone
		if c.Security.Policy == PolicyBasic256Sha256 {
			c.Security.Mode = ModeSignAndEncrypt
		}
	}
	if c.Security.ApplicationURI == "" {
		c.Security.ApplicationURI = "urn:openmhp:mhp-go:opcua"
	}
	if c.Auth.Type == "" {
		c.Auth.Type = AuthAnonymous
	}
	def := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Timeouts.RequestS, 10)
	def(&c.Timeouts.DialS, 5)
	def(&c.Timeouts.StartS, 10)
	def(&c.Timeouts.CancelS, 30)
	def(&c.Timeouts.PublishS, 0.05)
	def(&c.Timeouts.KeepAliveS, min(c.Timeouts.RequestS/2, 5))
	def(&c.Timeouts.MaxAgeS, 2*c.Timeouts.KeepAliveS+c.Timeouts.PublishS)
	def(&c.Reconn.MinS, 0.5)
	def(&c.Reconn.MaxS, 30)
	if c.Reconn.MaxS < c.Reconn.MinS {
		c.Reconn.MaxS = c.Reconn.MinS
	}
	for i := range c.Actions {
		if l := c.Actions[i].LADS; l != nil {
			if l.Start == "" {
				l.Start = "Start"
				if l.ProgramTemplate != "" {
					l.Start = "StartProgram"
				}
			}
			if l.CancelWith == "" {
				l.CancelWith = "Stop"
			}
		}
	}
	return c
}

// typeNames are the built-in types a setting's data_type may force.
var typeNames = map[string]ua.TypeID{
	"Boolean": ua.TypeIDBoolean, "SByte": ua.TypeIDSByte, "Byte": ua.TypeIDByte, "Int16": ua.TypeIDInt16,
	"UInt16": ua.TypeIDUint16, "Int32": ua.TypeIDInt32, "UInt32": ua.TypeIDUint32, "Int64": ua.TypeIDInt64,
	"UInt64": ua.TypeIDUint64, "Float": ua.TypeIDFloat, "Double": ua.TypeIDDouble, "String": ua.TypeIDString,
	"DateTime": ua.TypeIDDateTime, "LocalizedText": ua.TypeIDLocalizedText,
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// password returns the configured password, from the environment when
// password_env is set.
func (a Auth) password() (string, error) {
	if a.PasswordEnv != "" {
		p, ok := os.LookupEnv(a.PasswordEnv)
		if !ok {
			return "", fmt.Errorf("opcua: auth.password_env %s is not set", a.PasswordEnv)
		}
		return p, nil
	}
	return a.Password, nil
}

// parseFingerprint parses "sha256:AB:CD..." or "sha256:abcd..." into 32 bytes.
func parseFingerprint(s string) ([]byte, error) {
	h := strings.ToLower(strings.TrimSpace(s))
	h = strings.TrimPrefix(h, "sha256:")
	h = strings.NewReplacer(":", "", " ", "").Replace(h)
	b, err := hex.DecodeString(h)
	if err != nil || len(b) != sha256.Size {
		return nil, fmt.Errorf("%q is not a SHA-256 fingerprint (64 hex digits)", s)
	}
	return b, nil
}

// Fingerprint returns the "sha256:..." pin of a DER certificate, the form
// security.server_certificate takes.
func Fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	return "sha256:" + hex.EncodeToString(sum[:])
}
