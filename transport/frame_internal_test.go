package transport

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/openmhp/mhp-go"
)

// FuzzDecodeFrameAgreesWithTheMapDecoder holds the one-pass frame decoder
// to the decoder it replaced (json.Valid, a duplicate scan, then the frame
// unmarshalled into a map[string]json.RawMessage, kept below as the
// reference): on any input both accept or refuse alike, with the same code,
// message and data, the same method, id, params and notification flag.
func FuzzDecodeFrameAgreesWithTheMapDecoder(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":"a","method":"signals/read","params":{"names":["t"]}}`,
		`{"jsonrpc":"2.0","method":"notifications/x"}`,
		`{"jsonrpc":"2.0","id":null,"method":"ping","params":null}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping","params":[1]}`,
		`{"jsonrpc":"2.0","id":{},"method":"ping"}`,
		`{"jsonrpc":"1.0","id":1,"method":"ping"}`,
		`{"jsonrpc":"2\u002e0","id":1,"method":"p\u0069ng"}`,
		`{"jsonrpc":"2.0","id":1,"method":""}`,
		`{"jsonrpc":"2.0","id":1,"method":null}`,
		`{"jsonrpc":"2.0","id":1,"Method":"ping"}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping","ID":2}`,
		`{"jsonrpc":"2.0","\u0069d":1,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1,"method":"settings/write","params":{"dryRun":true,"dryrun":false}}`,
		`{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":{"b":1,"b":2}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"x","":{"a":1,"A":2}}`,
		`{"":{"params":{"a":1,"A":2}}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`,
		`[{"a":1,"a":1}]`,
		`{"jsonrpc":"2.0","id":1,"method":`,
		`"just a string"`, `null`, ``, ` `, `{}`, `{"id":-1e400}`, ` {"jsonrpc" : "2.0" , "id" : 7 , "method" : "ping" } `,
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"p\\u0000\"}",
		`{"jsonrpc":"2.0","id":1,"method":"ping","jsonrpc":"1.0"}`,
		`{"p":[1,{"q":[{"r":1,"r":1}]}]}`,
		`{"params":{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"q":17,"Q":18}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, gerr := decodeFrame(b)
		want, werr := refDecodeFrame(b)
		if (gerr == nil) != (werr == nil) {
			t.Fatalf("%q: error %v, the map decoder's %v", b, gerr, werr)
		}
		if gerr != nil {
			gerr.TS, werr.TS = 0, 0
			gj, _ := json.Marshal(gerr)
			wj, _ := json.Marshal(werr)
			if !bytes.Equal(gj, wj) {
				t.Fatalf("%q: error %s, the map decoder's %s", b, gj, wj)
			}
		}
		if (got == nil) != (want == nil) {
			t.Fatalf("%q: request %+v, the map decoder's %+v", b, got, want)
		}
		if got == nil {
			return
		}
		if got.Method != want.Method || got.hasID != want.hasID || string(got.ID) != string(trimJSONSpace(want.ID)) ||
			string(got.Params) != string(want.Params) {
			t.Fatalf("%q: request %q %v %q %q, the map decoder's %q %v %q %q", b, got.Method, got.hasID, got.ID, got.Params,
				want.Method, want.hasID, want.ID, want.Params)
		}
		if got.paramsErr != nil && want.paramsErr != nil {
			got.paramsErr.TS, want.paramsErr.TS = 0, 0
		}
		gp, _ := json.Marshal(got.paramsErr)
		wp, _ := json.Marshal(want.paramsErr)
		if !bytes.Equal(gp, wp) {
			t.Fatalf("%q: params error %s, the map decoder's %s", b, gp, wp)
		}
	})
}

// The decoder before the one-pass scan, as it was: the reference.

func refDecodeFrame(b []byte) (*Request, *mhp.Error) {
	b = trimJSONSpace(b)
	if len(b) == 0 {
		return nil, mhp.Errorf(mhp.CodeInvalidRequest, "empty frame")
	}
	if !utf8.Valid(b) {
		return nil, mhp.Errorf(mhp.CodeParseError, "request is not valid UTF-8 (first bad byte at offset %d)", badUTF8(b)).
			With("reason", "invalid_utf8")
	}
	if !json.Valid(b) {
		return nil, mhp.Errorf(mhp.CodeParseError, "malformed JSON: %s", syntaxDetail(b))
	}
	dupPath, dup, hasDup := refDuplicateMember(b)
	if hasDup && !strings.HasPrefix(dupPath, "params") {
		return nil, mhp.Errorf(mhp.CodeInvalidRequest, "member %q appears twice in %s", dup, orFrame(dupPath)).
			With("field", joinPath(dupPath, dup)).With("reason", "duplicate_member")
	}
	switch b[0] {
	case '{':
	case '[':
		return nil, mhp.Errorf(mhp.CodeInvalidRequest, "batch requests are not supported: send one request per frame")
	default:
		return nil, mhp.Errorf(mhp.CodeInvalidRequest, "a request must be a JSON object")
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, mhp.Errorf(mhp.CodeInvalidRequest, "a request must be a JSON object: %v", err)
	}
	req := &Request{}
	if id, ok := raw["id"]; ok {
		req.hasID = true
		if err := checkID(id); err != nil {
			req.ID = nullID
			return req, err
		}
		req.ID = id
	}
	idOrNull := func() *Request {
		if req.ID == nil {
			req.ID = nullID
		}
		return req
	}
	var version string
	if v, ok := raw["jsonrpc"]; !ok || json.Unmarshal(v, &version) != nil || version != Version {
		return idOrNull(), mhp.Errorf(mhp.CodeInvalidRequest, `"jsonrpc" must be "2.0"`).With("field", "jsonrpc")
	}
	m, ok := raw["method"]
	if !ok || json.Unmarshal(m, &req.Method) != nil || req.Method == "" {
		return idOrNull(), mhp.Errorf(mhp.CodeInvalidRequest, `"method" must be a non-empty string`).With("field", "method")
	}
	if p, ok := raw["params"]; ok {
		p = trimJSONSpace(p)
		switch {
		case string(p) == "null":
		case len(p) > 0 && p[0] == '{':
			req.Params = p
		default:
			return idOrNull(), mhp.Errorf(mhp.CodeInvalidParams, "%s: params must be an object", req.Method).With("field", "params")
		}
	}
	if hasDup {
		req.paramsErr = mhp.Errorf(mhp.CodeInvalidRequest, "%s: member %q appears twice in %s", req.Method, dup, dupPath).
			With("field", joinPath(dupPath, dup)).With("reason", "duplicate_member")
	}
	return req, nil
}

func refDuplicateMember(b []byte) (path, name string, found bool) {
	d := refDupScanner{b: b}
	d.value("")
	return d.path, d.name, d.found
}

type refDupScanner struct {
	b     []byte
	i     int
	found bool
	path  string
	name  string
}

func (d *refDupScanner) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\r', '\n':
			d.i++
		default:
			return
		}
	}
}

// value skips one value starting at d.i (after whitespace); it stops early
// once a duplicate is found.
func (d *refDupScanner) value(path string) {
	d.ws()
	if d.i >= len(d.b) || d.found {
		return
	}
	switch d.b[d.i] {
	case '{':
		d.object(path)
	case '[':
		d.i++
		for n := 0; ; n++ {
			d.ws()
			if d.i < len(d.b) && d.b[d.i] == ']' {
				d.i++
				return
			}
			d.value(path + "[" + strconv.Itoa(n) + "]")
			if d.found {
				return
			}
			d.ws()
			if d.i < len(d.b) && d.b[d.i] == ',' {
				d.i++
			}
		}
	case '"':
		d.str()
	default: // number, true, false, null
		for d.i < len(d.b) {
			switch d.b[d.i] {
			case ',', ']', '}', ' ', '\t', '\r', '\n':
				return
			}
			d.i++
		}
	}
}

// str skips a string and returns its raw text (quotes included).
func (d *refDupScanner) str() []byte {
	start := d.i
	d.i++ // opening quote
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case '\\':
			d.i += 2
			continue
		case '"':
			d.i++
			return d.b[start:d.i]
		}
		d.i++
	}
	return d.b[start:]
}

func (d *refDupScanner) object(path string) {
	d.i++ // '{'
	fold := path == "" || path == "params"
	seen := map[string]bool{}
	for {
		d.ws()
		if d.i >= len(d.b) {
			return
		}
		if d.b[d.i] == '}' {
			d.i++
			return
		}
		if d.b[d.i] == ',' {
			d.i++
			continue
		}
		raw := d.str()
		key := string(raw[1 : len(raw)-1])
		if strings.IndexByte(key, '\\') >= 0 {
			var s string
			if json.Unmarshal(raw, &s) == nil {
				key = s
			}
		}
		k := key
		if fold {
			k = strings.ToLower(key)
		}
		if seen[k] {
			d.path, d.name, d.found = path, key, true
			return
		}
		seen[k] = true
		d.ws()
		if d.i < len(d.b) && d.b[d.i] == ':' {
			d.i++
		}
		d.value(joinPath(path, key))
		if d.found {
			return
		}
	}
}

// Each fast params reader agrees with the strict decoder wherever it
// accepts: the same request, field by field.
func FuzzFastParamsAgree(f *testing.F) {
	for _, s := range []string{
		`{"names":["block_temperature"]}`, `{"names":[]}`, `{"names":["a","b"]}`, `{ "names" : [ "a" , "b" ] }`, `{"names":null}`,
		`{"names":["a\"b"]}`, `{"NAMES":["a"]}`, `{"names":["a",1]}`, `{"names":"a"}`, `{}`, `{"names":["a"],"x":1}`,
		`{"detail":"summary"}`, `{"detail":"card","select":{"signals":["a"]}}`, `{"detail":null}`, `{"detail":"\u0073ummary"}`,
		`{"name":"target_temperature","value":50,"dryRun":true}`, `{"name":"x","value":null}`, `{"name":"x","value":{"a":[1]},"approved":false}`,
		`{"name":"x","value":1e400}`, `{"name":"x","value":"s","commandId":"c-1","permitId":"p"}`, `{"name":1,"value":2}`,
		`{"name":"x","dryrun":true}`, `{"name":"x","value":true,"dryRun":"yes"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		if !utf8.Valid(p) || !json.Valid(p) || len(trimJSONSpace(p)) == 0 || trimJSONSpace(p)[0] != '{' {
			return
		}
		if _, _, dup := duplicateMember(append(append([]byte(`{"params":`), p...), '}')); dup {
			return // the frame decoder refuses it before any method runs
		}
		p = trimJSONSpace(p)
		agree(t, "signals/read", p, fastNames)
		agree(t, "device/describe", p, fastDescribe)
		agree(t, "settings/write", p, fastWrite)
	})
}

