package sim

import (
	"context"
	"fmt"
	"strings"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
)

// Drivers are the names device packages use for the simulated devices
// (DEVICE.md `driver:`).
const (
	DriverThermocycler = "sim:thermocycler"
	DriverArm          = "sim:arm"
)

// Cell is the demo cell: a thermocycler and a plate arm sharing one clock,
// with the arm refusing to reach into the thermocycler while its lid is
// closed (the cell-level hand-off check).
type Cell struct {
	Thermocycler *ThermocyclerSim
	Arm          *ArmSim
}

// NewCell builds both devices with the same options (ids from the options
// are ignored: each takes its default id unless a package renames it).
func NewCell(opts Options) *Cell {
	o := opts
	o.ID = ""
	tc := NewThermocycler(o)
	arm := NewArm(ArmOptions{Options: o, Guard: func(_ context.Context, action, loc string) error {
		if loc == "thermocycler" && tc.LidClosed() {
			return mhp.Errorf(mhp.CodeInterlockOpen, "%s: the thermocycler's lid is closed; open it before the arm reaches in", action).
				With("interlock", "thermocycler.lid_closed").With("gate", "interlocks")
		}
		return nil
	}})
	return &Cell{Thermocycler: tc, Arm: arm}
}

// Config returns the bindings the cell has for a driver name.
func (c *Cell) Config(driver string) (binding.Config, error) {
	switch driver {
	case DriverThermocycler:
		return c.Thermocycler.Config(), nil
	case DriverArm:
		return c.Arm.Config(), nil
	}
	return binding.Config{}, fmt.Errorf("unknown simulated driver %q (have %s, %s)", driver, DriverThermocycler, DriverArm)
}

// Config returns a fresh, standalone simulated device for a driver name.
func Config(driver string, opts Options) (binding.Config, error) {
	switch driver {
	case DriverThermocycler:
		return Thermocycler(opts), nil
	case DriverArm:
		return Arm(ArmOptions{Options: opts}), nil
	}
	return binding.Config{}, fmt.Errorf("unknown simulated driver %q (have %s, %s)", driver, DriverThermocycler, DriverArm)
}

// IsDriver reports whether a driver name is a simulated device.
func IsDriver(name string) bool { return strings.HasPrefix(name, "sim:") }
