package conformance_test

import (
	"flag"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/openmhp/mhp-go/conformance"
)

// The suite run on the package's own in-memory device. A driver's test does
// the same with its own harness: func TestConformance(t *testing.T) {
// conformance.Run(t, harness) }. Here testing.RunTests stands in for go test.
func ExampleRun() {
	var passed, checks atomic.Int64
	harness := func(t *testing.T, opt conformance.Options) *conformance.Fixture {
		checks.Add(1)
		t.Cleanup(func() {
			if !t.Failed() && !t.Skipped() {
				passed.Add(1)
			}
		})
		return conformance.MemoryHarness(t, opt)
	}
	all := func(pattern, name string) (bool, error) { return true, nil }
	v := flag.Lookup("test.v") // keep go test -v from printing the subtests into the output
	defer v.Value.Set(v.Value.String())
	_ = v.Value.Set("false")
	ok := testing.RunTests(all, []testing.InternalTest{{
		Name: "TestConformance",
		F:    func(t *testing.T) { conformance.Run(t, harness) },
	}})
	fmt.Println("ok:", ok, "- every check passed:", passed.Load() == checks.Load(), checks.Load() == int64(len(conformance.Checks())))
	// Output:
	// ok: true - every check passed: true true
}
