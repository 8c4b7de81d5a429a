package mqtt

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
)

// DiscoverOptions tune [Discover].
type DiscoverOptions struct {
	// DiscoverOptions are the options every discovery shares: Listen (the
	// window, default 5s), Include/Exclude by topic, DeviceID, Logger.
	adapters.DiscoverOptions
	// Client is the backend seam: the broker connection to listen on; nil
	// dials target.
	Client Client
}

// discoverTopics bounds how many topics one listen keeps.
const discoverTopics = 2000

// Discover listens on the broker at target (mqtt://BROKER[:PORT][/PREFIX])
// for opt.Listen and proposes the config that serves what it saw:
//   - Home Assistant discovery configs (homeassistant/<component>/.../config):
//     sensor and binary_sensor become signals; number, switch and select
//     become settings on their command_topic, confirmed on their state
//     topic (they say what is writable); buttons are skipped (an MHP action
//     needs a reply);
//   - Zigbee2MQTT's zigbee2mqtt/bridge/devices: each device's exposes
//     become signals (published) and settings (settable: <name>/set);
//   - every other topic under PREFIX becomes a signal, its type inferred
//     from the payloads seen (a JSON number, boolean, string, an object with
//     a "value"); command-looking topics (/cmd/, /set) are skipped.
func Discover(ctx context.Context, target string, opt DiscoverOptions) (Config, adapters.Report, error) {
	var rep adapters.Report
	if target == "" {
		return Config{}, rep, fmt.Errorf("mqtt: discover: give the broker (mqtt://HOST:1883[/PREFIX])")
	}
	broker, prefix := target, ""
	if u, err := url.Parse(target); err == nil && u.Host != "" {
		prefix = strings.Trim(u.Path, "/")
		u.Path = ""
		broker = u.String()
	}
	cfg := Config{Broker: broker}
	cfg.Adapter = Kind
	cfg.Device = mhp.DeviceInfo{ID: opt.DeviceIDFrom(lastSegment(prefix), "mqtt-device"), Class: "instrument"}
	cfg.ClientID = "mhp-" + cfg.Device.ID
	if err := cfg.Validate(); err != nil {
		return Config{}, rep, err
	}
	listen := opt.Listen
	if listen <= 0 {
		listen = 5 * time.Second
	}
	c := opt.Client
	if c == nil {
		pc, err := DialPaho(DialOptions{Broker: broker, ClientID: fmt.Sprintf("mhp-init-%08x", rand.Uint32()), ConnectTimeout: 10 * time.Second, Logger: opt.Log()})
		if err != nil {
			return Config{}, rep, fmt.Errorf("mqtt: discover %s: %w", broker, err)
		}
		defer pc.Close()
		c = pc
	}
	if err := waitUp(ctx, c); err != nil {
		return Config{}, rep, fmt.Errorf("mqtt: discover %s: %w", broker, err)
	}
	var mu sync.Mutex
	seen := map[string][]byte{}
	var order []string
	keep := func(m Message) {
		mu.Lock()
		defer mu.Unlock()
		if _, ok := seen[m.Topic]; !ok {
			if len(order) >= discoverTopics {
				return
			}
			order = append(order, m.Topic)
		}
		seen[m.Topic] = append([]byte(nil), m.Payload...)
	}
	filters := []string{"#"}
	if prefix != "" {
		filters = []string{prefix + "/#", "homeassistant/#", "zigbee2mqtt/bridge/devices"}
	}
	for _, f := range filters {
		if err := c.Subscribe(ctx, f, 0, keep); err != nil {
			return Config{}, rep, fmt.Errorf("mqtt: discover: subscribe %s: %w", f, err)
		}
	}
	t := time.NewTimer(listen)
	select {
	case <-ctx.Done():
		t.Stop()
		return Config{}, rep, ctx.Err()
	case <-t.C:
	}
	mu.Lock()
	topics := append([]string(nil), order...)
	payloads := make(map[string][]byte, len(seen))
	for k, v := range seen {
		payloads[k] = v
	}
	mu.Unlock()
	sort.Strings(topics)
	d := &mqttDiscovery{cfg: &cfg, rep: &rep, opt: opt, used: map[string]bool{}}
	for _, tp := range topics {
		if strings.HasPrefix(tp, "homeassistant/") && strings.HasSuffix(tp, "/config") {
			d.homeAssistant(tp, payloads[tp])
		}
	}
	if b, ok := payloads["zigbee2mqtt/bridge/devices"]; ok {
		d.zigbee(b)
	}
	for _, tp := range topics {
		if !d.used[tp] && !strings.HasPrefix(tp, "homeassistant/") && !strings.HasPrefix(tp, "zigbee2mqtt/bridge/") {
			d.plain(tp, payloads[tp])
		}
	}
	if len(topics) >= discoverTopics {
		rep.Warn("stopped keeping topics at %d: narrow the listen with a /PREFIX", discoverTopics)
	}
	d.finish(target, listen, len(topics))
	if err := cfg.Validate(); err != nil {
		return Config{}, rep, fmt.Errorf("mqtt: discovered config does not validate (a discovery bug): %w", err)
	}
	return cfg, rep, nil
}

