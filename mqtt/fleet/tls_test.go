package fleet

import (
	"context"
	"testing"
	"time"

	mochi "github.com/mochi-mqtt/server/v2"
	mochiauth "github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"

	"github.com/openmhp/mhp-go/auth/authtest"
	"github.com/openmhp/mhp-go/conformance"
)

// TestPublishOverMutualTLS: a publisher reaches an mqtts:// broker that
// requires client certificates with the same TLS options as every other
// client (the lab CA, a client certificate); without its certificate it
// never connects.
func TestPublishOverMutualTLS(t *testing.T) {
	lab := authtest.NewLab(t)
	srv := mochi.New(&mochi.Options{InlineClient: true, Logger: quiet()})
	if err := srv.AddHook(new(mochiauth.AllowHook), nil); err != nil {
		t.Fatal(err)
	}
	l := listeners.NewTCP(listeners.Config{ID: "tls", Address: "127.0.0.1:0", TLSConfig: lab.Server(t, true).Config()})
	if err := srv.AddListener(l); err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve() }()
	t.Cleanup(func() {
		done := make(chan struct{})
		go func() { _ = srv.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
		}
	})
	dev, _ := device(t)
	run := func(cfg Config) *Publisher {
		p, err := New(dev, cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = p.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
		return p
	}
	url := "mqtts://" + l.Address() + "/lab"
	stranger := run(Config{URL: url, Logger: quiet(), SignalInterval: -1, TLS: lab.Client(t, "")})
	p := run(Config{URL: url, Logger: quiet(), SignalInterval: -1, TLS: lab.Client(t, "bench-7")})
	conformance.Eventually(t, "the publisher with a client certificate connected over mqtts", func() bool { return p.Status().Connected })
	if stranger.Status().Connected {
		t.Fatal("a publisher without a client certificate connected to a broker that requires one")
	}
}
