package transport

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"slices"
	"strconv"
	"sync"

	"github.com/openmhp/mhp-go"
)

// encodedResult is a result already encoded as JSON (compact, with
// encoding/json's HTML escaping, as json.Marshal writes it): the answer
// carries its bytes as they are.
type encodedResult []byte

// MarshalJSON returns the encoded bytes (for the paths that marshal a
// Response with encoding/json: stdio, tests).
func (e encodedResult) MarshalJSON() ([]byte, error) { return e, nil }

// answerBuf is a pooled buffer for encoding an answer, with its encoder.
type answerBuf struct {
	b   bytes.Buffer
	enc *json.Encoder
}

var answerPool = sync.Pool{New: func() any {
	ab := &answerBuf{}
	ab.enc = json.NewEncoder(&ab.b)
	return ab
}}

// maxPooledAnswer is the largest buffer kept for reuse: a huge answer's
// buffer goes to the garbage collector, not into the pool.
const maxPooledAnswer = 64 << 10

// smallAnswer is the answer size up to which net/http buffers the whole
// answer and sets its Content-Length (its chunking threshold).
const smallAnswer = 2048

// jsonContentType is the Content-Type header value of every JSON answer
// (one shared slice: net/http only reads it).
var jsonContentType = []string{"application/json"}

// encodeResponse encodes resp, then a newline, into ab: the bytes
// json.Marshal(resp) gives, written without marshalling the envelope
// through reflection. An error answer, and an id that encoding/json would
// rewrite (HTML escaping), take json.Marshal itself.
func encodeResponse(ab *answerBuf, resp *Response) error {
	ab.b.Reset()
	if resp.Error != nil || resp.Result == nil || resp.JSONRPC != Version || !plainID(resp.ID) {
		c := *resp // marshalled as a copy: resp itself may stay on its caller's stack
		b, err := json.Marshal(&c)
		if err != nil {
			return err
		}
		ab.b.Write(b)
		ab.b.WriteByte('\n')
		return nil
	}
	ab.b.WriteString(`{"jsonrpc":"2.0","id":`)
	ab.b.Write(resp.ID)
	ab.b.WriteString(`,"result":`)
	if enc, ok := resp.Result.(encodedResult); ok {
		ab.b.Write(enc)
	} else if sr, ok := resp.Result.(splicedResult); ok {
		b, err := sr.r.appendTo(availableBuffer(&ab.b, 4096), sr.d)
		if err != nil {
			return err
		}
		ab.b.Write(b)
	} else if b, ok := appendReadResult(availableBuffer(&ab.b, 512), resp.Result); ok {
		ab.b.Write(b)
	} else {
		if err := ab.enc.Encode(resp.Result); err != nil {
			return err
		}
		ab.b.Truncate(ab.b.Len() - 1) // Encode's newline
	}
	ab.b.WriteString("}\n")
	return nil
}

// availableBuffer is b's free room, at least n bytes of it.
func availableBuffer(b *bytes.Buffer, n int) []byte {
	b.Grow(n)
	return b.AvailableBuffer()
}

// plainID reports whether id (a decoded request's id, or null) is written
// by encoding/json byte for byte as it is: compact, and nothing its HTML
// escaping rewrites (<, >, &, U+2028, U+2029).
func plainID(id json.RawMessage) bool {
	if len(id) == 0 {
		return false
	}
	for _, c := range id {
		switch c {
		case '<', '>', '&', 0xE2, ' ', '\t', '\r', '\n':
			return false
		}
	}
	return true
}

// writeResponse writes resp with status as one JSON body (with its
// Content-Length).
func writeResponse(w http.ResponseWriter, status int, resp *Response) {
	ab := answerPool.Get().(*answerBuf)
	defer func() {
		if ab.b.Cap() <= maxPooledAnswer {
			answerPool.Put(ab)
		}
	}()
	if err := encodeResponse(ab, resp); err != nil {
		c := *resp
		writeJSON(w, status, &c) // writes the not-serialisable answer
		return
	}
	h := w.Header()
	h["Content-Type"] = jsonContentType
	if ab.b.Len() > smallAnswer {
		// net/http sets the length of a small answer itself (without an
		// allocation); a larger one would be sent chunked.
		h["Content-Length"] = []string{strconv.Itoa(ab.b.Len())}
	}
	w.WriteHeader(status)
	_, _ = w.Write(ab.b.Bytes())
}

// appendReadResult appends a signals/read answer as json.Marshal writes
// it, without reflection, when every value and name is one it writes as is
// (numbers, booleans, null, strings of plain ASCII); ok is false for any
// other result (then encoding/json writes it).
// TestReadResultEncodingIsMarshals holds it to json.Marshal.
func appendReadResult(b []byte, result any) (out []byte, ok bool) {
	r, _ := result.(*mhp.ReadResult)
	if r == nil {
		return b, false
	}
	b = append(b, `{"values":`...)
	if b, ok = appendMap(b, r.Values, appendAny); !ok {
		return b, false
	}
	b = append(b, `,"ts":`...)
	if b, ok = appendFloat(b, r.TS); !ok {
		return b, false
	}
	if len(r.Times) > 0 {
		b = append(b, `,"times":`...)
		if b, ok = appendMap(b, r.Times, appendFloat); !ok {
			return b, false
		}
	}
	if len(r.Unavailable) > 0 {
		b = append(b, `,"unavailable":`...)
		if b, ok = appendMap(b, r.Unavailable, appendPlain); !ok {
			return b, false
		}
	}
	return append(b, '}'), true
}

// appendMap appends m with its keys sorted (as encoding/json orders them),
// each value by val; nil is null.
func appendMap[V any](b []byte, m map[string]V, val func([]byte, V) ([]byte, bool)) ([]byte, bool) {
	if m == nil {
		return append(b, "null"...), true
	}
	var small [8]string
	keys := small[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		var ok bool
		if b, ok = appendPlain(b, k); !ok {
			return b, false
		}
		b = append(b, ':')
		if b, ok = val(b, m[k]); !ok {
			return b, false
		}
	}
	return append(b, '}'), true
}

// appendAny appends a value of the kinds written as is.
func appendAny(b []byte, v any) ([]byte, bool) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), true
	case float64:
		return appendFloat(b, x)
	case bool:
		return strconv.AppendBool(b, x), true
	case string:
		return appendPlain(b, x)
	}
	return b, false
}

// appendPlain appends s quoted when no byte of it needs an escape (printable
// ASCII other than ", \, <, > and &).
func appendPlain(b []byte, s string) ([]byte, bool) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return b, false
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"'), true
}

// appendFloat appends f as encoding/json writes a float64: the shortest
// decimal, in exponent form below 1e-6 and from 1e21 on (with a one-digit
// negative exponent unpadded); NaN and the infinities are not JSON.
func appendFloat(b []byte, f float64) ([]byte, bool) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return b, false
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, true
}
