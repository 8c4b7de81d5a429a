package devicepkg

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"unicode/utf8"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
)

// Device is a driver served from a device package: the *binding.Driver with
// the package's files as resources (mhp.ResourceProvider) and listed in the
// descriptor.
type Device struct {
	*binding.Driver
	pkg      *Package
	operator mhp.OperatorExtension
}

var _ mhp.Device = (*Device)(nil)
var _ mhp.ResourceProvider = (*Device)(nil)

// NewDevice wraps a driver built from pkg.
func NewDevice(drv *binding.Driver, pkg *Package) *Device { return &Device{Driver: drv, pkg: pkg} }

// Build merges pkg over cfg, builds the driver and wraps it. The caller
// Starts and Closes the result.
func Build(pkg *Package, cfg binding.Config) (*Device, error) {
	if err := pkg.Apply(&cfg); err != nil {
		return nil, err
	}
	drv, err := binding.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("device package %s: %w", pkg.Card.ID, err)
	}
	return NewDevice(drv, pkg), nil
}

// WithOperator attaches operator-only wire methods to the device (the
// operator/answer methods of a `driver: manual` package) and returns it.
func (d *Device) WithOperator(x mhp.OperatorExtension) *Device { d.operator = x; return d }

// OperatorWireMethods implements [mhp.OperatorExtension]: those of the
// attached operator, if any.
func (d *Device) OperatorWireMethods() map[string]mhp.WireMethod {
	if d.operator == nil {
		return nil
	}
	return d.operator.OperatorWireMethods()
}

// Package is the device's package.
func (d *Device) Package() *Package { return d.pkg }

// Descriptor returns the driver's descriptor with the package's resources.
func (d *Device) Descriptor() mhp.Descriptor {
	desc := d.Driver.Descriptor()
	desc.Resources = d.pkg.Resources()
	return desc
}

// Describe implements mhp.Device, adding the resource list to the summary
// and full tiers.
func (d *Device) Describe(ctx context.Context, req mhp.DescribeRequest) (*mhp.Description, error) {
	out, err := d.Driver.Describe(ctx, req)
	if err != nil {
		return nil, err
	}
	if out.Detail == mhp.DetailSummary || out.Detail == mhp.DetailFull {
		out.Resources = d.pkg.Resources()
	}
	return out, nil
}

// ListResources implements mhp.ResourceProvider: every file of the package
// except DEVICE.md, relative, slash-separated, sorted.
func (d *Device) ListResources(ctx context.Context) ([]string, error) {
	return d.pkg.Resources(), nil
}

// ReadResource implements mhp.ResourceProvider: a listed text file's
// contents, capped at MaxResourceBytes (Truncated is then true). A path that
// is absolute, climbs with "..", or otherwise leaves the package is refused
// with InvalidParams; a path inside the package that is not a listed file
// (DEVICE.md, a folder, a missing file) is UnknownName; a binary file is
// NotSupported.
func (d *Device) ReadResource(ctx context.Context, p string) (*mhp.Resource, error) {
	return d.pkg.ReadResource(p)
}

// ReadResource reads a package file as a resource (see Device.ReadResource).
func (p *Package) ReadResource(name string) (*mhp.Resource, error) {
	clean := strings.TrimPrefix(name, "./")
	if strings.ContainsRune(clean, '\\') || !fs.ValidPath(clean) || clean == "." {
		return nil, mhp.Errorf(mhp.CodeInvalidParams, "resources/read: path %q is outside the package (relative paths without \"..\" only)", name).
			With("field", "path").With("reason", "outside_package")
	}
	listed := false
	for _, r := range p.resources {
		if r == clean {
			listed = true
			break
		}
	}
	if !listed {
		return nil, mhp.Errorf(mhp.CodeUnknownName, "resources/read: no resource %q (resources/list names them)", name).
			With("kind", "resource").With("name", name)
	}
	buf, err := p.readResourceFile(clean)
	if err != nil {
		// Listed at load, gone or redirected since: a symlink swapped in that
		// leaves the package fails here, inside os.Root; a FIFO or a folder
		// swapped in is refused before it is opened (or, in a race, before
		// it is read).
		if errors.Is(err, fs.ErrNotExist) {
			return nil, mhp.Errorf(mhp.CodeUnknownName, "resources/read: %q no longer exists", name).
				With("kind", "resource").With("name", name)
		}
		var nr *notRegularError
		if errors.As(err, &nr) {
			return nil, mhp.Errorf(mhp.CodeUnknownName, "resources/read: %s", nr.Error()).With("kind", "resource").With("name", name)
		}
		return nil, mhp.Errorf(mhp.CodeInvalidParams, "resources/read: %q cannot be read inside the package: %v", name, err).
			With("field", "path").With("reason", "outside_package")
	}
	truncated := len(buf) > MaxResourceBytes
	if truncated {
		buf = buf[:MaxResourceBytes]
		// Cut at a rune boundary so the text stays valid UTF-8.
		for i := 0; i < utf8.UTFMax-1 && len(buf) > 0 && !utf8.Valid(buf); i++ {
			buf = buf[:len(buf)-1]
		}
	}
	if !utf8.Valid(buf) || strings.ContainsRune(string(buf), 0) {
		return nil, mhp.Errorf(mhp.CodeNotSupported, "resources/read: %q is not a UTF-8 text file", name).With("name", name)
	}
	return &mhp.Resource{Path: clean, Text: string(buf), Truncated: truncated}, nil
}
