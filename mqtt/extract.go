package mqtt

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/openmhp/mhp-go"
)

// errNoValue says a payload carries no value (empty, null or a missing
// field): the signal is unavailable.
type errNoValue struct{ why string }

func (e errNoValue) Error() string { return e.why }

// decodeJSON decodes a payload keeping numbers exact until converted.
func decodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// lookup walks a path through a decoded JSON document. A path starting with
// "/" is a JSON pointer (RFC 6901); otherwise it is dotted ("a.b.0"). An
// empty path is the document itself.
func lookup(doc any, path string) (any, bool) {
	if path == "" {
		return doc, true
	}
	var parts []string
	if strings.HasPrefix(path, "/") {
		for _, p := range strings.Split(path[1:], "/") {
			p = strings.ReplaceAll(p, "~1", "/")
			parts = append(parts, strings.ReplaceAll(p, "~0", "~"))
		}
	} else {
		parts = strings.Split(path, ".")
	}
	cur := doc
	for _, p := range parts {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[p]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// extract turns a payload into a value of the MHP type typ. With a path the
// payload is JSON and the value is at the path; without one the payload is
// the raw value, parsed by the type (a number's text, true/false/on/off/1/0,
// a string as is, JSON for object, array and any).
func extract(payload []byte, path, typ string) (any, error) {
	if len(bytes.TrimSpace(payload)) == 0 {
		return nil, errNoValue{"empty payload (retained value cleared)"}
	}
	if path != "" {
		doc, err := decodeJSON(payload)
		if err != nil {
			return nil, fmt.Errorf("payload is not JSON: %w", err)
		}
		v, ok := lookup(doc, path)
		if !ok {
			return nil, errNoValue{fmt.Sprintf("payload has no %q", path)}
		}
		return convert(v, typ, false)
	}
	text := strings.TrimSpace(string(payload))
	switch typ {
	case mhp.TypeNumber, mhp.TypeInteger, mhp.TypeBoolean:
		return convert(text, typ, true)
	case mhp.TypeString:
		return text, nil
	default:
		doc, err := decodeJSON(payload)
		if err != nil {
			if typ == "" || typ == mhp.TypeAny {
				return text, nil
			}
			return nil, fmt.Errorf("payload is not JSON: %w", err)
		}
		return convert(doc, typ, false)
	}
}

// convert coerces an extracted value to typ. Numbers become float64,
// integers int64. Text from a raw payload is parsed by the type; a JSON
// value must already have the type (a JSON "true" string is not a boolean,
// so it never closes an interlock).
func convert(v any, typ string, text bool) (any, error) {
	if v == nil {
		return nil, errNoValue{"value is null"}
	}
	if !text {
		if err := jsonKind(v, typ); err != nil {
			return nil, err
		}
	}
	switch typ {
	case mhp.TypeNumber:
		f, err := toFloat(v)
		if err != nil {
			return nil, err
		}
		return f, nil
	case mhp.TypeInteger:
		f, err := toFloat(v)
		if err != nil {
			return nil, err
		}
		if f != math.Trunc(f) || math.Abs(f) > 1<<53 {
			return nil, fmt.Errorf("%v is not an integer", v)
		}
		return int64(f), nil
	case mhp.TypeBoolean:
		switch b := v.(type) {
		case bool:
			return b, nil
		case json.Number:
			return parseBool(b.String())
		case string:
			return parseBool(b)
		}
		return nil, fmt.Errorf("%v is not a boolean", v)
	case mhp.TypeString:
		switch s := v.(type) {
		case string:
			return s, nil
		case json.Number:
			return s.String(), nil
		case bool:
			return strconv.FormatBool(s), nil
		}
		return nil, fmt.Errorf("%v is not a string", v)
	case mhp.TypeObject:
		if _, ok := v.(map[string]any); !ok {
			return nil, fmt.Errorf("value is not an object")
		}
		return plain(v), nil
	case mhp.TypeArray:
		if _, ok := v.([]any); !ok {
			return nil, fmt.Errorf("value is not an array")
		}
		return plain(v), nil
	}
	return plain(v), nil
}

// jsonKind checks that a decoded JSON value has the MHP scalar type.
func jsonKind(v any, typ string) error {
	ok := true
	switch typ {
	case mhp.TypeNumber, mhp.TypeInteger:
		_, ok = v.(json.Number)
	case mhp.TypeBoolean:
		_, ok = v.(bool)
	case mhp.TypeString:
		_, ok = v.(string)
	}
	if !ok {
		b, _ := json.Marshal(v)
		return fmt.Errorf("JSON value %s is not a %s", b, typ)
	}
	return nil
}

func toFloat(v any) (float64, error) {
	var f float64
	var err error
	switch n := v.(type) {
	case json.Number:
		f, err = n.Float64()
	case string:
		f, err = strconv.ParseFloat(strings.TrimSpace(n), 64)
	case float64:
		f = n
	case int64:
		f = float64(n)
	case int:
		f = float64(n)
	default:
		return 0, fmt.Errorf("%v is not a number", v)
	}
	if err != nil {
		return 0, fmt.Errorf("%q is not a number", fmt.Sprint(v))
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%v is not a finite number", v)
	}
	return f, nil
}

func parseBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true", "1", "on", "yes":
		return true, nil
	case "false", "0", "off", "no":
		return false, nil
	}
	return false, fmt.Errorf("%q is not a boolean", s)
}

// plain replaces json.Number with float64 throughout a decoded document.
func plain(v any) any {
	switch x := v.(type) {
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return x.String()
		}
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = plain(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = plain(e)
		}
		return x
	}
	return v
}

// encodeValue renders a setting's value for a command payload. raw writes a
// scalar as plain text (42.5, true, idle); otherwise the value is JSON.
func encodeValue(v any, raw bool) ([]byte, error) {
	if raw {
		switch x := v.(type) {
		case string:
			return []byte(x), nil
		case float64:
			return []byte(strconv.FormatFloat(x, 'g', -1, 64)), nil
		case int64:
			return []byte(strconv.FormatInt(x, 10)), nil
		case bool:
			return []byte(strconv.FormatBool(x)), nil
		}
	}
	return json.Marshal(v)
}

// sameValue compares a confirmed state value with the written target:
// numbers by value (float64/int64 mix), everything else by JSON form.
func sameValue(a, b any) bool {
	fa, errA := toFloat(a)
	fb, errB := toFloat(b)
	if errA == nil && errB == nil {
		if _, sa := a.(string); !sa {
			if _, sb := b.(string); !sb {
				return fa == fb || math.Abs(fa-fb) <= 1e-9*math.Max(math.Abs(fa), math.Abs(fb))
			}
		}
	}
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}
