package ros2

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
)

// Config is a robot's adapter config: the `adapter: ros2` file of
// `mhp serve robot.yaml`, or built in Go.
//
//	adapter: ros2
//	device: {id: arm-01, class: robot_arm, make: Acme, model: A6}
//	url: ws://arm-01.lab:9090
//	signals:
//	  - {name: joint1_temp, type: number, unit: degC, topic: /arm/joint1/temperature,
//	     msg_type: sensor_msgs/msg/Temperature, field: temperature, max_age_s: 2}
//	settings:
//	  - {name: speed_scale, type: number, limits: {min: 0, max: 1}, topic: /arm/speed_scale,
//	     msg_type: std_msgs/msg/Float64, confirm: {topic: /arm/speed_scale_state, timeout_s: 2}}
//	actions:
//	  - {name: move_to, duration: long, cancellable: true, action: /arm/move_to,
//	     action_type: arm_msgs/action/MoveTo, progress_field: progress, timeout_s: 120}
//	estop: {service: /arm/estop, timeout_s: 2}
type Config struct {
	adapters.Common `yaml:",inline"`
	// URL is the rosbridge server, "ws://robot:9090".
	URL       string    `yaml:"url"`
	Reconnect Reconnect `yaml:"reconnect,omitempty"`
	// RequestTimeoutS is the deadline of service calls and settings without
	// their own; default 5.
	RequestTimeoutS float64 `yaml:"request_timeout_s,omitempty"`
	// ConnectTimeoutS bounds the first connection attempt at start;
	// default 10. Without FailFast the device starts anyway when it fails.
	ConnectTimeoutS float64 `yaml:"connect_timeout_s,omitempty"`
	// FailFast refuses to start when the bridge cannot be reached within
	// connect_timeout_s (the old behaviour). By default the start waits at
	// most 2 s (or connect_timeout_s if shorter) for the bridge, then the
	// device serves with the backend link down (ping and describe say so,
	// reads are unavailable, writes and invokes are refused as
	// not_started), dials with backoff, and works once the bridge answers.
	FailFast bool `yaml:"fail_fast,omitempty"`
	// CheckTypes asks /rosapi for the type of every configured topic, the
	// ROS version of the bridge and the type of every action server, and
	// refuses a mismatch (rosbridge itself drops wrongly typed requests
	// silently): a type spelt for the other ROS version
	// ("std_msgs/msg/Float64" on ROS 1), a topic or action server of
	// another type, a ROS 2 action on a ROS 1 bridge. With the bridge up at
	// start a mismatch fails the start; found later (the bridge came up
	// after the device), it keeps the backend link reported down with the
	// mismatch as its error. Needs rosapi on the robot.
	CheckTypes bool            `yaml:"check_types,omitempty"`
	Signals    []SignalConfig  `yaml:"signals,omitempty"`
	Settings   []SettingConfig `yaml:"settings,omitempty"`
	Actions    []ActionConfig  `yaml:"actions,omitempty"`
	EStop      *EStopConfig    `yaml:"estop,omitempty"`
	// PollIntervalS is how often subscribed signals are sampled for
	// notifications; default 1 (the binding's default).
	PollIntervalS float64 `yaml:"poll_interval_s,omitempty"`
}

// Reconnect is the redial policy after a dropped connection.
type Reconnect struct {
	// Disabled leaves the link down after a drop.
	Disabled bool `yaml:"disabled,omitempty"`
	// InitialS is the first wait (default 0.25), doubling up to MaxS (default 10).
	InitialS float64 `yaml:"initial_s,omitempty"`
	MaxS     float64 `yaml:"max_s,omitempty"`
}

// SignalConfig maps a topic field to a signal.
type SignalConfig struct {
	mhp.Signal `yaml:",inline"`
	Topic      string `yaml:"topic"`
	// MsgType is the topic's message type; without it the topic must exist.
	MsgType string `yaml:"msg_type,omitempty"`
	// Field is the path of the value in the message: "data" (default),
	// "pose.position.x", "position[2]"; "." is the whole message.
	Field       string `yaml:"field,omitempty"`
	ThrottleMs  int    `yaml:"throttle_ms,omitempty"`
	QueueLength int    `yaml:"queue_length,omitempty"`
	// MaxAgeS makes the value unavailable once the last message is older
	// (so an interlock on it opens); zero keeps the last value forever.
	MaxAgeS float64 `yaml:"max_age_s,omitempty"`
}

