package transport_test

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/tools/txtar"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/transport"
)

// FuzzDecode checks the frame decoder's contract on any input: it never
// panics; malformed JSON is -32700; any other refusal is -32600 or -32602;
// an accepted frame has a method, an object or no params, and a valid id.
// Seeds: a hand-picked set plus every request of the golden exchanges.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":"a","method":"signals/read","params":{"names":["t"]}}`,
		`{"jsonrpc":"2.0","method":"notifications/x"}`,
		`{"jsonrpc":"2.0","id":null,"method":"ping","params":null}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping","params":[1]}`,
		`{"jsonrpc":"2.0","id":{},"method":"ping"}`,
		`{"jsonrpc":"1.0","id":1,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1,"method":""}`,
		`{"jsonrpc":"2.0","id":1}`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`,
		`{"jsonrpc":"2.0","id":1,"method":`,
		`"just a string"`, `null`, ``, ` `, `{}`, `{"id":-1e400}`,
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"p\\u0000\"}",
		`{"jsonrpc":"2.0","id":1,"method":"ping","jsonrpc":"1.0"}`,
	} {
		f.Add([]byte(s))
	}
	files, _ := filepath.Glob("testdata/*.txtar")
	for _, file := range files {
		ar, err := txtar.ParseFile(file)
		if err != nil {
			f.Fatal(err)
		}
		for _, af := range ar.Files {
			if strings.HasSuffix(af.Name, ".request") || strings.HasSuffix(af.Name, ".setup") {
				f.Add(bytes.TrimSpace(af.Data))
			}
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := transport.DecodeFrame(b)
		if err != nil {
			switch mhp.CodeOf(err) {
			case mhp.CodeParseError:
				if json.Valid(b) && utf8.Valid(b) {
					t.Fatalf("valid JSON %q refused as a parse error", b)
				}
				if req != nil && string(req.ID) != "null" {
					t.Fatalf("%q: a parse error echoes id %q", b, req.ID)
				}
			case mhp.CodeInvalidRequest, mhp.CodeInvalidParams:
				if !json.Valid(b) && len(bytes.Trim(b, " \t\r\n")) > 0 {
					t.Fatalf("malformed %q refused with %d, want -32700", b, mhp.CodeOf(err))
				}
			default:
				t.Fatalf("%q: unexpected code %d", b, mhp.CodeOf(err))
			}
			if req != nil && !json.Valid(req.ID) {
				t.Fatalf("%q: refusal id %q is not JSON", b, req.ID)
			}
			if _, merr := json.Marshal(err); merr != nil {
				t.Fatalf("%q: the error does not marshal: %v", b, merr)
			}
			return
		}
		if req.Method == "" {
			t.Fatalf("%q: accepted without a method", b)
		}
		if !utf8.Valid(b) {
			t.Fatalf("%q: accepted bytes that are not UTF-8", b)
		}
		if req.Params != nil && (req.Params[0] != '{' || !json.Valid(req.Params)) {
			t.Fatalf("%q: accepted params %q", b, req.Params)
		}
		if !req.IsNotification() && !json.Valid(req.ID) {
			t.Fatalf("%q: accepted id %q", b, req.ID)
		}
		// The response to an accepted frame must marshal with its id.
		out, merr := json.Marshal(&transport.Response{JSONRPC: transport.Version, ID: req.ID, Result: map[string]any{}})
		if !req.IsNotification() && (merr != nil || !json.Valid(out)) {
			t.Fatalf("%q: response does not marshal: %v", b, merr)
		}
	})
}
