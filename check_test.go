package mhp_test

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/openmhp/mhp-go"
)

func TestShapeCheck(t *testing.T) {
	number := &mhp.Shape{Type: mhp.TypeNumber, Limits: mhp.Range(4, 105)}
	integer := &mhp.Shape{Type: mhp.TypeInteger, Limits: mhp.Range(1, 99)}
	boolean := &mhp.Shape{Type: mhp.TypeBoolean}
	text := &mhp.Shape{Type: mhp.TypeString, Limits: &mhp.Limits{Pattern: "[a-z]+"}}
	mode := &mhp.Shape{Type: mhp.TypeString, Limits: mhp.Enum("idle", "heat")}
	for _, tc := range []struct {
		name  string
		shape *mhp.Shape
		in    any
		code  mhp.Code
		want  any
	}{
		{"number ok", number, 95.0, 0, 95.0},
		{"number from int", number, 95, 0, 95.0},
		{"number from json.Number", number, json.Number("95.5"), 0, 95.5},
		{"string for number", number, "500", mhp.CodeInvalidValue, nil},
		{"null", number, nil, mhp.CodeInvalidValue, nil},
		{"NaN", number, math.NaN(), mhp.CodeInvalidValue, nil},
		{"+Inf", number, math.Inf(1), mhp.CodeInvalidValue, nil},
		{"bool for number", number, true, mhp.CodeInvalidValue, nil},
		{"above max", number, 200.0, mhp.CodeLimitViolation, nil},
		{"below min", number, 3.9, mhp.CodeLimitViolation, nil},
		{"integer ok", integer, 30.0, 0, int64(30)},
		{"integer fraction", integer, 2.5, mhp.CodeInvalidValue, nil},
		{"bool for integer", integer, false, mhp.CodeInvalidValue, nil},
		{"1 for boolean", boolean, 1.0, mhp.CodeInvalidValue, nil},
		{"boolean ok", boolean, true, 0, true},
		{"CRLF", text, "ab\r\ncd", mhp.CodeInvalidValue, nil},
		{"pattern miss", text, "ABC", mhp.CodeLimitViolation, nil},
		{"enum ok", mode, "heat", 0, "heat"},
		{"enum miss", mode, "cool", mhp.CodeLimitViolation, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.shape.Check("x", tc.in)
			if tc.code != 0 {
				if mhp.CodeOf(err) != tc.code {
					t.Fatalf("Check(%v) = %v, %v; want code %s", tc.in, got, err, tc.code)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Check(%v) = %#v, %v; want %#v", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestLimitViolationCarriesLimits(t *testing.T) {
	_, err := (&mhp.Shape{Type: mhp.TypeNumber, Limits: mhp.Range(4, 105)}).Check("target_temperature", 200.0)
	if d := errData(err); d["min"] != 4.0 || d["max"] != 105.0 {
		t.Fatalf("error %v data %v, want min 4 and max 105", err, d)
	}
	if e, _ := mhp.AsError(err); e.Message != "target_temperature=200 above max 105" {
		t.Fatalf("message %q", e.Message)
	}
}

func TestParamsCheckNested(t *testing.T) {
	steps := &mhp.Shape{Type: mhp.TypeArray, Items: &mhp.Shape{Type: mhp.TypeObject, Required: []string{"temp"},
		Properties: map[string]*mhp.Shape{"temp": {Type: mhp.TypeNumber, Limits: mhp.Range(4, 105)}, "hold_s": {Type: mhp.TypeNumber}}}}
	params := mhp.Params{{Name: "steps", Shape: steps}, {Name: "cycles", Shape: &mhp.Shape{Type: mhp.TypeInteger}},
		{Name: "label", Shape: &mhp.Shape{Type: mhp.TypeString, Optional: true}}}
	step := func(temp any) map[string]any { return map[string]any{"temp": temp, "hold_s": 30.0} }
	for _, tc := range []struct {
		name  string
		in    map[string]any
		code  mhp.Code
		field string
	}{
		{"valid", map[string]any{"steps": []any{step(95.0)}, "cycles": 3.0}, 0, ""},
		{"missing", map[string]any{"steps": []any{}}, mhp.CodeInvalidValue, "cycles"},
		{"undeclared", map[string]any{"steps": []any{}, "cycles": 1.0, "speed": 2.0}, mhp.CodeInvalidValue, "speed"},
		{"nested limit", map[string]any{"steps": []any{step(95.0), step(200.0)}, "cycles": 1.0}, mhp.CodeLimitViolation, "steps[1].temp"},
		{"nested undeclared", map[string]any{"steps": []any{map[string]any{"temp": 50.0, "x": 1.0}}, "cycles": 1.0}, mhp.CodeInvalidValue, "steps[0].x"},
		{"nested missing", map[string]any{"steps": []any{map[string]any{"hold_s": 1.0}}, "cycles": 1.0}, mhp.CodeInvalidValue, "steps[0].temp"},
		{"bool as integer", map[string]any{"steps": []any{}, "cycles": true}, mhp.CodeInvalidValue, "cycles"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := params.Check("run_protocol", tc.in)
			if tc.code == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if mhp.CodeOf(err) != tc.code || errData(err)["field"] != tc.field {
				t.Fatalf("got %v (data %v), want %s on %s", err, errData(err), tc.code, tc.field)
			}
		})
	}
}

// errData is the data of err, an *mhp.Error, or nil.
func errData(err error) map[string]any {
	if e, ok := mhp.AsError(err); ok {
		return e.Data
	}
	return nil
}

func TestProseShapeIsUnchecked(t *testing.T) {
	var p mhp.Params
	if err := json.Unmarshal([]byte(`{"steps":"array of {temp: degC, hold_s: number}","cycles":"integer"}`), &p); err != nil {
		t.Fatal(err)
	}
	if p[0].Shape.Prose == "" || p[1].Shape.Type != mhp.TypeInteger {
		t.Fatalf("parsed %+v %+v", p[0].Shape, p[1].Shape)
	}
	if _, err := p.Check("run", map[string]any{"steps": "anything", "cycles": 2.0}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Check("run", map[string]any{"steps": "anything", "cycles": 2.5}); err == nil {
		t.Fatal("typed param beside a prose one was not checked")
	}
}
