package transport_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/examples/sim"
	"github.com/openmhp/mhp-go/transport"
)

// SetWriteDeadline is accepted (a net/http writer has it).
func (w *sinkWriter) SetWriteDeadline(time.Time) error { return nil }

// sinkWriter is a reusable http.ResponseWriter that keeps nothing: the
// handler benchmarks count the server's own work, not a recorder's.
type sinkWriter struct {
	h      http.Header
	status int
	n      int
}

func (w *sinkWriter) Header() http.Header { return w.h }
func (w *sinkWriter) WriteHeader(s int)   { w.status = s }
func (w *sinkWriter) Write(b []byte) (int, error) {
	w.n += len(b)
	return len(b), nil
}

// nullHandler is the null JSON-RPC server the handler benchmarks compare
// against: it reads the body, decodes the envelope and answers an empty
// result with the request's id (bench's null server).
func nullHandler(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	var req struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params"`
	}
	_ = json.Unmarshal(body, &req)
	w.Header().Set("Content-Type", "application/json")
	resp, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  struct{}        `json:"result"`
	}{"2.0", req.ID, struct{}{}})
	_, _ = w.Write(resp)
}

// BenchmarkHandler is one POST /rpc through the server's handler, in
// process (no connection), for each kind of request of the bench's cpu
// row, beside the null JSON-RPC handler: compare the sub-benchmarks'
// ns/op and allocs/op as ratios.
func BenchmarkHandler(b *testing.B) {
	drv, err := binding.New(sim.Thermocycler(sim.Options{ID: "thermocycler-01"}))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = drv.Close() })
	srv := newServer(b, drv, transport.Options{})
	h := srv.Handler()
	init := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + mhp.ProtocolVersion + `","clientInfo":{"name":"bench"}}}`
	w := &sinkWriter{h: http.Header{}}
	h.ServeHTTP(w, rpcRequest(init, ""))
	sid := w.h.Get(mhp.HeaderSession)
	if sid == "" {
		b.Fatal("initialize: no session")
	}
	kinds := []struct{ name, body string }{
		{"null", `{"jsonrpc":"2.0","id":1,"method":"signals/read","params":{"names":["block_temperature"]}}`},
		{"read", `{"jsonrpc":"2.0","id":1,"method":"signals/read","params":{"names":["block_temperature"]}}`},
		{"write", `{"jsonrpc":"2.0","id":2,"method":"settings/write","params":{"name":"target_temperature","value":50,"dryRun":true}}`},
		{"describe", `{"jsonrpc":"2.0","id":3,"method":"device/describe","params":{"detail":"summary"}}`},
	}
	for _, k := range kinds {
		b.Run(k.name, func(b *testing.B) {
			serve := h.ServeHTTP
			if k.name == "null" {
				serve = nullHandler
			}
			body := []byte(k.body)
			r := rpcRequest(k.body, sid)
			rd := bytes.NewReader(body)
			b.ReportAllocs()
			for b.Loop() {
				rd.Reset(body)
				r.Body = io.NopCloser(rd)
				w := &sinkWriter{h: http.Header{}}
				serve(w, r)
				if w.status != 0 && w.status != http.StatusOK {
					b.Fatalf("status %d", w.status)
				}
			}
		})
	}
}

func rpcRequest(body, sid string) *http.Request {
	r, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/rpc", bytes.NewReader([]byte(body)))
	r.Header.Set("Content-Type", "application/json")
	r.RemoteAddr = "127.0.0.1:5555"
	r.Host = "127.0.0.1:18900"
	if sid != "" {
		r.Header.Set(mhp.HeaderSession, sid)
	}
	return r
}
