package client

import (
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"strings"

	"github.com/openmhp/mhp-go"
)

// The client reads every shape the spec leaves open, so that it works
// against other implementations (the Python reference among them), and never
// panics on an odd answer:
//
//   - device/describe: identity under "device" (the reference's full tier)
//     is lifted to the top level;
//   - safety/limits: a setting or action mapped to its bare limits
//     ({min,max}, {enum} or [min,max]) with approval levels in a separate
//     "approval" map becomes an envelope {limits, approval};
//   - safety/estop: the jobs stopped may be listed as "cancelled" or
//     "cancelling"; both names are filled, so the result type may use either;
//   - safety/reset: "verified" may be a boolean or a string ("true",
//     "false", or the reference's detail such as "all signals readable",
//     which says the recovery was verified);
//   - settings/write and actions/invoke dry runs: notes (needsApproval,
//     needsLease, leaseHeldBy, busyNow) at the top level move under "notes",
//     and busyNow given as the reason text reads as true;
//     a wouldWrite of {name: value} without "name" becomes name and value;
//     a job whose state is "dryRun" marks the result a dry run;
//   - jobs: an "error" that is a string becomes an error object;
//   - everywhere: numbers as ints or floats or numeric strings, booleans as
//     "true"/"false", a single value where a list is expected, null, and
//     values of a type that cannot be read (dropped, left at zero) —
//     a field never fails the whole answer.

// decodeResult decodes a result into out leniently (see above).
func decodeResult(method string, raw json.RawMessage, out any) error {
	if !shaped(method) {
		if err := unmarshalExact(raw, out); err == nil {
			return nil
		}
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return mhp.Errorf(mhp.CodeInternal, "%s: unreadable result: %v", method, err)
	}
	v = normalize(method, v)
	if t := reflect.TypeOf(out); t != nil && t.Kind() == reflect.Pointer {
		if c, keep := coerce(v, t.Elem()); keep {
			v = c
		} else {
			v = nil
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return mhp.Errorf(mhp.CodeInternal, "%s: unreadable result: %v", method, err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return mhp.Errorf(mhp.CodeInternal, "%s: unreadable result: %v", method, err)
	}
	return nil
}

// shaped reports methods whose answers have open shapes beyond types.
func shaped(method string) bool {
	switch method {
	case mhp.MethodDescribe, mhp.MethodSafetyLimits, mhp.MethodSafetyEStop, mhp.MethodSafetyReset, mhp.MethodSettingsWrite, mhp.MethodActionsInvoke,
		mhp.MethodJobsStatus, mhp.MethodJobsCancel, mhp.MethodJobsPause, mhp.MethodJobsResume, mhp.MethodJobsList:
		return true
	}
	return false
}

// normalize rewrites the open shapes of one method's result.
func normalize(method string, v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	switch method {
	case mhp.MethodDescribe:
		liftDevice(m)
	case mhp.MethodSafetyLimits:
		approval, _ := m["approval"].(map[string]any)
		for _, sec := range []string{"settings", "actions"} {
			items, ok := m[sec].(map[string]any)
			if !ok {
				continue
			}
			for name, e := range items {
				items[name] = envelope(sec, e, approval[name])
			}
		}
	case mhp.MethodSafetyEStop:
		// Older servers (and the reference) say "cancelled"; the result type
		// reads "cancelling".
		if c, hasC := m["cancelled"]; hasC {
			if _, hasG := m["cancelling"]; !hasG {
				if one, ok := c.(string); ok {
					c = []any{one}
				}
				if _, ok := c.([]any); ok {
					m["cancelling"] = c
				}
			}
			delete(m, "cancelled")
		}
	case mhp.MethodSafetyReset:
		// A textual verified (the reference's) is a boolean here; its text
		// goes to verifiedText, which mhp.ResetResult keeps.
		if s, ok := m["verified"].(string); ok {
			m["verified"], m["verifiedText"] = mhp.VerifiedText(s), s
		}
	case mhp.MethodSettingsWrite:
		liftNotes(m)
		if ww, ok := m["wouldWrite"].(map[string]any); ok && len(ww) == 1 && m["name"] == nil {
			for k, val := range ww {
				m["name"], m["wouldWrite"] = k, val
			}
		}
	case mhp.MethodActionsInvoke:
		liftNotes(m)
		if j, ok := m["job"].(map[string]any); ok {
			if j["state"] == "dryRun" && m["dryRun"] == nil {
				m["dryRun"] = true
			}
			normalizeJob(j)
		}
	case mhp.MethodJobsStatus, mhp.MethodJobsCancel, mhp.MethodJobsPause, mhp.MethodJobsResume:
		if j, ok := m["job"].(map[string]any); ok {
			normalizeJob(j)
		}
	case mhp.MethodJobsList:
		if l, ok := m["jobs"].([]any); ok {
			for _, j := range l {
				if jm, ok := j.(map[string]any); ok {
					normalizeJob(jm)
				}
			}
		}
	}
	return m
}

// liftDevice copies identity from a "device" object to the top level.
func liftDevice(m map[string]any) {
	d, ok := m["device"].(map[string]any)
	if !ok {
		return
	}
	for k, v := range d {
		if _, has := m[k]; !has {
			m[k] = v
		}
	}
}

// liftNotes moves top-level dry-run notes under "notes".
func liftNotes(m map[string]any) {
	if n, ok := m["notes"].(map[string]any); ok {
		busyText(n)
		return
	}
	if _, has := m["notes"]; has {
		return
	}
	notes := map[string]any{}
	for _, k := range []string{"needsApproval", "needsLease", "leaseHeldBy", "busyNow"} {
		if v, ok := m[k]; ok {
			notes[k] = v
		}
	}
	if len(notes) > 0 {
		busyText(notes)
		m["notes"] = notes
	}
}

// busyText reads busyNow given as the reason (the reference's shape) as true.
func busyText(notes map[string]any) {
	if s, ok := notes["busyNow"].(string); ok {
		notes["busyNow"] = s != ""
	}
}

// envelope turns bare limits into {limits, approval}; an envelope stays.
func envelope(sec string, e, approval any) any {
	m, isMap := e.(map[string]any)
	if isMap {
		for _, k := range []string{"limits", "approval", "interlocks", "unit", "during_job"} {
			if _, ok := m[k]; ok {
				return m // already an envelope
			}
		}
	}
	out := map[string]any{}
	if approval != nil {
		out["approval"] = approval
	}
	switch sec {
	case "settings":
		if l := bareLimits(e); l != nil {
			out["limits"] = l
		}
	case "actions": // {param: bound}
		params := map[string]any{}
		for p, b := range m {
			if l := bareLimits(b); l != nil {
				params[p] = l
			}
		}
		if len(params) > 0 {
			out["limits"] = params
		}
	}
	return out
}

// bareLimits reads {min,max,...}, {enum} or [min,max]; nil when empty.
func bareLimits(v any) map[string]any {
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 0 {
			return nil
		}
		return x
	case []any:
		if len(x) == 2 {
			return map[string]any{"min": x[0], "max": x[1]}
		}
	}
	return nil
}

// normalizeJob turns a string error into an error object.
func normalizeJob(j map[string]any) {
	if s, ok := j["error"].(string); ok {
		j["error"] = map[string]any{"code": int(mhp.CodeServerError), "message": s}
	}
}

var unmarshalerType = reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()

// coerce converts a decoded JSON value toward type t; keep is false when the
// value cannot be read as t (the field is then dropped).
func coerce(v any, t reflect.Type) (any, bool) {
	if v == nil {
		return nil, true
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		// The type reads itself; a struct's fields still get their types
		// (mhp.EStopResult reads "cancelled" itself but not "stopped":"true").
		// Only scalar fields are coerced: its lists and objects may come in
		// shapes only it knows (a card's name lists).
		if m, ok := v.(map[string]any); ok && t.Kind() == reflect.Struct {
			coerceScalarFields(m, t)
			return m, true
		}
		return v, true
	}
	switch t.Kind() {
	case reflect.Interface:
		return v, true
	case reflect.Bool:
		switch x := v.(type) {
		case bool:
			return x, true
		case string:
			b, err := strconv.ParseBool(strings.TrimSpace(x))
			return b, err == nil
		case float64:
			return x != 0, x == 0 || x == 1
		}
		return nil, false
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		f, ok := number(v)
		if !ok || f != math.Trunc(f) {
			return nil, false
		}
		return f, true
	case reflect.Float32, reflect.Float64:
		return number(v)
	case reflect.String:
		switch x := v.(type) {
		case string:
			return x, true
		case float64:
			return strconv.FormatFloat(x, 'g', -1, 64), true
		case bool:
			return strconv.FormatBool(x), true
		}
		return nil, false
	case reflect.Slice, reflect.Array:
		l, ok := v.([]any)
		if !ok {
			l = []any{v} // a single value where a list is expected
		}
		out := make([]any, 0, len(l))
		for _, e := range l {
			if c, keep := coerce(e, t.Elem()); keep {
				out = append(out, c)
			}
		}
		return out, true
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		for k, e := range m {
			if c, keep := coerce(e, t.Elem()); keep {
				m[k] = c
			} else {
				delete(m, k)
			}
		}
		return m, true
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		coerceFields(m, t)
		return m, true
	}
	return v, true
}

// number reads a number, or a string holding one.
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return 0, false
		}
		return f, true
	}
	return 0, false
}

