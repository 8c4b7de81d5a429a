package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/client"
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

// finishedJobs delivers the job id and state of every jobs/finished of d
// (buffered: a caller waits for one job at a time).
func finishedJobs(d mhp.Device) (<-chan [2]string, func()) {
	ch := make(chan [2]string, 64)
	stop := d.Listen(func(n mhp.Notification) {
		if n.Method != mhp.NotifyJobsFinished {
			return
		}
		var id, state string
		switch j := n.Params["job"].(type) {
		case map[string]any:
			id, _ = j["id"].(string)
			state, _ = j["state"].(string)
		case mhp.Job:
			id, state = j.ID, string(j.State)
		case *mhp.Job:
			id, state = j.ID, string(j.State)
		}
		select {
		case ch <- [2]string{id, state}:
		default:
		}
	})
	return ch, stop
}

// invokeFinished invokes name and waits for its jobs/finished on the
// notification stream, whose job says how it ended: what an agent does.
func invokeFinished(ctx context.Context, d mhp.Device, finished <-chan [2]string, name string, params map[string]any) error {
	r, err := d.Invoke(ctx, mhp.InvokeRequest{Name: name, Params: params})
	if err != nil {
		return err
	}
	for {
		select {
		case f := <-finished:
			if f[0] != r.Job.ID {
				continue
			}
			if f[1] != string(mhp.JobDone) {
				return fmt.Errorf("job %s ended %s", f[0], f[1])
			}
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// plrPickDrop is how long the bench's pick and drop takes at the fake
// bridge (what a PyLabRobot pick+drop on a simulated deck takes): long
// enough that it never ends inside the submit answer.
const plrPickDrop = 15 * time.Millisecond

// measurePLR is a PyLabRobot pick and drop (a task the fake bridge runs
// for plrPickDrop) through the adapter over HTTP+SSE (invoke, wait for
// its jobs/finished, whose job says done), with the adapter long-polling the bridge (the default)
// and, in the same run, polling it (long_poll: false, the default 200ms
// poll_interval: the path before bridges long-polled), against the bridge
// client's own submit and long-poll.
func measurePLR(ctx context.Context, o Options) (Row, error) {
	br := plrtest.NewBridge()
	defer br.Close()
	br.AddTimedMethod("pick_drop", plrPickDrop)
	open := func(id string, longPoll bool) (mhp.Device, <-chan [2]string, func(), error) {
		cfg := pylabrobot.Config{Mode: pylabrobot.ModeBridge, URL: br.URL, LongPoll: &longPoll}
		cfg.Device = mhp.DeviceInfo{ID: id}
		d, err := pylabrobot.New(ctx, cfg, pylabrobot.Options{})
		if err != nil {
			return nil, nil, nil, err
		}
		if err := d.Start(ctx); err != nil {
			return nil, nil, nil, err
		}
		cd, closeWire, err := overHTTP(ctx, d)
		if err != nil {
			d.Close()
			return nil, nil, nil, err
		}
		done, stop := finishedJobs(cd)
		return cd, done, func() { stop(); closeWire(); d.Close() }, nil
	}
	long, longDone, closeLong, err := open("bench-long", true)
	if err != nil {
		return Row{}, err
	}
	defer closeLong()
	poll, pollDone, closePoll, err := open("bench-poll", false)
	if err != nil {
		return Row{}, err
	}
	defer closePoll()
	c, err := pylabrobot.NewBridgeClient(br.URL, 0, nil)
	if err != nil {
		return Row{}, err
	}
	direct := func() error {
		t, err := c.Submit(ctx, "pick_drop", nil, 0)
		for err == nil && (t.Status == pylabrobot.TaskQueued || t.Status == pylabrobot.TaskRunning) {
			t, err = c.Task(ctx, t.ID, pylabrobot.Wait{For: 5 * time.Second, Seen: t.Version})
		}
		if err == nil && t.Status != pylabrobot.TaskDone {
			err = fmt.Errorf("task %s", t.Status)
		}
		return err
	}
	n := o.n(20)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }
	var base, addLong, addPoll, ratioLong, ratioPoll []float64
	for r := 0; r < o.Rounds; r++ {
		// Interleaved one by one, so that load and timer drift hit the
		// paths alike; each round reports medians (a loaded machine's
		// timer outliers say nothing of the path). Polling runs every
		// fourth time: it takes a poll interval (200ms) each time.
		var ds, ls, dps, ps []float64
		for i := 0; i < n; i++ {
			start := time.Now()
			if err := direct(); err != nil {
				return Row{}, err
			}
			mid := time.Now()
			if err := invokeFinished(ctx, long, longDone, "pick_drop", nil); err != nil {
				return Row{}, err
			}
			ds, ls = append(ds, ms(mid.Sub(start))), append(ls, ms(time.Since(mid)))
			if i%4 == 0 {
				start := time.Now()
				if err := invokeFinished(ctx, poll, pollDone, "pick_drop", nil); err != nil {
					return Row{}, err
				}
				dps, ps = append(dps, ds[len(ds)-1]), append(ps, ms(time.Since(start)))
			}
		}
		d, l, dp, p := median(ds), median(ls), median(dps), median(ps)
		base = append(base, d)
		addLong, addPoll = append(addLong, l-d), append(addPoll, p-dp)
		ratioLong, ratioPoll = append(ratioLong, l/d), append(ratioPoll, p/dp)
	}
	return Row{
		What: fmt.Sprintf("a PyLabRobot pick+drop (%v at the Go fake bridge) through MHP over HTTP+SSE (invoke, jobs/finished) vs the bridge client's submit+long-poll; "+
			"adapter long-polling (default) and polling (long_poll: false, poll_interval 200ms) in the same run", plrPickDrop),
		Baseline: "direct " + spread(base, "%.2f") + " ms",
		Now: "long-poll direct +" + spread(addLong, "%.2f") + " ms (" + spread(ratioLong, "%.2f") + "x); " +
			"polling direct +" + spread(addPoll, "%.1f") + " ms (" + spread(ratioPoll, "%.1f") + "x)",
		Goal: "<= direct + 1 ms",
		Met:  ptr(median(addLong) <= 1),
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
