package madsci

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Action statuses a node reports (ActionStatus, unchanged since v0.1).
const (
	StatusNotStarted = "not_started"
	StatusNotReady   = "not_ready"
	StatusRunning    = "running"
	StatusSucceeded  = "succeeded"
	StatusFailed     = "failed"
	StatusCancelled  = "cancelled"
	StatusPaused     = "paused"
	StatusUnknown    = "unknown"
)

// Admin commands of the node API.
const (
	AdminSafetyStop = "safety_stop"
	AdminReset      = "reset"
	AdminPause      = "pause"
	AdminResume     = "resume"
	AdminCancel     = "cancel"
	AdminLock       = "lock"
	AdminUnlock     = "unlock"
)

// NodeError is one entry of a node's errors lists.
type NodeError struct {
	Message   string `json:"message"`
	ErrorType string `json:"error_type,omitempty"`
	LoggedAt  string `json:"logged_at,omitempty"`
}

// NodeStatus is GET /status.
type NodeStatus struct {
	Busy             bool           `json:"busy"`
	Paused           bool           `json:"paused"`
	Locked           bool           `json:"locked"`
	Stopped          bool           `json:"stopped"`
	Errored          bool           `json:"errored"`
	Disconnected     bool           `json:"disconnected"`
	Initializing     bool           `json:"initializing"`
	RunningActions   []string       `json:"running_actions"`
	Errors           []NodeError    `json:"errors,omitempty"`
	WaitingForConfig []string       `json:"waiting_for_config,omitempty"`
	ConfigValues     map[string]any `json:"config_values,omitempty"`
	Ready            *bool          `json:"ready,omitempty"`
	Description      string         `json:"description,omitempty"`
}

// IsReady derives readiness from the booleans and waiting_for_config, not
// from the node's ready/description fields (a stopped node's description
// says "Node is ready").
func (s *NodeStatus) IsReady() bool {
	return !s.Busy && !s.Paused && !s.Locked && !s.Stopped && !s.Errored && !s.Disconnected &&
		!s.Initializing && len(s.WaitingForConfig) == 0
}

// NotReadyReasons lists the booleans that make the node not ready.
func (s *NodeStatus) NotReadyReasons() []string {
	var out []string
	for _, b := range []struct {
		on   bool
		name string
	}{{s.Busy, "busy"}, {s.Paused, "paused"}, {s.Locked, "locked"}, {s.Stopped, "stopped"},
		{s.Errored, "errored"}, {s.Disconnected, "disconnected"}, {s.Initializing, "initializing"}} {
		if b.on {
			out = append(out, b.name)
		}
	}
	if len(s.WaitingForConfig) > 0 {
		out = append(out, "waiting for config "+strings.Join(s.WaitingForConfig, ","))
	}
	return out
}

// OnlyRunning reports whether id is the node's one running action.
func (s *NodeStatus) OnlyRunning(id string) bool {
	return len(s.RunningActions) == 1 && s.RunningActions[0] == id
}

// Running reports whether id is among the node's running actions.
func (s *NodeStatus) Running(id string) bool {
	for _, r := range s.RunningActions {
		if r == id {
			return true
		}
	}
	return false
}

// ArgDef is one argument, location or file of an action in /info.
type ArgDef struct {
	Name         string `json:"name"`
	Description  string `json:"description,omitempty"`
	ArgumentType string `json:"argument_type,omitempty"`
	Required     bool   `json:"required"`
	Default      any    `json:"default,omitempty"`
}

// ResultDef is one declared result of an action.
type ResultDef struct {
	ResultLabel string `json:"result_label"`
	Description string `json:"description,omitempty"`
	ResultType  string `json:"result_type,omitempty"`
	// JSONSchema is a json result's schema; it wraps the value as
	// {"data": ...} (the wire value is not wrapped).
	JSONSchema map[string]any `json:"json_schema,omitempty"`
}

// ActionDef is one action of /info.
type ActionDef struct {
	Name             string               `json:"name"`
	Description      string               `json:"description,omitempty"`
	Blocking         *bool                `json:"blocking,omitempty"`
	Asynchronous     bool                 `json:"asynchronous,omitempty"`
	AcceptsVarArgs   bool                 `json:"accepts_var_args,omitempty"`
	AcceptsVarKwargs bool                 `json:"accepts_var_kwargs,omitempty"`
	Args             map[string]ArgDef    `json:"args,omitempty"`
	Locations        map[string]ArgDef    `json:"locations,omitempty"`
	Files            map[string]ArgDef    `json:"files,omitempty"`
	Results          map[string]ResultDef `json:"results,omitempty"`
}

// IsBlocking reports whether the action blocks the node (the default).
func (a ActionDef) IsBlocking() bool { return a.Blocking == nil || *a.Blocking }

// Capabilities is the capabilities block of /info.
type Capabilities struct {
	SendAdminCommands *bool    `json:"send_admin_commands,omitempty"`
	ActionFiles       *bool    `json:"action_files,omitempty"`
	AdminCommands     []string `json:"admin_commands"`
}

// Has reports whether the node implements the admin command.
func (c Capabilities) Has(cmd string) bool {
	if c.SendAdminCommands != nil && !*c.SendAdminCommands {
		return false
	}
	for _, x := range c.AdminCommands {
		if x == cmd {
			return true
		}
	}
	return false
}

