package mqtt_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/mqtt"
	"github.com/openmhp/mhp-go/mqtt/mqtttest"
)

// TestDiscover: retained topics, Home Assistant discovery configs and
// Zigbee2MQTT's device list become a config that round-trips (Load,
// Validate, New), starts and reads the broker's values.
func TestDiscover(t *testing.T) {
	b, err := mqtttest.NewBroker("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for topic, payload := range map[string]string{
		"lab/incubator-01/signal/temperature": `{"value": 37.0, "unit": "°C"}`,
		"lab/incubator-01/signal/co2":         `5.02`,
		"lab/incubator-01/signal/door":        `{"closed": true}`,
		"lab/incubator-01/status":             `online`,
		"lab/incubator-01/cmd/setpoint":       `{"value": 37}`,
		"homeassistant/sensor/inc/humidity/config": `{"name": "Humidity", "state_topic": "lab/ha/humidity", "unit_of_measurement": "%",
			"value_template": "{{ value_json.rh }}"}`,
		"homeassistant/number/inc/fan/config":   `{"name": "Fan speed", "command_topic": "lab/ha/fan/set", "state_topic": "lab/ha/fan", "min": 0, "max": 10}`,
		"homeassistant/switch/inc/light/config": `{"name": "Light", "command_topic": "lab/ha/light/set", "state_topic": "lab/ha/light"}`,
		"homeassistant/button/inc/reset/config": `{"name": "Reset", "command_topic": "lab/ha/reset"}`,
		"lab/ha/humidity":                       `{"rh": 40.5}`,
		"zigbee2mqtt/bridge/devices": `[{"friendly_name": "Coordinator", "type": "Coordinator"},
			{"friendly_name": "plug1", "type": "Router", "definition": {"model": "E1603", "vendor": "IKEA", "exposes": [
				{"type": "switch", "features": [{"type": "binary", "property": "state", "access": 7, "value_on": "ON", "value_off": "OFF"}]},
				{"type": "numeric", "property": "power", "unit": "W", "access": 1},
				{"type": "numeric", "property": "brightness", "access": 7, "value_min": 0, "value_max": 254}]}}]`,
	} {
		if err := b.Publish(topic, []byte(payload), true, 1); err != nil {
			t.Fatal(err)
		}
	}
	r := adapters.NewRegistry()
	if err := mqtt.Register(r); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	target := "mqtt://" + strings.TrimPrefix(b.Addr(), "tcp://") + "/lab"
	g, err := r.Discover(ctx, mqtt.Kind, target, adapters.DiscoverOptions{Listen: 500 * time.Millisecond, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	cfg := g.Config.(mqtt.Config)
	sig := map[string]mqtt.SignalConfig{}
	for _, s := range cfg.Signals {
		sig[s.Topic+" "+s.Path] = s
	}
	if s := sig["lab/incubator-01/signal/temperature /value"]; s.Type != mhp.TypeNumber || s.Unit != "degC" {
		t.Errorf("temperature %+v", s)
	}
	if s := sig["lab/incubator-01/signal/co2 "]; s.Type != mhp.TypeNumber {
		t.Errorf("co2 %+v", s)
	}
	if s := sig["lab/incubator-01/signal/door closed"]; s.Type != mhp.TypeBoolean {
		t.Errorf("door %+v", s)
	}
	if s := sig["lab/ha/humidity rh"]; s.Name != "humidity" || s.Unit != "%" {
		t.Errorf("HA sensor %+v", s)
	}
	if s := sig["zigbee2mqtt/plug1 power"]; s.Unit != "W" || s.Type != mhp.TypeNumber {
		t.Errorf("Z2M power %+v", s)
	}
	set := map[string]mqtt.SettingConfig{}
	for _, s := range cfg.Settings {
		set[s.CommandTopic+" "+s.ValueField] = s
		if s.Approval != mhp.ApprovalConfirm {
			t.Errorf("setting %s approval %q", s.Name, s.Approval)
		}
	}
	if s := set["lab/ha/fan/set "]; s.Type != mhp.TypeNumber || s.Limits == nil || *s.Limits.Max != 10 || s.StateTopic != "lab/ha/fan" {
		t.Errorf("HA number %+v", s)
	}
	if s := set["lab/ha/light/set "]; s.Type != mhp.TypeString || s.Limits == nil || len(s.Limits.Enum) != 2 {
		t.Errorf("HA switch %+v", s)
	}
	if s := set["zigbee2mqtt/plug1/set brightness"]; s.Limits == nil || *s.Limits.Max != 254 || s.StatePath != "brightness" {
		t.Errorf("Z2M brightness %+v", s)
	}
	why := map[string]string{}
	for _, s := range g.Report.Skipped {
		why[s.Source] = s.Why
	}
	if !strings.Contains(why["lab/incubator-01/cmd/setpoint"], "command topic") || !strings.Contains(why["homeassistant/button/inc/reset/config"], "reply topic") ||
		!strings.Contains(why["lab/incubator-01/status"], "availability") {
		t.Errorf("skips %v", why)
	}
	text := string(g.YAML)
	for _, w := range []string{"PROPOSED INTERLOCK", "TODO(integrator): estop", "payload seen"} {
		if !strings.Contains(text, w) {
			t.Errorf("file lacks %q\n%s", w, text)
		}
	}
	loaded, err := mqtt.Load(adapters.Source{Path: "sensor.yaml", Data: g.YAML})
	if err != nil {
		t.Fatalf("Load: %v\n%s", err, text)
	}
	d, err := mqtt.New(ctx, loaded, mqtt.Options{Options: adapters.Options{Logger: quietLogger()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	temp := sig["lab/incubator-01/signal/temperature /value"].Name
	conformance.EventuallyWithin(t, "the retained temperature", 5*time.Second, func() bool {
		res, err := d.Read(ctx, []string{temp})
		return err == nil && res.Values[temp] == 37.0
	})
}
