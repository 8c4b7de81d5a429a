package bench

import (
	"context"
	"fmt"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/client"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/pylabrobot"
	"github.com/openmhp/mhp-go/pylabrobot/plrtest"
	"github.com/openmhp/mhp-go/sila2"
	"github.com/openmhp/mhp-go/sila2/silatest"
)

const silaConfig = `adapter: sila2
device: {id: tc-01, class: incubator, make: Example}
features: [GreetingProvider, TemperatureController]
default_approval: auto
poll_interval_s: 0.02
resubscribe_s: 0.3
cancel_wait_s: 5
`

// invokeAndWait invokes name and waits for its job to end (on the
// jobs/finished notification, checked with jobs/status).
func invokeAndWait(ctx context.Context, d mhp.Device, done <-chan struct{}, name string, params map[string]any) error {
	r, err := d.Invoke(ctx, mhp.InvokeRequest{Name: name, Params: params})
	if err != nil {
		return err
	}
	for {
		j, err := d.Job(ctx, r.Job.ID)
		if err != nil {
			return err
		}
		if j.State.Terminal() {
			if j.State != mhp.JobDone {
				return fmt.Errorf("job %s ended %s", j.ID, j.State)
			}
			return nil
		}
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// finishedSignal returns a channel told of every jobs/finished of d.
func finishedSignal(d mhp.Device) (<-chan struct{}, func()) {
	done := make(chan struct{}, 1)
	stop := d.Listen(func(n mhp.Notification) {
		if n.Method == mhp.NotifyJobsFinished {
			select {
			case done <- struct{}{}:
			default:
			}
		}
	})
	return done, stop
}

// measureSiLA2 is a short SiLA 2 command (SayHello) invoked through the
// adapter as a job and waited for, against the client's unary call.
func measureSiLA2(ctx context.Context, o Options) (Row, error) {
	srv, err := silatest.New(silatest.Options{CancelController: true})
	if err != nil {
		return Row{}, err
	}
	clk := &stepClock{}
	greeter := silatest.Greeter(2024)
	greeter.Commands["SayHello"] = clk.wrap(greeter.Commands["SayHello"])
	if err := srv.AddFeature(silatest.GreetingProviderFDL, greeter); err != nil {
		return Row{}, err
	}
	th := silatest.NewThermostat(293.15)
	if err := srv.AddFeature(silatest.TemperatureControllerFDL, th.Handlers()); err != nil {
		return Row{}, err
	}
	cert, err := silatest.SelfSigned(srv.UUID())
	if err != nil {
		return Row{}, err
	}
	addr, err := srv.Start(&cert.TLS)
	if err != nil {
		return Row{}, err
	}
	defer srv.Stop()
	c, err := sila2.Dial(ctx, sila2.ClientConfig{Endpoint: addr, TLS: sila2.TLSConfig{PinSHA256: cert.PinSHA256}})
	if err != nil {
		return Row{}, err
	}
	defer c.Close()
	if _, err := c.LoadFeatures(ctx); err != nil {
		return Row{}, err
	}
	text := silaConfig + "endpoint: " + addr + "\ntls: {pin_sha256: \"" + cert.PinSHA256 + "\"}\n"
	cfg, err := sila2.Load(adapters.Source{Path: "bench.yaml", Data: []byte(text)})
	if err != nil {
		return Row{}, err
	}
	d, err := sila2.New(ctx, cfg, sila2.Options{})
	if err != nil {
		return Row{}, err
	}
	if err := d.Start(ctx); err != nil {
		return Row{}, err
	}
	defer d.Close()
	cd, closeWire, err := overHTTP(ctx, d)
	if err != nil {
		return Row{}, err
	}
	defer closeWire()
	done, stop := finishedSignal(cd)
	defer stop()
	params := map[string]any{"name": "bench"}
	n := o.n(300)
	var direct, added []float64
	for r := 0; r < o.Rounds; r++ {
		td, err := timeN(n, func() error { _, err := c.Call(ctx, "GreetingProvider", "SayHello", params); return err })
		if err != nil {
			return Row{}, err
		}
		ta, err := timeN(n, func() error { return invokeAndWait(ctx, cd, done, "say_hello", params) })
		if err != nil {
			return Row{}, err
		}
		direct = append(direct, float64(td.Microseconds())/float64(n)/1e3)
		added = append(added, float64((ta-td).Microseconds())/float64(n)/1e3)
	}
	line, err := steps(ctx, cd, clk, n, "say_hello", params)
	if err != nil {
		return Row{}, err
	}
	return Row{
		What:     "a short SiLA 2 command through MHP over HTTP (invoke, wait for jobs/finished on SSE) vs direct gRPC",
		Baseline: "direct " + spread(direct, "%.2f") + " ms",
		Now:      "direct +" + spread(added, "%.2f") + " ms",
		Goal:     "<= direct + 1 ms",
		Met:      ptr(median(added) <= 1),
		Notes:    []string{line},
	}, nil
}

// measurePLR is a quick PyLabRobot action through the adapter (invoke,
// wait for the job) against the bridge client's submit-and-wait, on the
// Go stub bridge, with the adapter's default configuration.
func measurePLR(ctx context.Context, o Options) (Row, error) {
	br := plrtest.NewBridge()
	defer br.Close()
	cfg := pylabrobot.Config{Mode: pylabrobot.ModeBridge, URL: br.URL}
	cfg.Device = mhp.DeviceInfo{ID: "bench"}
	d, err := pylabrobot.New(ctx, cfg, pylabrobot.Options{})
	if err != nil {
		return Row{}, err
	}
	if err := d.Start(ctx); err != nil {
		return Row{}, err
	}
	defer d.Close()
	c, err := pylabrobot.NewBridgeClient(br.URL, 0, nil)
	if err != nil {
		return Row{}, err
	}
	cd, closeWire, err := overHTTP(ctx, d)
	if err != nil {
		return Row{}, err
	}
	defer closeWire()
	done, stop := finishedSignal(cd)
	defer stop()
	n := o.n(20)
	var direct, added []float64
	for r := 0; r < o.Rounds; r++ {
		td, err := timeN(n, func() error {
			t, err := c.Submit(ctx, conformance.ActionQuick, nil, 0)
			if err == nil && t.Status != pylabrobot.TaskDone {
				err = fmt.Errorf("task %s", t.Status)
			}
			return err
		})
		if err != nil {
			return Row{}, err
		}
		ta, err := timeN(n, func() error { return invokeAndWait(ctx, cd, done, conformance.ActionQuick, nil) })
		if err != nil {
			return Row{}, err
		}
		direct = append(direct, float64(td.Microseconds())/float64(n)/1e3)
		added = append(added, float64((ta-td).Microseconds())/float64(n)/1e3)
	}
	return Row{
		What:     "a quick PyLabRobot action through MHP over HTTP+SSE vs the bridge client (Go stub bridge, default config)",
		Baseline: "direct " + spread(direct, "%.2f") + " ms",
		Now:      "direct +" + spread(added, "%.2f") + " ms",
		Goal:     "<= direct + 1 ms",
		Met:      ptr(median(added) <= 1),
	}, nil
}

// overHTTP serves d over HTTP on loopback and dials it with the client.
func overHTTP(ctx context.Context, d mhp.Device) (mhp.Device, func(), error) {
	urls, stop, err := serveDevices([]mhp.Device{d})
	if err != nil {
		return nil, nil, err
	}
	c, err := client.Dial(ctx, urls[0], client.Options{ClientName: "bench"})
	if err != nil {
		stop()
		return nil, nil, err
	}
	return c, func() { c.Close(); stop() }, nil
}
