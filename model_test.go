package mhp_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/openmhp/mhp-go"
)

func TestErrorWireForm(t *testing.T) {
	e := mhp.Errorf(mhp.CodeLimitViolation, "x=200 above max 105").With("max", 105.0)
	e.TS = 1788991266.5
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"code":-32010,"message":"x=200 above max 105","data":{"max":105,"ts":1788991266.5}}`
	if string(b) != want {
		t.Fatalf("got %s\nwant %s", b, want)
	}
	var back mhp.Error
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.TS != e.TS || back.Code != e.Code || back.Data["max"] != 105.0 || back.Data["ts"] != nil {
		t.Fatalf("round trip %+v", back)
	}
	if got := e.Error(); !strings.HasPrefix(got, "LimitViolation (-32010)") {
		t.Fatalf("Error() = %q", got)
	}
}

func TestEveryCodeHasAName(t *testing.T) {
	for _, c := range mhp.Codes() {
		if strings.HasPrefix(c.String(), "Code(") {
			t.Errorf("code %d has no name", int(c))
		}
	}
}

func TestNegotiateVersion(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"2026-09-12", "2026-09-12"}, {"2026-10-01", "2026-09-12"}, {"2026-09-09", "2026-09-09"},
		{"2026-09-10", "2026-09-09"}, {"", "2026-09-12"},
	} {
		got, err := mhp.NegotiateVersion(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("NegotiateVersion(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	if _, err := mhp.NegotiateVersion("2025-01-01"); mhp.CodeOf(err) != mhp.CodeInvalidParams {
		t.Errorf("too old a version: %v", err)
	}
}

func testDescriptor() *mhp.Descriptor {
	return &mhp.Descriptor{
		DeviceInfo: mhp.DeviceInfo{ID: "tc-01", Class: "thermocycler", Make: "SimBio", Tags: []string{"pcr"}},
		Notes:      "bench 3",
		Signals:    []mhp.Signal{{Name: "block_temperature", Type: mhp.TypeNumber, Unit: "degC"}, {Name: "lid_closed", Type: mhp.TypeBoolean}},
		Settings:   []mhp.Setting{{Name: "target_temperature", Type: mhp.TypeNumber, Limits: mhp.Range(4, 105), Approval: mhp.ApprovalAuto}},
		Actions: []mhp.Action{{Name: "run_protocol", Duration: mhp.DurationLong, Interlocks: []string{"lid_closed"},
			Params:   mhp.Params{{Name: "cycles", Shape: &mhp.Shape{Type: mhp.TypeInteger}}, {Name: "steps", Shape: &mhp.Shape{Prose: "array of steps"}}},
			Examples: []map[string]any{{"cycles": 30.0}}}},
		Safety: mhp.Safety{EStop: true, WatchdogS: 11},
	}
}

func TestDescribeTiers(t *testing.T) {
	d := testDescriptor()
	card, err := mhp.Describe(d, mhp.StateIdle, mhp.DescribeRequest{Detail: mhp.DetailCard})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(card)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	if !reflect.DeepEqual(m["signals"], []any{"block_temperature", "lid_closed"}) || m["state"] != "idle" || m["notes"] != nil {
		t.Fatalf("card = %s", b)
	}
	sum, _ := mhp.Describe(d, mhp.StateBusy, mhp.DescribeRequest{Detail: mhp.DetailSummary})
	b, _ = json.Marshal(sum)
	if !strings.Contains(string(b), `"params":["cycles","steps"]`) || !strings.Contains(string(b), `"notes":"bench 3"`) || strings.Contains(string(b), "examples") {
		t.Fatalf("summary = %s", b)
	}
	full, _ := mhp.Describe(d, mhp.StateIdle, mhp.DescribeRequest{})
	b, _ = json.Marshal(full)
	var back mhp.Description
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.MHP != mhp.ProtocolVersion || back.Actions[0].Params[1].Shape.Prose != "array of steps" || back.Safety.WatchdogS != 11 {
		t.Fatalf("full round trip: %s -> %+v", b, back)
	}
	sel, err := mhp.Describe(d, mhp.StateIdle, mhp.DescribeRequest{Select: &mhp.Selection{Actions: []string{"run_protocol"}}})
	if err != nil || len(sel.Actions) != 1 || len(sel.Signals) != 0 || sel.Detail != mhp.DetailSelect {
		t.Fatalf("select = %+v, %v", sel, err)
	}
	if _, err := mhp.Describe(d, mhp.StateIdle, mhp.DescribeRequest{Select: &mhp.Selection{Settings: []string{"nope"}}}); mhp.CodeOf(err) != mhp.CodeUnknownName {
		t.Fatalf("unknown select name: %v", err)
	}
	if _, err := mhp.Describe(d, mhp.StateIdle, mhp.DescribeRequest{Detail: "everything"}); mhp.CodeOf(err) != mhp.CodeInvalidParams {
		t.Fatalf("unknown tier: %v", err)
	}
}

func TestParamsKeepOrderInYAML(t *testing.T) {
	src := "params:\n  zeta: number\n  alpha: {type: integer, limits: {min: 1, max: 3}}\n  prose: array of {temp, hold_s}\n"
	var a mhp.Action
	if err := yaml.Unmarshal([]byte(src), &a); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(a.Params.Names(), ","); got != "zeta,alpha,prose" {
		t.Fatalf("order %s", got)
	}
	if s, _ := a.Params.Get("alpha"); *s.Limits.Max != 3 {
		t.Fatalf("alpha %+v", s)
	}
	b, _ := json.Marshal(a.Params)
	if string(b) != `{"zeta":{"type":"number"},"alpha":{"type":"integer","limits":{"min":1,"max":3}},"prose":"array of {temp, hold_s}"}` {
		t.Fatalf("json %s", b)
	}
}

func TestNotificationJob(t *testing.T) {
	wire := mhp.Notification{Method: mhp.NotifyJobsFinished, Params: map[string]any{"job": map[string]any{"id": "job_1", "state": "done", "progress": 1.0}}}
	if j := wire.Job(); j == nil || j.ID != "job_1" || j.State != mhp.JobDone {
		t.Fatalf("decoded job %+v", j)
	}
	inproc := mhp.Notification{Method: mhp.NotifyJobsStarted, Params: map[string]any{"job": mhp.Job{ID: "job_2"}}}
	if j := inproc.Job(); j == nil || j.ID != "job_2" {
		t.Fatalf("in-process job %+v", j)
	}
	if j := (mhp.Notification{Method: mhp.NotifySafetyEStop, Params: map[string]any{"job": "x"}}).Job(); j != nil {
		t.Fatalf("a safety notification carried a job: %+v", j)
	}
}
