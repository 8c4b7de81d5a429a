package mqtt

import (
	"fmt"
	"strings"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
)

// Config is an MQTT device: the broker connection and how each signal,
// setting, action and the estop map onto topics. It is the `adapter: mqtt`
// config file (see examples/mqtt-sensor/sensor.yaml).
type Config struct {
	adapters.Common `yaml:",inline"`
	// Link says how the adapter treats a broker that is not there: start
	// anyway (default) or fail fast, and the reconnect backoff (see
	// adapters.LinkConfig; descriptor_cache does not apply: the file is the
	// whole description).
	Link adapters.LinkConfig `yaml:"link,omitempty"`

	// Broker is the broker address (mqtt://host:1883, tcp://, mqtts://, ssl://, ws://).
	Broker string `yaml:"broker"`
	// ClientID is our MQTT client id; default "mhp-<device id>".
	ClientID string `yaml:"client_id,omitempty"`
	Username string `yaml:"username,omitempty"`
	// Password, or PasswordEnv naming the environment variable holding it.
	Password    string `yaml:"password,omitempty"`
	PasswordEnv string `yaml:"password_env,omitempty"`
	// QoS for commands; 1 (default) or 2.
	QoS int `yaml:"qos,omitempty"`
	// ConnectTimeout bounds the first connection in Start and each publish
	// acknowledgement; default 10s.
	ConnectTimeout time.Duration `yaml:"connect_timeout,omitempty"`

	// Availability is the device's online/offline topic (its last will).
	Availability *Availability `yaml:"availability,omitempty"`

	Signals  []SignalConfig  `yaml:"signals,omitempty"`
	Settings []SettingConfig `yaml:"settings,omitempty"`
	Actions  []ActionConfig  `yaml:"actions,omitempty"`
	// EStop is the device's stop topic; without it the device has no estop.
	EStop *EStopConfig `yaml:"estop,omitempty"`
}

// Availability maps the device's availability topic: while it reads
// Offline (typically the device's retained last will) every signal is
// unavailable, so every interlock is open.
type Availability struct {
	Topic string `yaml:"topic"`
	// Path extracts the state from a JSON payload; empty means the raw payload.
	Path    string `yaml:"path,omitempty"`
	Online  string `yaml:"online,omitempty"`  // default "online"
	Offline string `yaml:"offline,omitempty"` // default "offline"
	// AssumeOnline treats the device as online until the topic says
	// otherwise (for devices that publish only their will); by default the
	// device is unavailable until it reports Online.
	AssumeOnline bool `yaml:"assume_online,omitempty"`
}

// SignalConfig maps a signal onto a topic and a payload extractor.
type SignalConfig struct {
	mhp.Signal `yaml:",inline"`
	// Topic the value arrives on (retained values count: they are the last value).
	Topic string `yaml:"topic"`
	// Path is where the value is in a JSON payload: a JSON pointer ("/value")
	// or dotted ("sensor.temp"). Empty: the raw payload parsed by the type.
	Path string `yaml:"path,omitempty"`
	// StaleAfter makes the signal unavailable when no message came for this
	// long; zero never.
	StaleAfter time.Duration `yaml:"stale_after,omitempty"`
}

// SettingConfig maps a setting onto a command topic, with an optional
// acknowledgement: a reply carrying our id (Ack) or a state topic that must
// show the target (StateTopic). Without either the write answers "sent".
type SettingConfig struct {
	mhp.Setting  `yaml:",inline"`
	CommandTopic string `yaml:"command_topic"`
	// ValueField puts the value in a JSON object {"<value_field>": v}; empty
	// sends the bare value (required, default "value", when Ack is set: the
	// object then also carries our id).
	ValueField string `yaml:"value_field,omitempty"`
	// Raw sends a scalar as plain text (42.5, ON) instead of JSON.
	Raw bool `yaml:"raw,omitempty"`
	// Ack is a reply topic where the device answers with our id.
	Ack *Ack `yaml:"ack,omitempty"`
	// StateTopic/StatePath: the device's state topic, watched after the write
	// until it shows the target value.
	StateTopic string `yaml:"state_topic,omitempty"`
	StatePath  string `yaml:"state_path,omitempty"`
	// Timeout is how long to wait for the ack or the state; default 5s. A
	// missing ack is an unknown outcome (fault); a state that does not show
	// the target in time answers "sent".
	Timeout time.Duration `yaml:"timeout,omitempty"`
}

// Ack describes replies that carry our request id.
type Ack struct {
	Topic       string `yaml:"topic"`
	IDField     string `yaml:"id_field,omitempty"`     // default "id"
	StatusField string `yaml:"status_field,omitempty"` // default "status"
	ErrorField  string `yaml:"error_field,omitempty"`  // default "error"
	// OK statuses confirm (default ok, applied, done); Refused statuses say
	// nothing took effect (default refused, rejected). Any other status, or
	// an error without a status, is an unknown outcome.
	OK      []string `yaml:"ok,omitempty"`
	Refused []string `yaml:"refused,omitempty"`
}

