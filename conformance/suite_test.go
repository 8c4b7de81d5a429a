package conformance

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/clock"
)

func TestChecksAreNamedAndUnique(t *testing.T) {
	names := Checks()
	if len(names) < 45 {
		t.Fatalf("the suite has %d checks, want at least 45", len(names))
	}
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			t.Fatalf("duplicate check %q", n)
		}
		seen[n] = true
		if i := strings.Index(n, "/"); i <= 0 || i == len(n)-1 || strings.ContainsAny(n, " \t") {
			t.Fatalf("check %q is not named group/behaviour", n)
		}
	}
	for k := range WireSkips() {
		if !seen[k] {
			t.Fatalf("WireSkips names %q, which is no check", k)
		}
	}
}

func TestSkipReason(t *testing.T) {
	skip := map[string]string{"values/nan": "no NaN", "watchdog/": "no clock"}
	for _, tc := range []struct {
		name string
		want string
		ok   bool
	}{
		{"values/nan", "no NaN", true},
		{"values/nan_extra", "", false},
		{"watchdog/silent_holder_estops_once", "no clock", true},
		{"watchdogs/x", "", false},
		{"read/all", "", false},
	} {
		got, ok := skipReason(skip, tc.name)
		if ok != tc.ok || got != tc.want {
			t.Errorf("skipReason(%q) = %q, %v; want %q, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

// TestMemoryDriverServesTheFixture: the reference mapping serves exactly
// FixtureDescriptor's items, then FixtureExtras, and its identity.
func TestMemoryDriverServesTheFixture(t *testing.T) {
	d, err := MemoryDriver(NewInstrument(), Options{WatchdogS: 3, Extras: true}, clock.NewManual(mhp.FromUnixSeconds(MemoryClockStart)))
	if err != nil {
		t.Fatal(err)
	}
	got, want := d.Descriptor(), WithExtras(FixtureDescriptor())
	js := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if js(got.Signals) != js(want.Signals) || js(got.Settings) != js(want.Settings) || js(got.Actions) != js(want.Actions) {
		t.Fatalf("MemoryDriver items differ from the fixture:\n got %s %s %s\nwant %s %s %s",
			js(got.Signals), js(got.Settings), js(got.Actions), js(want.Signals), js(want.Settings), js(want.Actions))
	}
	if got.DeviceInfo.ID != want.ID || !got.Safety.EStop || got.Safety.WatchdogS != 3 {
		t.Fatalf("identity/safety %+v %+v", got.DeviceInfo, got.Safety)
	}
}

// TestSuiteOnMemoryHarness runs the suite on the reference mapping from
// inside the package too, so `go test ./conformance/` exercises it.
func TestSuiteOnMemoryHarness(t *testing.T) {
	Run(t, MemoryHarness)
}
