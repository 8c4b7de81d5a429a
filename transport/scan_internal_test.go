package transport

import (
	"encoding/json"
	"strings"
	"testing"
)

// scanSeeds are texts at the edges of JSON's grammar, each side.
var scanSeeds = []string{
	``, ` `, `{}`, `[]`, `{`, `}`, `[`, `]`, `{"a":1}`, `{"a":1,}`, `{,"a":1}`, `{"a":1,,"b":2}`, `{"a" 1}`, `{"a":}`, `{a:1}`,
	`{"a":1}x`, `{"a":1} {}`, `[1,]`, `[,1]`, `[1 2]`, `[1,,2]`, `["a",["b",{"c":[]}]]`,
	`0`, `-0`, `01`, `-`, `-01`, `1.`, `1.5`, `.5`, `+1`, `1e`, `1e+`, `1E-3`, `1e400`, `-1.0e-0`, `1x`, `0x10`, `1.5.5`, `- 1`,
	`true`, `false`, `null`, `tru`, `nul`, `truex`, `True`, `nan`, `Infinity`,
	`"a"`, `"`, `"a`, `"\"`, `"\\"`, `"\/"`, `"\b\f\n\r\t"`, `"\u00e9"`, `"\u00G9"`, `"\u12"`, `"\x41"`, `"\'"`, "\"a\tb\"", "\"a\x00b\"",
	"\"a\x1fb\"", "\"\x7f\"", "\"é\"", "\"\xff\"", `"\ud800"`,
	"{\"a\":1}\n", " \t\r\n1 \t\r\n", "\v1", "\f1", "\u00a01",
	`{"jsonrpc":"2.0","id":1,"method":"signals/read","params":{"names":["block_temperature"]}}`,
	strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth),
	strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1),
	strings.Repeat(`{"a":`, maxDepth) + "1" + strings.Repeat("}", maxDepth),
	strings.Repeat(`{"a":`, maxDepth+1) + "1" + strings.Repeat("}", maxDepth+1),
	strings.Repeat("[", maxDepth-1) + `{"a":1}` + strings.Repeat("]", maxDepth-1),
	strings.Repeat("[", maxDepth) + `{"a":1}` + strings.Repeat("]", maxDepth),
}

// TestScanIsAsStrictAsValid: the one-pass scan of the frame decoder accepts
// exactly the texts json.Valid accepts (grammar edges, nesting depth).
func TestScanIsAsStrictAsValid(t *testing.T) {
	for _, s := range scanSeeds {
		checkScanIsValid(t, []byte(s))
	}
}

// FuzzScanIsValid holds the scan to json.Valid on every input the fuzzer
// finds (a scan stopped at a duplicate leaves the rest to json.Valid).
func FuzzScanIsValid(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(checkScanIsValid)
}

func checkScanIsValid(t *testing.T, b []byte) {
	sc := getScanner()
	defer putScanner(sc)
	sc.scan(b)
	if sc.found {
		return
	}
	if want := json.Valid(b); sc.bad == want {
		t.Fatalf("scan of %q: bad %v, json.Valid %v", trimForLog(b), sc.bad, want)
	}
}

func trimForLog(b []byte) string {
	if len(b) > 80 {
		return string(b[:40]) + "..." + string(b[len(b)-40:])
	}
	return string(b)
}
