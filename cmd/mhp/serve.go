package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/auth"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/devicepkg"
	"github.com/openmhp/mhp-go/directory"
	"github.com/openmhp/mhp-go/examples/sim"
	"github.com/openmhp/mhp-go/host"
	"github.com/openmhp/mhp-go/metrics"
	"github.com/openmhp/mhp-go/mqtt/fleet"
	"github.com/openmhp/mhp-go/transport"
)

// DefaultAddr is where `mhp serve` listens without --http.
const DefaultAddr = "127.0.0.1:18921"

var serveFlags = mergeFlags(mergeFlags(flagSpec{"http": true, "stdio": false, "speed": true, "public-descriptor": false, "publish": true,
	"advertise": false, "strict-sessions": false, "allow-host": true, "log-format": true}, guardFlags), trustFlags)

func mergeFlags(a, b flagSpec) flagSpec {
	out := flagSpec{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// serveCmd runs `mhp serve TARGET [--http ADDR | --stdio]`.
//
// Safety flags: a --http address that is not loopback needs TLS
// (--tls-cert, --tls-key) and credentials (--credentials, --token-file or
// MHP_TOKEN, or --client-ca) unless --insecure is given; --strict-sessions
// refuses actuation from clients that send only X-MHP-Client (no
// Mhp-Session); --allow-host NAME[,NAME] lists the Host names served
// besides IP addresses and localhost when no token is set (DNS rebinding).
func (a *app) serveCmd(ctx context.Context, args []string) int {
	p, err := parseArgs(args, serveFlags)
	if err != nil {
		return a.usageError("serve: %v", err)
	}
	if len(p.args) != 1 {
		return a.usageError("serve: usage: mhp serve TARGET [--http ADDR | --stdio] [--token-file F] [--insecure] [--strict-sessions] [--allow-host NAME[,NAME]]")
	}
	if p.has("http") && p.has("stdio") {
		return a.usageError("serve: --http and --stdio exclude each other")
	}
	speed, err := speedOf(p, 1)
	if err != nil {
		return a.usageError("serve: %v", err)
	}
	token, err := a.token(p)
	if err != nil {
		return a.usageError("serve: %v", err)
	}
	gopts, err := parseGuardFlags(p)
	if err != nil {
		return a.usageError("serve: %v", err)
	}
	// Over stdio the parent reads our stderr: warnings only.
	level := slog.LevelInfo
	if p.has("stdio") {
		level = slog.LevelWarn
	}
	log, err := newLogger(a.stderr, p, level)
	if err != nil {
		return a.usageError("serve: %v", err)
	}
	trust, err := serverTrustOf(p, token, gopts.OperatorToken, log)
	if err != nil {
		return a.usageError("serve: %v", err)
	}
	addr := DefaultAddr
	if v := p.flags["http"]; v != "" {
		addr = v
	}
	if !p.has("stdio") {
		if err := trust.check("serve --http", addr, p.has("insecure"), log); err != nil {
			return a.usageError("%v", err)
		}
	}
	dev, closeDev, err := openTarget(ctx, p.args[0], sim.Options{Speed: speed}, log)
	if err != nil {
		fmt.Fprintf(a.stderr, "mhp serve: %v\n", err)
		return exitNoPeer
	}
	defer closeDev()
	gopts.Methods = methodsFor(p.args[0], log)
	wrapped, err := wrapDevice(ctx, dev, gopts, log)
	if err != nil {
		fmt.Fprintf(a.stderr, "mhp serve: %v\n", err)
		return exitUsage
	}
	defer wrapped.Close()
	mx := metrics.New(metrics.Config{})
	dev, stopMx := mx.Device(wrapped.Device, metrics.AdapterLabel(p.args[0]))
	defer stopMx()
	if wrapped.Log != nil {
		mx.EvidenceLength(func() float64 { return float64(wrapped.Log.Head().Seq) })
	}
	opts := transport.Options{Token: token, Auth: trust.auth, TLS: trust.tlsConfig(), PublicDescriptor: p.has("public-descriptor"), Logger: log,
		StrictSessions: p.has("strict-sessions"), AllowedHosts: splitList(p.flags["allow-host"]), OperatorToken: gopts.OperatorToken}
	srv := transport.NewServer(dev, opts)
	defer srv.Close()
	mx.SessionsFrom(srv.Sessions)
	id := describeID(ctx, dev)
	if url := p.flags["publish"]; url != "" {
		// Fleet notifications: nothing in the safety path waits on the broker;
		// an outage is logged and the device works on.
		host, _ := os.Hostname()
		ctls, err := a.clientTLS(p) // an mqtts:// broker: the same --ca, --pin, --client-cert as every client
		if err != nil {
			return a.usageError("serve: --publish: %v", err)
		}
		pub, err := fleet.New(dev, fleet.Config{URL: url, Host: host, Logger: log, TLS: ctls})
		if err != nil {
			return a.usageError("serve: --publish: %v", err)
		}
		pctx, stopPub := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); _ = pub.Run(pctx) }()
		defer func() { stopPub(); <-done }()
		log.Info("publishing fleet notifications", "device", id, "broker", url)
	}
	if p.has("stdio") {
		log.Info("mhp serving on stdio", "device", id)
		if err := srv.ServeStdio(ctx, a.stdin, a.stdout); err != nil && !errors.Is(err, context.Canceled) {
			fmt.Fprintf(a.stderr, "mhp serve: %v\n", err)
			return exitNoPeer
		}
		return exitOK
	}
	ln, err := transport.Listen(addr)
	if err != nil {
		fmt.Fprintf(a.stderr, "mhp serve: %v\n", err)
		return exitNoPeer
	}
	trust.reloadOnHangup(ctx, log)
	url := trust.scheme() + "://" + ln.Addr().String()
	fmt.Fprintf(a.stderr, "mhp: serving %s on %s (descriptor: %s/mhp.json)\n", id, url, url)
	if p.has("advertise") {
		info := mhp.DeviceInfo{ID: id}
		if d, err := dev.Describe(ctx, mhp.DescribeRequest{Detail: mhp.DetailCard}); err == nil {
			info = d.DeviceInfo
		}
		stopAd, err := directory.Advertise(info, ln.Addr().(*net.TCPAddr).Port)
		if err != nil {
			log.Warn("mDNS advertisement failed", "err", err)
		} else {
			defer stopAd()
		}
	}
	if a.ready != nil {
		a.ready([]string{url})
	}
	if err := serveDeviceConsole(ctx, ln, srv, mx, addr, p.flags["allow-host"]); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(a.stderr, "mhp serve: %v\n", err)
		return exitNoPeer
	}
	return exitOK
}

