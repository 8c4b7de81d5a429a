package mcpbridge_test

import (
	"net/http/httptest"
	"testing"

	"github.com/openmhp/mhp-go/conformance/wire/wiretest"
	"github.com/openmhp/mhp-go/mcpbridge"
)

// TestSpecWriteAnswerIsAppliedToTheModel: a device answering the spec's
// write shape {ok, name, value} (the reference's) is told to the model as
// applied, not "applied": false.
func TestSpecWriteAnswerIsAppliedToTheModel(t *testing.T) {
	ref := wiretest.New(wiretest.Options{})
	hs := httptest.NewServer(ref.Handler())
	t.Cleanup(hs.Close)
	b, err := mcpbridge.New(mcpbridge.Config{Finder: &mcpbridge.Named{Targets: map[string]string{"tc": hs.URL}, Simulated: map[string]bool{"tc": true}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	cs := session(t, b, nil)
	res, body := mustCall(t, cs, "mhp_write", map[string]any{"device": "tc", "name": "target_temperature", "value": 50})
	if res.IsError || body["applied"] != true || body["status"] != "applied" {
		t.Fatalf("the model was told %s", text(res))
	}
	if got := ref.Written(); len(got) != 1 {
		t.Fatalf("writes reaching the device: %v", got)
	}
}
