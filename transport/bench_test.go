package transport_test

import (
	"context"
	"os"
	"sync"
	"sync/atomic"
	"testing"

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
// runs only with MHP_BENCH_REPORT=1 (go test -run WireOverhead -v).
func TestWireOverheadReport(t *testing.T) {
	if os.Getenv("MHP_BENCH_REPORT") == "" {
		t.Skip("set MHP_BENCH_REPORT=1 to measure the wire overhead")
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
