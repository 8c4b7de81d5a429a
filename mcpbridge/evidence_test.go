package mcpbridge_test

import (
	"context"
	"testing"

	"github.com/openmhp/mhp-go/host"
)

// TestFleetEvidenceShowsOnlyTheDevice: two fleet-hosted devices record into
// one shared log; mhp_evidence of each gives the log's head and only that
// device's receipts, its latest ones first page included (the log's seqs
// count both devices' receipts, so a page chosen by seq would show the
// other device's or none).
func TestFleetEvidenceShowsOnlyTheDevice(t *testing.T) {
	b, f := fleetBridge(t)
	ctx := context.Background()
	var ids []string
	for _, spec := range []string{"sim:thermocycler", "sim:arm"} {
		e, err := f.Prepare(ctx, spec, host.AddOptions{})
		if err == nil {
			_, err = f.Commit(e)
		}
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, e.ID)
	}
	cs := session(t, b, nil)
	for i := 0; i < 4; i++ {
		if res, body := mustCall(t, cs, "mhp_write", map[string]any{"device": ids[0], "name": "target_temperature", "value": 40 + i}); res.IsError {
			t.Fatalf("write: %v", body)
		}
	}
	for i := 0; i < 12; i++ { // the arm's receipts are the log's newest
		if res, body := mustCall(t, cs, "mhp_write", map[string]any{"device": ids[1], "name": "speed", "value": 10 + i}); res.IsError {
			t.Fatalf("arm write: %v", body)
		}
	}
	res, body := mustCall(t, cs, "mhp_evidence", map[string]any{"device": ids[0]})
	if res.IsError {
		t.Fatalf("evidence: %v", body)
	}
	got := entries(body)
	writes := 0
	for _, e := range got {
		if e["device"] != ids[0] {
			t.Fatalf("%s's evidence shows a receipt of %v: %v", ids[0], e["device"], body)
		}
		if e["method"] == "settings/write" {
			writes++
		}
	}
	if writes != 4 {
		t.Fatalf("%s's latest receipts hold %d of its 4 writes: %v", ids[0], writes, body)
	}
	head, _ := body["head"].(map[string]any)
	if head["log"] == nil || head["log"] == "" {
		t.Fatalf("head %v, want the shared log's", head)
	}
}
