package transport_test

import (
	"context"
	"flag"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/client"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/transport"
)

var benchNames = []string{conformance.SignalTemperature}

func benchRead(b *testing.B, dev mhp.Device) {
	b.Helper()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := dev.Read(ctx, benchNames); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadInProcess is the baseline: signals/read straight on the
// driver, no wire.
func BenchmarkReadInProcess(b *testing.B) {
	m := newMemory(b, conformance.Options{})
	benchRead(b, mhp.AsSession(m.drv, "bench"))
}

// BenchmarkReadHTTP is a signals/read round trip through client.Device over
// HTTP on 127.0.0.1.
func BenchmarkReadHTTP(b *testing.B) {
	m := newMemory(b, conformance.Options{})
	srv := newServer(b, m.drv, transport.Options{})
	benchRead(b, dialHTTP(b, serveHTTP(b, srv).URL, client.Options{}))
}

// BenchmarkReadStdio is a signals/read round trip through client.Device over
// an in-process stream (io.Pipe pairs, the stdio transport's code path).
func BenchmarkReadStdio(b *testing.B) {
	m := newMemory(b, conformance.Options{})
	srv := newServer(b, m.drv, transport.Options{})
	benchRead(b, dialPipe(b, srv, client.Options{}))
}

// BenchmarkHTTP32Clients measures signals/read throughput with 32 HTTP
// clients (32 sessions) reading concurrently; ns/op is per read, over all
// clients.
func BenchmarkHTTP32Clients(b *testing.B) {
	m := newMemory(b, conformance.Options{})
	srv := newServer(b, m.drv, transport.Options{})
	url := serveHTTP(b, srv).URL
	const clients = 32
	devs := make([]*client.Device, clients)
	for i := range devs {
		devs[i] = dialHTTP(b, url, client.Options{})
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for _, d := range devs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				if _, err := d.Read(ctx, benchNames); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reads/s")
}

// TestWireOverheadReport runs the read benchmarks in one process and logs
// each wire's cost as a ratio to the in-process baseline. It measures, so it
// runs only when benchmarks are asked for (go test -run WireOverhead -bench
// WireOverhead -v ./transport/). It is a test, not a benchmark, because the
// benchmarks it runs cannot start inside another benchmark.
func TestWireOverheadReport(t *testing.T) {
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		t.Skip("measures: runs only with -bench (go test -run WireOverhead -bench WireOverhead -v ./transport/)")
	}
	base := testing.Benchmark(BenchmarkReadInProcess)
	httpR := testing.Benchmark(BenchmarkReadHTTP)
	stdio := testing.Benchmark(BenchmarkReadStdio)
	many := testing.Benchmark(BenchmarkHTTP32Clients)
	if base.NsPerOp() == 0 {
		t.Fatal("baseline too fast to measure")
	}
	ratio := func(r testing.BenchmarkResult) float64 { return float64(r.NsPerOp()) / float64(base.NsPerOp()) }
	t.Logf("in-process read: %d ns/op (baseline)", base.NsPerOp())
	t.Logf("HTTP read:       %d ns/op = %.1fx baseline", httpR.NsPerOp(), ratio(httpR))
	t.Logf("stdio read:      %d ns/op = %.1fx baseline", stdio.NsPerOp(), ratio(stdio))
	t.Logf("HTTP, 32 clients: %d ns/read = %.1fx baseline, %.0f reads/s", many.NsPerOp(), ratio(many),
		1e9/float64(many.NsPerOp()))
}

// BenchmarkEStopUnderLoad measures the latency of an anonymous
// safety/estop over HTTP while 32 clients read as fast as they can, 2,000
// idle connections are open and the session table is full. Beside it, in
// the same run and under the same load, a plain signals/read of one more
// client is timed the same way (interleaved with the estops), and a read on
// the idle server before the load is the unloaded baseline. Reported:
// estop-p50/p99-us, read-p50/p99-us (loaded), idle-read-p50-us, and
// estop-p50-x / estop-p99-x (estop over the loaded read).
func BenchmarkEStopUnderLoad(b *testing.B) {
	const (
		readers   = 32
		idleConns = 2000
		sessions  = 1024
	)
	m := newMemory(b, conformance.Options{})
	srv := newServer(b, m.drv, transport.Options{MaxSessions: sessions, MaxConns: idleConns + readers + 64})
	addr := listenServe(b, srv)
	url := "http://" + addr
	ctx := context.Background()

	// Baseline: a plain read on the idle server.
	base := dialHTTP(b, url, client.Options{})
	readLat := make([]time.Duration, 0, 500)
	for i := 0; i < 500; i++ {
		t0 := time.Now()
		if _, err := base.Read(ctx, benchNames); err != nil {
			b.Fatal(err)
		}
		readLat = append(readLat, time.Since(t0))
	}

	// Load: a full session table, idle connections, 32 readers.
	devs := make([]*client.Device, readers)
	for i := range devs {
		devs[i] = dialHTTP(b, url, client.Options{})
	}
	for srv.Sessions() < sessions {
		initHTTP(b, url, nil)
	}
	for i := 0; i < idleConns; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatalf("idle connection %d: %v", i, err)
		}
		b.Cleanup(func() { c.Close() })
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var reads atomic.Int64
	for _, d := range devs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := d.Read(ctx, benchNames); err == nil {
					reads.Add(1)
				}
			}
		}()
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: testTimeout}
	reset := mhp.AsSession(m.drv, "bench-reset")
	estopLat := make([]time.Duration, 0, b.N)
	loadedRead := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		t0 := time.Now()
		if _, err := base.Read(ctx, benchNames); err != nil {
			b.Fatal(err)
		}
		loadedRead = append(loadedRead, time.Since(t0))
		b.StartTimer()
		t0 = time.Now()
		resp, err := hc.Post(url+"/rpc", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"safety/estop","params":{"reason":"bench"}}`))
		if err != nil {
			b.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		estopLat = append(estopLat, time.Since(t0))
		b.StopTimer()
		if !strings.Contains(string(body), `"result"`) {
			b.Fatalf("estop: %s", body)
		}
		if _, err := reset.Reset(ctx); err != nil {
			b.Fatalf("reset: %v", err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	close(stop)
	wg.Wait()
	if srv.Sessions() < sessions {
		b.Fatalf("the session table shrank to %d", srv.Sessions())
	}
	p := func(d []time.Duration, q float64) float64 {
		s := slices.Clone(d)
		slices.Sort(s)
		return float64(s[min(len(s)-1, int(q*float64(len(s))))].Microseconds())
	}
	r50, r99 := p(loadedRead, 0.5), p(loadedRead, 0.99)
	b.ReportMetric(p(estopLat, 0.5), "estop-p50-us")
	b.ReportMetric(p(estopLat, 0.99), "estop-p99-us")
	b.ReportMetric(r50, "read-p50-us")
	b.ReportMetric(r99, "read-p99-us")
	b.ReportMetric(p(readLat, 0.5), "idle-read-p50-us")
	if r50 > 0 && r99 > 0 {
		b.ReportMetric(p(estopLat, 0.5)/r50, "estop-p50-x")
		b.ReportMetric(p(estopLat, 0.99)/r99, "estop-p99-x")
	}
	b.ReportMetric(float64(reads.Load()), "reads-during")
}
