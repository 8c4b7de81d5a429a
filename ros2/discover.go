package ros2

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
)

// DiscoverOptions tune [Discover].
type DiscoverOptions struct {
	// DiscoverOptions are the options every discovery shares (DeviceID,
	// Include/Exclude by topic, service or action name, Logger).
	adapters.DiscoverOptions
	// Conn is the backend seam: the rosbridge connection to ask; nil dials
	// target.
	Conn Conn
}

// stdTopics are the message types a topic signal maps by itself: the
// field holding the value, the MHP type and the unit.
var stdTopics = map[string]struct{ field, typ, unit string }{
	"std_msgs/Bool": {"data", mhp.TypeBoolean, ""}, "std_msgs/String": {"data", mhp.TypeString, ""},
	"std_msgs/Float32": {"data", mhp.TypeNumber, ""}, "std_msgs/Float64": {"data", mhp.TypeNumber, ""},
	"std_msgs/Int8": {"data", mhp.TypeInteger, ""}, "std_msgs/Int16": {"data", mhp.TypeInteger, ""},
	"std_msgs/Int32": {"data", mhp.TypeInteger, ""}, "std_msgs/Int64": {"data", mhp.TypeInteger, ""},
	"std_msgs/UInt8": {"data", mhp.TypeInteger, ""}, "std_msgs/UInt16": {"data", mhp.TypeInteger, ""},
	"std_msgs/UInt32": {"data", mhp.TypeInteger, ""}, "std_msgs/UInt64": {"data", mhp.TypeInteger, ""},
	"sensor_msgs/Temperature":         {"temperature", mhp.TypeNumber, "degC"},
	"sensor_msgs/RelativeHumidity":    {"relative_humidity", mhp.TypeNumber, ""},
	"sensor_msgs/FluidPressure":       {"fluid_pressure", mhp.TypeNumber, "Pa"},
	"sensor_msgs/BatteryState":        {"percentage", mhp.TypeNumber, ""},
	"geometry_msgs/PoseStamped":       {"", mhp.TypeObject, ""},
	"sensor_msgs/JointState":          {"", mhp.TypeObject, ""},
	"diagnostic_msgs/DiagnosticArray": {"", mhp.TypeObject, ""},
}

// baseType spells a type without its "/msg/" or "/srv/" part
// ("std_msgs/msg/Bool" -> "std_msgs/Bool"), the key of the tables.
func baseType(t string) string {
	for _, mid := range []string{"/msg/", "/srv/", "/action/"} {
		t = strings.Replace(t, mid, "/", 1)
	}
	return t
}

