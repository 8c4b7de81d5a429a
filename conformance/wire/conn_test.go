package wire

import (
	"encoding/json"
	"testing"

	"github.com/openmhp/mhp-go"
)

// TestErrorShapes: an error object is read in every shape the spec leaves
// open, and ts is found wherever it is.
func TestErrorShapes(t *testing.T) {
	cases := []struct {
		in         string
		code       mhp.Code
		ts         float64
		at         string
		dataKey    string
		shouldFail bool
	}{
		{`{"code":-32040,"message":"x","ts":12.5}`, mhp.CodeUnknownName, 12.5, "error.ts", "", false},
		{`{"code":-32010,"message":"x","data":{"min":1,"ts":7}}`, mhp.CodeLimitViolation, 7, "error.data.ts", "min", false},
		{`{"code":-32010.0,"message":"x","data":"text"}`, mhp.CodeLimitViolation, 0, "", "data", false},
		{`{"code":-32000,"message":"x","ts":"soon"}`, mhp.CodeServerError, 0, "", "", false},
		{`{"code":"abc","message":"x"}`, 0, 0, "", "", true},
		{`[1,2]`, 0, 0, "", "", true},
	}
	for _, k := range cases {
		var e Error
		err := json.Unmarshal([]byte(k.in), &e)
		if k.shouldFail {
			if err == nil {
				t.Errorf("%s: accepted", k.in)
			}
			continue
		}
		if err != nil || e.Code != k.code || e.TS != k.ts || e.TSAt != k.at {
			t.Errorf("%s: %+v %v", k.in, e, err)
			continue
		}
		me, _ := mhp.AsError(e.Err())
		if me.TS != k.ts || (k.dataKey != "" && me.Data[k.dataKey] == nil) || me.Data["ts"] != nil {
			t.Errorf("%s: Err() = %+v", k.in, me)
		}
	}
	var nilErr *Error
	if nilErr.Err() != nil || nilErr.String() != "no error" {
		t.Error("a nil *Error is not nil")
	}
}
