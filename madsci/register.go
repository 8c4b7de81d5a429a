package madsci

import (
	"context"

	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/binding"
)

// Register adds the "madsci" kind to r.
func Register(r *adapters.Registry) error {
	return r.Register(Kind, Factory)
}

// Factory builds a driver from a madsci config file. It reads the node's
// /info and /state; with the node down it serves link.descriptor_cache
// (unless link.fail_fast) and reconnects.
func Factory(ctx context.Context, src adapters.Source) (*binding.Driver, error) {
	cfg, err := Load(src)
	if err != nil {
		return nil, err
	}
	return New(ctx, cfg, Deps{NewDriver: src.NewDriver})
}

// Load decodes a config file strictly and resolves files_dir against the
// file's folder.
func Load(src adapters.Source) (Config, error) {
	var cfg Config
	if err := src.Decode(&cfg); err != nil {
		return Config{}, err
	}
	cfg.FilesDir = src.Resolve(cfg.FilesDir)
	cfg.Link.DescriptorCache = src.Resolve(cfg.Link.DescriptorCache)
	cfg.ResultsDir = src.Resolve(cfg.ResultsDir)
	return cfg, nil
}
