package main

import (
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/madsci"
	"github.com/openmhp/mhp-go/mqtt"
	"github.com/openmhp/mhp-go/opcua"
	"github.com/openmhp/mhp-go/pylabrobot"
	"github.com/openmhp/mhp-go/ros2"
	"github.com/openmhp/mhp-go/serial"
	"github.com/openmhp/mhp-go/sila2"
)

// newRegistry builds the registry of adapter config kinds behind
// `mhp serve plc.yaml`: one Register call per adapter package linked into
// the binary (the config file's `adapter:` field picks one).
func newRegistry() (*adapters.Registry, error) {
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
