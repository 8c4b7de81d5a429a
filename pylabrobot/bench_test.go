package pylabrobot_test

import (
	"context"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
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

// BenchmarkPythonBridgeHold measures, in one run, a 15ms task of the real
// plrbridge.py (the stub machine's hold: progress, then asyncio.sleep, as a
// short pick and drop) through the driver, long-polling (the default) and
// polling (long_poll: false, the default 200ms interval), against the
// bridge client's own submit and long-poll. It reports the ratios to the
// direct call and the direct time. Skipped without python3.
func BenchmarkPythonBridgeHold(b *testing.B) {
	url := startPythonBridge(b)
	ctx := context.Background()
	params := map[string]any{"seconds": 0.015}
	open := func(id string, longPoll bool) (*binding.Driver, chan struct{}) {
		cfg := pylabrobot.Config{Mode: pylabrobot.ModeBridge, URL: url, LongPoll: &longPoll}
		cfg.Device = mhp.DeviceInfo{ID: id}
		d, err := pylabrobot.New(ctx, cfg, pylabrobot.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if err := d.Start(ctx); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = d.Close() })
		finished := make(chan struct{}, 1)
		stop := d.Listen(func(n mhp.Notification) {
			if n.Method == mhp.NotifyJobsFinished {
				finished <- struct{}{}
			}
		})
		b.Cleanup(stop)
		return d, finished
	}
	long, longDone := open("bench-long", true)
	poll, pollDone := open("bench-poll", false)
	c, _ := pylabrobot.NewBridgeClient(url, 0, nil)
	run := func(d *binding.Driver, done chan struct{}) func() {
		return func() {
			if _, err := d.Invoke(ctx, mhp.InvokeRequest{Name: "hold", Params: params}); err != nil {
				b.Fatal(err)
			}
			<-done
		}
	}
	b.ResetTimer()
	var direct, viaLong, viaPoll time.Duration
	for i := 0; i < b.N; i++ {
		direct += measure(1, func() {
			t, err := c.Submit(ctx, "hold", params, 0)
			for err == nil && (t.Status == pylabrobot.TaskQueued || t.Status == pylabrobot.TaskRunning) {
				t, err = c.Task(ctx, t.ID, pylabrobot.Wait{For: 5 * time.Second, Seen: t.Version})
			}
			if err != nil || t.Status != pylabrobot.TaskDone {
				b.Fatal(err, t)
			}
		})
		viaLong += measure(1, run(long, longDone))
		viaPoll += measure(1, run(poll, pollDone))
	}
	b.ReportMetric(float64(viaLong)/float64(direct), "longpoll/direct")
	b.ReportMetric(float64(viaPoll)/float64(direct), "polling/direct")
	b.ReportMetric(float64(direct.Microseconds())/1e3/float64(b.N), "direct-ms")
	b.ReportMetric(float64((viaLong-direct).Microseconds())/1e3/float64(b.N), "longpoll-added-ms")
}
