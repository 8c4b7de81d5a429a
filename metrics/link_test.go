package metrics_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/examples/sim"
	"github.com/openmhp/mhp-go/metrics"
	"github.com/openmhp/mhp-go/transport"
)

// linked is a device whose backend link notifications the test sends.
type linked struct {
	mhp.Device
	mu  sync.Mutex
	fns []func(mhp.Notification)
}

func (l *linked) Describe(ctx context.Context, req mhp.DescribeRequest) (*mhp.Description, error) {
	d, err := l.Device.Describe(ctx, req)
	if err == nil {
		d.Backend = &mhp.BackendLink{Connected: true}
	}
	return d, err
}

func (l *linked) Listen(fn func(mhp.Notification)) func() {
	l.mu.Lock()
	l.fns = append(l.fns, fn)
	l.mu.Unlock()
	return l.Device.Listen(fn)
}

func (l *linked) link(up bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, fn := range l.fns {
		fn(mhp.Notification{Method: mhp.NotifyBackendLink, Params: map[string]any{"backend": map[string]any{"connected": up}}})
	}
}

func TestBackendLinkAndReconnects(t *testing.T) {
	cfg, err := sim.Config("sim:arm", sim.Options{})
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
	defer drv.Close()
	m := metrics.New(metrics.Config{NoRuntime: true})
	l := &linked{Device: drv}
	dev, stop := m.Device(l, "opcua")
	defer stop()
	if u, ok := dev.(interface{ Unwrap() mhp.Device }); !ok || u.Unwrap() != l {
		t.Fatalf("the decorator does not Unwrap to the device it wraps")
	}
	if err := m.EvidenceLength(func() float64 { return 42 }); err != nil {
		t.Fatal(err)
	}
	if err := m.EvidenceLength(func() float64 { return 0 }); err == nil {
		t.Error("a second evidence gauge was registered")
	}
	srv := transport.NewServer(dev, transport.Options{})
	defer srv.Close()
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler(""))
	mux.Handle("/", m.Middleware(srv.Handler(), srv.Methods()))
	hs := httptest.NewServer(mux)
	defer hs.Close()

	adapter := map[string]string{"adapter": "opcua"}
	steps := []struct {
		up               bool
		connected, again float64
	}{{false, 0, 0}, {false, 0, 0}, {true, 1, 1}, {false, 0, 1}, {true, 1, 2}}
	for i, s := range steps {
		l.link(s.up)
		f := scrape(t, hs.URL, "")
		if got := value(f, "mhp_backend_connected", adapter); got != s.connected {
			t.Errorf("step %d: mhp_backend_connected = %v, want %v", i, got, s.connected)
		}
		if got := value(f, "mhp_backend_reconnects_total", adapter); got != s.again {
			t.Errorf("step %d: mhp_backend_reconnects_total = %v, want %v", i, got, s.again)
		}
	}
	if got := value(scrape(t, hs.URL, ""), "mhp_evidence_chain_length", nil); got != 42 {
		t.Errorf("mhp_evidence_chain_length = %v, want 42", got)
	}
	m.SessionsFrom(func() int { return 7 })
	if got := value(scrape(t, hs.URL, ""), "mhp_sessions", nil); got != 7 {
		t.Errorf("mhp_sessions from the server's count = %v, want 7", got)
	}
	m.SessionsFrom(nil)

	// SSE subscribers: an open GET /events counts while it is open.
	resp, err := http.Post(hs.URL+"/rpc", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+mhp.ProtocolVersion+`"}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	sid := resp.Header.Get(mhp.HeaderSession)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, hs.URL+"/events", nil)
	req.Header.Set(mhp.HeaderSession, sid)
	ev, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	conformance.Eventually(t, "mhp_sse_subscribers reaches 1", func() bool {
		return value(scrape(t, hs.URL, ""), "mhp_sse_subscribers", nil) == 1
	})
	cancel()
	ev.Body.Close()
	conformance.Eventually(t, "mhp_sse_subscribers drops to 0", func() bool {
		return value(scrape(t, hs.URL, ""), "mhp_sse_subscribers", nil) == 0
	})
}