// ActionConfig maps an action onto a command carrying a job id, replies on
// ReplyTopic with the same id, and an optional cancel topic.
type ActionConfig struct {
	mhp.Action   `yaml:",inline"`
	CommandTopic string `yaml:"command_topic"`
	// ReplyTopic (a filter: + and # allowed) carries progress and terminal
	// messages with the job id. Required: a fire-and-forget command can never
	// prove that the work was done.
	ReplyTopic string `yaml:"reply_topic"`
	// CancelTopic receives {"<job_field>": id}; only then is the action cancellable.
	CancelTopic   string `yaml:"cancel_topic,omitempty"`
	JobField      string `yaml:"job_field,omitempty"`      // default "job"
	StatusField   string `yaml:"status_field,omitempty"`   // default "status"
	ProgressField string `yaml:"progress_field,omitempty"` // default "progress" (0..1)
	ErrorField    string `yaml:"error_field,omitempty"`    // default "error"
	MessageField  string `yaml:"message_field,omitempty"`  // default "message"
	// ResultField is where the result is in the terminal reply; empty: the
	// whole reply without the job and status fields.
	ResultField string `yaml:"result_field,omitempty"`
	// Statuses names the terminal statuses.
	Statuses Statuses `yaml:"statuses,omitempty"`
	// Timeout is the job deadline: no terminal message by then is an
	// unknown outcome (fault); default the driver's job timeout.
	Timeout time.Duration `yaml:"timeout,omitempty"`
	// CancelTimeout is how long to wait for the device's terminal message
	// after a cancel or estop; default 10s.
	CancelTimeout time.Duration `yaml:"cancel_timeout,omitempty"`
}

// Statuses are the status names that end a job. Every other status (and a
// message with only progress) is progress.
type Statuses struct {
	Done      []string `yaml:"done,omitempty"`      // default done, succeeded
	Failed    []string `yaml:"failed,omitempty"`    // default failed, error, aborted
	Cancelled []string `yaml:"cancelled,omitempty"` // default cancelled, canceled
	// Rejected: the device refused before starting (not_started); default rejected, refused.
	Rejected []string `yaml:"rejected,omitempty"`
}

// EStopConfig is the stop topic: published at QoS 1 (or 2), never retained
// (a retained stop would fire again at every reconnect).
type EStopConfig struct {
	Topic string `yaml:"topic"`
	// Payload sent when there is no Ack; default {"estop":true,"id":"<id>"}.
	Payload string `yaml:"payload,omitempty"`
	QoS     int    `yaml:"qos,omitempty"`
	// Ack, when set, makes the stop succeed only when the device answers ok.
	Ack *Ack `yaml:"ack,omitempty"`
	// Timeout bounds the publish and the ack; default 5s.
	Timeout time.Duration `yaml:"timeout,omitempty"`
}

func (a *Ack) withDefaults() {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&a.IDField, "id")
	def(&a.StatusField, "status")
	def(&a.ErrorField, "error")
	if len(a.OK) == 0 {
		a.OK = []string{"ok", "applied", "done"}
	}
	if len(a.Refused) == 0 {
		a.Refused = []string{"refused", "rejected"}
	}
}

// withDefaults returns a copy of c with every default filled in.
func (c Config) withDefaults() Config {
	if c.ClientID == "" && c.Device.ID != "" {
		c.ClientID = "mhp-" + c.Device.ID
	}
	if c.QoS == 0 {
		c.QoS = 1
	}
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = 10 * time.Second
	}
	if av := c.Availability; av != nil {
		cp := *av
		if cp.Online == "" {
			cp.Online = "online"
		}
		if cp.Offline == "" {
			cp.Offline = "offline"
		}
		c.Availability = &cp
	}
	c.Settings = append([]SettingConfig(nil), c.Settings...)
	for i := range c.Settings {
		s := &c.Settings[i]
		if s.Timeout <= 0 {
			s.Timeout = 5 * time.Second
		}
		if s.Ack != nil {
			cp := *s.Ack
			cp.withDefaults()
			s.Ack = &cp
			if s.ValueField == "" {
				s.ValueField = "value"
			}
		}
	}
	c.Actions = append([]ActionConfig(nil), c.Actions...)
	for i := range c.Actions {
		a := &c.Actions[i]
		def := func(s *string, v string) {
			if *s == "" {
				*s = v
			}
		}
		def(&a.JobField, "job")
		def(&a.StatusField, "status")
		def(&a.ProgressField, "progress")
		def(&a.ErrorField, "error")
		def(&a.MessageField, "message")
		st := &a.Statuses
		if len(st.Done) == 0 {
			st.Done = []string{"done", "succeeded"}
		}
		if len(st.Failed) == 0 {
			st.Failed = []string{"failed", "error", "aborted"}
		}
		if len(st.Cancelled) == 0 {
			st.Cancelled = []string{"cancelled", "canceled"}
		}
		if len(st.Rejected) == 0 {
			st.Rejected = []string{"rejected", "refused"}
		}
		if a.CancelTimeout <= 0 {
			a.CancelTimeout = 10 * time.Second
		}
		a.Cancellable = a.CancelTopic != ""
	}
	if e := c.EStop; e != nil {
		cp := *e
		if cp.QoS == 0 {
			cp.QoS = 1
		}
		if cp.Timeout <= 0 {
			cp.Timeout = 5 * time.Second
		}
		if cp.Ack != nil {
			ack := *cp.Ack
			ack.withDefaults()
			cp.Ack = &ack
		}
		c.EStop = &cp
	}
	return c
}