func lastSegment(p string) string {
	if i := strings.LastIndex(p, "/"); i >= 0 {
		return p[i+1:]
	}
	return p
}

// waitUp waits for the client's first connection.
func waitUp(ctx context.Context, c Client) error {
	deadline := time.NewTimer(15 * time.Second)
	defer deadline.Stop()
	for {
		st := c.State()
		if st.Up {
			return nil
		}
		select {
		case <-st.Changed:
		case <-deadline.C:
			return fmt.Errorf("the broker did not accept a connection within 15s")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

type mqttDiscovery struct {
	cfg   *Config
	rep   *adapters.Report
	opt   DiscoverOptions
	names adapters.Namer
	used  map[string]bool // topics mapped by a discovery config
}

// templatePath reads the field of a Home Assistant value_template
// ("{{ value_json.temperature }}", "{{ value_json['co2'] }}").
var templatePath = regexp.MustCompile(`^\{\{\s*value_json(?:\.([A-Za-z0-9_.]+)|\[['"]([^'"]+)['"]\])\s*\}\}$`)

func (d *mqttDiscovery) homeAssistant(topic string, payload []byte) {
	segs := strings.Split(topic, "/")
	if len(segs) < 4 {
		return
	}
	component := segs[1]
	var c struct {
		Name          string   `json:"name"`
		StateTopic    string   `json:"state_topic"`
		CommandTopic  string   `json:"command_topic"`
		ValueTemplate string   `json:"value_template"`
		Unit          string   `json:"unit_of_measurement"`
		Min           *float64 `json:"min"`
		Max           *float64 `json:"max"`
		Options       []string `json:"options"`
		PayloadOn     string   `json:"payload_on"`
		PayloadOff    string   `json:"payload_off"`
		UniqueID      string   `json:"unique_id"`
	}
	if err := json.Unmarshal(payload, &c); err != nil {
		d.rep.Skip("ha "+component, topic, "discovery config is not JSON: "+err.Error())
		return
	}
	src := c.StateTopic
	if src == "" {
		src = c.CommandTopic
	}
	if !d.opt.Included(src) {
		return
	}
	path := ""
	if c.ValueTemplate != "" {
		m := templatePath.FindStringSubmatch(c.ValueTemplate)
		if m == nil {
			d.rep.Skip("ha "+component, topic, fmt.Sprintf("value_template %q is more than a field: map it by hand", c.ValueTemplate))
			return
		}
		path = m[1] + m[2]
	}
	leaf := c.Name
	if leaf == "" {
		leaf = segs[len(segs)-2]
	}
	name := d.names.Name(leaf, "")
	where := "Home Assistant " + component + " " + topic
	switch component {
	case "sensor", "binary_sensor":
		if c.StateTopic == "" {
			d.rep.Skip("ha "+component, topic, "no state_topic")
			return
		}
		typ := mhp.TypeNumber
		if component == "binary_sensor" {
			// A raw ON/OFF payload reads as a boolean; inside JSON it is a string.
			typ = mhp.TypeBoolean
			if on := strings.ToLower(c.PayloadOn); path != "" || (on != "" && on != "on" && on != "true" && on != "1") {
				typ = mhp.TypeString
			}
		} else if c.Unit == "" {
			typ = mhp.TypeAny
		}
		d.cfg.Signals = append(d.cfg.Signals, SignalConfig{Signal: mhp.Signal{Name: name, Type: typ, Unit: haUnit(c.Unit)}, Topic: c.StateTopic, Path: path})
		d.used[c.StateTopic] = true
		d.rep.Map("signal", name, c.StateTopic, where)
		d.rep.Comment("signals."+name, where)
		d.interlock(name, typ, c.StateTopic)
	case "number", "switch", "select":
		if c.CommandTopic == "" {
			d.rep.Skip("ha "+component, topic, "no command_topic: read-only")
			return
		}
		s := SettingConfig{Setting: mhp.Setting{Name: name, Approval: mhp.ApprovalConfirm, Unit: haUnit(c.Unit)}, CommandTopic: c.CommandTopic,
			Raw: true, StateTopic: c.StateTopic, StatePath: path}
		switch component {
		case "number":
			s.Type = mhp.TypeNumber
			lo, hi := 1.0, 100.0 // Home Assistant's defaults
			if c.Min != nil {
				lo = *c.Min
			}
			if c.Max != nil {
				hi = *c.Max
			}
			s.Limits = &mhp.Limits{Min: &lo, Max: &hi}
		case "switch":
			on, off := c.PayloadOn, c.PayloadOff
			if on == "" {
				on = "ON"
			}
			if off == "" {
				off = "OFF"
			}
			s.Type, s.Limits = mhp.TypeString, mhp.Enum(on, off)
		case "select":
			if len(c.Options) == 0 {
				d.rep.Skip("ha select", topic, "no options")
				return
			}
			opts := make([]any, len(c.Options))
			for i, o := range c.Options {
				opts[i] = o
			}
			s.Type, s.Limits = mhp.TypeString, mhp.Enum(opts...)
		}
		d.cfg.Settings = append(d.cfg.Settings, s)
		d.used[c.StateTopic], d.used[c.CommandTopic] = true, true
		d.rep.Map("setting", name, c.CommandTopic, where)
		d.rep.Comment("settings."+name, where+(map[bool]string{true: "; applied once the state topic shows it", false: "; no state topic: writes stay \"sent\""})[c.StateTopic != ""])
	default:
		d.rep.Skip("ha "+component, topic, "an MHP action needs a reply topic; Home Assistant "+component+"s are fire-and-forget")
	}
}

// haUnit spells Home Assistant's units as MHP's.
func haUnit(u string) string { return adapters.UnitName(u) }

func (d *mqttDiscovery) interlock(name, typ, topic string) {
	if typ == mhp.TypeBoolean && adapters.InterlockCandidate(name) {
		d.rep.Proposals = append(d.rep.Proposals, fmt.Sprintf("interlock %s (%s): add it to safety.interlocks or to the settings and actions it must guard (with stale_after)", name, topic))
		d.rep.Comment("signals."+name, fmt.Sprintf("PROPOSED INTERLOCK (not applied): add `interlocks: [%s]` where it applies, and stale_after so a silent sensor opens it.", name))
	}
}

// zigbee reads Zigbee2MQTT's device list.
func (d *mqttDiscovery) zigbee(payload []byte) {
	type expose struct {
		Type     string   `json:"type"`
		Name     string   `json:"name"`
		Property string   `json:"property"`
		Unit     string   `json:"unit"`
		Access   int      `json:"access"`
		ValueMin *float64 `json:"value_min"`
		ValueMax *float64 `json:"value_max"`
		Values   []any    `json:"values"`
		ValueOn  any      `json:"value_on"`
		Features []expose `json:"features"`
	}
	var devices []struct {
		FriendlyName string `json:"friendly_name"`
		Type         string `json:"type"`
		Definition   *struct {
			Model   string   `json:"model"`
			Vendor  string   `json:"vendor"`
			Exposes []expose `json:"exposes"`
		} `json:"definition"`
	}
	if err := json.Unmarshal(payload, &devices); err != nil {
		d.rep.Skip("zigbee2mqtt", "zigbee2mqtt/bridge/devices", "not a device list: "+err.Error())
		return
	}
	for _, dev := range devices {
		if dev.Type == "Coordinator" || dev.Definition == nil {
			continue
		}
		state := "zigbee2mqtt/" + dev.FriendlyName
		if !d.opt.Included(state) {
			continue
		}
		d.used[state] = true
		var flat []expose
		for _, e := range dev.Definition.Exposes {
			flat = append(flat, e)
			flat = append(flat, e.Features...)
		}
		for _, e := range flat {
			if e.Property == "" {
				continue
			}
			var typ string
			var lim *mhp.Limits
			switch e.Type {
			case "numeric":
				typ = mhp.TypeNumber
				if e.ValueMin != nil && e.ValueMax != nil {
					lim = &mhp.Limits{Min: e.ValueMin, Max: e.ValueMax}
				}
			case "binary":
				typ = mhp.TypeString // "ON"/"OFF" in a JSON state: a string
				if _, ok := e.ValueOn.(bool); ok {
					typ = mhp.TypeBoolean
				}
			case "enum":
				typ = mhp.TypeString
				if len(e.Values) > 0 {
					lim = mhp.Enum(e.Values...)
				}
			default:
				continue
			}
			name := d.names.Name(e.Property, dev.FriendlyName)
			where := fmt.Sprintf("Zigbee2MQTT %s (%s %s) %s", dev.FriendlyName, dev.Definition.Vendor, dev.Definition.Model, e.Property)
			if e.Access&1 != 0 {
				sig := name
				if e.Access&2 != 0 {
					sig = d.names.Name(e.Property+"_state", dev.FriendlyName)
				}
				d.cfg.Signals = append(d.cfg.Signals, SignalConfig{Signal: mhp.Signal{Name: sig, Type: typ, Unit: e.Unit}, Topic: state, Path: e.Property})
				d.rep.Map("signal", sig, state+" "+e.Property, where)
				d.rep.Comment("signals."+sig, where)
			}
			if e.Access&2 != 0 && (e.Type != "binary" || typ == mhp.TypeBoolean) {
				s := SettingConfig{Setting: mhp.Setting{Name: name, Type: typ, Unit: e.Unit, Limits: lim, Approval: mhp.ApprovalConfirm},
					CommandTopic: state + "/set", ValueField: e.Property, StateTopic: state, StatePath: e.Property}
				d.cfg.Settings = append(d.cfg.Settings, s)
				d.rep.Map("setting", name, state+"/set "+e.Property, where)
				d.rep.Comment("settings."+name, where+"; applied once the device's state shows it")
				if typ == mhp.TypeNumber && lim == nil {
					d.rep.Comment("settings."+name, adapters.NoLimitsNote)
					d.rep.Warn("setting %s has no range in Zigbee2MQTT's exposes: it has no limits until you add them", name)
				}
			} else if e.Access&2 != 0 {
				d.rep.Skip("zigbee2mqtt", state+" "+e.Property, fmt.Sprintf("a settable binary with on/off values %v: map it by hand as a string setting with limits: {enum: [...]}", e.ValueOn))
			}
		}
	}
}

// plain maps a topic by the payload seen on it.
func (d *mqttDiscovery) plain(topic string, payload []byte) {
	if !d.opt.Included(topic) {
		return
	}
	low := "/" + strings.ToLower(topic) + "/"
	if strings.Contains(low, "/cmd/") || strings.Contains(low, "/set/") || strings.Contains(low, "/command/") {
		d.rep.Skip("topic", topic, "a command topic: map it as a setting's command_topic or an action by hand")
		return
	}
	if len(payload) == 0 {
		d.rep.Skip("topic", topic, "only an empty (cleared) payload was seen")
		return
	}
	typ, path, unit := inferPayload(payload)
	if typ == "" {
		d.rep.Skip("topic", topic, "payload is not a value this adapter reads")
		return
	}
	if (typ == mhp.TypeString) && (string(payload) == "online" || string(payload) == "offline") {
		d.rep.Proposals = append(d.rep.Proposals, fmt.Sprintf("availability %s: it reads online/offline; add `availability: {topic: %s}` so that every signal goes unavailable while it is offline", topic, topic))
		d.rep.Skip("topic", topic, "an availability topic (online/offline): proposed for availability:")
		return
	}
	segs := strings.Split(topic, "/")
	parent := ""
	if len(segs) > 1 {
		parent = segs[len(segs)-2]
	}
	name := d.names.Name(segs[len(segs)-1], parent)
	d.cfg.Signals = append(d.cfg.Signals, SignalConfig{Signal: mhp.Signal{Name: name, Type: typ, Unit: unit}, Topic: topic, Path: path})
	d.rep.Map("signal", name, topic, "payload "+abbrev(payload))
	d.rep.Comment("signals."+name, "topic "+topic+", payload seen: "+abbrev(payload))
	d.interlock(name, typ, topic)
}

// inferPayload infers a signal's type (and the field holding its value)
// from one payload.
func inferPayload(b []byte) (typ, path, unit string) {
	v, err := decodeJSON(b)
	if err != nil {
		s := strings.TrimSpace(string(b))
		if _, err := parseBool(s); err == nil {
			return mhp.TypeBoolean, "", ""
		}
		return mhp.TypeString, "", ""
	}
	switch x := v.(type) {
	case json.Number:
		return mhp.TypeNumber, "", ""
	case bool:
		return mhp.TypeBoolean, "", ""
	case string:
		return mhp.TypeString, "", ""
	case map[string]any:
		if inner, ok := x["value"]; ok {
			t, _, _ := inferPayload(mustJSON(inner))
			u, _ := x["unit"].(string)
			return t, "/value", haUnit(u)
		}
		if len(x) == 1 {
			for k, inner := range x {
				t, _, _ := inferPayload(mustJSON(inner))
				if t != mhp.TypeObject {
					return t, k, ""
				}
			}
		}
		return mhp.TypeObject, "", ""
	case []any:
		return mhp.TypeArray, "", ""
	}
	return "", "", ""
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func abbrev(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}

func (d *mqttDiscovery) finish(target string, listen time.Duration, topics int) {
	d.cfg.Safety.Notes = adapters.SafetyNotes
	d.rep.Comment("", fmt.Sprintf("Generated by `mhp init mqtt %s` from %d topic(s) seen in %v.\n", target, topics, listen)+
		"Signals are typed from the payloads seen; settings come from Home Assistant and Zigbee2MQTT discovery.\n"+
		"Actions need a reply topic (command_topic, reply_topic, statuses): add them by hand.\n"+adapters.ApprovalNote)
	d.rep.Comment("safety", adapters.TODOEStop+"\nAdd an `estop: {topic: ...}` the device obeys (QoS 1, never retained).\n"+adapters.TODOWatchdog)
	if len(d.cfg.Signals)+len(d.cfg.Settings) == 0 {
		d.rep.Warn("nothing was mapped: nothing was published in the window (retained values arrive at once; live ones need --listen long enough)")
	}
}

// discoveryEntry is the registry's entry for [Discover] (see Register).
var discoveryEntry = adapters.NewDiscovery(func(ctx context.Context, target string, o adapters.DiscoverOptions) (Config, adapters.Report, error) {
	if err := o.CheckFlags(Kind); err != nil {
		return Config{}, adapters.Report{}, err
	}
	return Discover(ctx, target, DiscoverOptions{DiscoverOptions: o})
}, Load)
