package madsci

import (
	"context"

	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/binding"
)

// Register adds the [Kind] "madsci" to r: a config file naming it is
// loaded with [Load] and built with [New], its [adapters.Source.Refine]
// as the Refine of [Options].
func Register(r *adapters.Registry) error {
	if err := r.RegisterDiscovery(Kind, discoveryEntry); err != nil { // mhp init (discover.go)
		return err
	}
	return r.Register(Kind, func(ctx context.Context, src adapters.Source) (*binding.Driver, error) {
		cfg, err := Load(src)
		if err != nil {
			return nil, err
		}
		return New(ctx, cfg, Options{Options: adapters.Options{Refine: src.Refine}})
	})
}

// Load decodes a config file strictly (an unknown key is an error naming
// its line), resolves files_dir, results_dir and link.descriptor_cache
// against the file's folder, fills the defaults ([Config.Defaults]) and
// validates the result ([Config.Validate]).
func Load(src adapters.Source) (Config, error) {
	var cfg Config
	if err := src.Decode(&cfg); err != nil {
		return Config{}, err
	}
	cfg.FilesDir = src.Resolve(cfg.FilesDir)
	cfg.Link.DescriptorCache = src.Resolve(cfg.Link.DescriptorCache)
	cfg.ResultsDir = src.Resolve(cfg.ResultsDir)
	cfg = cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}