// SettingConfig maps a setting to a topic publish or a service call.
type SettingConfig struct {
	mhp.Setting `yaml:",inline"`
	// Topic receives {field: value} (merged into Template). rosbridge never
	// acknowledges a publish: without Confirm the write reports "sent".
	Topic   string `yaml:"topic,omitempty"`
	MsgType string `yaml:"msg_type,omitempty"`
	// Service is called with {field: value} instead of publishing; a
	// response with success:false is a refusal (nothing changed), a result
	// without one is "applied".
	Service string `yaml:"service,omitempty"`
	// Field is where the value goes; default "data".
	Field    string         `yaml:"field,omitempty"`
	Template map[string]any `yaml:"template,omitempty"`
	// Confirm watches a state topic until it reports the written value.
	Confirm *ConfirmConfig `yaml:"confirm,omitempty"`
	// TimeoutS bounds the service call; default the config's request timeout.
	TimeoutS float64 `yaml:"timeout_s,omitempty"`
}

// ConfirmConfig is a state topic that confirms a published setting.
type ConfirmConfig struct {
	Topic   string `yaml:"topic"`
	MsgType string `yaml:"msg_type,omitempty"`
	Field   string `yaml:"field,omitempty"`
	// TimeoutS is how long to wait for the state to match; default 2. No
	// match in time is an unknown outcome (the device faults).
	TimeoutS float64 `yaml:"timeout_s,omitempty"`
	// Tolerance is the allowed difference for numbers.
	Tolerance float64 `yaml:"tolerance,omitempty"`
}

// ActionConfig maps an action to a service call, a ROS 2 action goal or a
// ROS 1 actionlib goal (set exactly one of Service, Action, Actionlib).
type ActionConfig struct {
	mhp.Action `yaml:",inline"`
	// Service is called with the params as args: a short action.
	Service string `yaml:"service,omitempty"`
	// ROSAction is a ROS 2 action server ("/arm/move_to") reached with
	// send_action_goal (rosbridge >= 2.0).
	ROSAction string `yaml:"action,omitempty"`
	// Actionlib is a ROS 1 actionlib namespace ("/arm/move_to").
	Actionlib string `yaml:"actionlib,omitempty"`
	// ActionType is the action type: "arm_msgs/action/MoveTo" (ROS 2) or
	// "arm_msgs/MoveTo" (ROS 1; the topic types append ActionGoal etc.).
	ActionType string `yaml:"action_type,omitempty"`
	// Args are fixed arguments; the params are merged over them.
	Args map[string]any `yaml:"args,omitempty"`
	// ProgressField is the path of progress in the feedback; ProgressMax is
	// its full scale (default 1; 100 for percent).
	ProgressField string  `yaml:"progress_field,omitempty"`
	ProgressMax   float64 `yaml:"progress_max,omitempty"`
	// TimeoutS is the deadline of the result; no result by then is an
	// unknown outcome. Default: request timeout for services, 1 h for goals.
	TimeoutS float64 `yaml:"timeout_s,omitempty"`
	// CancelWaitS is how long to wait for the robot's final status after a
	// cancel; default 30.
	CancelWaitS float64 `yaml:"cancel_wait_s,omitempty"`
	// FirstResponseS (ROS 2 actions and ROS 1 actionlib) bounds the wait for
	// the first sign that the action server took the goal: an
	// action_feedback or action_result (ROS 2), the goal listed in
	// <ns>/status or any feedback or result (actionlib). rosbridge answers
	// nothing to a rejected goal, a goal for a missing server or of a wrong
	// type, and rosbridge older than 2.0 has no action ops at all, so
	// without this bound such a goal would run until TimeoutS. Default 30;
	// set it to TimeoutS for an action server that sends no feedback.
	FirstResponseS float64 `yaml:"first_response_s,omitempty"`
	// FaultOnFailure latches the device in fault when the robot reports a
	// failure (ABORTED, success:false).
	FaultOnFailure bool `yaml:"fault_on_failure,omitempty"`
	// CancelAllOnReconnect (ROS 2 actions) also calls the action server's
	// own <action>/_action/cancel_goal with a zero goal id once the link is
	// back after a drop: it cancels every goal of that server, other
	// clients' too, and reaches goals whose rosbridge handle is gone (the
	// bridge itself restarted). The cancel_action_goal the adapter sends
	// for each orphaned goal reaches it as long as the bridge process lives
	// (rosbridge 2.x keeps goal handles for all connections). Use it when
	// MHP is the robot's only client.
	CancelAllOnReconnect bool `yaml:"cancel_all_on_reconnect,omitempty"`
}

