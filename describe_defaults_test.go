package mhp_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/openmhp/mhp-go"
)

// TestDescribeLeavesOutWhatTheAgentAlreadyHas: summary and select leave out
// approval auto (what an item without one has) and select the identity the
// card gave; full keeps both. Read back, every tier says the same approvals.
func TestDescribeLeavesOutWhatTheAgentAlreadyHas(t *testing.T) {
	d := &mhp.Descriptor{DeviceInfo: mhp.DeviceInfo{ID: "tc-1", Class: "thermocycler", Make: "SimBio", Model: "TC-96", Location: "bay 3"},
		Settings: []mhp.Setting{{Name: "target", Type: mhp.TypeNumber, Limits: mhp.Range(4, 105), Approval: mhp.ApprovalAuto},
			{Name: "lid", Type: mhp.TypeBoolean, Approval: mhp.ApprovalForbid}},
		Actions: []mhp.Action{{Name: "run", Duration: mhp.DurationLong, Approval: mhp.ApprovalAuto},
			{Name: "open_lid", Duration: mhp.DurationShort, Approval: mhp.ApprovalConfirm}},
		Safety: mhp.Safety{EStop: true}}
	sel := &mhp.Selection{Settings: []string{"target", "lid"}, Actions: []string{"run", "open_lid"}}
	for _, c := range []struct {
		name     string
		req      mhp.DescribeRequest
		auto     bool     // "approval":"auto" on the wire
		absent   []string // top-level keys left out
		present  []string
		approval bool // the decoded items carry approvals (not bare names)
	}{
		{"card", mhp.DescribeRequest{Detail: mhp.DetailCard}, false, []string{"safety"}, []string{"class", "make", "model", "location"}, false},
		{"summary", mhp.DescribeRequest{Detail: mhp.DetailSummary}, false, nil, []string{"class", "make", "model", "location", "safety"}, true},
		{"select", mhp.DescribeRequest{Select: sel}, false, []string{"class", "make", "model", "location", "safety"}, []string{"id", "state", "detail"}, true},
		{"full", mhp.DescribeRequest{Detail: mhp.DetailFull}, true, nil, []string{"class", "make", "model", "location", "safety"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := mhp.Describe(d, mhp.StateIdle, c.req)
			if err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(out)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(string(b), `"approval":"auto"`); got != c.auto {
				t.Errorf(`"approval":"auto" on the wire: %v, want %v: %s`, got, c.auto, b)
			}
			var m map[string]any
			_ = json.Unmarshal(b, &m)
			for _, k := range c.absent {
				if _, ok := m[k]; ok {
					t.Errorf("%s carries %q: %s", c.name, k, b)
				}
			}
			for _, k := range c.present {
				if _, ok := m[k]; !ok {
					t.Errorf("%s lacks %q: %s", c.name, k, b)
				}
			}
			var back mhp.Description
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			want := map[string]mhp.Approval{"target": mhp.ApprovalAuto, "lid": mhp.ApprovalForbid, "run": mhp.ApprovalAuto, "open_lid": mhp.ApprovalConfirm}
			if !c.approval { // a card names items; it says nothing of their approval
				want = map[string]mhp.Approval{"target": "", "lid": "", "run": "", "open_lid": ""}
			}
			got := map[string]mhp.Approval{}
			for _, s := range back.Settings {
				got[s.Name] = s.Approval
			}
			for _, a := range back.Actions {
				got[a.Name] = a.Approval
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s read back: %s approval %q, want %q", c.name, k, got[k], v)
				}
			}
		})
	}
}
