package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/client"
	"github.com/openmhp/mhp-go/devicepkg"
	"github.com/openmhp/mhp-go/examples/devices"
	"github.com/openmhp/mhp-go/examples/sim"
	"github.com/openmhp/mhp-go/metrics"
	"github.com/openmhp/mhp-go/transport"
)

// Demo defaults: the thermocycler on 18921, the arm on 18922; simulated
// time runs 60x (a 30 s hold takes half a second).
const (
	demoHost      = "127.0.0.1"
	demoPort      = 18921
	demoSpeed     = 60.0
	demoTC        = "thermocycler-01"
	demoArm       = "arm-01"
	demoLeaseTime = 10 * time.Minute
)

var demoFlags = mergeFlags(flagSpec{"http": true, "speed": true, "once": false}, trustFlags)

// demoCmd runs `mhp demo`: the simulated lab over HTTP, a PCR workflow
// through the client SDK, then serving until Ctrl-C (or exit with --once).
func (a *app) demoCmd(ctx context.Context, args []string) int {
	p, err := parseArgs(args, demoFlags)
	if err != nil {
		return a.usageError("demo: %v", err)
	}
	if len(p.args) != 0 {
		return a.usageError("demo: usage: mhp demo [--http HOST:PORT] [--speed N] [--once]")
	}
	speed, err := speedOf(p, demoSpeed)
	if err != nil {
		return a.usageError("demo: %v", err)
	}
	host, port, explicit := demoHost, demoPort, false
	if v, ok := p.flags["http"]; ok {
		h, ps, err := net.SplitHostPort(v)
		n, perr := strconv.Atoi(ps)
		if err != nil || perr != nil || n < 0 || n > 65534 {
			return a.usageError("demo: --http %q: want HOST:PORT (the arm gets PORT+1; port 0 picks free ports)", v)
		}
		if h != "" {
			host = h
		}
		port, explicit = n, true
	}
	token, err := a.token(p)
	if err != nil {
		return a.usageError("demo: %v", err)
	}
	trust, err := serverTrustOf(p, token, "", a.quietLogger())
	if err != nil {
		return a.usageError("demo: %v", err)
	}
	if err := trust.check("demo --http", net.JoinHostPort(host, strconv.Itoa(port)), p.has("insecure"), a.quietLogger()); err != nil {
		return a.usageError("%v", err)
	}
	ctls, err := a.clientTLS(p)
	if err != nil {
		return a.usageError("demo: %v", err)
	}
	if trust.tls != nil && ctls.IsZero() {
		return a.usageError("demo: with --tls-cert the demo's own workflow needs to trust it: give --ca FILE (the lab CA) or --pin sha256:HEX")
	}
	lab, err := startDemoLab(ctx, host, port, explicit, speed, a.quietLogger(), trust)
	if err != nil {
		fmt.Fprintf(a.stderr, "mhp demo: %v\n", err)
		return exitNoPeer
	}
	defer lab.stop()
	fmt.Fprintf(a.stdout, "MHP demo lab (simulated, time runs %gx)\n", speed)
	for _, name := range []string{demoTC, demoArm} {
		fmt.Fprintf(a.stdout, "  %-16s %s\n", name, lab.urls[name])
	}
	if lab.note != "" {
		fmt.Fprintf(a.stdout, "  (%s)\n", lab.note)
	}
	fmt.Fprintf(a.stdout, "  evidence: %s, one log of both devices (mhp evidence verify %s; mhp evidence list %s --device %s)\n",
		lab.evidence, lab.evidence, lab.evidence, demoTC)
	if a.ready != nil {
		a.ready([]string{lab.urls[demoTC], lab.urls[demoArm]})
	}
	fmt.Fprintln(a.stdout)
	if err := a.workflow(ctx, lab.urls[demoTC], lab.urls[demoArm], client.Options{Token: token, TLS: ctls}); err != nil {
		if ctx.Err() != nil {
			return exitOK
		}
		if e, ok := mhp.AsError(err); ok {
			fmt.Fprint(a.stderr, refusalText(e))
		} else {
			fmt.Fprintf(a.stderr, "mhp demo: %v\n", err)
		}
		return exitRefused
	}
	a.pokeHelp(lab.urls[demoTC], lab.urls[demoArm])
	if p.has("once") {
		return exitOK
	}
	fmt.Fprintln(a.stdout, "\nServing until Ctrl-C.")
	<-ctx.Done()
	fmt.Fprintln(a.stdout, "\nstopping the lab")
	return exitOK
}

