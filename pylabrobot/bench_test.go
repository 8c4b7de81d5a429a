package pylabrobot_test

import (
	"context"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/pylabrobot"
	"github.com/openmhp/mhp-go/pylabrobot/plrtest"
)

// BenchmarkAdapterVsDirect measures, in one run, a signal read and a quick
// action through the MHP driver against the same calls made directly with
// the bridge client (the baseline), and reports the ratios.
func BenchmarkAdapterVsDirect(b *testing.B) {
	br := plrtest.NewBridge()
	defer br.Close()
	ctx := context.Background()
	cfg := fastConfig(pylabrobot.ModeBridge, br.URL)
	cfg.Device = mhp.DeviceInfo{ID: "bench"}
	d, err := pylabrobot.New(ctx, cfg, pylabrobot.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if err := d.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	c, _ := pylabrobot.NewBridgeClient(br.URL, 0, nil)
	directRead := measure(b.N, func() {
		if _, err := c.State(ctx); err != nil {
			b.Fatal(err)
		}
	})
	adapterRead := measure(b.N, func() {
		if _, err := d.Read(ctx, []string{conformance.SignalTemperature}); err != nil {
			b.Fatal(err)
		}
	})
	finished := make(chan struct{}, 1)
	stop := d.Listen(func(n mhp.Notification) {
		if n.Method == mhp.NotifyJobsFinished {
			finished <- struct{}{}
		}
	})
	defer stop()
	directAction := measure(b.N, func() {
		t, err := c.Submit(ctx, conformance.ActionQuick, nil, 0)
		if err != nil || t.Status != pylabrobot.TaskDone {
			b.Fatal(err, t)
		}
	})
	adapterAction := measure(b.N, func() {
		if _, err := d.Invoke(ctx, mhp.InvokeRequest{Name: conformance.ActionQuick}); err != nil {
			b.Fatal(err)
		}
		<-finished
	})
	b.ReportMetric(float64(adapterRead)/float64(directRead), "read-adapter/direct")
	b.ReportMetric(float64(adapterAction)/float64(directAction), "action-adapter/direct")
	b.ReportMetric(float64(directRead.Nanoseconds())/float64(b.N), "direct-read-ns")
	b.ReportMetric(float64(directAction.Nanoseconds())/float64(b.N), "direct-action-ns")
}

// measure times n calls of f.
func measure(n int, f func()) time.Duration {
	start := time.Now()
	for i := 0; i < n; i++ {
		f()
	}
	return time.Since(start)
}
