package madsci

import (
	"encoding/json"
	"sort"
	"strings"

	"github.com/openmhp/mhp-go"
)

// shapeOfPython maps a MADSci argument_type (Python type text) onto an MHP
// shape. The bool result says whether None is allowed (Optional[...]).
func shapeOfPython(t string) (*mhp.Shape, bool) {
	t = strings.TrimSpace(t)
	t = strings.TrimPrefix(t, "typing.")
	optional := false
	if inner, ok := unwrap(t, "Optional"); ok {
		t, optional = inner, true
	}
	if parts := splitUnion(t); len(parts) > 1 {
		var rest []string
		for _, p := range parts {
			if p == "None" || p == "NoneType" {
				optional = true
				continue
			}
			rest = append(rest, p)
		}
		if len(rest) == 1 {
			s, _ := shapeOfPython(rest[0])
			return s, optional
		}
		return &mhp.Shape{Type: mhp.TypeAny, Notes: "python type " + t}, optional
	}
	lower := strings.ToLower(t)
	switch lower {
	case "str", "string", "path", "pathlib.path", "posixpath":
		return &mhp.Shape{Type: mhp.TypeString}, optional
	case "int":
		return &mhp.Shape{Type: mhp.TypeInteger}, optional
	case "float", "number":
		return &mhp.Shape{Type: mhp.TypeNumber}, optional
	case "bool":
		return &mhp.Shape{Type: mhp.TypeBoolean}, optional
	case "dict", "object":
		return &mhp.Shape{Type: mhp.TypeObject}, optional
	case "list", "tuple", "set":
		return &mhp.Shape{Type: mhp.TypeArray}, optional
	case "any", "":
		return &mhp.Shape{Type: mhp.TypeAny}, optional
	}
	for _, pfx := range []string{"list", "List", "tuple", "Tuple", "set", "Set", "Sequence"} {
		if inner, ok := unwrap(t, pfx); ok {
			s := &mhp.Shape{Type: mhp.TypeArray}
			if parts := splitTop(inner); len(parts) == 1 && parts[0] != "..." {
				s.Items, _ = shapeOfPython(parts[0])
			}
			return s, optional
		}
	}
	for _, pfx := range []string{"dict", "Dict", "Mapping"} {
		if _, ok := unwrap(t, pfx); ok {
			return &mhp.Shape{Type: mhp.TypeObject}, optional
		}
	}
	if inner, ok := unwrap(t, "Literal"); ok {
		var enum []any
		for _, p := range splitTop(inner) {
			var v any
			if err := json.Unmarshal([]byte(strings.ReplaceAll(p, "'", "\"")), &v); err == nil {
				enum = append(enum, v)
			}
		}
		s := &mhp.Shape{Type: mhp.TypeAny}
		if len(enum) > 0 {
			s.Limits = &mhp.Limits{Enum: enum}
			switch enum[0].(type) {
			case string:
				s.Type = mhp.TypeString
			case float64:
				s.Type = mhp.TypeNumber
			}
		}
		return s, optional
	}
	// A model name or anything else: not checked beyond JSON.
	return &mhp.Shape{Type: mhp.TypeAny, Notes: "python type " + t}, optional
}

// unwrap returns the inside of "Name[...]".
func unwrap(t, name string) (string, bool) {
	if strings.HasPrefix(t, name+"[") && strings.HasSuffix(t, "]") {
		return strings.TrimSpace(t[len(name)+1 : len(t)-1]), true
	}
	return "", false
}

// splitTop splits on commas outside brackets.
func splitTop(s string) []string {
	return splitOn(s, ',')
}

// splitUnion splits "A | B" (and Union[A, B]) at the top level.
func splitUnion(t string) []string {
	if inner, ok := unwrap(t, "Union"); ok {
		return splitTop(inner)
	}
	return splitOn(t, '|')
}

