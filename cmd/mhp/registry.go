package main

import (
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/cmd/internal/linked"
)

// newRegistry builds the registry of adapter config kinds behind
// `mhp serve plc.yaml` (linked.Registry: every adapter in the binary).
func newRegistry() (*adapters.Registry, error) { return linked.Registry() }