func agree[Req any](t *testing.T, method string, p []byte, fast func(json.RawMessage) (Req, bool)) {
	got, ok := fast(p)
	if !ok {
		return
	}
	want, err := mhp.DecodeAs[Req](method, p)
	if err != nil {
		t.Fatalf("%s %s: the fast reader accepted what the decoder refuses: %v", method, p, err)
	}
	gj, _ := json.Marshal(got)
	wj, _ := json.Marshal(want)
	if !bytes.Equal(gj, wj) {
		t.Fatalf("%s %s: the fast reader read %s, the decoder %s", method, p, gj, wj)
	}
}

// fastValue decodes what it accepts as json.Unmarshal into an any does.
func FuzzFastValueAgrees(f *testing.F) {
	for _, s := range []string{`50`, `-1.5e3`, `0`, `1e400`, `-0`, `true`, `false`, `null`, `"x"`, `"a\"b"`, `[1]`, `{"a":1}`,
		`123456789012345678901234567890`, `4.9e-324`, `1e-400`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		v = trimJSONSpace(v)
		if !utf8.Valid(v) || !json.Valid(v) {
			return
		}
		got, ok := fastValue(v)
		if !ok {
			return
		}
		var want any
		if err := json.Unmarshal(v, &want); err != nil {
			t.Fatalf("%s: fastValue took %v, json.Unmarshal refuses it: %v", v, got, err)
		}
		if gf, ok := got.(float64); ok && gf == 0 && want == 0.0 {
			if math.Signbit(gf) != math.Signbit(want.(float64)) {
				t.Fatalf("%s: fastValue %v, json.Unmarshal %v (sign of zero)", v, got, want)
			}
		}
		if got != want {
			t.Fatalf("%s: fastValue %#v, json.Unmarshal %#v", v, got, want)
		}
	})
}
