package transport

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"

	"github.com/openmhp/mhp-go"
)

// The answer of signals/read written without reflection is json.Marshal's,
// byte for byte, for every value it takes; NaN, infinities and names or
// strings that need an escape are left to json.Marshal.
func FuzzReadResultEncodingIsMarshals(f *testing.F) {
	for _, x := range []float64{0, 1, -1, 25.1, 1e-6, 9.99e-7, 1e-7, 1e20, 1e21, 123456789e13, -0.0000001, 5e-324,
		math.MaxFloat64, 1.7e9, math.Copysign(0, -1)} {
		f.Add(x, "block_temperature", "plain")
	}
	f.Add(1.0, "a<b", "x")
	f.Add(1.0, "a", "tab\there")
	f.Add(math.NaN(), "a", "x")
	f.Add(math.Inf(1), "a", "x")
	f.Add(2.0, "é", "\u2028")
	f.Fuzz(func(t *testing.T, x float64, name, s string) {
		results := []*mhp.ReadResult{
			{Values: map[string]any{name: x}, TS: x},
			{Values: map[string]any{name: x, "b": true, "f": false, "n": nil, "s": s, "z": 1.5}, TS: 1.7e9,
				Times: map[string]float64{name: x, "b": 2}, Unavailable: map[string]string{"n": s}},
			{Values: nil, TS: 3},
			{Values: map[string]any{}, Times: map[string]float64{}, Unavailable: map[string]string{}},
			{Values: map[string]any{"i": 3}}, // an int: left to json.Marshal
		}
		for _, r := range results {
			want, werr := json.Marshal(r)
			got, ok := appendReadResult(nil, r)
			if !ok {
				continue
			}
			if werr != nil {
				t.Fatalf("%+v: written as %s, json.Marshal refuses it: %v", r, got, werr)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%+v: written as\n%s\njson.Marshal writes\n%s", r, got, want)
			}
		}
		if _, ok := appendReadResult(nil, results[0]); !ok && !math.IsNaN(x) && !math.IsInf(x, 0) {
			if _, plain := appendPlain(nil, name); plain {
				t.Fatalf("a read of plain %q = %v was left to json.Marshal", name, x)
			}
		}
	})
}

// A whole answer is json.Marshal's of the Response, newline ended, on the
// fast path and off it (errors, ids that encoding/json rewrites).
func TestEncodeResponseIsMarshals(t *testing.T) {
	read := &mhp.ReadResult{Values: map[string]any{"t": 25.5}, TS: 1.8e9}
	for _, resp := range []*Response{
		{JSONRPC: Version, ID: json.RawMessage(`1`), Result: read},
		{JSONRPC: Version, ID: json.RawMessage(`"a<b>&"`), Result: read},
		{JSONRPC: Version, ID: json.RawMessage(`"\u2028"`), Result: map[string]any{"ok": true}},
		{JSONRPC: Version, ID: nullID, Result: map[string]any{"ok": true, "html": "<&>"}},
		{JSONRPC: Version, ID: json.RawMessage(`7`), Result: encodedResult(`{"a":1}`)},
		{JSONRPC: Version, ID: json.RawMessage(`7`), Error: mhp.Errorf(mhp.CodeServerError, "busy").With(mhp.DataReason, "x")},
	} {
		want, err := json.Marshal(resp)
		if err != nil {
			t.Fatal(err)
		}
		ab := &answerBuf{}
		ab.enc = json.NewEncoder(&ab.b)
		if err := encodeResponse(ab, resp); err != nil {
			t.Fatal(err)
		}
		if got := ab.b.Bytes(); !bytes.Equal(got, append(want, '\n')) {
			t.Errorf("encoded\n%s\njson.Marshal writes\n%s", got, want)
		}
	}
}
