package mhp

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Check validates v against the shape and returns it normalised: numbers as
// float64, integers as int64, booleans, strings, []any and map[string]any.
// path names the value in errors ("target_temperature", "steps[1].temp").
// Type errors (null, NaN, ±Inf, a boolean where a number is due, control
// characters, undeclared or missing properties) are InvalidValue; values
// outside the limits are LimitViolation with the limits in data. A non-nil
// error is always an [*Error]; get at it with [AsError].
func (s *Shape) Check(path string, v any) (any, error) {
	out, e := s.check(path, v)
	if e != nil {
		return nil, e
	}
	return out, nil
}

// check is [Shape.Check] returning the concrete error type.
func (s *Shape) check(path string, v any) (any, *Error) {
	if s == nil || s.Prose != "" {
		return v, nil
	}
	if v == nil {
		return nil, Errorf(CodeInvalidValue, "%s: null is not a value", path).With(DataField, path)
	}
	var out any
	switch s.Type {
	case TypeNumber:
		f, ok := toFloat(v)
		if !ok {
			return nil, typeError(path, "a number", v)
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, Errorf(CodeInvalidValue, "%s=%v is not a finite number", path, f).With(DataField, path)
		}
		if _, isFloat := v.(float64); isFloat {
			out = v // already the checked form: no new boxing
		} else {
			out = f
		}
	case TypeInteger:
		n, e := checkInteger(path, v)
		if e != nil {
			return nil, e
		}
		out = n
	case TypeBoolean:
		b, ok := v.(bool)
		if !ok {
			return nil, typeError(path, "a boolean", v)
		}
		out = b
	case TypeString:
		str, ok := v.(string)
		if !ok {
			return nil, typeError(path, "a string", v)
		}
		if e := checkText(path, str); e != nil {
			return nil, e
		}
		out = str
	case TypeArray:
		list, ok := toList(v)
		if !ok {
			return nil, typeError(path, "an array", v)
		}
		norm := make([]any, len(list))
		for i, item := range list {
			n, e := s.Items.checkItem(fmt.Sprintf("%s[%d]", path, i), item)
			if e != nil {
				return nil, e
			}
			norm[i] = n
		}
		out = norm
	case TypeObject:
		m, ok := v.(map[string]any)
		if !ok {
			return nil, typeError(path, "an object", v)
		}
		n, e := checkObject(path, s.Properties, s.Required, m, s.Properties != nil)
		if e != nil {
			return nil, e
		}
		out = n
	case "", TypeAny:
		if e := checkAny(path, v); e != nil {
			return nil, e
		}
		out = v
	default:
		return v, nil
	}
	if e := s.Limits.check(path, out); e != nil {
		return nil, e
	}
	return out, nil
}

// maxSafeInteger is the largest integer a float64 (every JSON peer that
// decodes numbers as doubles) carries exactly: 2^53-1.
const maxSafeInteger = 1<<53 - 1

// checkInteger converts v to an int64 exactly, refusing fractions, bools
// and integers beyond ±maxSafeInteger (which would arrive rounded: 2^53+1
// decodes as 2^53 on most peers, so such a value is refused, not changed).
func checkInteger(path string, v any) (int64, *Error) {
	notInteger := func() *Error {
		return Errorf(CodeInvalidValue, "%s=%s is not an integer", path, formatValue(v)).With(DataField, path)
	}
	unsafe := func() *Error {
		return Errorf(CodeInvalidValue, "%s=%s is beyond ±%d, the integers JSON carries exactly", path,
			formatValue(v), int64(maxSafeInteger)).With(DataField, path)
	}
	fromFloat := func(f float64) (int64, *Error) {
		if math.IsNaN(f) || math.IsInf(f, 0) || f != math.Trunc(f) {
			return 0, notInteger()
		}
		if math.Abs(f) > maxSafeInteger {
			return 0, unsafe()
		}
		return int64(f), nil
	}
	var n int64
	switch x := v.(type) {
	case int:
		n = int64(x)
	case int8:
		n = int64(x)
	case int16:
		n = int64(x)
	case int32:
		n = int64(x)
	case int64:
		n = x
	case uint, uint8, uint16, uint32, uint64:
		u := reflect.ValueOf(x).Uint()
		if u > maxSafeInteger {
			return 0, unsafe()
		}
		n = int64(u)
	case json.Number:
		i, err := strconv.ParseInt(string(x), 10, 64)
		if err == nil {
			n = i
			break
		}
		if errors.Is(err, strconv.ErrRange) {
			return 0, unsafe()
		}
		f, ok := toFloat(x) // 1e3, 3.0, 2.5
		if !ok {
			return 0, typeError(path, "an integer", v)
		}
		return fromFloat(f)
	default:
		f, ok := toFloat(v)
		if !ok {
			return 0, typeError(path, "an integer", v)
		}
		return fromFloat(f)
	}
	if n > maxSafeInteger || n < -maxSafeInteger {
		return 0, unsafe()
	}
	return n, nil
}

