package pylabrobot

import (
	"context"

	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/binding"
)

// Register adds the "pylabrobot" kind to r.
func Register(r *adapters.Registry) error {
	return r.Register(Kind, Factory)
}

// Factory builds a driver from a pylabrobot config file; in bridge mode it
// reads the bridge's /describe, or with the bridge down serves
// link.descriptor_cache and reconnects.
func Factory(ctx context.Context, src adapters.Source) (*binding.Driver, error) {
	cfg, err := Load(src)
	if err != nil {
		return nil, err
	}
	bc, attach, err := build(ctx, cfg, Deps{})
	if err != nil {
		return nil, err
	}
	d, err := src.NewDriver(bc)
	if err != nil {
		return nil, err
	}
	attach(d)
	return d, nil
}

// Load decodes a config file strictly.
func Load(src adapters.Source) (Config, error) {
	var cfg Config
	if err := src.Decode(&cfg); err != nil {
		return Config{}, err
	}
	cfg.Link.DescriptorCache = src.Resolve(cfg.Link.DescriptorCache)
	return cfg, nil
}