// beyondLoopback reports whether an --http address may be reached from
// another machine: any host but a loopback IP or localhost (an address
// without a host binds 127.0.0.1; a name is assumed to reach beyond).
func beyondLoopback(addr string) bool { return auth.BeyondLoopback(transport.LoopbackDefault(addr)) }

// splitList splits a comma-separated flag value, dropping empty entries.
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func speedOf(p parsed, def float64) (float64, error) {
	v, ok := p.flags["speed"]
	if !ok {
		return def, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || !(f > 0) || f > 1e6 {
		return 0, fmt.Errorf("--speed %q: want a factor above 0 (simulated seconds per second)", v)
	}
	return f, nil
}

func describeID(ctx context.Context, dev mhp.Device) string { return host.DeviceID(ctx, dev) }

// openTarget builds and starts the device a serve target names: a device
// package folder, sim:thermocycler / sim:arm, or an adapter config file.
// The returned func closes it.
func openTarget(ctx context.Context, target string, simOpts sim.Options, log *slog.Logger) (mhp.Device, func() error, error) {
	if sim.IsDriver(target) {
		cfg, err := sim.Config(target, simOpts)
		if err != nil {
			return nil, nil, err
		}
		cfg.Logger = log
		return startDriver(ctx, cfg)
	}
	info, err := os.Stat(target)
	if err != nil {
		return nil, nil, fmt.Errorf("target %q: not sim:thermocycler, sim:arm, a package folder or a config file: %w", target, err)
	}
	if info.IsDir() {
		pkg, err := devicepkg.Load(target)
		if err != nil {
			return nil, nil, err
		}
		// A package on an adapter config whose backend was never reached
		// still serves, and adopts the description when it connects.
		dev, err := openPackage(ctx, pkg, simOpts, log)
		if err != nil {
			pkg.Close()
			return nil, nil, err
		}
		if err := dev.Start(ctx); err != nil {
			dev.Close()
			pkg.Close()
			return nil, nil, err
		}
		return dev, func() error { dev.Close(); return pkg.Close() }, nil
	}
	reg, err := newRegistry()
	if err != nil {
		return nil, nil, err
	}
	// A self-describing backend never reached, with no descriptor cache,
	// still serves (its identity and link) and adopts its description when
	// it first connects (adapters.Pending).
	return reg.OpenDevice(ctx, target, log)
}

// buildPackage builds a package's device on the bindings its card names: a
// simulated driver (sim:thermocycler, sim:arm) or an adapter config file
// (relative to the package folder), with the package merged over the
// bindings either way.
func buildPackage(ctx context.Context, pkg *devicepkg.Package, simOpts sim.Options, log *slog.Logger) (*devicepkg.Device, error) {
	reg, err := newRegistry()
	if err != nil {
		return nil, err
	}
	return host.BuildPackage(ctx, pkg, host.Config{Registry: reg, Sim: simOpts, Logger: log})
}

// openPackage is buildPackage for serving (host.OpenPackage): the caller
// Starts the device.
func openPackage(ctx context.Context, pkg *devicepkg.Package, simOpts sim.Options, log *slog.Logger) (host.Device, error) {
	reg, err := newRegistry()
	if err != nil {
		return nil, err
	}
	return host.OpenPackage(ctx, pkg, host.Config{Registry: reg, Sim: simOpts, Logger: log})
}

func startDriver(ctx context.Context, cfg binding.Config) (mhp.Device, func() error, error) {
	drv, err := binding.New(cfg)
	if err != nil {
		return nil, nil, err
	}
	if err := drv.Start(ctx); err != nil {
		drv.Close()
		return nil, nil, err
	}
	return drv, drv.Close, nil
}
