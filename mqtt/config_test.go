package mqtt

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/binding"
)

func TestExtract(t *testing.T) {
	for _, tc := range []struct {
		name, payload, path, typ string
		want                     any
		unavailable              bool // errNoValue
		bad                      bool // any other error
	}{
		{name: "json pointer number", payload: `{"value":21.5}`, path: "/value", typ: mhp.TypeNumber, want: 21.5},
		{name: "dotted nested", payload: `{"a":{"b":[1,{"c":true}]}}`, path: "a.b.1.c", typ: mhp.TypeBoolean, want: true},
		{name: "pointer escape", payload: `{"a/b":3}`, path: "/a~1b", typ: mhp.TypeInteger, want: int64(3)},
		{name: "raw number", payload: " 5.02\n", typ: mhp.TypeNumber, want: 5.02},
		{name: "raw integer", payload: "7", typ: mhp.TypeInteger, want: int64(7)},
		{name: "raw tasmota ON", payload: "ON", typ: mhp.TypeBoolean, want: true},
		{name: "raw off", payload: "off", typ: mhp.TypeBoolean, want: false},
		{name: "raw string", payload: "heating", typ: mhp.TypeString, want: "heating"},
		{name: "raw object", payload: `{"x":1}`, typ: mhp.TypeObject, want: map[string]any{"x": 1.0}},
		{name: "empty = cleared", payload: "", typ: mhp.TypeNumber, unavailable: true},
		{name: "null", payload: `{"value":null}`, path: "/value", typ: mhp.TypeNumber, unavailable: true},
		{name: "missing field", payload: `{"other":1}`, path: "/value", typ: mhp.TypeNumber, unavailable: true},
		{name: "json string is not a boolean", payload: `{"value":"true"}`, path: "/value", typ: mhp.TypeBoolean, bad: true},
		{name: "json 1 is not a boolean", payload: `{"value":1}`, path: "/value", typ: mhp.TypeBoolean, bad: true},
		{name: "json string is not a number", payload: `{"value":"21"}`, path: "/value", typ: mhp.TypeNumber, bad: true},
		{name: "fraction is not an integer", payload: "2.5", typ: mhp.TypeInteger, bad: true},
		{name: "raw garbage number", payload: "ERROR", typ: mhp.TypeNumber, bad: true},
		{name: "raw NaN", payload: "NaN", typ: mhp.TypeNumber, bad: true},
		{name: "not json", payload: "{", path: "/value", typ: mhp.TypeNumber, bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := extract([]byte(tc.payload), tc.path, tc.typ)
			_, isNoValue := err.(errNoValue)
			switch {
			case tc.unavailable:
				if !isNoValue {
					t.Fatalf("got %v, %v; want no value", got, err)
				}
			case tc.bad:
				if err == nil || isNoValue {
					t.Fatalf("got %v, %v; want a payload error", got, err)
				}
			default:
				if err != nil || !sameValue(got, tc.want) {
					t.Fatalf("got %#v, %v; want %#v", got, err, tc.want)
				}
			}
		})
	}
}

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		filter, topic string
		want          bool
	}{
		{"a/b", "a/b", true}, {"a/+", "a/b", true}, {"a/+", "a/b/c", false}, {"a/#", "a/b/c", true},
		{"a/#", "a", true}, {"+/b", "a/b", true}, {"#", "$SYS/x", false}, {"+/x", "$SYS/x", false},
		{"a/b", "a/c", false}, {"a/b/c", "a/b", false},
	} {
		if got := Match(tc.filter, tc.topic); got != tc.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tc.filter, tc.topic, got, tc.want)
		}
	}
}

