package transport

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
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
		b, err := json.Marshal(resp)
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
	} else {
		if err := ab.enc.Encode(resp.Result); err != nil {
			return err
		}
		ab.b.Truncate(ab.b.Len() - 1) // Encode's newline
	}
	ab.b.WriteString("}\n")
	return nil
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
		writeJSON(w, status, resp) // writes the not-serialisable answer
		return
	}
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["Content-Length"] = []string{strconv.Itoa(ab.b.Len())}
	w.WriteHeader(status)
	_, _ = w.Write(ab.b.Bytes())
}