// EStopConfig is the robot's own emergency stop: a topic publish or a
// (std_srvs/Trigger-like) service call.
type EStopConfig struct {
	Topic   string         `yaml:"topic,omitempty"`
	MsgType string         `yaml:"msg_type,omitempty"`
	Msg     map[string]any `yaml:"msg,omitempty"`
	Service string         `yaml:"service,omitempty"`
	Args    map[string]any `yaml:"args,omitempty"`
	// TimeoutS bounds the call; default 2.
	TimeoutS float64 `yaml:"timeout_s,omitempty"`
}

func seconds(s float64, def time.Duration) time.Duration {
	if s <= 0 {
		return def
	}
	return time.Duration(s * float64(time.Second))
}

// Validate reports the first problem, naming the field and why: no url,
// an item without its topic, service or action, a bad field path, negative
// times. It does no I/O; [Load] and [New] call it.
func (c Config) Validate() error {
	if c.URL == "" {
		return fmt.Errorf("ros2: url is required (ws://robot:9090)")
	}
	if !strings.HasPrefix(c.URL, "ws://") && !strings.HasPrefix(c.URL, "wss://") {
		return fmt.Errorf("ros2: url %q is not ws:// or wss://", c.URL)
	}
	for _, v := range []struct {
		what string
		s    float64
	}{{"request_timeout_s", c.RequestTimeoutS}, {"connect_timeout_s", c.ConnectTimeoutS},
		{"reconnect.initial_s", c.Reconnect.InitialS}, {"reconnect.max_s", c.Reconnect.MaxS}, {"poll_interval_s", c.PollIntervalS}} {
		if v.s < 0 {
			return fmt.Errorf("ros2: %s %v is negative", v.what, v.s)
		}
	}
	for _, s := range c.Signals {
		if s.Topic == "" {
			return fmt.Errorf("ros2: signal %q has no topic", s.Name)
		}
		if _, err := parsePath(s.Field); err != nil {
			return fmt.Errorf("ros2: signal %q: %w", s.Name, err)
		}
		if s.MaxAgeS < 0 || s.ThrottleMs < 0 || s.QueueLength < 0 {
			return fmt.Errorf("ros2: signal %q: negative max_age_s, throttle_ms or queue_length", s.Name)
		}
	}
	for _, s := range c.Settings {
		if (s.Topic == "") == (s.Service == "") {
			return fmt.Errorf("ros2: setting %q needs exactly one of topic or service", s.Name)
		}
		if s.Topic != "" && s.MsgType == "" {
			return fmt.Errorf("ros2: setting %q: msg_type is required to advertise %s", s.Name, s.Topic)
		}
		if _, err := parsePath(s.Field); err != nil {
			return fmt.Errorf("ros2: setting %q: %w", s.Name, err)
		}
		if s.Confirm != nil {
			if s.Service != "" {
				return fmt.Errorf("ros2: setting %q: confirm applies to topic settings; a service answers for itself", s.Name)
			}
			if s.Confirm.Topic == "" {
				return fmt.Errorf("ros2: setting %q: confirm needs a topic", s.Name)
			}
			if _, err := parsePath(s.Confirm.Field); err != nil {
				return fmt.Errorf("ros2: setting %q confirm: %w", s.Name, err)
			}
			if s.Confirm.TimeoutS < 0 || s.Confirm.Tolerance < 0 {
				return fmt.Errorf("ros2: setting %q confirm: negative timeout_s or tolerance", s.Name)
			}
		}
	}
	for _, a := range c.Actions {
		n := 0
		for _, x := range []string{a.Service, a.ROSAction, a.Actionlib} {
			if x != "" {
				n++
			}
		}
		if n != 1 {
			return fmt.Errorf("ros2: action %q needs exactly one of service, action or actionlib", a.Name)
		}
		if a.CancelAllOnReconnect && a.ROSAction == "" {
			return fmt.Errorf("ros2: action %q: cancel_all_on_reconnect applies to ROS 2 actions", a.Name)
		}
		if (a.ROSAction != "" || a.Actionlib != "") && a.ActionType == "" {
			return fmt.Errorf("ros2: action %q needs action_type", a.Name)
		}
		if _, err := parsePath(a.ProgressField); err != nil {
			return fmt.Errorf("ros2: action %q progress_field: %w", a.Name, err)
		}
		if a.TimeoutS < 0 || a.CancelWaitS < 0 || a.ProgressMax < 0 || a.FirstResponseS < 0 {
			return fmt.Errorf("ros2: action %q: negative timeout_s, cancel_wait_s, first_response_s or progress_max", a.Name)
		}
	}
	if e := c.EStop; e != nil {
		if (e.Topic == "") == (e.Service == "") {
			return fmt.Errorf("ros2: estop needs exactly one of topic or service")
		}
		if e.Topic != "" && e.MsgType == "" {
			return fmt.Errorf("ros2: estop: msg_type is required to advertise %s", e.Topic)
		}
		if e.TimeoutS < 0 {
			return fmt.Errorf("ros2: estop timeout_s is negative")
		}
	}
	return nil
}

