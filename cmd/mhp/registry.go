package main

import "github.com/openmhp/mhp-go/adapters"

// newRegistry builds the registry of adapter config kinds behind
// `mhp serve plc.yaml`: one Register call per adapter package linked into
// the binary. The adapter packages (opcua, sila2, ros2, madsci, pylabrobot,
// mqtt) are added here as they land, e.g.
//
//	if err := opcua.Register(r); err != nil {
//		return nil, err
//	}
func newRegistry() (*adapters.Registry, error) {
	r := adapters.NewRegistry()
	return r, nil
}
