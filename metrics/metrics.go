// Package metrics exposes the Prometheus metrics of MHP servers. Names
// follow the Prometheus conventions: a unit suffix (_seconds), _total on
// counters, one mhp_ namespace:
//
//	mhp_rpc_requests_total{method,code}      JSON-RPC requests; code "ok", "none" (notification) or the error code
//	mhp_refusals_total{gate}                 device calls refused, by data.gate (state, lease, approval, interlocks, limits, params, other)
//	mhp_jobs_finished_total{action,state}    jobs that ended (done, failed, cancelled)
//	mhp_estops_total                         safety/estop calls answered
//	mhp_estop_duration_seconds               estop answer latency (histogram)
//	mhp_hook_duration_seconds{kind}          device call time, backend hook included (read, write, invoke, acquire, reset, estop, cancel)
//	mhp_backend_connected{adapter}           1 while the backend link is up
//	mhp_backend_reconnects_total{adapter}    link came back after being down
//	mhp_sse_subscribers                      open GET /events streams
//	mhp_sessions                             live sessions
//	mhp_evidence_chain_length                receipts in the evidence chain (when registered)
//	mhp_mcp_tool_calls_total{tool,outcome}   MCP tool calls (ok, error, invalid)
//
// plus the Go runtime and process collectors. Labels are bounded: methods
// outside the server's table count as "other", unknown tools as "invalid".
//
//	m := metrics.New(metrics.Config{})
//	dev = m.Device(dev, "sim")                    // decorator: refusals, jobs, estops, hook latency
//	h := m.Middleware(srv.Handler(), srv.Methods()) // requests, SSE subscribers, sessions
//	mux.Handle("GET /metrics", m.Handler(token))  // behind the token when there is one
package metrics

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Config configures a Metrics set. Zero values take the defaults.
type Config struct {
	// Namespace prefixes every metric name; default "mhp".
	Namespace string
	// MaxSessions bounds the session ids tracked for the sessions gauge;
	// default 65536 (ids beyond it are not counted, nothing grows further).
	MaxSessions int
	// NoRuntime leaves out the Go runtime and process collectors.
	NoRuntime bool
}

// Validate reports a negative bound.
func (c Config) Validate() error {
	if c.MaxSessions < 0 {
		return fmt.Errorf("metrics: MaxSessions %d is negative", c.MaxSessions)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.Namespace == "" {
		c.Namespace = "mhp"
	}
	if c.MaxSessions <= 0 {
		c.MaxSessions = 1 << 16
	}
	return c
}

// Metrics is one registry of MHP metrics. It is safe for concurrent use.
type Metrics struct {
	cfg Config
	reg *prometheus.Registry

	requests     *prometheus.CounterVec
	refusals     *prometheus.CounterVec
	jobs         *prometheus.CounterVec
	estops       prometheus.Counter
	estopLatency prometheus.Histogram
	hookLatency  *prometheus.HistogramVec
	backendUp    *prometheus.GaugeVec
	reconnects   *prometheus.CounterVec
	sse          prometheus.Gauge
	toolCalls    *prometheus.CounterVec

	mu         sync.Mutex
	sessions   map[string]struct{}
	sessionsFn func() int
}

// New makes a Metrics set with its own registry.
func New(cfg Config) *Metrics {
	cfg = cfg.withDefaults()
	ns := cfg.Namespace
	m := &Metrics{cfg: cfg, reg: prometheus.NewRegistry(), sessions: map[string]struct{}{}}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "rpc_requests_total",
		Help: "JSON-RPC requests served, by method and result code (ok, or the JSON-RPC error code)."}, []string{"method", "code"})
	m.refusals = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "refusals_total",
		Help: "Device calls refused, by the gate that refused them (data.gate: state, lease, approval, limits, interlocks, ...)."}, []string{"gate"})
	m.jobs = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "jobs_finished_total",
		Help: "Jobs that reached an end state, by action and end state."}, []string{"action", "state"})
	m.estops = prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "estops_total",
		Help: "safety/estop calls answered."})
	m.estopLatency = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "estop_duration_seconds",
		Help:    "Time from a safety/estop call to its answer.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}})
	m.hookLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "hook_duration_seconds",
		Help:    "Time a device call (and the backend hook behind it) took, by kind (read, write, invoke, estop, reset, ...).",
		Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10)}, []string{"kind"})
	m.backendUp = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "backend_connected",
		Help: "1 while the driver's link to its backend is up, 0 while it is down, by adapter."}, []string{"adapter"})
	m.reconnects = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "backend_reconnects_total",
		Help: "Times the backend link came back after being down, by adapter."}, []string{"adapter"})
	m.sse = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "sse_subscribers",
		Help: "Open Server-Sent Events streams (GET /events)."})
	m.toolCalls = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "mcp_tool_calls_total",
		Help: "MCP tool calls, by tool and outcome (ok, error, refused)."}, []string{"tool", "outcome"})
	sessions := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Name: "sessions",
		Help: "Live sessions (opened by initialize, not yet ended)."}, func() float64 {
		m.mu.Lock()
		fn := m.sessionsFn
		n := len(m.sessions)
		m.mu.Unlock()
		if fn != nil {
			return float64(fn())
		}
		return float64(n)
	})
	m.reg.MustRegister(m.requests, m.refusals, m.jobs, m.estops, m.estopLatency, m.hookLatency,
		m.backendUp, m.reconnects, m.sse, m.toolCalls, sessions)
	if !cfg.NoRuntime {
		m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	return m
}

// Registry returns the registry, to register more collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// EvidenceLength registers a gauge of the evidence chain length (entries
// appended), read from fn at each scrape. Call it once, when evidence is on.
func (m *Metrics) EvidenceLength(fn func() float64) error {
	return m.reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: m.cfg.Namespace, Name: "evidence_chain_length",
		Help: "Entries in the evidence chain (receipts appended)."}, fn))
}

// SessionsFrom makes the sessions gauge read fn (a server's own count, such
// as a transport's live sessions, stdio included) instead of the sessions
// the middleware saw open and the decorator saw end.
func (m *Metrics) SessionsFrom(fn func() int) {
	m.mu.Lock()
	m.sessionsFn = fn
	m.mu.Unlock()
}

// ObserveToolCall counts one MCP tool call.
func (m *Metrics) ObserveToolCall(tool, outcome string) {
	m.toolCalls.WithLabelValues(tool, outcome).Inc()
}

// Handler serves the registry in the Prometheus text format. With a token,
// every scrape needs "Authorization: Bearer <token>" (401 otherwise),
// compared in constant time.
func (m *Metrics) Handler(token string) http.Handler {
	h := promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
	return RequireToken(token, h)
}

// RequireToken wraps next so that it needs "Authorization: Bearer <token>"
// when token is not empty (401 otherwise); the comparison is constant time.
func RequireToken(token string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := ""
		if h := r.Header.Get("Authorization"); len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
			got = strings.TrimSpace(h[7:])
		}
		sum := sha256.Sum256([]byte(got))
		if subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="mhp"`)
			http.Error(w, "unauthorized: a valid bearer token is required", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (m *Metrics) sessionOpened(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.sessions) < m.cfg.MaxSessions { // bounded: ended sessions leave under the same key
		m.sessions[id] = struct{}{}
	}
}

func (m *Metrics) sessionEnded(id string) {
	m.mu.Lock()
	delete(m.sessions, id)
	m.mu.Unlock()
}