// Validate reports the first problem with the config, naming the field
// and why. It does no I/O: [New] reads password_env and dials the broker.
func (c Config) Validate() error {
	if c.Device.ID == "" {
		return fmt.Errorf("mqtt: device.id is required")
	}
	if _, err := BrokerURL(c.Broker); err != nil {
		return err
	}
	if c.QoS < 0 || c.QoS > 2 {
		return fmt.Errorf("mqtt: qos %d is not 0, 1 or 2", c.QoS)
	}
	if av := c.Availability; av != nil {
		if err := checkFilter("availability.topic", av.Topic); err != nil {
			return err
		}
		if av.Online != "" && av.Online == av.Offline {
			return fmt.Errorf("mqtt: availability: online and offline are both %q", av.Online)
		}
	}
	for _, s := range c.Signals {
		if err := checkFilter(fmt.Sprintf("signal %q topic", s.Name), s.Topic); err != nil {
			return err
		}
	}
	for _, s := range c.Settings {
		if err := checkTopic(fmt.Sprintf("setting %q command_topic", s.Name), s.CommandTopic); err != nil {
			return err
		}
		if s.Ack != nil {
			if err := checkFilter(fmt.Sprintf("setting %q ack.topic", s.Name), s.Ack.Topic); err != nil {
				return err
			}
			if s.Raw {
				return fmt.Errorf("mqtt: setting %q: raw payloads cannot carry the id an ack needs", s.Name)
			}
		}
		if s.StateTopic != "" {
			if err := checkFilter(fmt.Sprintf("setting %q state_topic", s.Name), s.StateTopic); err != nil {
				return err
			}
		}
		if s.Ack != nil && s.StateTopic != "" {
			return fmt.Errorf("mqtt: setting %q: choose ack or state_topic, not both", s.Name)
		}
	}
	for _, a := range c.Actions {
		if err := checkTopic(fmt.Sprintf("action %q command_topic", a.Name), a.CommandTopic); err != nil {
			return err
		}
		if a.ReplyTopic == "" {
			return fmt.Errorf("mqtt: action %q: reply_topic is required (a fire-and-forget command never proves the work was done; model it as a setting with a state_topic)", a.Name)
		}
		if err := checkFilter(fmt.Sprintf("action %q reply_topic", a.Name), a.ReplyTopic); err != nil {
			return err
		}
		if a.Cancellable && a.CancelTopic == "" {
			return fmt.Errorf("mqtt: action %q: cancellable needs a cancel_topic", a.Name)
		}
		if a.CancelTopic != "" {
			if err := checkTopic(fmt.Sprintf("action %q cancel_topic", a.Name), a.CancelTopic); err != nil {
				return err
			}
		}
		if a.Pausable {
			return fmt.Errorf("mqtt: action %q: pause is not supported over MQTT", a.Name)
		}
	}
	if e := c.EStop; e != nil {
		if err := checkTopic("estop.topic", e.Topic); err != nil {
			return err
		}
		if e.QoS < 0 || e.QoS > 2 {
			return fmt.Errorf("mqtt: estop.qos %d is not 1 or 2 (0 means the default, 1)", e.QoS)
		}
		if e.Ack != nil {
			if err := checkFilter("estop.ack.topic", e.Ack.Topic); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkTopic accepts a topic to publish to: non-empty, no wildcards.
func checkTopic(what, t string) error {
	if t == "" {
		return fmt.Errorf("mqtt: %s is required", what)
	}
	if strings.ContainsAny(t, "+#\x00") {
		return fmt.Errorf("mqtt: %s %q: a publish topic cannot hold + or #", what, t)
	}
	return nil
}

// checkFilter accepts a subscription filter: + whole levels, # last.
func checkFilter(what, f string) error {
	if f == "" {
		return fmt.Errorf("mqtt: %s is required", what)
	}
	levels := strings.Split(f, "/")
	for i, l := range levels {
		if strings.Contains(l, "#") && (l != "#" || i != len(levels)-1) {
			return fmt.Errorf("mqtt: %s %q: # must be a whole, last level", what, f)
		}
		if strings.Contains(l, "+") && l != "+" {
			return fmt.Errorf("mqtt: %s %q: + must be a whole level", what, f)
		}
	}
	return nil
}

// Match reports whether topic matches the subscription filter.
func Match(filter, topic string) bool {
	fl := strings.Split(filter, "/")
	tl := strings.Split(topic, "/")
	for i, f := range fl {
		if f == "#" {
			return !strings.HasPrefix(topic, "$") || i > 0
		}
		if i >= len(tl) {
			return false
		}
		if f == "+" {
			if i == 0 && strings.HasPrefix(tl[0], "$") {
				return false
			}
			continue
		}
		if f != tl[i] {
			return false
		}
	}
	return len(fl) == len(tl)
}
