package serial

import (
	"context"
	"fmt"

	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/binding"
)

// Kind is the config-file kind of this adapter (`adapter: serial`).
const Kind = "serial"

// Load reads an `adapter: serial` config file: strict YAML (an unknown key
// is an error naming it), the kind checked, [Config.Validate]; defaults are
// filled by New.
func Load(src adapters.Source) (Config, error) {
	var cfg Config
	if err := src.Decode(&cfg); err != nil {
		return Config{}, err
	}
	if cfg.Adapter != Kind {
		return Config{}, fmt.Errorf("%s: adapter is %q, not %q", src.Path, cfg.Adapter, Kind)
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, fmt.Errorf("%s: %w", src.Path, err)
	}
	return cfg, nil
}

// Register adds the "serial" kind to r: [Load] the file, then [New] with
// the file's [adapters.Source.Refine] and the real serial port.
func Register(r *adapters.Registry) error {
	if err := r.RegisterDiscovery(Kind, discoveryEntry); err != nil { // mhp init serial (discover.go)
		return err
	}
	return r.Register(Kind, func(ctx context.Context, src adapters.Source) (*binding.Driver, error) {
		cfg, err := Load(src)
		if err != nil {
			return nil, err
		}
		d, err := New(ctx, cfg, Options{Options: adapters.Options{Refine: src.Refine}})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", src.Path, err)
		}
		return d, nil
	})
}
