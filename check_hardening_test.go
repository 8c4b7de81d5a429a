package mhp_test

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/openmhp/mhp-go"
)

// Regression tests for value checks the conformance suite did not reach.

// TestIntegerChecksAreExact: integers are refused rather than silently
// rounded when they cannot be carried exactly (beyond ±(2^53-1), which is
// what a float64 JSON peer can represent). Before the fix
// json.Number("9007199254740993") and int64(2^53+1) passed as 2^53, a
// different value from the one sent.
func TestIntegerChecksAreExact(t *testing.T) {
	integer := &mhp.Shape{Type: mhp.TypeInteger}
	number := &mhp.Shape{Type: mhp.TypeNumber}
	for _, tc := range []struct {
		name  string
		shape *mhp.Shape
		in    any
		code  mhp.Code
		want  any
	}{
		{"json.Number int", integer, json.Number("42"), 0, int64(42)},
		{"json.Number negative", integer, json.Number("-7"), 0, int64(-7)},
		{"json.Number exponent", integer, json.Number("1e3"), 0, int64(1000)},
		{"json.Number max safe", integer, json.Number("9007199254740991"), 0, int64(1<<53 - 1)},
		{"json.Number beyond safe", integer, json.Number("9007199254740993"), mhp.CodeInvalidValue, nil},
		{"json.Number 2^53", integer, json.Number("9007199254740992"), mhp.CodeInvalidValue, nil},
		{"json.Number fraction", integer, json.Number("2.5"), mhp.CodeInvalidValue, nil},
		{"json.Number huge", integer, json.Number("1e400"), mhp.CodeInvalidValue, nil},
		{"int64 beyond safe", integer, int64(1<<53 + 1), mhp.CodeInvalidValue, nil},
		{"uint64 max", integer, uint64(math.MaxUint64), mhp.CodeInvalidValue, nil},
		{"int", integer, 12, 0, int64(12)},
		{"float 2^53", integer, float64(1 << 53), mhp.CodeInvalidValue, nil},
		{"float max safe", integer, float64(1<<53 - 1), 0, int64(1<<53 - 1)},
		{"number json.Number huge", number, json.Number("1e400"), mhp.CodeInvalidValue, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.shape.Check("n", tc.in)
			if tc.code != 0 {
				if mhp.CodeOf(err) != tc.code || errData(err)["field"] != "n" {
					t.Fatalf("Check(%#v) = %#v, %v; want %s on field n", tc.in, got, err, tc.code)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Check(%#v) = %#v, %v; want %#v", tc.in, got, err, tc.want)
			}
		})
	}
	// A number too large for float64 is named as such, not "a number, not a number".
	_, err := number.Check("n", json.Number("1e400"))
	if e, ok := mhp.AsError(err); !ok || !strings.Contains(e.Message, "finite") {
		t.Fatalf("huge json.Number: %v, want a message saying it is not finite", err)
	}
}

// TestArrayLimitsApplyToEachElement: limits on an array shape bound each
// element (the reference checks limits element-wise for lists) while
// minLength/maxLength bound the list. Before the fix {min,max} and enum on
// an array were ignored: a list of temperatures with 500 in it passed.
func TestArrayLimitsApplyToEachElement(t *testing.T) {
	max := 3
	temps := &mhp.Shape{Type: mhp.TypeArray, Items: &mhp.Shape{Type: mhp.TypeNumber},
		Limits: &mhp.Limits{Min: ptr(4), Max: ptr(105), MaxLength: &max}}
	modes := &mhp.Shape{Type: mhp.TypeArray, Limits: mhp.Enum("idle", "heat")}
	for _, tc := range []struct {
		name  string
		shape *mhp.Shape
		in    any
		code  mhp.Code
		field string
	}{
		{"in range", temps, []any{4.0, 95.0, 105.0}, 0, ""},
		{"element above max", temps, []any{95.0, 500.0}, mhp.CodeLimitViolation, "t[1]"},
		{"element below min", temps, []any{3.0}, mhp.CodeLimitViolation, "t[0]"},
		{"too long", temps, []any{5.0, 6.0, 7.0, 8.0}, mhp.CodeLimitViolation, "t"},
		{"enum ok", modes, []any{"idle", "heat", "idle"}, 0, ""},
		{"enum miss", modes, []any{"idle", "cool"}, mhp.CodeLimitViolation, "t[1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.shape.Check("t", tc.in)
			if tc.code == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if mhp.CodeOf(err) != tc.code || errData(err)["field"] != tc.field {
				t.Fatalf("Check(%v) = %v (data %v), want %s on %s", tc.in, err, errData(err), tc.code, tc.field)
			}
		})
	}
}

func ptr(f float64) *float64 { return &f }

