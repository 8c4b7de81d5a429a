package mhp

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// DetailSelect is the tier name a Description carries when it answers a select.
const DetailSelect = "select"

// Description is the answer of device/describe: the descriptor seen at a
// detail tier, plus the live state. Detail decides what MarshalJSON writes:
//
//   - card: identity, state and the names of signals, settings and actions;
//   - summary: card + notes, instructions, physical, slim item tables, safety, resources;
//   - full: the whole descriptor + mhp version + state;
//   - select: id, state and the full specs of the selected items only (the
//     card or summary the agent read first gave the rest).
//
// The summary and select tiers leave out an item's approval when it is auto,
// the level an item without one has (spec §4.2); full keeps it.
//
// UnmarshalJSON reads every tier back: item lists of bare names become items
// with only Name set; an item given as an object without an approval is auto.
type Description struct {
	Detail string `json:"detail"`
	Descriptor
	State DeviceState `json:"state"`
	// Backend is the driver's link to its backend, when the driver tracks one.
	Backend *BackendLink `json:"backend,omitempty"`
}

// Describe renders the descriptor at the requested tier. An unknown tier or an
// unknown name in Select is an error (InvalidParams, UnknownName), never
// silently dropped. The default tier is full.
func Describe(d *Descriptor, state DeviceState, req DescribeRequest) (*Description, error) {
	out := &Description{Detail: req.Detail, State: state, Descriptor: *d}
	switch req.Detail {
	case "", DetailCard, DetailSummary, DetailFull:
	default:
		return nil, Errorf(CodeInvalidParams, "detail %q is not one of card, summary, full", req.Detail).With(DataField, "detail")
	}
	if req.Select != nil {
		out.Detail = DetailSelect
		sel := Descriptor{MHP: d.MHP, DeviceInfo: d.DeviceInfo, Safety: d.Safety}
		for _, n := range req.Select.Signals {
			s, ok := d.Signal(n)
			if !ok {
				return nil, Errorf(CodeUnknownName, "select: no signal %q", n).With(DataKind, "signal").With(DataName, n)
			}
			sel.Signals = append(sel.Signals, *s)
		}
		for _, n := range req.Select.Settings {
			s, ok := d.Setting(n)
			if !ok {
				return nil, Errorf(CodeUnknownName, "select: no setting %q", n).With(DataKind, "setting").With(DataName, n)
			}
			sel.Settings = append(sel.Settings, *s)
		}
		for _, n := range req.Select.Actions {
			a, ok := d.Action(n)
			if !ok {
				return nil, Errorf(CodeUnknownName, "select: no action %q", n).With(DataKind, "action").With(DataName, n)
			}
			sel.Actions = append(sel.Actions, *a)
		}
		out.Descriptor = sel
		return out, nil
	}
	if req.Detail == "" {
		out.Detail = DetailFull
	}
	if out.MHP == "" {
		out.MHP = ProtocolVersion
	}
	return out, nil
}

// MarshalJSON writes the tier's contents.
func (d *Description) MarshalJSON() ([]byte, error) {
	m := map[string]any{"detail": d.Detail, "state": d.State}
	if d.Backend != nil { // every tier: the link is part of the device's state
		m["backend"] = d.Backend
	}
	id := d.DeviceInfo
	put := func(k string, v any, keep bool) {
		if keep {
			m[k] = v
		}
	}
	put("id", id.ID, true)
	if d.Detail != DetailSelect { // a select follows a card or summary: identity is known
		put("class", id.Class, id.Class != "")
		put("make", id.Make, id.Make != "")
		put("model", id.Model, id.Model != "")
		put("serial", id.Serial, id.Serial != "")
		put("location", id.Location, id.Location != "")
		put("tags", id.Tags, len(id.Tags) > 0)
		put("description", id.Description, id.Description != "")
	}
	switch d.Detail {
	case DetailCard:
		m["signals"] = names(d.Signals, func(s Signal) string { return s.Name })
		m["settings"] = names(d.Settings, func(s Setting) string { return s.Name })
		m["actions"] = names(d.Actions, func(a Action) string { return a.Name })
	case DetailSummary:
		put("notes", d.Notes, d.Notes != "")
		put("instructions", d.Instructions, d.Instructions != "")
		put("physical", d.Physical, d.Physical != nil)
		sig := make([]map[string]any, 0, len(d.Signals))
		for _, s := range d.Signals {
			sig = append(sig, slim(map[string]any{"name": s.Name, "type": s.Type, "unit": s.Unit}))
		}
		set := make([]map[string]any, 0, len(d.Settings))
		for _, s := range d.Settings {
			set = append(set, slim(map[string]any{"name": s.Name, "type": s.Type, "unit": s.Unit, "limits": s.Limits,
				"approval": s.Approval, "interlocks": s.Interlocks, "during_job": s.DuringJob}))
		}
		act := make([]map[string]any, 0, len(d.Actions))
		for _, a := range d.Actions {
			act = append(act, slim(map[string]any{"name": a.Name, "duration": a.Duration, "approval": a.Approval,
				"interlocks": a.Interlocks, "params": a.Params.Names(), "concurrent": a.Concurrent,
				"cancellable": a.Cancellable, "pausable": a.Pausable}))
		}
		m["signals"], m["settings"], m["actions"] = sig, set, act
		m["safety"] = d.Safety
		put("resources", d.Resources, len(d.Resources) > 0)
	case DetailFull, DetailSelect:
		type full Descriptor
		b, err := json.Marshal((*full)(&d.Descriptor))
		if err != nil {
			return nil, err
		}
		var fm map[string]any
		if err := json.Unmarshal(b, &fm); err != nil {
			return nil, err
		}
		for k, v := range fm {
			m[k] = v
		}
		m["detail"], m["state"] = d.Detail, d.State
		if d.Detail == DetailFull {
			m["mhp"] = d.MHP
		} else {
			for _, k := range []string{"mhp", "safety", "class", "make", "model", "serial", "location", "description", "tags"} {
				delete(m, k)
			}
			dropAutoApproval(m["settings"])
			dropAutoApproval(m["actions"])
		}
	default:
		return nil, fmt.Errorf("description: unknown detail %q", d.Detail)
	}
	return json.Marshal(m)
}