func splitOn(s string, sep byte) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[', '(':
			depth++
		case ']', ')':
			depth--
		case sep:
			if depth == 0 {
				out = append(out, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	out = append(out, strings.TrimSpace(s[start:]))
	return out
}

// isListFile reports whether a file arg takes several files.
func isListFile(t string) bool {
	l := strings.ToLower(strings.TrimSpace(t))
	return strings.HasPrefix(l, "list") || strings.HasPrefix(l, "optional[list")
}

// locationShape is a MADSci location argument.
func locationShape() *mhp.Shape {
	return &mhp.Shape{Type: mhp.TypeObject, Properties: map[string]*mhp.Shape{
		"representation": {Type: mhp.TypeAny},
		"resource_id":    {Type: mhp.TypeString},
		"location_name":  {Type: mhp.TypeString},
		"reservation":    {Type: mhp.TypeAny},
	}, Required: []string{"representation"}, Notes: "MADSci location: {representation, resource_id?, location_name?, reservation?}"}
}

// inferType is the MHP type of a JSON value.
func inferType(v any) string {
	switch v.(type) {
	case bool:
		return mhp.TypeBoolean
	case float64, json.Number, int, int64:
		return mhp.TypeNumber
	case string:
		return mhp.TypeString
	case []any:
		return mhp.TypeArray
	case map[string]any:
		return mhp.TypeObject
	}
	return mhp.TypeAny
}

// flatten turns nested objects into dotted keys; arrays and scalars are
// leaves, an empty object is a leaf, depth is bounded.
func flatten(m map[string]any) map[string]any {
	out := map[string]any{}
	var walk func(prefix string, v any, depth int)
	walk = func(prefix string, v any, depth int) {
		if sub, ok := v.(map[string]any); ok && len(sub) > 0 && depth < 4 {
			for k, x := range sub {
				walk(prefix+"."+k, x, depth+1)
			}
			return
		}
		out[prefix] = v
	}
	for k, v := range m {
		walk(k, v, 1)
	}
	return out
}

// schemaProp is one property of the node's config_schema.
type schemaProp struct {
	Type        any      `json:"type"`
	AnyOf       []schema `json:"anyOf"`
	Enum        []any    `json:"enum"`
	Minimum     *float64 `json:"minimum"`
	Maximum     *float64 `json:"maximum"`
	Description string   `json:"description"`
	Title       string   `json:"title"`
	// Runtime marks a key the node means to be set at run time
	// (json_schema_extra={"x-mhp-setting": true} on the pydantic field).
	Runtime bool `json:"x-mhp-setting"`
}

type schema struct {
	Type any `json:"type"`
}

// configShapes reads config_schema's properties as setting shapes.
func configShapes(raw json.RawMessage) map[string]*mhp.Shape {
	out := map[string]*mhp.Shape{}
	if len(raw) == 0 {
		return out
	}
	var s struct {
		Properties map[string]schemaProp `json:"properties"`
	}
	if json.Unmarshal(raw, &s) != nil {
		return out
	}
	for name, p := range s.Properties {
		t := jsonSchemaType(p.Type)
		if t == "" {
			for _, a := range p.AnyOf {
				if x := jsonSchemaType(a.Type); x != "" && x != "null" {
					t = x
					break
				}
			}
		}
		if !mhp.IsType(t) {
			t = ""
		}
		sh := &mhp.Shape{Type: t, Notes: p.Description}
		if p.Minimum != nil || p.Maximum != nil || len(p.Enum) > 0 {
			sh.Limits = &mhp.Limits{Min: p.Minimum, Max: p.Maximum, Enum: p.Enum}
		}
		out[name] = sh
	}
	return out
}

func jsonSchemaType(t any) string {
	switch x := t.(type) {
	case string:
		return x
	case []any:
		for _, e := range x {
			if s, ok := e.(string); ok && s != "null" {
				return s
			}
		}
	}
	return ""
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// PythonType is the MHP type a MADSci argument_type maps onto.
func PythonType(t string) string {
	s, _ := shapeOfPython(t)
	return s.Type
}

// runtimeKeys lists the config keys whose config_schema property carries
// "x-mhp-setting": true: the node marks them as meant to be set at run time.
func runtimeKeys(raw json.RawMessage) map[string]bool {
	out := map[string]bool{}
	var s struct {
		Properties map[string]schemaProp `json:"properties"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &s) != nil {
		return out
	}
	for name, p := range s.Properties {
		if p.Runtime {
			out[name] = true
		}
	}
	return out
}

// infrastructureKey reports a node config key that wires the node itself
// (where it listens, who it is, how it rate-limits, how uvicorn runs): it is
// never a setting, whatever the config file or the node's schema says.
func infrastructureKey(k string) bool {
	switch k {
	case "node_url", "node_id", "node_name", "node_definition", "node_info_path", "enable_rate_limiting", "uvicorn_kwargs":
		return true
	}
	return strings.HasPrefix(k, "rate_limit") || strings.HasPrefix(k, "uvicorn")
}