// TestStringsRefuseEveryControlCharacter: C1 controls (U+0080-U+009F, NEL
// among them) and the Unicode line and paragraph separators split lines as
// CR and LF do. Before the fix only C0 and DEL were refused. Other Unicode
// text passes unchanged.
func TestStringsRefuseEveryControlCharacter(t *testing.T) {
	text := &mhp.Shape{Type: mhp.TypeString}
	for _, bad := range []string{"a\u0085b", "a\u009bb", "a\u2028b", "a\u2029b", "a\tb", "a\x7fb"} {
		if _, err := text.Check("s", bad); mhp.CodeOf(err) != mhp.CodeInvalidValue {
			t.Errorf("Check(%q) = %v, want InvalidValue", bad, err)
		}
	}
	for _, good := range []string{"Grüße, 温度 ✓", "µL", "emoji 🧪"} {
		if got, err := text.Check("s", good); err != nil || got != good {
			t.Errorf("Check(%q) = %v, %v; want it unchanged", good, got, err)
		}
	}
}

// TestParamDefaultsAreChecked: a default fills in normalised (int64 for an
// integer) and as a fresh copy, so Run cannot change the descriptor. Before
// the fix the declared value went through as is.
func TestParamDefaultsAreChecked(t *testing.T) {
	list := []any{1, 2}
	params := mhp.Params{
		{Name: "cycles", Shape: &mhp.Shape{Type: mhp.TypeInteger, Default: 3}},
		{Name: "wells", Shape: &mhp.Shape{Type: mhp.TypeArray, Items: &mhp.Shape{Type: mhp.TypeInteger}, Default: list}},
	}
	got, err := params.Check("mix", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got["cycles"] != int64(3) {
		t.Fatalf("cycles default %#v, want int64(3)", got["cycles"])
	}
	w := got["wells"].([]any)
	w[0] = int64(99)
	if list[0] != 1 {
		t.Fatal("changing the checked default changed the descriptor's default")
	}
}

// TestDescribeRefusesUnknownTierWithSelect: an unknown detail tier is
// refused even beside a select. Before the fix a select made any tier
// name pass.
func TestDescribeRefusesUnknownTierWithSelect(t *testing.T) {
	d := &mhp.Descriptor{DeviceInfo: mhp.DeviceInfo{ID: "x"}, Signals: []mhp.Signal{{Name: "t"}}}
	_, err := mhp.Describe(d, mhp.StateIdle, mhp.DescribeRequest{Detail: "everything", Select: &mhp.Selection{Signals: []string{"t"}}})
	if e, _ := mhp.AsError(err); e == nil || e.Code != mhp.CodeInvalidParams || e.Data["field"] != "detail" {
		t.Fatalf("unknown tier with select: %v, want InvalidParams on detail", err)
	}
	if _, err := mhp.Describe(d, mhp.StateIdle, mhp.DescribeRequest{Detail: mhp.DetailCard, Select: &mhp.Selection{Signals: []string{"t"}}}); err != nil {
		t.Fatalf("card tier with select: %v", err)
	}
}

// TestObjectKeysRefuseControlCharacters: object keys are strings too. Before
// the fix a key with CR LF passed in an object without declared properties
// and in an unshaped value.
func TestObjectKeysRefuseControlCharacters(t *testing.T) {
	open := &mhp.Shape{Type: mhp.TypeObject}
	anything := &mhp.Shape{Type: mhp.TypeAny}
	for _, tc := range []struct {
		name  string
		shape *mhp.Shape
		in    any
	}{
		{"open object", open, map[string]any{"a\r\nb": 1.0}},
		{"any", anything, map[string]any{"x": map[string]any{"k\u0085": "v"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.shape.Check("o", tc.in); mhp.CodeOf(err) != mhp.CodeInvalidValue {
				t.Fatalf("Check(%q) = %v, want InvalidValue", tc.in, err)
			}
		})
	}
	if _, err := open.Check("o", map[string]any{"temp_°C": 1.0}); err != nil {
		t.Fatalf("unicode key: %v", err)
	}
}

// TestEnumComparesNumbersByValueNotByForm: an enum of numbers matches a
// number in any Go form (float64, int, json.Number) but never its string,
// and an enum of strings never matches a number.
func TestEnumComparesNumbersByValueNotByForm(t *testing.T) {
	nums := &mhp.Shape{Type: mhp.TypeAny, Limits: mhp.Enum(1, 2.5)}
	strs := &mhp.Shape{Type: mhp.TypeAny, Limits: mhp.Enum("1", "2")}
	for _, tc := range []struct {
		shape *mhp.Shape
		in    any
		ok    bool
	}{
		{nums, 1.0, true}, {nums, json.Number("2.5"), true}, {nums, int64(1), true},
		{nums, "1", false}, {nums, true, false}, {nums, 2.0, false},
		{strs, "2", true}, {strs, 2.0, false}, {strs, json.Number("1"), false},
	} {
		_, err := tc.shape.Check("e", tc.in)
		if tc.ok != (err == nil) || (err != nil && mhp.CodeOf(err) != mhp.CodeLimitViolation) {
			t.Errorf("enum %v, value %#v: %v", tc.shape.Limits.Enum, tc.in, err)
		}
	}
}
