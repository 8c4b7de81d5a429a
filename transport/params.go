package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"

	"github.com/openmhp/mhp-go"
)

// Fast params: the params of the most frequent requests (signals/read,
// device/describe, settings/write) in their usual spelling are read by a
// scan of the raw object instead of a json.Decoder (which costs a dozen
// allocations). A fast reader accepts only what it is sure of: member names
// spelt exactly as the struct's tags, string values without escapes, the
// value types the struct expects; anything else ("NAMES", an escape, null,
// an unknown member) falls back to mhp.DecodeAs, so the answer, refusals
// included, is what the strict decoder gives. FuzzFastParamsAgree holds
// each to the decoder.

// handleFast is handle with a fast reader of the params tried first.
func handleFast[Req, Res any](name string, fast func(json.RawMessage) (Req, bool),
	fn func(s *Server, ctx context.Context, ss *session, req Req) (Res, error)) entry {
	return entry{name, func(s *Server, ctx context.Context, ss *session, p json.RawMessage) (any, error) {
		req, ok := fast(p)
		if !ok {
			var err error
			if req, err = mhp.DecodeAs[Req](name, p); err != nil {
				return nil, err
			}
		}
		return fn(s, ctx, ss, req)
	}}
}

// plainString is the text of a JSON string without escapes.
func plainString(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' || bytes.IndexByte(v, '\\') >= 0 {
		return "", false
	}
	return string(v[1 : len(v)-1]), true
}

// plainBool is a JSON true or false.
func plainBool(v []byte) (bool, bool) {
	switch string(v) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}

// readParams reads a params object (valid JSON: the frame decoder checked
// it, and no name repeats) whose every member set takes; set reports
// false for a member it does not take. Absent params read as none.
func readParams(p json.RawMessage, set func(key, value []byte) bool) bool {
	if len(p) == 0 {
		return true
	}
	ok := true
	if !eachMember(p, func(key, member []byte) bool {
		// member is "key":value; the value follows the colon.
		v := bytes.TrimLeft(member[len(key)+2:], " \t\r\n")
		v = bytes.TrimLeft(v[1:], " \t\r\n")
		ok = set(key, bytes.TrimRight(v, " \t\r\n"))
		return ok
	}) {
		return false
	}
	return ok
}

// fastNames reads {"names":["a","b"]}.
func fastNames(p json.RawMessage) (namesParams, bool) {
	var out namesParams
	ok := readParams(p, func(key, v []byte) bool {
		if string(key) != "names" || len(v) < 2 || v[0] != '[' {
			return false
		}
		out.Names = []string{}
		body := bytes.TrimSpace(v[1 : len(v)-1])
		for len(body) > 0 {
			end := bytes.IndexByte(body[1:], '"') + 2
			if body[0] != '"' || end < 2 {
				return false
			}
			s, ok := plainString(body[:end])
			if !ok {
				return false
			}
			out.Names = append(out.Names, s)
			body = bytes.TrimLeft(body[end:], " \t\r\n")
			if len(body) > 0 {
				if body[0] != ',' {
					return false
				}
				body = bytes.TrimLeft(body[1:], " \t\r\n")
				if len(body) == 0 {
					return false
				}
			}
		}
		return true
	})
	return out, ok
}

// fastDescribe reads {"detail":"summary"}.
func fastDescribe(p json.RawMessage) (mhp.DescribeRequest, bool) {
	var out mhp.DescribeRequest
	ok := readParams(p, func(key, v []byte) bool {
		if string(key) != "detail" {
			return false
		}
		s, ok := plainString(v)
		out.Detail = s
		return ok
	})
	return out, ok
}

// fastWrite reads settings/write's params: name, value (any JSON value,
// kept raw), and approved, dryRun, commandId, permitId.
func fastWrite(p json.RawMessage) (writeParams, bool) {
	var out writeParams
	ok := readParams(p, func(key, v []byte) bool {
		var ok bool
		switch string(key) {
		case "name":
			var s string
			s, ok = plainString(v)
			out.Name = &s
		case "value":
			if string(v) == "null" { // the decoder leaves a raw null as null
				return false
			}
			out.Value, ok = json.RawMessage(v), true
		case "approved":
			out.Approved, ok = plainBool(v)
		case "dryRun":
			out.DryRun, ok = plainBool(v)
		case "commandId":
			out.CommandID, ok = plainString(v)
		case "permitId":
			out.PermitID, ok = plainString(v)
		}
		return ok
	})
	return out, ok
}

// fastValue decodes a setting's value (valid JSON) as json.Unmarshal into
// an any does, for a number that fits a double, a boolean or a string
// without escapes; ok is false for anything else (json.Unmarshal decides,
// and words the refusal of a number that overflows).
func fastValue(v json.RawMessage) (any, bool) {
	if len(v) == 0 {
		return nil, false
	}
	switch c := v[0]; {
	case c == '-' || ('0' <= c && c <= '9'):
		f, err := strconv.ParseFloat(string(v), 64)
		return f, err == nil
	case c == '"':
		return plainString(v)
	}
	b, ok := plainBool(v)
	return b, ok
}
