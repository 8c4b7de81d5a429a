package opcua

import (
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/gopcua/opcua/id"
	"github.com/gopcua/opcua/ua"

	"github.com/openmhp/mhp-go"
)

// builtinOf returns the built-in type of a DataType node id from namespace 0
// (i=1 Boolean .. i=13 DateTime, i=21 LocalizedText, ...). Subtypes the
// adapter knows (Duration, UtcTime, Enumeration, ...) map onto their base;
// anything else returns 0 and values are written as the server gave them.
func builtinOf(dt *ua.NodeID) ua.TypeID {
	if dt == nil || dt.Namespace() != 0 {
		return 0
	}
	n := dt.IntID()
	switch {
	case n >= 1 && n <= 25:
		return ua.TypeID(n)
	case n == id.Duration:
		return ua.TypeIDDouble
	case n == id.UtcTime:
		return ua.TypeIDDateTime
	case n == id.Enumeration: // enumerations travel as Int32
		return ua.TypeIDInt32
	case n == id.Integer:
		return ua.TypeIDInt64
	case n == id.UInteger:
		return ua.TypeIDUint64
	case n == id.Number:
		return ua.TypeIDDouble
	}
	return 0
}

// dataTypeOf turns the DataType attribute's value (a *ua.NodeID from most
// servers, a *ua.ExpandedNodeID from gopcua's) into a node id.
func dataTypeOf(v any) *ua.NodeID {
	switch x := v.(type) {
	case *ua.NodeID:
		return x
	case *ua.ExpandedNodeID:
		if x == nil {
			return nil
		}
		return x.NodeID
	}
	return nil
}

// mhpTypeOf returns the MHP value type that suits an OPC UA built-in type.
func mhpTypeOf(t ua.TypeID) string {
	switch t {
	case ua.TypeIDBoolean:
		return mhp.TypeBoolean
	case ua.TypeIDSByte, ua.TypeIDByte, ua.TypeIDInt16, ua.TypeIDUint16, ua.TypeIDInt32, ua.TypeIDUint32,
		ua.TypeIDInt64, ua.TypeIDUint64:
		return mhp.TypeInteger
	case ua.TypeIDFloat, ua.TypeIDDouble:
		return mhp.TypeNumber
	case ua.TypeIDString, ua.TypeIDLocalizedText, ua.TypeIDDateTime:
		return mhp.TypeString
	}
	return mhp.TypeAny
}

// toVariant converts an MHP value (float64, int64, bool, string, and JSON
// objects/arrays) to a variant of the built-in type t. An impossible
// conversion (fraction into an integer, out of the type's range, wrong kind)
// is an *mhp.Error raised before anything is sent. t == 0 (unknown type)
// picks the natural variant of the value.
func toVariant(name string, v any, t ua.TypeID) (*ua.Variant, error) {
	bad := func(format string, args ...any) error {
		return mhp.Errorf(mhp.CodeInvalidValue, "%s: %s", name, fmt.Sprintf(format, args...)).With("opcua_type", t.String())
	}
	if v == nil {
		return nil, bad("null cannot be written")
	}
	if t == 0 {
		switch x := v.(type) {
		case float64, bool, string, int64:
			return ua.NewVariant(x)
		case int:
			return ua.NewVariant(int64(x))
		default:
			b, err := json.Marshal(x)
			if err != nil {
				return nil, bad("%v", err)
			}
			return ua.NewVariant(string(b))
		}
	}
	num, isNum := mhp.Number(v)
	switch t {
	case ua.TypeIDBoolean:
		b, ok := v.(bool)
		if !ok {
			return nil, bad("%v is not a boolean", v)
		}
		return ua.NewVariant(b)
	case ua.TypeIDFloat, ua.TypeIDDouble:
		if !isNum {
			return nil, bad("%v is not a number", v)
		}
		if math.IsNaN(num) || math.IsInf(num, 0) {
			return nil, bad("%v is not finite", v)
		}
		if t == ua.TypeIDFloat {
			if math.Abs(num) > math.MaxFloat32 {
				return nil, mhp.Errorf(mhp.CodeLimitViolation, "%s: %v does not fit the node's Float type", name, v)
			}
			return ua.NewVariant(float32(num))
		}
		return ua.NewVariant(num)
	case ua.TypeIDSByte, ua.TypeIDByte, ua.TypeIDInt16, ua.TypeIDUint16, ua.TypeIDInt32, ua.TypeIDUint32,
		ua.TypeIDInt64, ua.TypeIDUint64:
		if !isNum {
			return nil, bad("%v is not an integer", v)
		}
		if num != math.Trunc(num) || math.IsInf(num, 0) || math.IsNaN(num) {
			return nil, bad("%v is not an integer (the node is %s)", v, t)
		}
		lo, hi := intRange(t)
		if num < lo || num > hi {
			return nil, mhp.Errorf(mhp.CodeLimitViolation, "%s: %v is outside the range of the node's %s type (%v..%v)", name, v, t, lo, hi).
				With("min", lo).With("max", hi)
		}
		var x any
		switch t {
		case ua.TypeIDSByte:
			x = int8(num)
		case ua.TypeIDByte:
			x = uint8(num)
		case ua.TypeIDInt16:
			x = int16(num)
		case ua.TypeIDUint16:
			x = uint16(num)
		case ua.TypeIDInt32:
			x = int32(num)
		case ua.TypeIDUint32:
			x = uint32(num)
		case ua.TypeIDInt64:
			if i, ok := v.(int64); ok {
				x = i
			} else {
				x = int64(num)
			}
		case ua.TypeIDUint64:
			if i, ok := v.(int64); ok {
				x = uint64(i)
			} else {
				x = uint64(num)
			}
		}
		return ua.NewVariant(x)
	case ua.TypeIDString:
		switch x := v.(type) {
		case string:
			return ua.NewVariant(x)
		case map[string]any, []any:
			b, err := json.Marshal(x)
			if err != nil {
				return nil, bad("%v", err)
			}
			return ua.NewVariant(string(b))
		}
		return nil, bad("%v is not a string", v)
	case ua.TypeIDLocalizedText:
		s, ok := v.(string)
		if !ok {
			return nil, bad("%v is not a string", v)
		}
		return ua.NewVariant(&ua.LocalizedText{EncodingMask: ua.LocalizedTextText, Text: s})
	case ua.TypeIDDateTime:
		switch x := v.(type) {
		case string:
			tm, err := time.Parse(time.RFC3339Nano, x)
			if err != nil {
				return nil, bad("%q is not an RFC 3339 time", x)
			}
			return ua.NewVariant(tm)
		default:
			if isNum {
				return ua.NewVariant(mhp.FromUnixSeconds(num).UTC())
			}
		}
		return nil, bad("%v is not a time", v)
	}
	return nil, bad("the node's type %s cannot be written by this adapter", t)
}

