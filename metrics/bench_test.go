package metrics_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/examples/sim"
	"github.com/openmhp/mhp-go/metrics"
	"github.com/openmhp/mhp-go/transport"
)

// BenchmarkMiddlewareOverhead serves signals/read in process through the
// bare transport handler and through the metrics middleware and device
// decorator, and reports the cost of metrics as a ratio of the two, both
// measured in the same run.
func BenchmarkMiddlewareOverhead(b *testing.B) {
	cfg, err := sim.Config("sim:thermocycler", sim.Options{})
	if err != nil {
		b.Fatal(err)
	}
	drv, err := binding.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := drv.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer drv.Close()
	m := metrics.New(metrics.Config{NoRuntime: true})
	mdev, stop := m.Device(drv, "sim")
	defer stop()
	bareSrv := transport.NewServer(drv, transport.Options{})
	defer bareSrv.Close()
	metSrv := transport.NewServer(mdev, transport.Options{})
	defer metSrv.Close()
	handlers := []http.Handler{bareSrv.Handler(), m.Middleware(metSrv.Handler(), metSrv.Methods())}
	sessions := make([]string, 2)
	// httptest's requests name Host example.com, which the DNS rebinding
	// guard refuses: the benchmark speaks to a loopback server.
	newReq := func(body string) *http.Request {
		req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/rpc", strings.NewReader(body))
		req.Host = "127.0.0.1"
		return req
	}
	for i, h := range handlers {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, newReq(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+mhp.ProtocolVersion+`"}}`))
		sessions[i] = rec.Header().Get(mhp.HeaderSession)
		if rec.Code != http.StatusOK || sessions[i] == "" {
			b.Fatalf("initialize: %d %s", rec.Code, rec.Body.String())
		}
	}
	const body = `{"jsonrpc":"2.0","id":2,"method":"signals/read","params":{"names":["block_temperature"]}}`
	run := func(i int) time.Duration {
		req := newReq(body)
		req.Header.Set(mhp.HeaderSession, sessions[i])
		rec := httptest.NewRecorder()
		start := time.Now()
		handlers[i].ServeHTTP(rec, req)
		d := time.Since(start)
		if rec.Code != http.StatusOK || strings.Contains(rec.Body.String(), `"error"`) {
			b.Fatalf("answer: %d %s", rec.Code, rec.Body.String())
		}
		return d
	}
	var bare, with time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		bare += run(0)
		with += run(1)
	}
	b.ReportMetric(float64(with)/float64(bare), "metrics/bare")
}