// infraService reports the services every ROS 2 node or the bridge itself
// serves: parameters, type descriptions, rosapi, rosbridge.
func infraService(name string) bool {
	if strings.HasPrefix(name, "/rosapi/") || strings.HasPrefix(name, "/rosbridge") || strings.Contains(name, "/_") {
		return true
	}
	for _, s := range []string{"/get_parameters", "/set_parameters", "/set_parameters_atomically", "/describe_parameters",
		"/list_parameters", "/get_parameter_types", "/get_type_description"} {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

func infraTopic(name string) bool {
	return name == "/rosout" || name == "/parameter_events" || strings.Contains(name, "/_") || strings.HasPrefix(name, "/rosapi")
}

// Discover asks the robot's rosbridge at target (ws://HOST:9090) through
// rosapi what it has and proposes the config that serves it: topics
// become signals (standard message types map their value field; others
// are served whole), std_srvs SetBool services become boolean settings,
// other services and ROS 2 action servers (ROS 1 actionlib servers on a
// ROS 1 bridge) become actions, with the types as the bridge spells them.
// An action server whose type rosapi does not give (rosbridge 2.x lists
// hidden action services untyped) takes it from its hidden feedback topic;
// without either it is skipped with the reason. A service named like an
// emergency stop is proposed for estop, never mapped as an action.
func Discover(ctx context.Context, target string, opt DiscoverOptions) (Config, adapters.Report, error) {
	var rep adapters.Report
	cfg := Config{URL: target, CheckTypes: true}
	cfg.Adapter = Kind
	cfg.Device = mhp.DeviceInfo{ID: opt.DeviceIDFrom("", "ros2-robot"), Class: "robot"}
	if err := cfg.Validate(); err != nil {
		return Config{}, rep, err
	}
	conn := opt.Conn
	if conn == nil {
		c, err := Dial(ctx, target, ClientOptions{NoReconnect: true, Logger: opt.Log()})
		if err != nil {
			return Config{}, rep, fmt.Errorf("ros2: discover %s: %w", target, err)
		}
		defer c.Close()
		conn = c
	}
	d := &rosDiscovery{conn: conn, opt: opt, cfg: &cfg, rep: &rep}
	a := &adapter{reqTimeout: 10 * time.Second, log: opt.Log()}
	bridge, err := a.probe(ctx, conn)
	if err != nil {
		return Config{}, rep, fmt.Errorf("ros2: discover %s: %w", target, err)
	}
	if !bridge.Rosapi {
		return Config{}, rep, fmt.Errorf("ros2: discover %s: rosapi does not answer; start rosapi_node with rosbridge (ros2 launch rosbridge_server rosbridge_websocket_launch.xml)", target)
	}
	d.ros = bridge.ROS
	if err := d.topics(ctx); err != nil {
		return Config{}, rep, err
	}
	if err := d.services(ctx); err != nil {
		return Config{}, rep, err
	}
	if err := d.actions(ctx); err != nil {
		return Config{}, rep, err
	}
	d.finish(bridge)
	if err := cfg.Validate(); err != nil {
		return Config{}, rep, fmt.Errorf("ros2: discovered config does not validate (a discovery bug): %w", err)
	}
	return cfg, rep, nil
}

type rosDiscovery struct {
	conn  Conn
	opt   DiscoverOptions
	cfg   *Config
	rep   *adapters.Report
	names adapters.Namer
	ros   int
	estop []string
	hid   map[string]string // topic -> type, the hidden ones too
}

func (d *rosDiscovery) call(ctx context.Context, service string, args, v any) error {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	raw, err := d.conn.CallService(cctx, service, args)
	if err == nil && v != nil {
		err = json.Unmarshal(raw, v)
	}
	return err
}

// name makes an MHP name of a ROS name: its last segment, the one before
// it on a collision.
func (d *rosDiscovery) name(ros string) string {
	segs := strings.Split(strings.Trim(ros, "/"), "/")
	parent := ""
	if len(segs) > 1 {
		parent = segs[len(segs)-2]
	}
	return d.names.Name(segs[len(segs)-1], parent)
}

func (d *rosDiscovery) topics(ctx context.Context) error {
	var tops struct {
		Topics []string `json:"topics"`
		Types  []string `json:"types"`
	}
	if err := d.call(ctx, "/rosapi/topics", nil, &tops); err != nil {
		return fmt.Errorf("ros2: discover: /rosapi/topics: %w", err)
	}
	d.hid = map[string]string{}
	for i, t := range tops.Topics {
		typ := ""
		if i < len(tops.Types) {
			typ = tops.Types[i]
		}
		d.hid[t] = typ
		switch {
		case infraTopic(t):
			continue
		case !d.opt.Included(t):
			d.rep.Skip("topic", t, "not selected by --include/--exclude")
			continue
		case typ == "":
			d.rep.Skip("topic", t, "rosapi gives no type")
			continue
		}
		std, known := stdTopics[baseType(typ)]
		if !known {
			std.typ = mhp.TypeObject
		}
		name := d.name(t)
		d.cfg.Signals = append(d.cfg.Signals, SignalConfig{Signal: mhp.Signal{Name: name, Type: std.typ, Unit: std.unit},
			Topic: t, MsgType: typ, Field: std.field})
		note := ""
		if !known {
			note = "served whole: pick a field with field:"
		}
		d.rep.Map("signal", name, t, note)
		d.rep.Comment("signals."+name, "topic "+t+" ("+typ+")")
		if std.typ == mhp.TypeBoolean && adapters.InterlockCandidate(name) {
			d.rep.Proposals = append(d.rep.Proposals, fmt.Sprintf("interlock %s (%s): add `interlocks: [%s]` (and max_age_s) to the settings and actions it must guard", name, t, name))
			d.rep.Comment("signals."+name, fmt.Sprintf("PROPOSED INTERLOCK (not applied): add `interlocks: [%s]` where it applies, and max_age_s so a silent sensor opens it.", name))
		}
	}
	return nil
}

func (d *rosDiscovery) services(ctx context.Context) error {
	var svcs struct {
		Services []string `json:"services"`
	}
	err := d.call(ctx, "/rosapi/services", nil, &svcs)
	var se *ServiceError
	if errors.As(err, &se) {
		d.rep.Warn("rosapi lists no services (/rosapi/services: %s): add service settings and actions by hand", se.Message)
		return nil
	}
	if err != nil {
		return fmt.Errorf("ros2: discover: /rosapi/services: %w", err)
	}
	sort.Strings(svcs.Services)
	for _, s := range svcs.Services {
		if infraService(s) {
			continue
		}
		if !d.opt.Included(s) {
			d.rep.Skip("service", s, "not selected by --include/--exclude")
			continue
		}
		var st struct {
			Type string `json:"type"`
		}
		if err := d.call(ctx, "/rosapi/service_type", map[string]any{"service": s}, &st); err != nil || st.Type == "" {
			d.rep.Skip("service", s, "rosapi gives no type")
			continue
		}
		base := baseType(st.Type)
		leaf := s[strings.LastIndex(s, "/")+1:]
		if stopService(leaf) && (base == "std_srvs/Trigger" || base == "std_srvs/Empty") {
			d.estop = append(d.estop, fmt.Sprintf("service %s (%s) looks like an emergency stop:\n  estop: {service: %s}", s, st.Type, s))
			d.rep.Skip("service", s, "named like an emergency stop: proposed for `estop:` (see the TODO in the file), not an action")
			continue
		}
		name := d.name(s)
		switch base {
		case "std_srvs/SetBool":
			d.cfg.Settings = append(d.cfg.Settings, SettingConfig{Setting: mhp.Setting{Name: name, Type: mhp.TypeBoolean, Approval: mhp.ApprovalConfirm}, Service: s})
			d.rep.Map("setting", name, s, st.Type+": success:false is a refusal")
			d.rep.Comment("settings."+name, "service "+s+" ("+st.Type+")")
		default:
			d.cfg.Actions = append(d.cfg.Actions, ActionConfig{Action: mhp.Action{Name: name, Duration: mhp.DurationShort, Approval: mhp.ApprovalConfirm}, Service: s})
			d.rep.Map("action", name, s, st.Type)
			c := "service " + s + " (" + st.Type + ")"
			if base != "std_srvs/Trigger" && base != "std_srvs/Empty" {
				c += "\nTODO(integrator): params. The request fields of " + st.Type + " become params: {field: {type: ..., limits: ...}}."
			}
			d.rep.Comment("actions."+name, c)
		}
	}
	return nil
}

func stopService(leaf string) bool {
	s := "_" + adapters.SnakeName(leaf) + "_"
	return strings.Contains(s, "_estop_") || strings.Contains(s, "_e_stop_") || strings.Contains(s, "emergency") || s == "_stop_"
}

func (d *rosDiscovery) actions(ctx context.Context) error {
	var as struct {
		Servers []string `json:"action_servers"`
	}
	err := d.call(ctx, "/rosapi/action_servers", nil, &as)
	var se *ServiceError
	if errors.As(err, &se) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("ros2: discover: /rosapi/action_servers: %w", err)
	}
	sort.Strings(as.Servers)
	for _, s := range as.Servers {
		if !d.opt.Included(s) {
			d.rep.Skip("action", s, "not selected by --include/--exclude")
			continue
		}
		if d.ros == 1 {
			d.actionlib(s)
			continue
		}
		typ, how := d.actionType(ctx, s)
		if typ == "" {
			d.rep.Skip("action", s, "rosapi gives no type for its hidden send_goal service and no feedback topic: add it by hand with action_type:")
			continue
		}
		name := d.name(s)
		d.cfg.Actions = append(d.cfg.Actions, ActionConfig{Action: mhp.Action{Name: name, Duration: mhp.DurationLong, Approval: mhp.ApprovalConfirm},
			ROSAction: s, ActionType: typ})
		d.rep.Map("action", name, s, typ+how)
		d.rep.Comment("actions."+name, "ROS 2 action "+s+" ("+typ+how+")\nTODO(integrator): params. The goal fields of "+typ+" become params: {field: {type: ..., limits: ...}}; progress_field names a feedback field.")
	}
	return nil
}

// actionType is the ROS 2 action type: from /rosapi/action_type where
// rosapi serves it, the hidden send_goal service's type, or (rosbridge 2.x lists it untyped) from the hidden
// feedback topic's.
func (d *rosDiscovery) actionType(ctx context.Context, action string) (string, string) {
	var st struct {
		Type string `json:"type"`
	}
	// Newer rosapi builds answer /rosapi/action_type; rosbridge 2.0/2.1
	// has none (an error, at once) and jazzy's may never answer, so it
	// gets a short deadline of its own.
	actx, cancel := context.WithTimeout(ctx, 2*time.Second)
	err := d.call(actx, "/rosapi/action_type", map[string]any{"action": action}, &st)
	cancel()
	if err == nil && st.Type != "" {
		return st.Type, ""
	}
	st.Type = ""
	if err := d.call(ctx, "/rosapi/service_type", map[string]any{"service": action + "/_action/send_goal"}, &st); err == nil {
		if t, ok := strings.CutSuffix(st.Type, "_SendGoal"); ok && t != "" {
			return t, ""
		}
	}
	fb := d.hid[action+"/_action/feedback"]
	if fb == "" {
		var tt struct {
			Type string `json:"type"`
		}
		if err := d.call(ctx, "/rosapi/topic_type", map[string]any{"topic": action + "/_action/feedback"}, &tt); err == nil {
			fb = tt.Type
		}
	}
	if t, ok := strings.CutSuffix(fb, "_FeedbackMessage"); ok && t != "" {
		return t, ", from its feedback topic"
	}
	return "", ""
}

// actionlib maps a ROS 1 actionlib server: its type from <ns>/goal.
func (d *rosDiscovery) actionlib(ns string) {
	t, ok := strings.CutSuffix(d.hid[ns+"/goal"], "ActionGoal")
	if !ok || t == "" {
		d.rep.Skip("action", ns, "no typed <ns>/goal topic: add it by hand with actionlib: and action_type:")
		return
	}
	name := d.name(ns)
	d.cfg.Actions = append(d.cfg.Actions, ActionConfig{Action: mhp.Action{Name: name, Duration: mhp.DurationLong, Approval: mhp.ApprovalConfirm},
		Actionlib: ns, ActionType: t})
	d.rep.Map("action", name, ns, "ROS 1 actionlib "+t)
	d.rep.Comment("actions."+name, "actionlib "+ns+" ("+t+")\nTODO(integrator): params. The goal fields become params.")
	for _, suffix := range []string{"/goal", "/cancel", "/feedback", "/result", "/status"} {
		d.dropSignal(ns + suffix)
	}
}

// dropSignal removes a topic mapped as a signal (an actionlib server's own
// topics are not the device's signals).
func (d *rosDiscovery) dropSignal(topic string) {
	for i, s := range d.cfg.Signals {
		if s.Topic == topic {
			d.cfg.Signals = append(d.cfg.Signals[:i], d.cfg.Signals[i+1:]...)
			for j, m := range d.rep.Mapped {
				if m.Source == topic {
					d.rep.Mapped = append(d.rep.Mapped[:j], d.rep.Mapped[j+1:]...)
					break
				}
			}
			delete(d.rep.Comments, "signals."+s.Name)
			return
		}
	}
}

func (d *rosDiscovery) finish(b Bridge) {
	d.cfg.Safety.Notes = adapters.SafetyNotes
	d.rep.Comment("", "Generated by `mhp init ros2 "+d.cfg.URL+"` from rosapi: "+b.String()+".\n"+
		"Types are spelt as this bridge spells them; check_types asks rosapi again at every start.\n"+adapters.ApprovalNote)
	todo := adapters.TODOEStop + "\nAdd an `estop:` block: the robot's own stop service or topic (never \"cancel all goals\")."
	for _, e := range d.estop {
		todo += "\nProposed: " + e
	}
	d.rep.Comment("safety", todo+"\n"+adapters.TODOWatchdog)
	if len(d.cfg.Signals)+len(d.cfg.Settings)+len(d.cfg.Actions) == 0 {
		d.rep.Warn("nothing was mapped: check --include and that the robot's nodes run")
	}
}

// discoveryEntry is the registry's entry for [Discover] (see Register).
var discoveryEntry = adapters.NewDiscovery(func(ctx context.Context, target string, o adapters.DiscoverOptions) (Config, adapters.Report, error) {
	if err := o.CheckFlags(Kind); err != nil {
		return Config{}, adapters.Report{}, err
	}
	return Discover(ctx, target, DiscoverOptions{DiscoverOptions: o})
}, Load)
