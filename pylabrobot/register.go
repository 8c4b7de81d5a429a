package pylabrobot

import (
	"context"

	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/binding"
)

// Register adds the "pylabrobot" kind ([Kind]) to r: a config file is read
// with [Load] and built with [New], its Refine (a device package's
// descriptor) applied to the generated bindings.
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

// Load reads a pylabrobot config file: it decodes it strictly (an unknown
// field is an error naming its line), resolves link.descriptor_cache
// against the file's folder, fills the defaults ([Config.Defaults]) and
// checks the result ([Config.Validate]).
func Load(src adapters.Source) (Config, error) {
	var cfg Config
	if err := src.Decode(&cfg); err != nil {
		return Config{}, err
	}
	cfg.Link.DescriptorCache = src.Resolve(cfg.Link.DescriptorCache)
	cfg = cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}
