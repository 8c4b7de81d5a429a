package transport

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/openmhp/mhp-go"
)

// Version is the JSON-RPC version every frame carries.
const Version = "2.0"

// Request is one decoded JSON-RPC 2.0 request or notification. ID is the raw
// id (a string, a number or null); a frame without an id member is a
// notification and IsNotification reports true.
type Request struct {
	ID     json.RawMessage
	Method string
	// Params is the raw params member: an object, or nil when absent or null.
	Params json.RawMessage
	// hasID records whether the frame had an id member at all.
	hasID bool
	// paramsErr is a duplicate member found inside params: every method
	// refuses it (-32600) except safety/estop, which stops anyway.
	paramsErr *mhp.Error
}

// IsNotification reports whether the frame had no id (no response is due).
func (r *Request) IsNotification() bool { return !r.hasID }

// Response is one JSON-RPC 2.0 response: Result or Error, never both.
type Response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *mhp.Error      `json:"error,omitempty"`
}

// NotificationFrame is a JSON-RPC notification (no id) the server pushes.
type NotificationFrame struct {
	JSONRPC string         `json:"jsonrpc"`
	Method  string         `json:"method"`
	Params  map[string]any `json:"params"`
}

var nullID = json.RawMessage("null")

// DecodeFrame decodes one JSON-RPC 2.0 request frame. A batch (a JSON array)
// is refused: MHP requests are answered one by one and the priority path
// (safety/estop, ping) must never sit behind other members of a batch. On
// failure it returns the id when one could be read (else null) and an
// [*mhp.Error] (as an error; get at it with [mhp.AsError]): -32700 for malformed JSON or bytes that are not UTF-8 (the id
// is then null: invalid text is never echoed), -32600 for a frame that is
// JSON but not a request, or that repeats a member name in any object (RFC
// 8259 leaves duplicates to the parser; "dryRun":true,"dryRun":false must not
// become a real write). Member names of the frame and of params are compared
// case-insensitively, as the params decoder matches them.
func DecodeFrame(b []byte) (*Request, error) {
	req, e := decodeFrame(b)
	if req != nil { // the caller keeps b: the request holds copies
		req.ID, req.Params = slices.Clone(req.ID), slices.Clone(req.Params)
	}
	if e != nil {
		return req, e
	}
	return req, nil
}

// decodeFrame is [DecodeFrame] returning the concrete error type; the
// request's ID and Params are slices of b.
func decodeFrame(b []byte) (*Request, *mhp.Error) {
	req := &Request{}
	if filled, err := decodeFrameInto(b, req); !filled {
		return nil, err
	} else if err != nil {
		return req, err
	}
	return req, nil
}

