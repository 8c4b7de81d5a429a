package evidence

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
)

// fastWalk runs only the one-pass walk (no fallback): ok false when it
// hands the value to encoding/json.
func fastWalk(t testing.TB, v any) ([]byte, bool) {
	t.Helper()
	var b bytes.Buffer
	err := (&canonWalk{b: &b}).value(v, 0)
	if err != nil && !errors.Is(err, errSlow) {
		t.Fatalf("the walk failed with %v, want errSlow or success", err)
	}
	return b.Bytes(), err == nil
}

// agreeWithOracle checks canonicalValue(v) against Canonical(v), the
// marshal-and-re-parse path: the same bytes, or the same error text (Digest
// puts the text in the digest).
func agreeWithOracle(t testing.TB, v any) (fast bool) {
	t.Helper()
	want, werr := Canonical(v)
	got, gerr := canonicalValue(v)
	if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
		t.Fatalf("%#v: error %v, oracle %v", v, gerr, werr)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%#v:\n got %s\nwant %s", v, got, want)
	}
	b, ok := fastWalk(t, v)
	if ok {
		if werr != nil {
			t.Fatalf("%#v: the walk wrote %s where the oracle fails: %v", v, b, werr)
		}
		if !bytes.Equal(b, want) {
			t.Fatalf("%#v: the walk wrote\n %s\nwant %s", v, b, want)
		}
	}
	return ok
}

// plainStruct has a tag name the walk leaves to encoding/json.
type plainStruct struct {
	S    string `json:"s"`
	Zeta string `json:"Ärger"`
}

type plainNoOdd struct {
	B     bool            `json:"b"`
	N     float64         `json:"n,omitempty"`
	S     string          `json:"s"`
	I     int             `json:"i,omitempty"`
	U     uint16          `json:"u"`
	F32   float32         `json:"f32"`
	Any   any             `json:"any,omitempty"`
	M     map[string]int  `json:"m,omitempty"`
	L     []string        `json:"l"`
	P     *plainNoOdd     `json:"p,omitempty"`
	Arr   [2]byte         `json:"arr"`
	NoTag string          //
	Dash  string          `json:"-"`
	DashC string          `json:"-,"`
	Num   json.Number     `json:"num,omitempty"`
	Raw   json.RawMessage `json:"raw,omitempty"`
	E     *mhp.Error      `json:"e,omitempty"`
	skip  int
}

type embedded struct {
	plainNoOdd
	X int `json:"x"`
}

type withString struct {
	N int `json:"n,string"`
}

type ptrMarshaler struct{ V int }

func (p *ptrMarshaler) MarshalJSON() ([]byte, error) {
	return []byte(`{"z":1,"a":[1.50,"<&>"],"v":` + string(rune('0'+p.V%10)) + `}`), nil
}

type holdsPtrMarshaler struct {
	M ptrMarshaler `json:"m"`
}

type named string

type textKey struct{}

func (textKey) MarshalText() ([]byte, error) { return []byte("t\u2028"), nil }

func deep(n int) any {
	var v any = "leaf"
	for i := 0; i < n; i++ {
		v = []any{v}
	}
	return v
}

