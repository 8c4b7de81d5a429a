package transport_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openmhp/mhp-go/auth/authtest"
	"github.com/openmhp/mhp-go/client"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/transport"
)

// dial32 opens 32 clients of url (keep-alive connections, one session
// each), each with one read done (its handshake paid).
func dial32(b *testing.B, url string, opts client.Options) []*client.Device {
	b.Helper()
	devs := make([]*client.Device, 32)
	for i := range devs {
		devs[i] = dialHTTP(b, url, opts)
		if _, err := devs[i].Read(context.Background(), benchNames); err != nil {
			b.Fatal(err)
		}
	}
	return devs
}

// readsWith runs n signals/read calls spread over devs and returns the wall time.
func readsWith(b *testing.B, devs []*client.Device, n int) time.Duration {
	b.Helper()
	clients := len(devs)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	start := time.Now()
	for _, d := range devs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				if _, err := d.Read(context.Background(), benchNames); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return took
}

// BenchmarkHTTPSvsHTTP32Clients: signals/read with 32 keep-alive clients
// over HTTPS (TLS 1.3, the lab CA) beside plain HTTP, in the same run on the
// same device. ns/op is the HTTPS read; https/http is the ratio of the two
// (the handshake is paid once per connection, so it should be near 1).
func BenchmarkHTTPSvsHTTP32Clients(b *testing.B) {
	lab := authtest.NewLab(b)
	m := newMemory(b, conformance.Options{})
	plain := serveListener(b, newServer(b, m.drv, transport.Options{}))
	secure := serveListener(b, newServer(b, m.drv, transport.Options{TLS: lab.Server(b, false).Config()}))
	plainDevs := dial32(b, "http://"+plain, client.Options{})
	secureDevs := dial32(b, "https://"+secure, client.Options{TLS: lab.Client(b, "")})
	// Alternating rounds, so that neither side gets the warm machine.
	var httpTook, httpsTook time.Duration
	b.ResetTimer()
	for round := range 4 {
		n := b.N / 4
		if round == 3 {
			n = b.N - 3*(b.N/4)
		}
		b.StopTimer()
		httpTook += readsWith(b, plainDevs, n)
		b.StartTimer()
		httpsTook += readsWith(b, secureDevs, n)
	}
	b.StopTimer()
	b.ReportMetric(float64(httpTook.Nanoseconds())/float64(b.N), "http-ns/op")
	b.ReportMetric(float64(httpsTook)/float64(httpTook), "https/http")
}
