package mcpbridge_test

import (
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/openmhp/mhp-go/directory"
)

// TestFindSaysSharedFieldsOnce: mhp_find hands the model what every result
// shares once, under common, and each result's own fields; decoded, every
// result has all its fields back.
func TestFindSaysSharedFieldsOnce(t *testing.T) {
	l := newLab(t, 3, new(atomic.Int32))
	cs := connect(t, l, nil)
	_, body := call(t, cs, "mhp_find", map[string]any{"query": "thermocycler", "state": "idle", "limit": 3})
	common, _ := body["common"].(map[string]any)
	if common["class"] != "thermocycler" || common["state"] != "idle" {
		t.Fatalf("common %v: want the shared class and state", body["common"])
	}
	rs, _ := body["results"].([]any)
	if len(rs) != 3 {
		t.Fatalf("results %v", body["results"])
	}
	for _, r := range rs {
		m, _ := r.(map[string]any)
		if m["id"] == nil || m["target"] == nil || m["class"] != nil {
			t.Fatalf("a result %v: want its own id and target, not the shared class", m)
		}
	}
	b, _ := json.Marshal(body)
	got, err := directory.DecodeFound(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("decoded %+v", got)
	}
	for _, r := range got {
		if r.Class != "thermocycler" || r.State != "idle" || r.Target != "mem:"+r.ID || len(r.Actions) != 1 || r.Score <= 0 {
			t.Fatalf("a decoded result lost a field: %+v", r)
		}
	}
}