// UnmarshalJSON reads any tier; bare item names become items with Name only.
func (d *Description) UnmarshalJSON(b []byte) error {
	var head struct {
		Detail   string            `json:"detail"`
		State    DeviceState       `json:"state"`
		Backend  *BackendLink      `json:"backend"`
		Signals  []json.RawMessage `json:"signals"`
		Settings []json.RawMessage `json:"settings"`
		Actions  []json.RawMessage `json:"actions"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return err
	}
	type plain Descriptor
	var rest struct {
		plain
		Signals  json.RawMessage `json:"signals,omitempty"`
		Settings json.RawMessage `json:"settings,omitempty"`
		Actions  json.RawMessage `json:"actions,omitempty"`
	}
	if err := json.Unmarshal(b, &rest); err != nil {
		return err
	}
	d.Detail, d.State, d.Descriptor, d.Backend = head.Detail, head.State, Descriptor(rest.plain), head.Backend
	d.Signals, d.Settings, d.Actions = nil, nil, nil
	for _, raw := range head.Signals {
		var s Signal
		if err := itemOrName(raw, &s, &s.Name); err != nil {
			return fmt.Errorf("signals: %w", err)
		}
		d.Signals = append(d.Signals, s)
	}
	for _, raw := range head.Settings {
		var s Setting
		if err := itemOrName(raw, &s, &s.Name); err != nil {
			return fmt.Errorf("settings: %w", err)
		}
		if isObject(raw) {
			autoIfUnset(&s.Approval)
		}
		d.Settings = append(d.Settings, s)
	}
	for _, raw := range head.Actions {
		var a Action
		var probe struct {
			Params json.RawMessage `json:"params"`
		}
		_ = json.Unmarshal(raw, &probe)
		if len(probe.Params) > 0 && probe.Params[0] == '[' {
			// summary tier: params are a list of names
			var slimA struct {
				Action
				Params []string `json:"params"`
			}
			if err := json.Unmarshal(raw, &slimA); err != nil {
				return fmt.Errorf("actions: %w", err)
			}
			a = slimA.Action
			for _, n := range slimA.Params {
				a.Params = append(a.Params, Param{Name: n})
			}
		} else if err := itemOrName(raw, &a, &a.Name); err != nil {
			return fmt.Errorf("actions: %w", err)
		}
		if isObject(raw) {
			autoIfUnset(&a.Approval)
		}
		d.Actions = append(d.Actions, a)
	}
	return nil
}

func itemOrName(raw json.RawMessage, item any, name *string) error {
	if len(raw) > 0 && raw[0] == '"' {
		return json.Unmarshal(raw, name)
	}
	return json.Unmarshal(raw, item)
}

// dropAutoApproval removes approval "auto" from a list of marshalled items:
// an item without an approval is auto.
func dropAutoApproval(items any) {
	list, _ := items.([]any)
	for _, it := range list {
		if m, ok := it.(map[string]any); ok && m["approval"] == string(ApprovalAuto) {
			delete(m, "approval")
		}
	}
}

func isObject(raw json.RawMessage) bool {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	return len(raw) > 0 && raw[0] == '{'
}

// autoIfUnset is the approval of an item read as an object: auto when the
// answer left it out.
func autoIfUnset(a *Approval) {
	if *a == "" {
		*a = ApprovalAuto
	}
}

func names[T any](items []T, name func(T) string) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = name(it)
	}
	return out
}

// slim drops zero values so summary tables stay small.
func slim(m map[string]any) map[string]any {
	for k, v := range m {
		switch x := v.(type) {
		case string:
			if x == "" {
				delete(m, k)
			}
		case Approval:
			if x == "" || x == ApprovalAuto { // auto is what an item without one has
				delete(m, k)
			}
		case bool:
			if !x {
				delete(m, k)
			}
		case []string:
			if len(x) == 0 {
				delete(m, k)
			}
		case *Limits:
			if x.Empty() {
				delete(m, k)
			}
		case nil:
			delete(m, k)
		}
	}
	return m
}