func intRange(t ua.TypeID) (float64, float64) {
	switch t {
	case ua.TypeIDSByte:
		return math.MinInt8, math.MaxInt8
	case ua.TypeIDByte:
		return 0, math.MaxUint8
	case ua.TypeIDInt16:
		return math.MinInt16, math.MaxInt16
	case ua.TypeIDUint16:
		return 0, math.MaxUint16
	case ua.TypeIDInt32:
		return math.MinInt32, math.MaxInt32
	case ua.TypeIDUint32:
		return 0, math.MaxUint32
	case ua.TypeIDInt64:
		return math.MinInt64, math.MaxInt64
	case ua.TypeIDUint64:
		return 0, math.MaxUint64
	}
	return math.Inf(-1), math.Inf(1)
}

// fromVariant converts a value read from the server into a JSON-friendly
// MHP value: numbers as float64 or int64, text as string, times as RFC 3339,
// status codes as their names, arrays element-wise.
func fromVariant(v *ua.Variant) any {
	if v == nil {
		return nil
	}
	return fromValue(v.Value())
}

func fromValue(x any) any {
	switch t := x.(type) {
	case nil:
		return nil
	case bool, string, float64, int64:
		return t
	case float32:
		return float64(t)
	case int8:
		return int64(t)
	case uint8:
		return int64(t)
	case int16:
		return int64(t)
	case uint16:
		return int64(t)
	case int32:
		return int64(t)
	case uint32:
		return int64(t)
	case uint64:
		if t > math.MaxInt64 {
			return float64(t)
		}
		return int64(t)
	case time.Time:
		return t.UTC().Format(time.RFC3339Nano)
	case *ua.LocalizedText:
		if t == nil {
			return nil
		}
		return t.Text
	case *ua.QualifiedName:
		if t == nil {
			return nil
		}
		return t.Name
	case *ua.NodeID:
		if t == nil {
			return nil
		}
		return t.String()
	case *ua.ExpandedNodeID:
		if t == nil {
			return nil
		}
		return t.String()
	case ua.StatusCode:
		return StatusName(t)
	case []byte:
		return t
	case *ua.Variant:
		return fromVariant(t)
	case *ua.DataValue:
		if t == nil {
			return nil
		}
		return fromVariant(t.Value)
	case *ua.ExtensionObject:
		if t == nil || t.Value == nil {
			return nil
		}
		b, err := json.Marshal(t.Value)
		if err != nil {
			return fmt.Sprint(t.Value)
		}
		var out any
		if json.Unmarshal(b, &out) != nil {
			return string(b)
		}
		return out
	}
	// Arrays of any of the above.
	switch a := x.(type) {
	case []bool:
		return toAnySlice(a)
	case []string:
		return toAnySlice(a)
	case []float64:
		return toAnySlice(a)
	case []float32:
		return toAnySlice(a)
	case []int8:
		return toAnySlice(a)
	case []int16:
		return toAnySlice(a)
	case []uint16:
		return toAnySlice(a)
	case []int32:
		return toAnySlice(a)
	case []uint32:
		return toAnySlice(a)
	case []int64:
		return toAnySlice(a)
	case []uint64:
		return toAnySlice(a)
	case []*ua.LocalizedText:
		return toAnySlice(a)
	case []*ua.ExtensionObject:
		return toAnySlice(a)
	case []*ua.Variant:
		return toAnySlice(a)
	}
	return fmt.Sprint(x)
}

func toAnySlice[T any](a []T) []any {
	out := make([]any, len(a))
	for i := range a {
		out[i] = fromValue(a[i])
	}
	return out
}