// TestCanonicalValueAgreesWithTheOracle: the one-pass walk gives the bytes
// (or the error) of the marshal-and-re-parse path, and takes the fast path
// for the values receipts carry.
func TestCanonicalValueAgreesWithTheOracle(t *testing.T) {
	s := plainNoOdd{B: true, N: -0.0, S: "é\u2028<tag>&\"\\\x01\x7f\xff", U: 7, F32: 0.1, Any: map[string]any{"z": 1e21, "a": []any{nil, 1.5e-7}},
		M: map[string]int{"b": 2, "a": 1}, L: []string{"x"}, Arr: [2]byte{1, 2}, NoTag: "n", DashC: "d",
		Num: "1.0e+2", Raw: json.RawMessage(` { "b" : [ 1 , 2.50 ] , "a" : "\u00e9\ud83d\ude00" } `),
		E: &mhp.Error{Code: mhp.CodeLimitViolation, Message: "too hot", Data: map[string]any{"max": 100.0, "ts": 3.0}, TS: 1.5}}
	s.P = &plainNoOdd{S: "inner", L: nil}
	cases := []struct {
		name string
		v    any
		fast bool // the walk handles it without the whole-value fallback (odd structs and custom marshallers go through encoding/json alone)
	}{
		{"nil", nil, true},
		{"true", true, true},
		{"string with escapes", "a\"b\\c\n\t\r\b\f\x00\x1f\x7f<>&\u2028\u2029", true},
		{"invalid UTF-8, byte by byte", "a\xff\xfeb\xed\xa0\x80c", true},
		{"non-ASCII and astral", "日本語😀\uFFFF\uE000", true},
		{"negative zero", math.Copysign(0, -1), true},
		{"1e21", 1e21, true},
		{"1e20", 1e20, true},
		{"tiny", 1.5e-7, true},
		{"1e-6", 1e-6, true},
		{"fraction", 0.1 + 0.2, true},
		{"max float", math.MaxFloat64, true},
		{"smallest denormal", 5e-324, true},
		{"huge int64", int64(math.MaxInt64), true},
		{"min int64", int64(math.MinInt64), true},
		{"15 digits", int64(999_999_999_999_999), true},
		{"16 digits", int64(1_000_000_000_000_001), true},
		{"max uint64", uint64(math.MaxUint64), true},
		{"int8", int8(-5), true},
		{"float32", float32(3.14159), true},
		{"float32 tiny", float32(1e-7), true},
		{"NaN", math.NaN(), false},
		{"Inf in a map", map[string]any{"x": math.Inf(1)}, false},
		{"json.Number", json.Number("12.50e1"), true},
		{"json.Number -0", json.Number("-0"), true},
		{"json.Number empty", json.Number(""), true},
		{"json.Number huge int", json.Number("123456789012345678901234567890"), true},
		{"json.Number out of range", json.Number("1e400"), false},
		{"json.Number invalid", json.Number("01"), false},
		{"raw nested", json.RawMessage(`{"b":{"y":[true,null,-0.0,1E21]},"a":"\u003c\/"}`), true},
		{"raw invalid", json.RawMessage(`{"a":01}`), false},
		{"raw duplicate keys", json.RawMessage(`{"a":1,"a":2}`), false},
		{"raw lone surrogate", json.RawMessage(`"\ud800"`), false},
		{"raw empty", json.RawMessage{}, false},
		{"raw nil", json.RawMessage(nil), true},
		{"map keys by UTF-16", map[string]any{"\uE000": 1, "😀": 2, "z": 3, "é": 4, "": 5, "a\x00": 6}, true},
		{"map keys invalid UTF-8 collide", map[string]any{"\xff": 1, "\xfe": 2}, false},
		{"named map", map[named]named{"b": "x", "a": "y"}, true},
		{"int keys", map[int]string{2: "b", 10: "a"}, false},
		{"text keys", map[textKey]int{{}: 1}, false},
		{"nested maps and lists", map[string]any{"a": []any{map[string]any{"y": 1, "x": []any{}}, map[string]any{}}}, true},
		{"nil map", map[string]any(nil), true},
		{"nil list", []any(nil), true},
		{"typed nil pointer", (*plainNoOdd)(nil), true},
		{"struct", s, true},
		{"struct pointer", &s, true},
		{"struct with odd tags", plainStruct{S: "x", Zeta: "z"}, true},
		{"embedded struct", embedded{X: 1}, true},
		{"string option", withString{N: 5}, true},
		{"bytes", []byte("hi"), false},
		{"mhp error", s.E, true},
		{"mhp error without data", &mhp.Error{Code: mhp.CodeDeviceBusy, Message: "busy"}, true},
		{"mhp error with only ts", &mhp.Error{Code: mhp.CodeDeviceBusy, Message: "busy", TS: 1.25}, true},
		{"mhp error value", *s.E, true},
		{"write result", &mhp.WriteResult{OK: true, Name: "sp", Value: 42.0, Applied: true, Status: mhp.WriteApplied}, true},
		{"dry-run write result", &mhp.WriteResult{OK: true, Name: "sp", Value: 42.0, DryRun: true, WouldWrite: 42.0, Notes: &mhp.DryRunNotes{}}, true},
		{"time (MarshalJSON)", map[string]any{"t": time.Unix(1_800_000_000, 5).UTC()}, true},
		{"netip (MarshalText)", []any{netip.MustParseAddr("::1")}, true},
		{"pointer marshaler, addressable", &holdsPtrMarshaler{M: ptrMarshaler{V: 3}}, true},
		{"pointer marshaler, not addressable", holdsPtrMarshaler{M: ptrMarshaler{V: 3}}, true},
		{"channel", map[string]any{"c": make(chan int)}, false},
		{"512 deep", deep(512), true},
		{"513 deep", deep(513), false},
		{"invoke result (MarshalJSON)", &mhp.InvokeResult{Job: &mhp.Job{ID: "j1", Action: "run", State: mhp.JobRunning}}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fast := agreeWithOracle(t, tc.v)
			if fast != tc.fast {
				t.Fatalf("the walk handled it itself: %v, want %v", fast, tc.fast)
			}
		})
	}
}

