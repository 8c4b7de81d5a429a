package ros2

import (
	"context"

	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/binding"
)

// Kind is the `adapter:` value of a ROS config file.
const Kind = "ros2"

// Register adds the "ros2" kind to r: `mhp serve robot.yaml` with
// `adapter: ros2` builds the robot's driver from a Config.
func Register(r *adapters.Registry) error {
	return r.Register(Kind, Factory)
}

// Factory builds an unstarted driver from an `adapter: ros2` config file
// (decoded strictly: an unknown field is an error naming its line).
func Factory(ctx context.Context, src adapters.Source) (*binding.Driver, error) {
	var cfg Config
	if err := src.Decode(&cfg); err != nil {
		return nil, err
	}
	a, bc, err := newAdapter(cfg, Options{})
	if err != nil {
		return nil, err
	}
	d, err := src.NewDriver(bc)
	if err != nil {
		return nil, err
	}
	a.bind(d)
	return d, nil
}