// coerceScalarFields coerces the keys of m that name bool, number or string
// fields of struct type t (top level only).
func coerceScalarFields(m map[string]any, t reflect.Type) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "" || name == "-" {
			continue
		}
		switch f.Type.Kind() {
		case reflect.Bool, reflect.String, reflect.Float32, reflect.Float64, reflect.Int, reflect.Int64, reflect.Int32:
		default:
			continue
		}
		v, ok := m[name]
		if !ok {
			continue
		}
		if c, keep := coerce(v, f.Type); keep {
			m[name] = c
		} else {
			delete(m, name)
		}
	}
}

// coerceFields coerces the keys of m that name fields of struct type t
// (embedded structs included, as encoding/json flattens them).
func coerceFields(m map[string]any, t reflect.Type) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				coerceFields(m, ft)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		key, ok := "", false
		if _, ok = m[name]; ok {
			key = name
		} else {
			for k := range m {
				if strings.EqualFold(k, name) {
					key, ok = k, true
					break
				}
			}
		}
		if !ok {
			continue
		}
		if c, keep := coerce(m[key], f.Type); keep {
			m[key] = c
		} else {
			delete(m, key)
		}
	}
}

// EStopJobs returns the jobs an estop result lists as stopping (the wire's
// "cancelling", or "cancelled" from older servers, which [mhp.EStopResult]
// decodes into Cancelling): jobs whose cancel was requested, not their end
// states (those come from the backend).
func EStopJobs(r *mhp.EStopResult) []string {
	if r == nil {
		return nil
	}
	return r.Cancelling
}