func (s *Shape) checkItem(path string, v any) (any, *Error) {
	if s == nil {
		if e := checkAny(path, v); e != nil {
			return nil, e
		}
		return v, nil
	}
	return s.check(path, v)
}

// checkObject checks properties; strict refuses undeclared keys.
func checkObject(path string, props map[string]*Shape, required []string, m map[string]any, strict bool) (map[string]any, *Error) {
	out := make(map[string]any, len(m))
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		sub := join(path, k)
		shape, ok := props[k]
		if !ok && strict {
			return nil, Errorf(CodeInvalidValue, "%s: undeclared field %q", orRoot(path), k).With(DataField, sub)
		}
		if e := checkText(sub+" (key)", k); e != nil {
			return nil, e.With(DataField, sub)
		}
		n, e := shape.checkItem(sub, m[k])
		if e != nil {
			return nil, e
		}
		out[k] = n
	}
	for _, r := range required {
		if _, ok := m[r]; !ok {
			return nil, Errorf(CodeInvalidValue, "%s: missing required field %q", orRoot(path), r).With(DataField, join(path, r))
		}
	}
	return out, nil
}

// Check validates an action's parameters: an object with no undeclared names,
// every non-optional parameter present (defaults filled in), each value
// checked against its shape. It returns the normalised parameters. A
// non-nil error is always an [*Error]; get at it with [AsError].
func (p Params) Check(action string, params map[string]any) (map[string]any, error) {
	out := make(map[string]any, len(p))
	for k := range params {
		if _, ok := p.Get(k); !ok {
			return nil, Errorf(CodeInvalidValue, "%s: undeclared parameter %q (declared: %s)", action, k,
				strings.Join(p.Names(), ", ")).With(DataField, k)
		}
	}
	for _, x := range p {
		v, ok := params[x.Name]
		if !ok {
			if x.Shape != nil && x.Shape.Default != nil {
				// The default goes through the shape too: normalised like a sent
				// value, and a fresh copy the action may modify.
				n, e := x.Shape.check(x.Name, x.Shape.Default)
				if e != nil {
					e.Message = fmt.Sprintf("%s: the declared default of parameter %q is invalid (send a value): %s", action, x.Name, e.Message)
					return nil, e
				}
				out[x.Name] = n
				continue
			}
			if x.Shape != nil && x.Shape.Optional {
				continue
			}
			return nil, Errorf(CodeInvalidValue, "%s: missing parameter %q", action, x.Name).With(DataField, x.Name)
		}
		n, e := x.Shape.checkItem(x.Name, v)
		if e != nil {
			return nil, e
		}
		out[x.Name] = n
	}
	return out, nil
}

func (l *Limits) check(path string, v any) *Error {
	if l.Empty() {
		return nil
	}
	if list, ok := v.([]any); ok && !l.enumOfLists() {
		// Lengths bound the list; every other limit bounds each element.
		if e := l.checkLength(path, len(list)); e != nil {
			return e
		}
		each := *l
		each.MinLength, each.MaxLength = nil, nil
		if each.Empty() {
			return nil
		}
		for i, item := range list {
			if e := each.check(fmt.Sprintf("%s[%d]", path, i), item); e != nil {
				return e
			}
		}
		return nil
	}
	if len(l.Enum) > 0 {
		found := false
		for _, e := range l.Enum {
			if valuesEqual(e, v) {
				found = true
				break
			}
		}
		if !found {
			return Errorf(CodeLimitViolation, "%s=%s not one of %s", path, formatValue(v), formatValue(l.Enum)).
				With("enum", l.Enum).With(DataField, path)
		}
	}
	if f, ok := toFloat(v); ok {
		if _, isBool := v.(bool); !isBool {
			if l.Min != nil && f < *l.Min {
				return l.violation(path, v, "below min", *l.Min)
			}
			if l.Max != nil && f > *l.Max {
				return l.violation(path, v, "above max", *l.Max)
			}
			if l.ExclusiveMin != nil && f <= *l.ExclusiveMin {
				return l.violation(path, v, "not above exclusive min", *l.ExclusiveMin)
			}
			if l.ExclusiveMax != nil && f >= *l.ExclusiveMax {
				return l.violation(path, v, "not below exclusive max", *l.ExclusiveMax)
			}
		}
	}
	n := -1
	switch x := v.(type) {
	case string:
		n = utf8.RuneCountInString(x)
		if l.Pattern != "" {
			re, err := regexp.Compile("^(?:" + l.Pattern + ")$")
			if err != nil {
				return Errorf(CodeInternal, "%s: bad pattern %q in the descriptor: %v", path, l.Pattern, err)
			}
			if !re.MatchString(x) {
				return Errorf(CodeLimitViolation, "%s=%q does not match pattern %q", path, x, l.Pattern).
					With(DataPattern, l.Pattern).With(DataField, path)
			}
		}
	case []any:
		n = len(x)
	}
	if n >= 0 {
		return l.checkLength(path, n)
	}
	return nil
}

