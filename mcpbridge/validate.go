package mcpbridge

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/openmhp/mhp-go"
)

// validate checks a tool's arguments (decoded with json.Number) against its
// input schema: the subset of JSON Schema the bridge's schemas use (type,
// enum, minimum, maximum, items, properties, required, $ref to #/$defs).
// An object schema with properties is closed (an unknown argument is
// refused, naming the known ones) unless it says additionalProperties: true;
// the listed schemas leave additionalProperties out to keep tools/list small. The first mismatch is an
// InvalidParams error naming the argument, what it wants and what came.
func validate(tool string, schema map[string]any, args map[string]any) error {
	defs, _ := schema["$defs"].(map[string]any)
	if msg := check(defs, schema, args, ""); msg != "" {
		field, _, _ := strings.Cut(msg, ": ")
		return mhp.Errorf(mhp.CodeInvalidParams, "%s: argument %s", tool, msg).With(mhp.DataField, field).With(mhp.DataReason, "schema")
	}
	return nil
}

// check returns "path: problem" for the first mismatch of v against s, or "".
func check(defs, s map[string]any, v any, path string) string {
	if ref, ok := s["$ref"].(string); ok {
		d, _ := defs[strings.TrimPrefix(ref, "#/$defs/")].(map[string]any)
		if d == nil {
			return fmt.Sprintf("%s: schema has a dangling $ref %s", name(path), ref)
		}
		return check(defs, d, v, path)
	}
	if t, ok := s["type"].(string); ok {
		if got := jsonType(v); got != t && !(t == "number" && got == "integer") {
			return fmt.Sprintf("%s: want %s, got %s", name(path), t, describeValue(v))
		}
	}
	if enum, ok := s["enum"].([]string); ok {
		str, _ := v.(string)
		if !slices.Contains(enum, str) {
			return fmt.Sprintf("%s: want one of %s, got %s", name(path), strings.Join(enum, ", "), describeValue(v))
		}
	}
	if n, ok := v.(json.Number); ok {
		f, err := n.Float64()
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return fmt.Sprintf("%s: %s is not a finite number", name(path), n)
		}
		if lo, ok := asFloat(s["minimum"]); ok && f < lo {
			return fmt.Sprintf("%s: %s is below the minimum %g", name(path), n, lo)
		}
		if hi, ok := asFloat(s["maximum"]); ok && f > hi {
			return fmt.Sprintf("%s: %s is above the maximum %g", name(path), n, hi)
		}
	}
	if list, ok := v.([]any); ok {
		if items, ok := s["items"].(map[string]any); ok {
			for i, e := range list {
				if msg := check(defs, items, e, fmt.Sprintf("%s[%d]", path, i)); msg != "" {
					return msg
				}
			}
		}
	}
	if m, ok := v.(map[string]any); ok {
		props, closed := s["properties"].(map[string]any)
		closed = closed && s["additionalProperties"] != true // closed unless said open
		if req, ok := s["required"].([]string); ok {
			for _, k := range req {
				if _, ok := m[k]; !ok {
					return fmt.Sprintf("%s: is required", join(path, k))
				}
			}
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			ps, ok := props[k].(map[string]any)
			if !ok {
				if closed {
					known := make([]string, 0, len(props))
					for p := range props {
						known = append(known, p)
					}
					sort.Strings(known)
					return fmt.Sprintf("%s: is not an argument here (known: %s)", join(path, k), strings.Join(known, ", "))
				}
				continue
			}
			if msg := check(defs, ps, m[k], join(path, k)); msg != "" {
				return msg
			}
		}
	}
	return ""
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func name(path string) string {
	if path == "" {
		return "(arguments)"
	}
	return path
}

func jsonType(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case json.Number:
		if f, err := x.Float64(); err == nil && f == math.Trunc(f) {
			return "integer" // JSON Schema: 3.0 is an integer
		}
		return "number"
	case float64:
		if x == math.Trunc(x) {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// describeValue names a value's type and a short rendering of it.
func describeValue(v any) string {
	return jsonType(v) + " " + mhp.Truncate(jsonText(v), 40)
}

func asFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int:
		return float64(x), true
	}
	return 0, false
}
