package sila2_test

import (
	"context"
	"testing"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/sila2"
	"github.com/openmhp/mhp-go/sila2/silatest"
)

// The benchmarks compare the adapter with the bare generic client in the
// same run, over the same loopback TLS connection setup: report the ratio
// adapter/direct, not the absolute figures.

func adaptersSource(text string) adapters.Source {
	return adapters.Source{Path: "bench.yaml", Data: []byte(text)}
}

func benchLab(b *testing.B) (*lab, *sila2.Client, mhp.Device) {
	l := startLabB(b)
	c := l.dialB(b)
	d := openAdapterB(b, l)
	return l, c, d
}

func startLabB(b *testing.B) *lab {
	srv, err := silatest.New(silatest.Options{CancelController: true})
	if err != nil {
		b.Fatal(err)
	}
	th := silatest.NewThermostat(293.15)
	if err := srv.AddFeature(silatest.GreetingProviderFDL, silatest.Greeter(2024)); err != nil {
		b.Fatal(err)
	}
	if err := srv.AddFeature(silatest.TemperatureControllerFDL, th.Handlers()); err != nil {
		b.Fatal(err)
	}
	cert, err := silatest.SelfSigned(srv.UUID())
	if err != nil {
		b.Fatal(err)
	}
	addr, err := srv.Start(&cert.TLS)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Stop)
	return &lab{srv: srv, addr: addr, cert: cert, thermo: th}
}

func (l *lab) dialB(b *testing.B) *sila2.Client {
	c, err := sila2.Dial(context.Background(), sila2.ClientConfig{Endpoint: l.addr, TLS: sila2.TLSConfig{PinSHA256: l.cert.PinSHA256}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	if _, err := c.LoadFeatures(context.Background()); err != nil {
		b.Fatal(err)
	}
	return c
}

func openAdapterB(b *testing.B, l *lab) mhp.Device {
	text := labConfig + "endpoint: " + l.addr + "\ntls: {pin_sha256: \"" + l.cert.PinSHA256 + "\"}\n"
	cfg, err := sila2.Load(adaptersSource(text))
	if err != nil {
		b.Fatal(err)
	}
	d, err := sila2.New(context.Background(), cfg, sila2.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = d.Close() })
	return d
}

// BenchmarkRead: signals/read of an unobservable property through the
// adapter (gates, binding, Get_ over gRPC) vs the client's Get_ alone.
func BenchmarkRead(b *testing.B) {
	_, c, d := benchLab(b)
	ctx := context.Background()
	b.Run("direct", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := c.Property(ctx, "GreetingProvider", "StartYear"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("adapter", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			r, err := d.Read(ctx, []string{"start_year"})
			if err != nil || r.Values["start_year"] != int64(2024) {
				b.Fatal(r, err)
			}
		}
	})
}

// BenchmarkShortCommand: a short action (SayHello) invoked as a job and
// waited for, vs the client's unary call alone.
func BenchmarkShortCommand(b *testing.B) {
	_, c, d := benchLab(b)
	ctx := context.Background()
	params := map[string]any{"name": "bench"}
	b.Run("direct", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := c.Call(ctx, "GreetingProvider", "SayHello", params); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("adapter", func(b *testing.B) {
		done := make(chan struct{}, 1)
		stop := d.Listen(func(n mhp.Notification) {
			if n.Method == mhp.NotifyJobsFinished {
				select {
				case done <- struct{}{}:
				default:
				}
			}
		})
		defer stop()
		for i := 0; i < b.N; i++ {
			r, err := d.Invoke(ctx, mhp.InvokeRequest{Name: "say_hello", Params: params})
			if err != nil {
				b.Fatal(err)
			}
			for {
				j, err := d.Job(ctx, r.Job.ID)
				if err != nil {
					b.Fatal(err)
				}
				if j.State.Terminal() {
					if j.State != mhp.JobDone {
						b.Fatal(j)
					}
					break
				}
				<-done
			}
		}
	})
}
