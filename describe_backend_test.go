package mhp_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/openmhp/mhp-go"
)

// TestDescriptionCarriesBackend: device/describe (every tier) and /mhp.json
// carry the backend link, and it reads back. Before the fix MarshalJSON
// dropped it, so only ping showed it.
func TestDescriptionCarriesBackend(t *testing.T) {
	desc := mhp.Descriptor{DeviceInfo: mhp.DeviceInfo{ID: "plc-01"}}
	link := &mhp.BackendLink{Since: 1788991266.5, Error: "server not reachable"}
	for _, detail := range []string{mhp.DetailCard, mhp.DetailSummary, mhp.DetailFull} {
		d, err := mhp.Describe(&desc, mhp.StateIdle, mhp.DescribeRequest{Detail: detail})
		if err != nil {
			t.Fatal(err)
		}
		d.Backend = link
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), `"backend":{`) {
			t.Fatalf("%s tier %s has no backend", detail, b)
		}
		var back mhp.Description
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if back.Backend == nil || back.Backend.Error != link.Error || back.Backend.Connected {
			t.Fatalf("%s tier read back backend %+v", detail, back.Backend)
		}
	}
}
