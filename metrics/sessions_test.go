package metrics_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/client"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/examples/sim"
	"github.com/openmhp/mhp-go/metrics"
	"github.com/openmhp/mhp-go/transport"
)

// TestSessionsGaugeAsDocumented wires the gauge as the package docs show
// (middleware and device decorator, no SessionsFrom): sessions that end
// leave the gauge, so it goes back to 0 after many clients came and went.
func TestSessionsGaugeAsDocumented(t *testing.T) {
	cfg, err := sim.Config("sim:thermocycler", sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	drv, err := binding.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drv.Close() })
	m := metrics.New(metrics.Config{NoRuntime: true})
	dev, stop := m.Device(drv, "sim")
	t.Cleanup(stop)
	srv := transport.NewServer(dev, transport.Options{Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { srv.Close() })
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler(""))
	mux.Handle("/", m.Middleware(srv.Handler(), srv.Methods()))
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	ctx := context.Background()
	var live []*client.Device
	for i := 0; i < 20; i++ {
		d, err := client.Dial(ctx, hs.URL, client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		live = append(live, d)
	}
	if got := value(scrape(t, hs.URL, ""), "mhp_sessions", nil); got != 20 {
		t.Fatalf("mhp_sessions = %v with 20 clients, want 20", got)
	}
	for _, d := range live {
		d.Close()
	}
	conformance.Eventually(t, "mhp_sessions back to 0 once the clients left", func() bool {
		return value(scrape(t, hs.URL, ""), "mhp_sessions", nil) == 0
	})
}

// TestMiddlewareOverheadBenchmarkRuns: the benchmark answers its requests
// (it used to stop at 403 host_forbidden) and reports its ratio.
func TestMiddlewareOverheadBenchmarkRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("a benchmark run")
	}
	r := testing.Benchmark(BenchmarkMiddlewareOverhead)
	if r.N == 0 || r.Extra["metrics/bare"] <= 0 {
		t.Fatalf("BenchmarkMiddlewareOverhead did not run: %+v", r)
	}
}
