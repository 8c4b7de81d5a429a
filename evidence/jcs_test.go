package evidence

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestFormatNumber(t *testing.T) {
	// Expected strings from ECMAScript's Number.prototype.toString, as RFC 8785
	// appendix B lists them.
	tests := []struct {
		in   float64
		want string
	}{
		{0, "0"},
		{math.Copysign(0, -1), "0"},
		{1, "1"},
		{-1, "-1"},
		{95, "95"},
		{0.1, "0.1"},
		{1.5, "1.5"},
		{123456789, "123456789"},
		{1e21, "1e+21"},
		{1e20, "100000000000000000000"},
		{1e-6, "0.000001"},
		{1e-7, "1e-7"},
		{1.5e-7, "1.5e-7"},
		{9007199254740992, "9007199254740992"},
		{333333333.3333332, "333333333.3333332"},
		{5e-324, "5e-324"},
		{1.7976931348623157e308, "1.7976931348623157e+308"},
		{4.50, "4.5"},
		{2e-3, "0.002"},
	}
	for _, tc := range tests {
		if got := FormatNumber(tc.in); got != tc.want {
			t.Errorf("FormatNumber(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestCanonicalJSON(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"sorted keys, no whitespace", `{ "b": 1, "a": [ true, null, "x" ] }`, `{"a":[true,null,"x"],"b":1}`},
		{"nested objects sorted", `{"z":{"y":1,"x":2},"a":{}}`, `{"a":{},"z":{"x":2,"y":1}}`},
		{"numbers normalised", `[1.0, 1e2, -0, 0.10, 1E-7]`, `[1,100,0,0.1,1e-7]`},
		{"minimal escaping", `"\u00e9\u2028<>&\u001f\n\/"`, "\"é\u2028<>&\\u001f\\n/\""},
		// RFC 8785 section 3.2.3: keys sort by UTF-16 code units, so U+10000
		// (a surrogate pair D800 DC00) sorts before U+FB33.
		{"utf-16 key order", `{"\ufb33":1,"\ud800\udc00":2,"a":3}`, "{\"a\":3,\"\U00010000\":2,\"\ufb33\":1}"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := CanonicalJSON([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
		})
	}
	for _, bad := range []string{`{"a":1,"a":2}`, `[1e400]`, "\"\xff\"", `{"a":1} x`} {
		if _, err := CanonicalJSON([]byte(bad)); err == nil {
			t.Errorf("CanonicalJSON(%q) accepted", bad)
		}
	}
}

// FormatNumber's plain-notation path agrees with the ECMAScript layout
// rules applied to the shortest digits, and an integer text passes through
// the canonicalizer unchanged.
func TestFormatNumberFastPathAgrees(t *testing.T) {
	rnd := rand.New(rand.NewPCG(30, 30))
	vals := []float64{1e-6, 0.000001, 1e-7, 1e20, 1e21, 999999999999999999999, 123.456, 0.1, 5e-324, 1.7976931348623157e308,
		9007199254740993, 4.35, 0.000123, 100, 1.5, 2e-6, 123456789012345680000}
	for i := 0; i < 20000; i++ {
		vals = append(vals, math.Float64frombits(rnd.Uint64()), rnd.Float64()*math.Pow(10, float64(rnd.IntN(44)-22)), float64(rnd.Int64N(1<<53)))
	}
	for _, v := range vals {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		for _, f := range []float64{v, -v} {
			if got, want := FormatNumber(f), formatNumberExp(f); got != want {
				t.Fatalf("FormatNumber(%v) = %s, the layout rules give %s", f, got, want)
			}
		}
	}
	for _, c := range []struct{ in, want string }{{`[0,-0,123456789012345,-42,1234567890123456,1.0,1e2]`, `[0,0,123456789012345,-42,1234567890123456,1,100]`}} {
		got, err := CanonicalJSON([]byte(c.in))
		if err != nil || string(got) != c.want {
			t.Fatalf("CanonicalJSON(%s) = %s %v, want %s", c.in, got, err, c.want)
		}
	}
}