// pathStep is one step of a field path: a key or an index.
type pathStep struct {
	key   string
	index int // -1 for a key
}

// parsePath parses "a.b[2].c"; "" means "data" and "." the whole message.
func parsePath(p string) ([]pathStep, error) {
	if p == "" {
		p = "data"
	}
	if p == "." {
		return nil, nil
	}
	var out []pathStep
	for _, part := range strings.Split(p, ".") {
		key := part
		var idx []int
		if i := strings.IndexByte(part, '['); i >= 0 {
			key = part[:i]
			rest := part[i:]
			for rest != "" {
				if rest[0] != '[' {
					return nil, fmt.Errorf("field path %q: bad index syntax", p)
				}
				j := strings.IndexByte(rest, ']')
				if j < 0 {
					return nil, fmt.Errorf("field path %q: missing ]", p)
				}
				n, err := strconv.Atoi(rest[1:j])
				if err != nil || n < 0 {
					return nil, fmt.Errorf("field path %q: bad index %q", p, rest[1:j])
				}
				idx = append(idx, n)
				rest = rest[j+1:]
			}
		}
		if key == "" && len(idx) == 0 {
			return nil, fmt.Errorf("field path %q: empty step", p)
		}
		if key != "" {
			out = append(out, pathStep{key: key, index: -1})
		}
		for _, n := range idx {
			out = append(out, pathStep{index: n})
		}
	}
	return out, nil
}

// getPath walks a decoded JSON value.
func getPath(v any, path []pathStep) (any, error) {
	for _, st := range path {
		if st.index < 0 {
			m, ok := v.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("no field %q (not an object)", st.key)
			}
			x, ok := m[st.key]
			if !ok {
				return nil, fmt.Errorf("no field %q", st.key)
			}
			v = x
			continue
		}
		a, ok := v.([]any)
		if str, isStr := v.(string); isStr {
			// uint8[] and char[] arrive as base64 strings.
			b, err := bytesField(str)
			if err != nil {
				return nil, fmt.Errorf("no element [%d]: %v", st.index, err)
			}
			a, ok = b, true
		}
		if !ok || st.index >= len(a) {
			return nil, fmt.Errorf("no element [%d]", st.index)
		}
		v = a[st.index]
	}
	return v, nil
}

// setPath returns msg with value placed at path, creating objects on the way
// (indexes need existing arrays, e.g. from the template).
func setPath(msg any, path []pathStep, value any) (any, error) {
	if len(path) == 0 {
		return value, nil
	}
	st := path[0]
	if st.index < 0 {
		m, _ := msg.(map[string]any)
		if m == nil {
			m = map[string]any{}
		}
		child, err := setPath(m[st.key], path[1:], value)
		if err != nil {
			return nil, err
		}
		m[st.key] = child
		return m, nil
	}
	a, ok := msg.([]any)
	if !ok || st.index >= len(a) {
		return nil, fmt.Errorf("no element [%d] in the template", st.index)
	}
	child, err := setPath(a[st.index], path[1:], value)
	if err != nil {
		return nil, err
	}
	a[st.index] = child
	return a, nil
}

// deepCopy copies a template of maps and slices (yaml or JSON decoded).
func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		a := make([]any, len(x))
		for i, e := range x {
			a[i] = deepCopy(e)
		}
		return a
	}
	return v
}
