package binding_test

import (
	"testing"

	"github.com/openmhp/mhp-go/conformance"
)

// TestConformance runs the whole behavioural suite against the in-memory
// reference mapping of the conformance Instrument onto bindings.
func TestConformance(t *testing.T) {
	conformance.Run(t, conformance.MemoryHarness)
}
