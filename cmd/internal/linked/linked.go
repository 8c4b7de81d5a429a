// Package linked is what the mhp and mhp-mcp binaries link in: the adapter
// registry (one Register call per adapter package) and the host's fleet
// over it, so both commands host the same device packages the same way.
package linked

import (
	"log/slog"

	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/client"
	"github.com/openmhp/mhp-go/examples/sim"
	"github.com/openmhp/mhp-go/host"
	"github.com/openmhp/mhp-go/madsci"
	"github.com/openmhp/mhp-go/mqtt"
	"github.com/openmhp/mhp-go/onboard"
	"github.com/openmhp/mhp-go/opcua"
	"github.com/openmhp/mhp-go/pylabrobot"
	"github.com/openmhp/mhp-go/ros2"
	"github.com/openmhp/mhp-go/serial"
	"github.com/openmhp/mhp-go/sila2"
)

// Registry builds the registry of adapter config kinds: one Register call
// per adapter package linked into the binaries (a config file's `adapter:`
// field picks one).
func Registry() (*adapters.Registry, error) {
	r := adapters.NewRegistry()
	for _, register := range []func(*adapters.Registry) error{
		opcua.Register, sila2.Register, ros2.Register, madsci.Register, pylabrobot.Register, mqtt.Register,
		serial.Register,
	} {
		if err := register(r); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Fleet opens the host's fleet in home ("" for $MHP_HOME or ~/.mhp) with
// every linked adapter and driver kind. Every hosted device is wrapped as
// `mhp serve` wraps its device (host.Wrap): guard, evidence in the
// fleet's shared log in guard.EvidenceDir (default HOME/evidence), and its
// package's saved methods.
func Fleet(home string, copts client.Options, simOpts sim.Options, guard host.GuardOptions, log *slog.Logger) (*host.Fleet, error) {
	reg, err := Registry()
	if err != nil {
		return nil, err
	}
	return host.Open(host.Config{Home: home, Registry: reg, Client: copts, Sim: simOpts, Guard: guard, Logger: log})
}

// Interview is the onboarding interview over f; its "ecosystem adapter"
// kind discovers the device with the linked adapters' discovery.
func Interview(f *host.Fleet) (*onboard.Interview, error) {
	reg, err := Registry()
	if err != nil {
		return nil, err
	}
	return onboard.NewInterview(onboard.Config{Fleet: f, Discover: reg.DiscoverConfig})
}
