package host

import (
	"context"
	"fmt"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/devicepkg"
	"github.com/openmhp/mhp-go/examples/sim"
	"github.com/openmhp/mhp-go/manual"
)

// OpenPackage is BuildPackage for serving: the caller Starts the result,
// then Closes it (not the package). A package on an adapter config is
// opened started (Start then does nothing), and one whose self-describing
// backend (sila2, madsci, pylabrobot) was never reached, with no
// descriptor cache, still serves: the package's identity and the link,
// every actuation refused not_started, until the backend first answers and
// its description, refined by the package, is adopted ([adapters.Pending]).
func OpenPackage(ctx context.Context, pkg *devicepkg.Package, cfg Config) (Device, error) {
	if d := pkg.Card.Driver; sim.IsDriver(d) || manual.IsDriver(d) {
		return BuildPackage(ctx, pkg, cfg)
	}
	file, err := adapterFile(pkg, cfg)
	if err != nil {
		return nil, err
	}
	ref := adapters.Refinement{Bindings: packageRefine(pkg, cfg), Identity: pkg.ApplyIdentity}
	dev, closeDev, err := cfg.Registry.OpenDeviceRefined(ctx, file, ref, cfg.Logger)
	if err != nil {
		return nil, err
	}
	switch d := dev.(type) {
	case *binding.Driver:
		return startedPackage{devicepkg.NewDevice(d, pkg)}, nil
	case *adapters.Pending:
		return &pendingPackage{Pending: d, pkg: pkg}, nil
	default:
		closeDev()
		return nil, fmt.Errorf("%s: the adapter served a %T", pkg.Card.ID, dev)
	}
}

// adapterFile is the package's adapter config file, with a registry to
// build it.
func adapterFile(pkg *devicepkg.Package, cfg Config) (string, error) {
	file, err := pkg.DriverFile() // inside the package, no symlink out
	if err != nil {
		return "", err
	}
	if cfg.Registry == nil {
		return "", fmt.Errorf("%s: driver %q is an adapter config, and no adapter registry is linked here", pkg.Card.ID, pkg.Card.Driver)
	}
	return file, nil
}

// packageRefine merges pkg over an adapter's generated bindings.
func packageRefine(pkg *devicepkg.Package, cfg Config) func(*binding.Config) error {
	return func(bc *binding.Config) error {
		if cfg.Logger != nil {
			bc.Logger = cfg.Logger
		}
		return pkg.Apply(bc)
	}
}

// startedPackage is a package's device whose driver was started when
// opened: Start does nothing.
type startedPackage struct{ *devicepkg.Device }

// Start implements Device: the driver is started already.
func (startedPackage) Start(context.Context) error { return nil }

// startedDriver is an adapter's driver started when opened.
type startedDriver struct{ *binding.Driver }

// Start implements Device: the driver is started already.
func (startedDriver) Start(context.Context) error { return nil }

// pendingPackage is a package's device on a backend never reached: the
// Pending device with the package's resources.
type pendingPackage struct {
	*adapters.Pending
	pkg *devicepkg.Package
}

var _ mhp.ResourceProvider = (*pendingPackage)(nil)

// Describe adds the package's resources to the summary and full tiers.
func (p *pendingPackage) Describe(ctx context.Context, req mhp.DescribeRequest) (*mhp.Description, error) {
	out, err := p.Pending.Describe(ctx, req)
	if err != nil {
		return nil, err
	}
	if out.Detail == mhp.DetailSummary || out.Detail == mhp.DetailFull {
		out.Resources = p.pkg.Resources()
	}
	return out, nil
}

// ListResources lists the package's files (as devicepkg.Device does).
func (p *pendingPackage) ListResources(ctx context.Context) ([]string, error) {
	return p.pkg.Resources(), nil
}

// ReadResource reads a package file (as devicepkg.Device does).
func (p *pendingPackage) ReadResource(ctx context.Context, name string) (*mhp.Resource, error) {
	return p.pkg.ReadResource(name)
}