// decodeFrameInto is decodeFrame into a request the caller holds (one on
// its stack): filled false stands for decodeFrame's nil request.
func decodeFrameInto(b []byte, req *Request) (filled bool, _ *mhp.Error) {
	b = trimJSONSpace(b)
	if len(b) == 0 {
		return false, mhp.Errorf(mhp.CodeInvalidRequest, "empty frame")
	}
	if !utf8.Valid(b) {
		return false, mhp.Errorf(mhp.CodeParseError, "request is not valid UTF-8 (first bad byte at offset %d)", badUTF8(b)).
			With("reason", "invalid_utf8")
	}
	// One scan checks the syntax (as strictly as json.Valid), finds a
	// repeated member and keeps the members read below. It stops at a
	// duplicate, leaving the rest unchecked: json.Valid checks it then.
	sc := getScanner()
	defer putScanner(sc)
	sc.scan(b)
	if sc.bad || (sc.found && !json.Valid(b)) {
		return false, mhp.Errorf(mhp.CodeParseError, "malformed JSON: %s", syntaxDetail(b))
	}
	dupPath, dup, hasDup := sc.dupPath(), sc.name, sc.found
	if hasDup && !strings.HasPrefix(dupPath, "params") {
		return false, mhp.Errorf(mhp.CodeInvalidRequest, "member %q appears twice in %s", dup, orFrame(dupPath)).
			With("field", joinPath(dupPath, dup)).With("reason", "duplicate_member")
	}
	switch b[0] {
	case '{':
	case '[':
		return false, mhp.Errorf(mhp.CodeInvalidRequest, "batch requests are not supported: send one request per frame")
	default:
		return false, mhp.Errorf(mhp.CodeInvalidRequest, "a request must be a JSON object")
	}
	// The members are the scan's (the frame is valid JSON, and no member
	// name repeats at the top level, folded or not: each is read once). The
	// scan stopped at a duplicate inside params: the members after it are
	// read by a second one.
	if hasDup {
		sc.membersOnly = true
		sc.scan(b)
	}
	*req = Request{}
	if id := sc.id; id != nil {
		req.hasID = true
		if err := checkID(id); err != nil {
			req.ID = nullID
			return true, err
		}
		req.ID = id
	}
	idOrNull := func() bool {
		if req.ID == nil {
			req.ID = nullID
		}
		return true
	}
	if v := sc.jsonrpc; v == nil || !jsonString(v, Version) {
		return idOrNull(), mhp.Errorf(mhp.CodeInvalidRequest, `"jsonrpc" must be "2.0"`).With("field", "jsonrpc")
	}
	if m, ok := decodeString(sc.method); !ok || m == "" {
		return idOrNull(), mhp.Errorf(mhp.CodeInvalidRequest, `"method" must be a non-empty string`).With("field", "method")
	} else {
		req.Method = m
	}
	if p := sc.params; p != nil {
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
	return true, nil
}

func badUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return len(b)
}

func orFrame(path string) string {
	if path == "" {
		return "the request"
	}
	return path
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// jsonString reports whether the JSON value v is the string want.
func jsonString(v []byte, want string) bool {
	s, ok := decodeString(v)
	return ok && s == want
}

// decodeString decodes the JSON value v (valid JSON, or nil) as a string:
// ok is false for nil or any other type. Text without an escape is taken
// as is.
func decodeString(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	if bytes.IndexByte(v, '\\') < 0 {
		if name, ok := knownMethods()[string(v[1:len(v)-1])]; ok {
			return name, true // a method name: no copy
		}
		return string(v[1 : len(v)-1]), true
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}

// knownMethods maps the name of every built-in method to itself, for the
// decoder to take a frame's method without copying it.
var knownMethods = sync.OnceValue(func() map[string]string {
	m := map[string]string{mhp.MethodInitialize: mhp.MethodInitialize, Version: Version}
	for name := range builtinMethods() {
		m[name] = name
	}
	return m
})

// trimJSONSpace trims the four whitespace bytes of JSON (not \v, \f or
// Unicode spaces, which make a frame malformed).
func trimJSONSpace(b []byte) []byte { return bytes.Trim(b, " \t\r\n") }

// checkID accepts a string, a number or null as the id.
func checkID(id json.RawMessage) *mhp.Error {
	id = trimJSONSpace(id)
	if len(id) == 0 {
		return mhp.Errorf(mhp.CodeInvalidRequest, "id is empty").With("field", "id")
	}
	switch c := id[0]; {
	case c == '"', c == '-', c >= '0' && c <= '9', string(id) == "null":
		return nil
	}
	return mhp.Errorf(mhp.CodeInvalidRequest, "id must be a string, a number or null").With("field", "id")
}

// syntaxDetail names where JSON went wrong, for the -32700 message.
func syntaxDetail(b []byte) string {
	var v any
	err := json.Unmarshal(b, &v)
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("%s at byte %d", se.Error(), se.Offset)
	}
	if err != nil {
		return err.Error()
	}
	return "invalid JSON"
}

// missing is the InvalidParams error for a required member that is absent.
func missing(method, field string) *mhp.Error {
	return mhp.Errorf(mhp.CodeInvalidParams, "%s: %s is required", method, field).With("field", field)
}
