package mhp_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/openmhp/mhp-go"
)

// TestSpecWriteAnswerReadsApplied: §5.4's write answer {ok, name, value}
// (the reference's) is an applied write; explicit applied/status are kept.
func TestSpecWriteAnswerReadsApplied(t *testing.T) {
	cases := []struct {
		in      string
		applied bool
		status  string
	}{
		{`{"ok":true,"name":"target_temperature","value":95}`, true, mhp.WriteApplied},
		{`{"ok":true,"name":"t","value":1,"applied":false,"status":"sent"}`, false, mhp.WriteSent},
		{`{"ok":true,"name":"t","value":1,"status":"sent"}`, false, mhp.WriteSent},
		{`{"ok":true,"name":"t","value":1,"applied":true}`, true, ""},
		{`{"ok":true,"dryRun":true,"wouldWrite":1}`, false, ""},
	}
	for _, c := range cases {
		var w mhp.WriteResult
		if err := json.Unmarshal([]byte(c.in), &w); err != nil {
			t.Fatal(err)
		}
		if w.Applied != c.applied || w.Status != c.status {
			t.Errorf("%s read as applied %v status %q, want %v %q", c.in, w.Applied, w.Status, c.applied, c.status)
		}
	}
}

// TestResetVerifiedTextKept: the reference's textual verified survives a
// round trip.
func TestResetVerifiedTextKept(t *testing.T) {
	var r mhp.ResetResult
	if err := json.Unmarshal([]byte(`{"state":"idle","verified":"all signals readable"}`), &r); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(r)
	if !r.Verified || !strings.Contains(string(b), `"verified":"all signals readable"`) {
		t.Fatalf("read %+v, wrote %s", r, b)
	}
	b, _ = json.Marshal(mhp.ResetResult{State: mhp.StateIdle, Verified: true})
	if string(b) != `{"state":"idle","verified":true}` {
		t.Fatalf("our own reset answer is %s", b)
	}
}
