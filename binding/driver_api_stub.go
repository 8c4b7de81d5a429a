package binding

import (
	"context"

	"github.com/openmhp/mhp-go"
)

// Driver is the BoundDriver. (Implementation lands in driver.go.)
type Driver struct {
	cfg Config
}

// New validates cfg and builds the driver.
func New(cfg Config) (*Driver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Driver{cfg: cfg.withDefaults()}, nil
}

// Start runs the Setup hook.
func (d *Driver) Start(ctx context.Context) error { return nil }

// Close stops the driver.
func (d *Driver) Close() error { return nil }

// PublishSignal records a pushed sample.
func (d *Driver) PublishSignal(name string, s Sample) {}

// Descriptor returns the generated descriptor.
func (d *Driver) Descriptor() mhp.Descriptor { return mhp.Descriptor{} }

func (d *Driver) jobProgress(id string, fraction float64, extra map[string]any) {}
