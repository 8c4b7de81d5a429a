package metrics_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/client"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/examples/sim"
	"github.com/openmhp/mhp-go/metrics"
	"github.com/openmhp/mhp-go/transport"
)

// serve runs sim:thermocycler behind the metrics decorator and middleware.
func serve(t *testing.T, token string) (*httptest.Server, *metrics.Metrics) {
	t.Helper()
	cfg, err := sim.Config("sim:thermocycler", sim.Options{Speed: 20})
	if err != nil {
		t.Fatal(err)
	}
	drv, err := binding.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := drv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drv.Close() })
	m := metrics.New(metrics.Config{})
	dev, stop := m.Device(drv, "sim")
	t.Cleanup(stop)
	srv := transport.NewServer(dev, transport.Options{Token: token})
	t.Cleanup(func() { srv.Close() })
	m.SessionsFrom(srv.Sessions) // the transport's own count, as mhp serve wires it
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler(token))
	mux.Handle("/", m.Middleware(srv.Handler(), srv.Methods()))
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return hs, m
}

func scrape(t *testing.T, url, token string) map[string]*dto.MetricFamily {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url+"/metrics", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: HTTP %d", resp.StatusCode)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("the Prometheus text parser refused /metrics: %v", err)
	}
	return fams
}

// value sums the samples of family name whose labels include want.
func value(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	f, ok := fams[name]
	if !ok {
		return 0
	}
	var sum float64
next:
	for _, m := range f.Metric {
		for k, v := range want {
			found := false
			for _, lp := range m.Label {
				if lp.GetName() == k && lp.GetValue() == v {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		}
	}
	return sum
}

func TestFamiliesMoveAsAWriteIsRefusedAndAJobEnds(t *testing.T) {
	const token = "s3cret"
	hs, _ := serve(t, token)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	before := scrape(t, hs.URL, token)
	for _, name := range []string{"mhp_rpc_requests_total", "mhp_refusals_total", "mhp_jobs_finished_total"} {
		if _, ok := before[name]; ok {
			t.Errorf("%s present before anything happened", name)
		}
	}
	if got := value(before, "mhp_backend_connected", map[string]string{"adapter": "sim"}); got != 1 {
		t.Errorf("mhp_backend_connected{adapter=sim} = %v, want 1", got)
	}

	dev, err := client.Dial(ctx, hs.URL, client.Options{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	if _, err := dev.Acquire(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	_, err = dev.Write(ctx, mhp.WriteRequest{Name: sim.TCTargetTemp, Value: 500.0})
	if me, ok := mhp.AsError(err); !ok || me.Code != mhp.CodeLimitViolation {
		t.Fatalf("write 500 degC: %v, want LimitViolation", err)
	}
	mid := scrape(t, hs.URL, token)
	if got := value(mid, "mhp_refusals_total", nil); got != 1 {
		t.Errorf("mhp_refusals_total = %v after one refused write, want 1", got)
	}
	code := map[string]string{"method": "settings/write", "code": "-32010"}
	if got := value(mid, "mhp_rpc_requests_total", code); got != 1 {
		t.Errorf("mhp_rpc_requests_total%v = %v, want 1", code, got)
	}
	if got := value(mid, "mhp_sessions", nil); got != 1 {
		t.Errorf("mhp_sessions = %v with one client, want 1", got)
	}

	res, err := dev.Invoke(ctx, mhp.InvokeRequest{Name: sim.TCOpenLid, Approved: true})
	if err != nil {
		t.Fatal(err)
	}
	if j, err := dev.Wait(ctx, res.Job.ID); err != nil || j.State != mhp.JobDone {
		t.Fatalf("open_lid: %v %v", j, err)
	}
	done := map[string]string{"action": sim.TCOpenLid, "state": "done"}
	conformance.Eventually(t, "mhp_jobs_finished_total{open_lid,done} reaches 1", func() bool {
		return value(scrape(t, hs.URL, token), "mhp_jobs_finished_total", done) == 1
	})

	if _, err := dev.EStop(ctx, "metrics test"); err != nil {
		t.Fatal(err)
	}
	after := scrape(t, hs.URL, token)
	if got := value(after, "mhp_estops_total", nil); got != 1 {
		t.Errorf("mhp_estops_total = %v, want 1", got)
	}
	if got := value(after, "mhp_estop_duration_seconds", nil); got != 1 {
		t.Errorf("mhp_estop_duration_seconds count = %v, want 1", got)
	}
	if got := value(after, "mhp_hook_duration_seconds", map[string]string{"kind": "write"}); got < 1 {
		t.Errorf("mhp_hook_duration_seconds{kind=write} count = %v, want >= 1", got)
	}
	dev.Close()
	conformance.Eventually(t, "mhp_sessions drops to 0 after the client leaves", func() bool {
		return value(scrape(t, hs.URL, token), "mhp_sessions", nil) == 0
	})
}

func TestMetricsNeedTheToken(t *testing.T) {
	hs, _ := serve(t, "tok")
	for _, auth := range []string{"", "Bearer wrong", "Basic tok"} {
		req, _ := http.NewRequest(http.MethodGet, hs.URL+"/metrics", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("Authorization %q: HTTP %d, want 401", auth, resp.StatusCode)
		}
	}
}

func TestHostileMethodsDoNotGrowLabels(t *testing.T) {
	hs, _ := serve(t, "")
	for i, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"made/up/1"}`,
		`{"jsonrpc":"2.0","id":2,"method":"made/up/2"}`,
		`not json`,
		`{"jsonrpc":"2.0","id":3,"method":"ping"}`,
	} {
		resp, err := http.Post(hs.URL+"/rpc", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(i, err)
		}
		resp.Body.Close()
	}
	fams := scrape(t, hs.URL, "")
	if got := value(fams, "mhp_rpc_requests_total", map[string]string{"method": "other"}); got != 2 {
		t.Errorf("unknown methods counted as other: %v, want 2", got)
	}
	if got := value(fams, "mhp_rpc_requests_total", map[string]string{"method": "invalid", "code": "-32700"}); got != 1 {
		t.Errorf("malformed frame: %v, want 1 with code -32700", got)
	}
	for _, m := range fams["mhp_rpc_requests_total"].Metric {
		for _, lp := range m.Label {
			if strings.HasPrefix(lp.GetValue(), "made/") {
				t.Errorf("a client-chosen method became a label: %s", lp.GetValue())
			}
		}
	}
}