// NodeInfo is GET /info.
type NodeInfo struct {
	NodeName        string               `json:"node_name"`
	NodeID          string               `json:"node_id,omitempty"`
	NodeDescription string               `json:"node_description,omitempty"`
	NodeType        string               `json:"node_type,omitempty"`
	ModuleName      string               `json:"module_name,omitempty"`
	ModuleVersion   string               `json:"module_version,omitempty"`
	NodeURL         string               `json:"node_url,omitempty"`
	Capabilities    Capabilities         `json:"capabilities"`
	Actions         map[string]ActionDef `json:"actions"`
	Config          map[string]any       `json:"config,omitempty"`
	ConfigSchema    json.RawMessage      `json:"config_schema,omitempty"`

	// ActionOrder and ConfigOrder are the key orders of actions and config
	// on the wire (filled by UnmarshalJSON, used by MarshalJSON).
	ActionOrder []string `json:"-"`
	ConfigOrder []string `json:"-"`
}

// ActionResult is RestActionResult (v0.5+) or ActionResult (v0.1-v0.4).
type ActionResult struct {
	ActionID         string            `json:"action_id"`
	Status           string            `json:"status"`
	Errors           []NodeError       `json:"errors,omitempty"`
	JSONResult       any               `json:"json_result,omitempty"`
	Files            any               `json:"files,omitempty"`
	Datapoints       map[string]string `json:"datapoints,omitempty"`
	HistoryCreatedAt string            `json:"history_created_at,omitempty"`
}

// Terminal reports whether the status is one the node will not leave.
func Terminal(status string) bool {
	switch status {
	case StatusSucceeded, StatusFailed, StatusCancelled, StatusNotReady:
		return true
	}
	return false
}

// hasErrorType reports whether any error has the type.
func (r *ActionResult) hasErrorType(t string) bool {
	for _, e := range r.Errors {
		if e.ErrorType == t {
			return true
		}
	}
	return false
}

// messages joins the errors' messages.
func messages(errs []NodeError) string {
	var parts []string
	for _, e := range errs {
		m := e.Message
		if e.ErrorType != "" {
			m = e.ErrorType + ": " + m
		}
		parts = append(parts, m)
	}
	if len(parts) == 0 {
		return "no error message from the node"
	}
	return strings.Join(parts, "; ")
}

// errorData renders node errors for job error data.
func errorData(errs []NodeError) []any {
	out := make([]any, 0, len(errs))
	for _, e := range errs {
		m := map[string]any{"message": e.Message}
		if e.ErrorType != "" {
			m["error_type"] = e.ErrorType
		}
		if e.LoggedAt != "" {
			m["logged_at"] = e.LoggedAt
		}
		out = append(out, m)
	}
	return out
}

// AdminReply is the answer of POST /admin/{cmd}.
type AdminReply struct {
	Success bool        `json:"success"`
	Errors  []NodeError `json:"errors,omitempty"`
	Data    any         `json:"data,omitempty"`
}

// Submission is one action to run: its name, JSON args and files (arg name ->
// local paths; one path for a single-file arg).
type Submission struct {
	Action string
	Args   map[string]any
	Files  map[string][]string
	// ListFiles names the file args that take a list (uploaded as repeated
	// "files" fields rather than one "file").
	ListFiles map[string]bool
}

// ActionNames lists the actions in the node's order (the order of the
// /info object, which is the order the node declared them), falling back
// to sorted names.
func (n *NodeInfo) ActionNames() []string { return orderOf(n.ActionOrder, n.Actions) }

// ConfigNames lists the config keys in the node's order.
func (n *NodeInfo) ConfigNames() []string { return orderOf(n.ConfigOrder, n.Config) }

func orderOf[V any](order []string, m map[string]V) []string {
	out := make([]string, 0, len(m))
	seen := map[string]bool{}
	for _, k := range order {
		if _, ok := m[k]; ok && !seen[k] {
			out = append(out, k)
			seen[k] = true
		}
	}
	for _, k := range sortedNames(m) {
		if !seen[k] {
			out = append(out, k)
		}
	}
	return out
}

type nodeInfoAlias NodeInfo

// UnmarshalJSON decodes /info and keeps the key order of actions and config.
func (n *NodeInfo) UnmarshalJSON(b []byte) error {
	if err := json.Unmarshal(b, (*nodeInfoAlias)(n)); err != nil {
		return err
	}
	var raw struct {
		Actions json.RawMessage `json:"actions"`
		Config  json.RawMessage `json:"config"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	n.ActionOrder = objectKeys(raw.Actions)
	n.ConfigOrder = objectKeys(raw.Config)
	return nil
}

// MarshalJSON encodes /info with actions and config in ActionOrder and
// ConfigOrder (the fake node serves them in declaration order).
func (n NodeInfo) MarshalJSON() ([]byte, error) {
	base, err := json.Marshal(nodeInfoAlias(n))
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(base, &m); err != nil {
		return nil, err
	}
	ordered := func(keys []string, get func(string) any) (json.RawMessage, error) {
		var buf bytes.Buffer
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			kb, _ := json.Marshal(k)
			vb, err := json.Marshal(get(k))
			if err != nil {
				return nil, err
			}
			buf.Write(kb)
			buf.WriteByte(':')
			buf.Write(vb)
		}
		buf.WriteByte('}')
		return buf.Bytes(), nil
	}
	if m["actions"], err = ordered(n.ActionNames(), func(k string) any { return n.Actions[k] }); err != nil {
		return nil, err
	}
	if n.Config != nil {
		if m["config"], err = ordered(n.ConfigNames(), func(k string) any { return n.Config[k] }); err != nil {
			return nil, err
		}
	}
	// Keep the field order stable: node fields first, then the rest sorted.
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, k := range sortedNames(m) {
		if i > 0 {
			buf.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		buf.Write(kb)
		buf.WriteByte(':')
		buf.Write(m[k])
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// objectKeys lists the keys of a JSON object in order.
func objectKeys(raw json.RawMessage) []string {
	if len(raw) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var keys []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return keys
		}
		k, _ := t.(string)
		keys = append(keys, k)
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return keys
		}
	}
	return keys
}
