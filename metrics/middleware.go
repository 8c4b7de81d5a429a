package metrics

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/openmhp/mhp-go"
)

// maxPeek bounds how much of a request body the middleware reads to learn
// the method, and how much of an answer it keeps to learn the result code.
const maxPeek = 64 << 10

// Middleware observes an MHP JSON-RPC HTTP handler (POST /rpc, GET /events,
// DELETE /session): requests by method and result code, open SSE streams,
// and sessions opened (the public label of a successful initialize's
// answer, the key the device decorator removes when the session ends: the
// secret in the Mhp-Session header is never kept). methods is the server's method
// table: any other method is counted as "other", so a hostile client cannot
// grow the label set. The request body reaches next unchanged.
func (m *Metrics) Middleware(next http.Handler, methods []string) http.Handler {
	known := map[string]bool{mhp.MethodInitialize: true}
	for _, n := range methods {
		known[n] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/events":
			m.sse.Inc()
			defer m.sse.Dec()
			next.ServeHTTP(w, r)
		case r.Method == http.MethodPost && r.URL.Path == "/rpc":
			method := m.peekMethod(r, known)
			rec := &recorder{ResponseWriter: w, status: http.StatusOK}
			next.ServeHTTP(rec, r)
			code := rec.code()
			m.requests.WithLabelValues(method, code).Inc()
			if method == mhp.MethodInitialize && code == "ok" {
				if label := rec.label(); label != "" {
					m.sessionOpened(label)
				}
			}
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// peekMethod reads the head of the body for the method and puts it back.
func (m *Metrics) peekMethod(r *http.Request, known map[string]bool) string {
	head, err := io.ReadAll(io.LimitReader(r.Body, maxPeek))
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), r.Body), r.Body}
	if err != nil {
		return "invalid"
	}
	var f struct {
		Method string `json:"method"`
	}
	if json.Unmarshal(head, &f) != nil {
		if len(head) == maxPeek {
			return "other" // a large frame: the method is past what we read
		}
		return "invalid"
	}
	if known[f.Method] {
		return f.Method
	}
	return "other"
}

// recorder keeps the status and the head of the answer.
type recorder struct {
	http.ResponseWriter
	status int
	buf    bytes.Buffer
	over   bool
}

func (r *recorder) WriteHeader(status int) {
	r.status = status
	r.ResponseWriter.WriteHeader(status)
}

func (r *recorder) Write(b []byte) (int, error) {
	room := maxPeek - r.buf.Len()
	if len(b) > room {
		r.over = true
		r.buf.Write(b[:max(room, 0)])
	} else {
		r.buf.Write(b)
	}
	return r.ResponseWriter.Write(b)
}

// code is "ok", "none" (a notification: no answer), the JSON-RPC error code,
// or "http_<status>" for an answer that is not a JSON-RPC frame.
func (r *recorder) code() string {
	if r.status == http.StatusNoContent {
		return "none"
	}
	if r.status == http.StatusOK && !bytes.Contains(r.buf.Bytes(), []byte(`"error"`)) {
		return "ok" // no error member: skip decoding the whole answer
	}
	var f struct {
		Error *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.buf.Bytes(), &f); err != nil {
		if r.over && r.status == http.StatusOK {
			return "ok" // a large result
		}
		return "http_" + strconv.Itoa(r.status)
	}
	if f.Error != nil {
		return strconv.Itoa(f.Error.Code)
	}
	return "ok"
}

// label is the session label of an initialize answer ("" when it has none).
func (r *recorder) label() string {
	var f struct {
		Result struct {
			Label string `json:"label"`
		} `json:"result"`
	}
	if json.Unmarshal(r.buf.Bytes(), &f) != nil {
		return ""
	}
	return f.Result.Label
}

// Since returns the seconds elapsed since t, for histograms.
func since(t time.Time) float64 { return time.Since(t).Seconds() }