// TestCompareUTF16 orders names as their UTF-16 code units, the RFC 8785
// rule that differs from UTF-8 byte order above U+E000.
func TestCompareUTF16(t *testing.T) {
	order := []string{"", "a", "a\x00", "ab", "é", "\uD7FF", "😀", "😁", "\uE000", "\uFFFF"}
	for i := range order {
		for j := range order {
			got := compareUTF16(order[i], order[j])
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got != want {
				t.Fatalf("compare(%q, %q) = %d, want %d", order[i], order[j], got, want)
			}
		}
	}
}

// FuzzCanonicalValue: for values built from arbitrary bytes, strings and
// numbers, the one-pass walk agrees with the marshal-and-re-parse path.
func FuzzCanonicalValue(f *testing.F) {
	f.Add([]byte(`{"a":[1,2.5e-7,"\u00e9"],"b":{"c":null}}`), "é\xff", 1e21, int64(-1))
	f.Add([]byte(`"\ud83d\ude00"`), "\u2028<>&", math.Copysign(0, -1), int64(math.MaxInt64))
	f.Add([]byte(`[1e400]`), "", 5e-324, int64(1e15))
	f.Add([]byte(`{"a":1,"a":2}`), "\x00\x1f\"\\", 0.1, int64(-999_999_999_999_999))
	f.Fuzz(func(t *testing.T, data []byte, s string, x float64, i int64) {
		var v any
		if json.Unmarshal(data, &v) == nil {
			agreeWithOracle(t, v)
		}
		d := json.NewDecoder(bytes.NewReader(data))
		d.UseNumber()
		var n any
		if d.Decode(&n) == nil {
			agreeWithOracle(t, n)
		}
		agreeWithOracle(t, map[string]any{
			s: x, "raw": json.RawMessage(data), "num": json.Number(s), "i": i, "u": uint64(i),
			"f32": float32(x), "list": []any{s, x, i, nil, true}, strings.ToUpper(s) + "k": map[string]string{s: s},
		})
		agreeWithOracle(t, &plainNoOdd{S: s, N: x, I: int(i), F32: float32(x), Any: s, M: map[string]int{s: int(i)},
			Num: json.Number(s), Raw: json.RawMessage(data), E: &mhp.Error{Code: mhp.Code(i), Message: s, Data: map[string]any{s: x}, TS: x}})
		agreeWithOracle(t, &mhp.Error{Code: mhp.CodeInvalidValue, Message: s, TS: x})
		agreeWithOracle(t, json.RawMessage(data))
	})
}
