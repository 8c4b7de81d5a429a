package mhp_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/openmhp/mhp-go"
)

func TestGatesInSpecOrder(t *testing.T) {
	// Spec §7.1: state, approval, interlocks, limits, lease, busy.
	want := []string{"state", "approval", "interlocks", "limits", "lease", "busy"}
	got := mhp.Gates()
	if !slices.Equal(got, want) {
		t.Fatalf("Gates() = %v, want %v", got, want)
	}
	got[0] = "mutated"
	if mhp.Gates()[0] != mhp.GateState {
		t.Fatal("Gates() shares its slice between calls")
	}
}

func TestDecodeParams(t *testing.T) {
	type req struct {
		Name  *string  `json:"name"`
		TTL   *float64 `json:"ttl"`
		Inner struct {
			N int `json:"n"`
		} `json:"inner"`
	}
	tests := []struct {
		name   string
		params string
		code   mhp.Code // 0: accepted
		field  string
		msg    string
	}{
		{name: "absent", params: ""},
		{name: "null", params: "null"},
		{name: "empty", params: "{}"},
		{name: "members", params: `{"name":"x","ttl":2,"inner":{"n":3}}`},
		{name: "member names match case-insensitively", params: `{"NAME":"x"}`},
		{name: "unknown member", params: `{"nmae":"x"}`, code: mhp.CodeInvalidParams, field: "nmae", msg: `m/x: unknown field "nmae"`},
		{name: "wrong type", params: `{"ttl":"soon"}`, code: mhp.CodeInvalidParams, field: "ttl", msg: "m/x: ttl is string, expected float64"},
		{name: "wrong type nested", params: `{"inner":{"n":"3"}}`, code: mhp.CodeInvalidParams, field: "inner.n"},
		{name: "not an object", params: `[1]`, code: mhp.CodeInvalidParams, field: "params"},
		{name: "overflowing number", params: `{"ttl":1e400}`, code: mhp.CodeInvalidValue, field: "ttl",
			msg: "m/x: ttl: 1e400 is not a finite number (it overflows a double)"},
		{name: "trailing data", params: `{} {}`, code: mhp.CodeInvalidParams, field: "params", msg: "m/x: trailing data after params"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var r req
			err := mhp.DecodeParams("m/x", json.RawMessage(tc.params), &r)
			if tc.code == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			e, ok := mhp.AsError(err)
			if !ok || e.Code != tc.code || e.Data[mhp.DataField] != tc.field || (tc.msg != "" && e.Message != tc.msg) {
				t.Fatalf("got %#v, want code %d field %q message %q", err, tc.code, tc.field, tc.msg)
			}
		})
	}
}

func TestHandleDecodesWithDecodeParams(t *testing.T) {
	called := 0
	m := mhp.Handle(mhp.MethodEvidenceList, func(_ context.Context, req struct {
		Limit int `json:"limit"`
	}) (int, error) {
		called++
		return req.Limit * 2, nil
	})
	res, err := m(context.Background(), json.RawMessage(`{"limit":21}`))
	if err != nil || res != 42 {
		t.Fatalf("Handle: %v, %v", res, err)
	}
	_, err = m(context.Background(), json.RawMessage(`{"limt":1}`))
	want := mhp.DecodeParams(mhp.MethodEvidenceList, json.RawMessage(`{"limt":1}`), &struct {
		Limit int `json:"limit"`
	}{})
	if err == nil || err.Error() != want.Error() || called != 1 {
		t.Fatalf("refusal %v, want %v, and the function not called (called %d times)", err, want, called)
	}
}