// demoLab is the running simulated lab.
type demoLab struct {
	urls map[string]string
	note string
	// evidence is the folder of the devices' shared evidence log.
	evidence string
	stop     func()
}

// startDemoLab builds both packages (embedded) on one simulated cell and
// serves each over HTTP. Default ports that are taken fall back to free
// ones; explicitly asked ports do not.
func startDemoLab(ctx context.Context, host string, port int, explicit bool, speed float64, log *slog.Logger, trust serverTrust) (*demoLab, error) {
	cell := sim.NewCell(sim.Options{Speed: speed})
	sctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var closers []func()
	lab := &demoLab{urls: map[string]string{}}
	// The demo keeps evidence (receipts in a hash chain) in a fresh folder.
	evDir, err := os.MkdirTemp("", "mhp-demo-evidence-")
	if err != nil {
		cancel()
		return nil, err
	}
	lab.evidence = evDir
	// One shared log for both devices: one chain, one fsync per batch.
	shared, err := openSharedEvidence(guardOptions{}, evDir)
	if err != nil {
		cancel()
		return nil, err
	}
	closers = append(closers, func() {
		if err := shared.Close(); err != nil {
			log.Error("evidence log close", "err", err)
		}
	})
	lab.stop = func() {
		cancel()
		wg.Wait()
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	for i, name := range []string{demoTC, demoArm} {
		fsys, err := devices.FS(name)
		if err != nil {
			lab.stop()
			return nil, err
		}
		pkg, err := devicepkg.LoadFS(fsys)
		if err != nil {
			lab.stop()
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		cfg, err := cell.Config(pkg.Card.Driver)
		if err != nil {
			lab.stop()
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		cfg.Logger = log
		dev, err := devicepkg.Build(pkg, cfg)
		if err != nil {
			lab.stop()
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if err := dev.Start(ctx); err != nil {
			dev.Close()
			lab.stop()
			return nil, err
		}
		wrapped, err := wrapDevice(ctx, dev, guardOptions{Evidence: shared, Methods: methodsFS(fsys, log)}, log)
		if err != nil {
			dev.Close()
			lab.stop()
			return nil, err
		}
		mx := metrics.New(metrics.Config{})
		mx.EvidenceLength(func() float64 { return float64(wrapped.Log.Head().Seq) })
		mdev, stopMx := mx.Device(wrapped.Device, "sim")
		srv := transport.NewServer(mdev, transport.Options{Logger: log, Auth: trust.auth, TLS: trust.tlsConfig()})
		mx.SessionsFrom(srv.Sessions)
		closers = append(closers, func() { srv.Close(); stopMx(); wrapped.Close(); dev.Close() })
		p := 0
		if port != 0 {
			p = port + i
		}
		ln, err := transport.Listen(net.JoinHostPort(host, strconv.Itoa(p)))
		if err != nil && !explicit && p != 0 {
			lab.note = fmt.Sprintf("port %d was taken: free ports picked", p)
			ln, err = transport.Listen(net.JoinHostPort(host, "0"))
		}
		if err != nil {
			lab.stop()
			return nil, err
		}
		lab.urls[name] = trust.scheme() + "://" + ln.Addr().String()
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = serveDeviceConsole(sctx, ln, srv, mx, host, "")
		}()
	}
	return lab, nil
}

// workflow is the demo's PCR run, through the client SDK as any program
// would: lease both devices, plate to the cycler, close the lid, heat the
// lid, cycle, open, plate back.
func (a *app) workflow(ctx context.Context, tcURL, armURL string, creds client.Options) error {
	opts := client.Options{ClientName: "mhp-demo", Stderr: a.stderr, PollEvery: 200 * time.Millisecond, Logger: a.quietLogger(),
		Token: creds.Token, TLS: creds.TLS}
	lab := client.NewLab(map[string]string{demoTC: tcURL, demoArm: armURL}, opts)
	defer lab.Close()
	tc, err := lab.Device(ctx, demoTC)
	if err != nil {
		return err
	}
	arm, err := lab.Device(ctx, demoArm)
	if err != nil {
		return err
	}
	n := 0
	step := func(what string, fn func() error) error {
		n++
		fmt.Fprintf(a.stdout, "[%2d] %s\n", n, what)
		start := time.Now()
		if err := fn(); err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "     ok (%.2fs)\n", time.Since(start).Seconds())
		return nil
	}
	run := func(d *client.Device, action string, params map[string]any, approved bool) error {
		res, err := d.Invoke(ctx, mhp.InvokeRequest{Name: action, Params: params, Approved: approved})
		if err != nil {
			return err
		}
		j, err := d.Wait(ctx, res.Job.ID)
		if err != nil {
			return err
		}
		if j.State != mhp.JobDone {
			if j.Error != nil {
				return j.Error
			}
			return fmt.Errorf("%s ended %s", action, j.State)
		}
		return nil
	}
	var releases []func()
	defer func() {
		for _, r := range releases {
			r()
		}
	}()
	steps := []struct {
		what string
		fn   func() error
	}{
		{"describe both devices (card tier)", func() error {
			for _, d := range []*client.Device{tc, arm} {
				desc, err := d.Describe(ctx, mhp.DescribeRequest{Detail: mhp.DetailCard})
				if err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "     %s: %s %s at %s, %s; actions %s\n", desc.ID, desc.Make, desc.Model, desc.Location, desc.State, names(desc.Actions))
			}
			return nil
		}},
		{"lease both devices for the run (heartbeat renews the leases)", func() error {
			for _, d := range []*client.Device{tc, arm} {
				rel, err := d.Scope(ctx, demoLeaseTime)
				if err != nil {
					return err
				}
				releases = append(releases, rel)
			}
			return nil
		}},
		{"arm: speed 80 %", func() error { _, err := arm.Set(ctx, sim.ArmSpeed, 80); return err }},
		{"arm: pick_plate deck_A1", func() error { return run(arm, sim.ArmPickPlate, map[string]any{"location": "deck_A1"}, false) }},
		{"arm: place_plate thermocycler (the lid is open)", func() error {
			return run(arm, sim.ArmPlacePlate, map[string]any{"location": "thermocycler"}, false)
		}},
		{"thermocycler: close_lid without approval is refused", func() error {
			return a.expectRefusal(errOf(tc.Invoke(ctx, mhp.InvokeRequest{Name: sim.TCCloseLid})), mhp.CodeApprovalRequired)
		}},
		{"thermocycler: close_lid, approved (the demo is the person who confirms)", func() error {
			return run(tc, sim.TCCloseLid, nil, true)
		}},
		{"thermocycler: target_temperature 200 is refused by the driver", func() error {
			return a.expectRefusal(errOf(tc.Write(ctx, mhp.WriteRequest{Name: sim.TCTargetTemp, Value: 200})), mhp.CodeLimitViolation)
		}},
		{"thermocycler: lid_heater on, wait for the lid above 100 degC", func() error {
			if _, err := tc.Set(ctx, sim.TCLidHeater, true); err != nil {
				return err
			}
			return waitSignal(ctx, tc, sim.TCLidTemperature, func(v any) bool { f, _ := v.(float64); return f > 100 })
		}},
		{"thermocycler: run_protocol 95/58/72 degC x 3 cycles, then a 4 degC hold", func() error {
			params := map[string]any{"steps": []any{
				map[string]any{"temp": 95, "hold_s": 15}, map[string]any{"temp": 58, "hold_s": 15},
				map[string]any{"temp": 72, "hold_s": 20}, map[string]any{"temp": 4, "hold_s": 5}}, "cycles": 3}
			res, err := tc.Invoke(ctx, mhp.InvokeRequest{Name: sim.TCRunProtocol, Params: params})
			if err != nil {
				return err
			}
			v := &verbCtx{app: a, d: tc}
			j, err := v.waitWithProgress(ctx, res.Job.ID, "     ")
			if err != nil {
				return err
			}
			if j.State != mhp.JobDone {
				return fmt.Errorf("run_protocol ended %s", j.State)
			}
			fmt.Fprintf(a.stdout, "     result %s\n", compact(j.Result))
			return nil
		}},
		{"thermocycler: lid_heater off, open_lid approved (block below 60 degC)", func() error {
			if _, err := tc.Set(ctx, sim.TCLidHeater, false); err != nil {
				return err
			}
			return run(tc, sim.TCOpenLid, nil, true)
		}},
		{"arm: pick_plate thermocycler", func() error {
			return run(arm, sim.ArmPickPlate, map[string]any{"location": "thermocycler"}, false)
		}},
		{"arm: place_plate deck_A1, home", func() error {
			if err := run(arm, sim.ArmPlacePlate, map[string]any{"location": "deck_A1"}, false); err != nil {
				return err
			}
			return run(arm, sim.ArmHome, nil, false)
		}},
		{"release both leases", func() error {
			for _, r := range releases {
				r()
			}
			releases = nil
			return nil
		}},
	}
	for _, s := range steps {
		if err := step(s.what, s.fn); err != nil {
			return err
		}
	}
	fmt.Fprintln(a.stdout, "\nPCR workflow complete: the plate is back at deck_A1.")
	return nil
}

func names(actions []mhp.Action) string {
	s := ""
	for i, a := range actions {
		if i > 0 {
			s += ", "
		}
		s += a.Name
	}
	return s
}

// expectRefusal checks that a call was refused with a code, and shows the refusal.
func (a *app) expectRefusal(err error, code mhp.Code) error {
	if err == nil {
		return fmt.Errorf("expected a %s refusal, but the request was accepted", code)
	}
	e, ok := mhp.AsError(err)
	if !ok || e.Code != code {
		return fmt.Errorf("expected a %s refusal, got: %w", code, err)
	}
	for _, line := range splitLines(refusalText(e)) {
		fmt.Fprintf(a.stdout, "     %s\n", line)
	}
	return nil
}

// errOf keeps the error of a two-value call.
func errOf[T any](_ T, err error) error { return err }

func splitLines(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// waitSignal polls a signal until ok accepts it, within a minute.
func waitSignal(ctx context.Context, d *client.Device, name string, ok func(any) bool) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		v, err := d.Get(ctx, name)
		if err != nil {
			return err
		}
		if ok(v) {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.New("timed out waiting for " + name)
		case <-t.C:
		}
	}
}

// pokeHelp prints what a person can do with the running lab.
func (a *app) pokeHelp(tc, arm string) {
	fmt.Fprintf(a.stdout, `
Poke the lab (mhp is `+"`go run ./cmd/mhp`"+` from the repository):
  curl -s %[1]s/mhp.json
  mhp %[1]s describe
  mhp %[1]s read
  mhp %[1]s write target_temperature 200          # refused: LimitViolation, limits in data
  mhp %[1]s invoke close_lid --approved --wait
  mhp %[1]s invoke run_protocol '{"steps":[{"temp":95,"hold_s":30},{"temp":4,"hold_s":5}],"cycles":2}' --wait
  mhp %[2]s invoke pick_plate location=deck_A1 --wait
  mhp %[1]s estop "testing the stop"  &&  mhp %[1]s reset
  mhp %[1]s resources  &&  mhp %[1]s resource references/protocols.md
  mhp conformance %[1]s
  mhp run examples/devices/arm-01/scripts/load_thermocycler.star thermocycler-01=%[1]s arm-01=%[2]s
`, tc, arm)
}
