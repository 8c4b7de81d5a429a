package script

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"

	"go.starlark.net/starlark"
)

// toStarlark converts a decoded JSON-like Go value (or any value that
// marshals to JSON) into a Starlark value.
func toStarlark(v any) (starlark.Value, error) {
	switch x := v.(type) {
	case nil:
		return starlark.None, nil
	case bool:
		return starlark.Bool(x), nil
	case string:
		return starlark.String(x), nil
	case int:
		return starlark.MakeInt(x), nil
	case int64:
		return starlark.MakeInt64(x), nil
	case float64:
		// JSON has one number type: integral values read as Starlark ints.
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return starlark.MakeInt64(int64(x)), nil
		}
		return starlark.Float(x), nil
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return starlark.MakeInt64(i), nil
		}
		f, err := x.Float64()
		return starlark.Float(f), err
	case []any:
		vals := make([]starlark.Value, len(x))
		for i, e := range x {
			sv, err := toStarlark(e)
			if err != nil {
				return nil, err
			}
			vals[i] = sv
		}
		return starlark.NewList(vals), nil
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		d := starlark.NewDict(len(x))
		for _, k := range keys {
			sv, err := toStarlark(x[k])
			if err != nil {
				return nil, err
			}
			if err := d.SetKey(starlark.String(k), sv); err != nil {
				return nil, err
			}
		}
		return d, nil
	}
	// Structs (jobs, results): through their JSON form.
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("cannot pass %T to a script: %w", v, err)
	}
	var generic any
	if err := json.Unmarshal(b, &generic); err != nil {
		return nil, err
	}
	return toStarlark(generic)
}

// fromStarlark converts a Starlark value to a JSON-like Go value.
func fromStarlark(v starlark.Value) (any, error) {
	switch x := v.(type) {
	case starlark.NoneType:
		return nil, nil
	case starlark.Bool:
		return bool(x), nil
	case starlark.String:
		return string(x), nil
	case starlark.Int:
		if i, ok := x.Int64(); ok {
			return float64(i), nil
		}
		return nil, fmt.Errorf("integer %s is too large", x)
	case starlark.Float:
		f := float64(x)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("%v is not a finite number", f)
		}
		return f, nil
	case *starlark.List:
		out := make([]any, x.Len())
		for i := range out {
			e, err := fromStarlark(x.Index(i))
			if err != nil {
				return nil, err
			}
			out[i] = e
		}
		return out, nil
	case starlark.Tuple:
		out := make([]any, len(x))
		for i, e := range x {
			g, err := fromStarlark(e)
			if err != nil {
				return nil, err
			}
			out[i] = g
		}
		return out, nil
	case *starlark.Dict:
		out := make(map[string]any, x.Len())
		for _, item := range x.Items() {
			k, ok := starlark.AsString(item[0])
			if !ok {
				return nil, fmt.Errorf("dict keys must be strings, not %s", item[0].Type())
			}
			e, err := fromStarlark(item[1])
			if err != nil {
				return nil, err
			}
			out[k] = e
		}
		return out, nil
	}
	return nil, fmt.Errorf("a %s cannot be sent to a device", v.Type())
}
