package ros2

import (
	"context"
	"fmt"

	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/binding"
)

// Kind is the `adapter:` value of a ROS config file.
const Kind = "ros2"

// Load decodes an `adapter: ros2` config file strictly (an unknown field is
// an error naming its line; an `adapter:` other than [Kind] is refused) and
// validates it. A ROS config names no files, so nothing is resolved against
// the file's folder.
func Load(src adapters.Source) (Config, error) {
	var cfg Config
	if err := src.Decode(&cfg); err != nil {
		return Config{}, err
	}
	if cfg.Adapter != "" && cfg.Adapter != Kind {
		return Config{}, fmt.Errorf("%s: adapter is %q, not %q", src.Path, cfg.Adapter, Kind)
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// Register adds the "ros2" kind to r: `mhp serve robot.yaml` with
// `adapter: ros2` builds the robot's driver with [Load] then [New], the
// file's [adapters.Source.Refine] applied.
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
