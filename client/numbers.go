package client

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strconv"
)

// unmarshalExact decodes b into out with numbers read as json.Number, then
// turns every number that landed in an interface value (a signal value, a
// job result) into float64 when a double holds it exactly, and into int64
// (or, beyond int64, the json.Number itself) when it does not: an integer
// such as 9007199254740993 keeps every digit instead of becoming ...992.
// Typed fields decode as encoding/json always does.
func unmarshalExact(b []byte, out any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(out); err != nil {
		return err
	}
	fixNumbers(reflect.ValueOf(out))
	return nil
}

// exactNumber is the value a json.Number stands for in an interface slot.
func exactNumber(n json.Number) any {
	if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		if i > 1<<53 || i < -(1<<53) {
			return i
		}
		return float64(i)
	}
	if f, err := n.Float64(); err == nil && !math.IsInf(f, 0) {
		if _, err := strconv.ParseUint(string(n), 10, 64); err == nil {
			return n // an integer beyond int64: keep its digits
		}
		return f
	}
	return n
}

// fixNumbers replaces the json.Number values held in interfaces under v.
func fixNumbers(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			fixNumbers(v.Elem())
		}
	case reflect.Interface:
		if v.IsNil() {
			return
		}
		if fixed, changed := fixAny(v.Elem().Interface()); changed && v.CanSet() {
			v.Set(reflect.ValueOf(fixed))
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				fixNumbers(v.Field(i))
			}
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			fixNumbers(v.Index(i))
		}
	case reflect.Map:
		switch v.Type().Elem().Kind() {
		case reflect.Interface:
		case reflect.Struct, reflect.Pointer, reflect.Slice, reflect.Map, reflect.Array:
			for _, k := range v.MapKeys() {
				e := reflect.New(v.Type().Elem()).Elem()
				e.Set(v.MapIndex(k))
				fixNumbers(e)
				v.SetMapIndex(k, e)
			}
			return
		default:
			return
		}
		for _, k := range v.MapKeys() {
			if fixed, changed := fixAny(v.MapIndex(k).Interface()); changed {
				v.SetMapIndex(k, reflect.ValueOf(&fixed).Elem())
			}
		}
	}
}

// fixAny returns x with its json.Numbers replaced, and whether it changed.
func fixAny(x any) (any, bool) {
	switch t := x.(type) {
	case json.Number:
		return exactNumber(t), true
	case map[string]any:
		for k, e := range t {
			if f, ok := fixAny(e); ok {
				t[k] = f
			}
		}
		return t, false
	case []any:
		for i, e := range t {
			if f, ok := fixAny(e); ok {
				t[i] = f
			}
		}
		return t, false
	}
	return x, false
}
