package madsci_test

import (
	"context"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/madsci"
	"github.com/openmhp/mhp-go/madsci/madscitest"
)

// BenchmarkAdapterVsDirect measures, in one run, a signal read and a
// quick action through the MHP driver against the same calls made directly
// with the node client (the baseline), and reports the ratios.
func BenchmarkAdapterVsDirect(b *testing.B) {
	n := madscitest.New(madscitest.Options{})
	defer n.Close()
	ctx := context.Background()
	cfg := baseConfig(n.URL, "")
	cfg.Device = mhp.DeviceInfo{ID: "bench"}
	d, err := madsci.New(ctx, cfg, madsci.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if err := d.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	c, _ := madsci.NewClient(madsci.ClientOptions{URL: n.URL, Layout: madsci.LayoutV5})

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
		r, err := c.Submit(ctx, madsci.Submission{Action: conformance.ActionQuick})
		if err != nil || r.Status != madsci.StatusSucceeded {
			b.Fatal(err, r)
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