func TestBrokerURL(t *testing.T) {
	for in, want := range map[string]string{
		"mqtt://h": "tcp://h:1883", "h:1884": "tcp://h:1884", "mqtts://h": "ssl://h:8883",
		"tcp://h:1/x": "tcp://h:1", "ws://h/mqtt": "ws://h/mqtt", "http://h": "", "": "",
	} {
		got, err := BrokerURL(in)
		if (want == "") != (err != nil) || got != want {
			t.Errorf("BrokerURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	base := func() Config {
		return Config{Common: adapters.Common{Device: mhp.DeviceInfo{ID: "d"}}, Broker: "mqtt://h"}
	}
	num := mhp.Setting{Name: "s", Type: mhp.TypeNumber}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string // substring of the error; "" = valid
	}{
		{"valid", func(c *Config) {}, ""},
		{"no id", func(c *Config) { c.Device.ID = "" }, "device.id"},
		{"bad broker", func(c *Config) { c.Broker = "http://h" }, "scheme"},
		{"bad qos", func(c *Config) { c.QoS = 3 }, "qos"},
		{"signal without topic", func(c *Config) { c.Signals = []SignalConfig{{Signal: mhp.Signal{Name: "x"}}} }, "topic is required"},
		{"bad filter", func(c *Config) {
			c.Signals = []SignalConfig{{Signal: mhp.Signal{Name: "x"}, Topic: "a/#/b"}}
		}, "# must be"},
		{"wildcard command topic", func(c *Config) {
			c.Settings = []SettingConfig{{Setting: num, CommandTopic: "a/+"}}
		}, "cannot hold"},
		{"ack and state", func(c *Config) {
			c.Settings = []SettingConfig{{Setting: num, CommandTopic: "a", Ack: &Ack{Topic: "r"}, StateTopic: "s"}}
		}, "not both"},
		{"raw with ack", func(c *Config) {
			c.Settings = []SettingConfig{{Setting: num, CommandTopic: "a", Ack: &Ack{Topic: "r"}, Raw: true}}
		}, "raw"},
		{"fire and forget action", func(c *Config) {
			c.Actions = []ActionConfig{{Action: mhp.Action{Name: "a"}, CommandTopic: "c"}}
		}, "reply_topic is required"},
		{"cancellable without topic", func(c *Config) {
			c.Actions = []ActionConfig{{Action: mhp.Action{Name: "a", Cancellable: true}, CommandTopic: "c", ReplyTopic: "r"}}
		}, "cancel_topic"},
		{"pausable", func(c *Config) {
			c.Actions = []ActionConfig{{Action: mhp.Action{Name: "a", Pausable: true}, CommandTopic: "c", ReplyTopic: "r"}}
		}, "pause"},
		{"estop wildcard", func(c *Config) { c.EStop = &EStopConfig{Topic: "x/#"} }, "estop.topic"},
		{"availability same words", func(c *Config) {
			c.Availability = &Availability{Topic: "s", Online: "x", Offline: "x"}
		}, "both"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			tc.edit(&c)
			err := c.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("valid config refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

// TestExampleConfig registers the kind and builds the example file: every
// field decodes strictly and the descriptor carries the mapping's items.
func TestExampleConfig(t *testing.T) {
	r := adapters.NewRegistry()
	if err := Register(r); err != nil {
		t.Fatal(err)
	}
	if err := Register(r); err == nil {
		t.Fatal("registering twice succeeded")
	}
	path := filepath.Join("..", "examples", "mqtt-sensor", "sensor.yaml")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d, err := r.Open(ctx, path)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer d.Close()
	desc := d.Descriptor()
	if desc.ID != "incubator-01" || len(desc.Signals) != 3 || len(desc.Settings) != 2 || len(desc.Actions) != 1 || !desc.Safety.EStop {
		t.Fatalf("descriptor %+v does not carry the example's items", desc)
	}
	a, _ := desc.Action("decontaminate")
	if !a.Cancellable {
		t.Fatal("an action with a cancel topic is not cancellable")
	}
	// a typo is refused, naming the field
	data, _ := os.ReadFile(path)
	bad := strings.Replace(string(data), "stale_after: 30s", "stale_afterr: 30s", 1)
	_, err = r.Build(ctx, adapters.Source{Path: "bad.yaml", Data: []byte(bad)})
	if err == nil || !strings.Contains(err.Error(), "stale_afterr") {
		t.Fatalf("typo accepted or unnamed: %v", err)
	}
}

// TestLoadAndNew: Load decodes strictly, checks the kind, validates (naming
// the file and the field) and fills the defaults; New refuses what Load
// would and a password_env that is not set, before dialling; Register
// hands the file's Refine to New, which may refuse the bindings.
func TestLoadAndNew(t *testing.T) {
	const good = "adapter: mqtt\ndevice: {id: d1}\nbroker: mqtt://127.0.0.1:1\n" +
		"signals:\n  - {name: t, type: number, topic: d1/t}\n"
	for _, tc := range []struct {
		name, data, want string // want: substring of the error; "" = loads
	}{
		{"good", good, ""},
		{"unknown key", good + "qoss: 1\n", "qoss"},
		{"other kind", strings.Replace(good, "adapter: mqtt", "adapter: opcua", 1), `not "mqtt"`},
		{"invalid", good + "qos: 3\n", "cfg.yaml: mqtt: qos 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Load(adapters.Source{Path: "cfg.yaml", Data: []byte(tc.data)})
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("Load: %v, want an error mentioning %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.ClientID != "mhp-d1" || cfg.QoS != 1 || cfg.ConnectTimeout != 10*time.Second {
				t.Fatalf("defaults not filled: client_id %q qos %d connect_timeout %s", cfg.ClientID, cfg.QoS, cfg.ConnectTimeout)
			}
		})
	}
	ctx := context.Background()
	if _, err := New(ctx, Config{Broker: "mqtt://h"}, Options{}); err == nil || !strings.Contains(err.Error(), "device.id") {
		t.Fatalf("New of an invalid config: %v, want device.id refused", err)
	}
	cfg := Config{Common: adapters.Common{Device: mhp.DeviceInfo{ID: "d"}}, Broker: "mqtt://127.0.0.1:1",
		PasswordEnv: "MHP_TEST_UNSET_MQTT_PASSWORD"}
	if _, err := New(ctx, cfg, Options{}); err == nil || !strings.Contains(err.Error(), "password_env MHP_TEST_UNSET_MQTT_PASSWORD") {
		t.Fatalf("New with an unset password_env: %v, want it named", err)
	}
	r := adapters.NewRegistry()
	if err := Register(r); err != nil {
		t.Fatal(err)
	}
	refused := errors.New("refined away")
	var saw []string
	_, err := r.Build(ctx, adapters.Source{Path: "cfg.yaml", Data: []byte(good), Refine: func(bc *binding.Config) error {
		for _, s := range bc.Signals {
			saw = append(saw, s.Spec.Name)
		}
		return refused
	}})
	if !errors.Is(err, refused) || !strings.Contains(err.Error(), "cfg.yaml") || len(saw) != 1 || saw[0] != "t" {
		t.Fatalf("Register's factory: %v (Refine saw %v), want the Refine error, naming the file, after seeing signal t", err, saw)
	}
}
