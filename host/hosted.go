package host

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/devicepkg"
	"github.com/openmhp/mhp-go/examples/sim"
	"github.com/openmhp/mhp-go/manual"
)

// Device is a device the host runs in-process.
type Device interface {
	mhp.Device
	Start(ctx context.Context) error
	Close() error
}

// startTimeout bounds building and starting one hosted device.
const startTimeout = 30 * time.Second

// retryAfter is how long a hosted device that failed to build or start is
// left before the next try.
const retryAfter = 5 * time.Second

// hosted is one in-process device, built and started on first use.
type hosted struct {
	mu      sync.Mutex
	dev     Device
	release func() error
	err     error
	failed  time.Time
}

func (h *hosted) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.release != nil {
		_ = h.release()
	}
	h.dev, h.release = nil, nil
}

// IsHosted reports whether a target is run in-process by the host.
func IsHosted(target string) bool {
	return sim.IsDriver(target) || strings.HasPrefix(target, prefixPackage) || strings.HasPrefix(target, prefixTwin) ||
		strings.HasPrefix(target, prefixConfig)
}

// Hosted returns the running in-process device of a target, building and
// starting it on first use. A device that failed is tried again after a
// few seconds, not on every call.
func (f *Fleet) Hosted(ctx context.Context, target string) (Device, error) {
	if !IsHosted(target) {
		return nil, mhp.Errorf(mhp.CodeInvalidParams, "%s is not an in-process target", mhp.Truncate(target, 200))
	}
	key := NormalizeTarget(target)
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil, mhp.Errorf(mhp.CodeServerError, "the host is closed")
	}
	h, ok := f.hosted[key]
	if !ok {
		h = &hosted{}
		f.hosted[key] = h
	}
	f.mu.Unlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.dev != nil {
		return h.dev, nil
	}
	if h.err != nil && time.Since(h.failed) < retryAfter {
		return nil, h.err
	}
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), startTimeout)
	defer cancel()
	dev, release, err := f.build(bctx, target)
	if err == nil {
		if err = dev.Start(bctx); err != nil {
			release()
		} else if gdev, grelease, gerr := f.guarded(bctx, target, dev, release); gerr != nil {
			err = gerr
			release()
		} else {
			dev, release = gdev, grelease
		}
	}
	if err != nil {
		h.err = mhp.Errorf(mhp.CodeServerError, "hosting %s: %v", mhp.Truncate(target, 200), err).With(mhp.DataReason, "unreachable")
		h.failed = time.Now()
		return nil, h.err
	}
	h.dev, h.release, h.err = dev, release, nil
	return dev, nil
}

// running returns the hosted record of a target when its device runs.
func (f *Fleet) running(target string) *hosted {
	f.mu.Lock()
	h := f.hosted[NormalizeTarget(target)]
	f.mu.Unlock()
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.dev == nil {
		return nil
	}
	return h
}

// forget stops and drops the hosted device of a target.
func (f *Fleet) forget(target string) {
	key := NormalizeTarget(target)
	f.mu.Lock()
	h := f.hosted[key]
	delete(f.hosted, key)
	f.mu.Unlock()
	if h != nil {
		h.close()
	}
}

// build makes the unstarted device of an in-process target and the
// function that closes it (and its package).
func (f *Fleet) build(ctx context.Context, target string) (Device, func() error, error) {
	switch {
	case sim.IsDriver(target):
		cfg, err := sim.Config(target, f.cfg.Sim)
		if err != nil {
			return nil, nil, err
		}
		cfg.Logger = f.cfg.Logger
		drv, err := binding.New(cfg)
		if err != nil {
			return nil, nil, err
		}
		return drv, drv.Close, nil
	case strings.HasPrefix(target, prefixConfig):
		if f.cfg.Registry == nil {
			return nil, nil, fmt.Errorf("adapter config files cannot be hosted here (no adapter registry)")
		}
		// Started here: a self-describing backend never reached serves
		// pending (adapters.Pending) and adopts its description later.
		dev, closeDev, err := f.cfg.Registry.OpenDevice(ctx, f.abs(strings.TrimPrefix(target, prefixConfig)), f.cfg.Logger)
		if err != nil {
			return nil, nil, err
		}
		switch d := dev.(type) {
		case *binding.Driver:
			return startedDriver{d}, closeDev, nil
		case *adapters.Pending:
			return d, closeDev, nil
		}
		closeDev()
		return nil, nil, fmt.Errorf("%s: the adapter served a %T", mhp.Truncate(target, 200), dev)
	}
	twin := strings.HasPrefix(target, prefixTwin)
	dir := f.abs(strings.TrimPrefix(strings.TrimPrefix(target, prefixTwin), prefixPackage))
	pkg, err := devicepkg.Load(dir)
	if err != nil {
		return nil, nil, err
	}
	var dev Device
	if twin {
		dev, err = f.buildTwin(pkg)
	} else {
		dev, err = OpenPackage(ctx, pkg, f.cfg) // a backend never reached serves pending
	}
	if err != nil {
		pkg.Close()
		return nil, nil, err
	}
	return dev, func() error { err := dev.Close(); pkg.Close(); return err }, nil
}

// BuildPackage builds a package's device (unstarted) on the driver its
// card names: a simulated device (sim:…), an operator-run instrument
// (manual), or an adapter config file inside the package, with the package
// merged over the bindings in every case.
func (f *Fleet) BuildPackage(ctx context.Context, pkg *devicepkg.Package) (*devicepkg.Device, error) {
	return BuildPackage(ctx, pkg, f.cfg)
}

// BuildPackage is Fleet.BuildPackage with the drivers of cfg (Registry,
// Drivers, Sim, Logger), for a caller without a fleet.
func BuildPackage(ctx context.Context, pkg *devicepkg.Package, cfg Config) (*devicepkg.Device, error) {
	d := pkg.Card.Driver
	if sim.IsDriver(d) {
		bc, err := sim.Config(d, cfg.Sim)
		if err != nil {
			return nil, err
		}
		bc.Logger = cfg.Logger
		return devicepkg.Build(pkg, bc)
	}
	if manual.IsDriver(d) { // operated by a person: bindings from descriptor.yaml + manual.yaml
		return manual.Build(pkg, manual.Options{Logger: cfg.Logger})
	}
	file, err := adapterFile(pkg, cfg)
	if err != nil {
		return nil, err
	}
	drv, err := cfg.Registry.OpenRefined(ctx, file, packageRefine(pkg, cfg))
	if err != nil {
		return nil, err
	}
	return devicepkg.NewDevice(drv, pkg), nil
}

// UsersOf lists the ids of fleet entries hosted from the package folder dir
// (the package itself and its twin): the package is live when any is.
func (f *Fleet) UsersOf(dir string) ([]string, error) {
	list, err := f.List()
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range list {
		for _, p := range []string{prefixPackage, prefixTwin} {
			if strings.HasPrefix(e.Target, p) && filepath.Clean(f.abs(strings.TrimPrefix(e.Target, p))) == filepath.Clean(abs) {
				ids = append(ids, e.ID)
			}
		}
	}
	return ids, nil
}

// Reload stops the running devices hosted from the package folder dir, so
// the next use builds them from the package as it now is.
func (f *Fleet) Reload(dir string) error {
	ids, err := f.UsersOf(dir)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if e, err := f.Entry(id); err == nil {
			f.forget(e.Target)
		}
	}
	return nil
}
