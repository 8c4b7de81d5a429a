package wire_test

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/openmhp/mhp-go/conformance/wire"
	"github.com/openmhp/mhp-go/conformance/wire/wiretest"
)

// TestActuateRestoresAWatchdogDevice: on the reference, a device with a
// watchdog loses its lease to the estop and refuses an unleased reset
// (lease_required); the --actuate checks take the lease to reset it, so the
// device is left idle.
func TestActuateRestoresAWatchdogDevice(t *testing.T) {
	ref := wiretest.New(wiretest.Options{WatchdogS: 30})
	hs := httptest.NewServer(ref.Handler())
	defer hs.Close()
	rep := run(t, hs.URL, wire.Options{Only: []string{"estop/"}, Actuate: true})
	for _, r := range rep.Results {
		if strings.Contains(r.Detail, "could not be reset") {
			t.Errorf("%s", r)
		}
	}
	if ref.EStops() != 2 || ref.State() != "idle" {
		t.Fatalf("estops %d, state %s: want 2 and reset to idle\n%s", ref.EStops(), ref.State(), dump(rep))
	}
}