func (l *Limits) checkLength(path string, n int) *Error {
	if l.MinLength != nil && n < *l.MinLength {
		return Errorf(CodeLimitViolation, "%s has length %d, below minLength %d", path, n, *l.MinLength).
			With("minLength", *l.MinLength).With(DataField, path)
	}
	if l.MaxLength != nil && n > *l.MaxLength {
		return Errorf(CodeLimitViolation, "%s has length %d, above maxLength %d", path, n, *l.MaxLength).
			With("maxLength", *l.MaxLength).With(DataField, path)
	}
	return nil
}

// enumOfLists reports whether the enum lists whole arrays, so a list value
// is compared whole rather than element by element.
func (l *Limits) enumOfLists() bool {
	for _, e := range l.Enum {
		if _, ok := toList(e); ok {
			return true
		}
	}
	return false
}

func (l *Limits) violation(path string, v any, what string, bound float64) *Error {
	e := Errorf(CodeLimitViolation, "%s=%s %s %s", path, formatValue(v), what, formatValue(bound)).With(DataField, path)
	if l.Min != nil {
		e = e.With(DataMin, *l.Min)
	}
	if l.Max != nil {
		e = e.With(DataMax, *l.Max)
	}
	if l.ExclusiveMin != nil {
		e = e.With("exclusiveMin", *l.ExclusiveMin)
	}
	if l.ExclusiveMax != nil {
		e = e.With("exclusiveMax", *l.ExclusiveMax)
	}
	return e
}

func checkText(path, s string) *Error {
	if !utf8.ValidString(s) {
		return Errorf(CodeInvalidValue, "%s: string is not valid UTF-8", path).With(DataField, path)
	}
	for _, r := range s {
		// C0, DEL and C1 controls, and the Unicode line and paragraph
		// separators, which split lines as CR and LF do.
		if r < 0x20 || (r >= 0x7f && unicode.IsControl(r)) || r == '\u2028' || r == '\u2029' {
			return Errorf(CodeInvalidValue, "%s: string contains control character %U", path, r).With(DataField, path)
		}
	}
	return nil
}

// checkAny walks an unshaped value refusing null, non-finite numbers and control characters.
func checkAny(path string, v any) *Error {
	switch x := v.(type) {
	case nil:
		return Errorf(CodeInvalidValue, "%s: null is not a value", path).With(DataField, path)
	case string:
		return checkText(path, x)
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return Errorf(CodeInvalidValue, "%s=%v is not a finite number", path, x).With(DataField, path)
		}
	case float32:
		return checkAny(path, float64(x))
	case []any:
		for i, item := range x {
			if e := checkAny(fmt.Sprintf("%s[%d]", path, i), item); e != nil {
				return e
			}
		}
	case map[string]any:
		for k, item := range x {
			if e := checkText(join(path, k)+" (key)", k); e != nil {
				return e.With(DataField, join(path, k))
			}
			if e := checkAny(join(path, k), item); e != nil {
				return e
			}
		}
	}
	return nil
}

func typeError(path, want string, v any) *Error {
	return Errorf(CodeInvalidValue, "%s=%s is %s, not %s", path, formatValue(v), describeType(v), want).
		With(DataField, path).With("expected", strings.TrimPrefix(strings.TrimPrefix(want, "an "), "a "))
}

func describeType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case float64, float32, int, int64, int32, uint, uint64, uint32, json.Number:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("a %T", v)
}

// Number returns v as a float64 when it is any Go number or a [json.Number]
// (never a boolean or a string): the one numeric conversion adapters share.
func Number(v any) (float64, bool) { return toFloat(v) }

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case float32:
		return float64(x), true
	case int:
		return float64(x), true
	case int8:
		return float64(x), true
	case int16:
		return float64(x), true
	case int32:
		return float64(x), true
	case int64:
		return float64(x), true
	case uint:
		return float64(x), true
	case uint8:
		return float64(x), true
	case uint16:
		return float64(x), true
	case uint32:
		return float64(x), true
	case uint64:
		return float64(x), true
	case json.Number:
		// Out of range parses as ±Inf (or 0): a number, refused later as not finite.
		f, err := strconv.ParseFloat(string(x), 64)
		return f, err == nil || errors.Is(err, strconv.ErrRange)
	}
	return 0, false
}

func toList(v any) ([]any, bool) {
	if l, ok := v.([]any); ok {
		return l, true
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Slice {
		return nil, false
	}
	out := make([]any, rv.Len())
	for i := range out {
		out[i] = rv.Index(i).Interface()
	}
	return out, true
}

// valuesEqual compares two decoded values, numbers by value whatever their Go type.
func valuesEqual(a, b any) bool {
	fa, oka := toFloat(a)
	fb, okb := toFloat(b)
	if oka && okb {
		return fa == fb
	}
	return reflect.DeepEqual(a, b)
}

func formatValue(v any) string {
	if f, ok := v.(float64); ok {
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func orRoot(path string) string {
	if path == "" {
		return "params"
	}
	return path
}
