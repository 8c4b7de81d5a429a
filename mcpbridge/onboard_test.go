package mcpbridge_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/host"
	"github.com/openmhp/mhp-go/mcpbridge"
	"github.com/openmhp/mhp-go/onboard"
)

// onboardBridge is a bridge with the fleet and the interview over home (a
// new one is a restarted process over the same files).
func onboardBridge(t *testing.T, home string) *mcpbridge.Bridge {
	t.Helper()
	return onboardBridgeWith(t, home, mcpbridge.Config{})
}

// onboardBridgeWith is onboardBridge with cfg's other fields (a policy, an
// operator token).
func onboardBridgeWith(t *testing.T, home string, cfg mcpbridge.Config) *mcpbridge.Bridge {
	t.Helper()
	f, err := host.Open(host.Config{Home: home})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	iv, err := onboard.NewInterview(onboard.Config{Fleet: f})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Fleet, cfg.Onboard = f, iv
	b, err := mcpbridge.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func asks(body map[string]any) []string {
	var out []string
	qs, _ := body["ask"].([]any)
	for _, q := range qs {
		out = append(out, q.(map[string]any)["key"].(string))
	}
	return out
}

// The interview end to end through the MCP bridge: questions, refused
// answers, a crash and resume, the package written, validated, served, and
// a limit change on the live package refused without the person's yes.
func TestOnboardingInterview(t *testing.T) {
	home := t.TempDir()
	var yes atomic.Bool
	var asked atomic.Int32
	elicit := &mcp.ClientOptions{ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked.Add(1)
		if yes.Load() {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
		}
		return &mcp.ElicitResult{Action: "decline"}, nil
	}}
	cs := session(t, onboardBridge(t, home), elicit)
	step := func(cs *mcp.ClientSession, args map[string]any) map[string]any {
		t.Helper()
		args["op"] = "onboard"
		res, body := mustCall(t, cs, "mhp_lab", args)
		if res.IsError {
			t.Fatalf("onboard %v: %v", args, body)
		}
		return body
	}
	body := step(cs, map[string]any{})
	if got := asks(body); len(got) != 1 || got[0] != "name" {
		t.Fatalf("first question %v", body)
	}
	body = step(cs, map[string]any{"answers": map[string]any{"name": map[string]any{"make": "Hettich", "model": "EBA 20", "nickname": "Centrifuge"}}})
	if body["id"] != "centrifuge-01" || strings.Join(asks(body), ",") != "kind,purpose" {
		t.Fatalf("after the name: %v", body)
	}
	body = step(cs, map[string]any{"id": "centrifuge-01", "answers": map[string]any{
		"kind":    map[string]any{"kind": "bluetooth"},
		"purpose": map[string]any{"description": "Spins tubes.", "colour": "red"},
	}})
	ref, _ := body["refused"].(map[string]any)
	if ref["kind"] == nil || ref["purpose"] == nil || body["progress"] != "1/9 required answered" {
		t.Fatalf("bad answers taken: %v", body)
	}
	step(cs, map[string]any{"id": "centrifuge-01", "answers": map[string]any{
		"kind": map[string]any{"kind": "manual"},
		"purpose": map[string]any{"description": "Benchtop microcentrifuge for 1.5 and 2 ml tubes, up to 15000 rpm; pellets cells and DNA.",
			"never_for": "unbalanced loads or open tubes of pathogens"},
	}})

	// The process restarts: a new bridge over the same home resumes.
	cs = session(t, onboardBridge(t, home), elicit)
	body = step(cs, map[string]any{})
	if u, _ := body["unfinished"].([]any); len(u) != 1 || u[0] != "centrifuge-01" {
		t.Fatalf("unfinished after a restart: %v", body)
	}
	body = step(cs, map[string]any{"id": "centrifuge-01"})
	if body["progress"] != "3/9 required answered" || strings.Join(asks(body), ",") != "place,physical" {
		t.Fatalf("resumed: %v", body)
	}
	step(cs, map[string]any{"id": "centrifuge-01", "answers": map[string]any{
		"place": map[string]any{"location": "bench 2, next to the sink", "tags": []string{"spin", "tubes", "pellet"}, "class": "centrifuge"},
		"skip":  true,
	}})
	body = step(cs, map[string]any{"id": "centrifuge-01", "answers": map[string]any{
		"signals": []any{map[string]any{"name": "balanced", "type": "boolean"}, map[string]any{"name": "lid_closed", "type": "boolean"},
			map[string]any{"name": "speed", "type": "number", "unit": "rpm"}},
		"settings": []any{map[string]any{"name": "speed_rpm", "type": "number", "unit": "rpm", "min": 15000, "max": 100}},
		"actions": []any{map[string]any{"name": "spin", "duration": "long", "interlocks": []string{"speed"},
			"params": map[string]any{"duration_s": map[string]any{"type": "number", "unit": "s", "min": 1, "max": 3600}}}},
	}})
	ref, _ = body["refused"].(map[string]any)
	if ref["settings"] == nil || !strings.Contains(jsonOf(ref["settings"]), "above max") ||
		ref["actions"] == nil || !strings.Contains(jsonOf(ref["actions"]), "yes/no") {
		t.Fatalf("min > max and a numeric interlock must be refused: %v", body)
	}
	body = step(cs, map[string]any{"id": "centrifuge-01", "answers": map[string]any{
		"settings": []any{map[string]any{"name": "speed_rpm", "type": "number", "unit": "rpm", "min": 100, "max": 15000,
			"above_max": "the rotor fails"}},
		"actions": []any{map[string]any{"name": "spin", "duration": "long", "interlocks": []string{"balanced"},
			"params":  map[string]any{"duration_s": map[string]any{"type": "number", "unit": "s", "min": 1, "max": 3600}},
			"example": map[string]any{"duration_s": 60}, "preconditions": "the rotor is balanced and the lid closed"}},
		"procedure": map[string]any{"steps": []string{"Balance the tubes", "Close the lid", "Spin"}},
		"stop":      map[string]any{"estop": "Press the red STOP button and step back."},
	}})
	if strings.Join(asks(body), ",") != "docs" {
		t.Fatalf("only the optional docs should be left: %v", body)
	}
	body = step(cs, map[string]any{"id": "centrifuge-01", "answers": map[string]any{"skip": true}})
	res, _ := body["result"].(map[string]any)
	if res == nil || res["valid"] != true {
		t.Fatalf("finish: %v", body)
	}
	files, _ := res["files"].(map[string]any)
	for _, f := range []string{"DEVICE.md", "descriptor.yaml", "manual.yaml"} {
		if files[f] == nil {
			t.Errorf("%s not written: %v", f, files)
		}
	}
	if w := jsonOf(res["wrote"]); !strings.Contains(w, "setting speed_rpm: 100..15000 rpm, approval confirm") ||
		!strings.Contains(w, "only when balanced is true") {
		t.Fatalf("what it wrote: %s", w)
	}
	card, _ := res["safety_card"].([]any)
	if len(card) < 3 {
		t.Fatalf("safety card %v", card)
	}
	for _, p := range card {
		if p.(map[string]any)["held"] != true {
			t.Errorf("safety probe did not hold: %v", p)
		}
	}
	dir := filepath.Join(home, host.DevicesDir, "centrifuge-01")
	desc, _ := os.ReadFile(filepath.Join(dir, "descriptor.yaml"))
	if !strings.Contains(string(desc), "approval: confirm") {
		t.Fatalf("a setting with no approval said must be confirm:\n%s", desc)
	}

	// Added (hardware: the person confirms), it serves.
	yes.Store(true)
	if r, body := mustCall(t, cs, "mhp_lab", map[string]any{"op": "add", "target": "centrifuge-01"}); r.IsError {
		t.Fatalf("add: %v", body)
	}
	r, body := mustCall(t, cs, "mhp_describe", map[string]any{"device": "centrifuge-01", "select": map[string]any{"settings": []string{"speed_rpm"}}})
	if r.IsError || !strings.Contains(jsonOf(body), `"max":15000`) {
		t.Fatalf("the live package: %v", body)
	}

	// The agent widens a limit of the live package: the person says no.
	yes.Store(false)
	before := asked.Load()
	wider := strings.Replace(string(desc), "max: 15000", "max: 30000", 1)
	r, body = mustCall(t, cs, "mhp_lab", map[string]any{"op": "write", "id": "centrifuge-01", "path": "descriptor.yaml", "content": wider})
	if !r.IsError || errCode(body) != float64(mhp.CodeApprovalRequired) || asked.Load() != before+1 {
		t.Fatalf("a limit change on a live package without a yes: %v", body)
	}
	if now, _ := os.ReadFile(filepath.Join(dir, "descriptor.yaml")); string(now) != string(desc) {
		t.Fatal("the refused change was written")
	}
	// With the person's yes it is written, and the live device serves it.
	yes.Store(true)
	if r, body := mustCall(t, cs, "mhp_lab", map[string]any{"op": "write", "id": "centrifuge-01", "path": "descriptor.yaml", "content": wider}); r.IsError {
		t.Fatalf("a confirmed limit change: %v", body)
	}
	r, body = mustCall(t, cs, "mhp_describe", map[string]any{"device": "centrifuge-01", "select": map[string]any{"settings": []string{"speed_rpm"}}})
	if r.IsError || !strings.Contains(jsonOf(body), `"max":30000`) {
		t.Fatalf("the reloaded package: %v", body)
	}
	yes.Store(false)
	// A note-only change needs no one; escaping the package is refused.
	if r, body := mustCall(t, cs, "mhp_lab", map[string]any{"op": "write", "id": "centrifuge-01", "path": "references/notes.md", "content": "Rotor F-45."}); r.IsError {
		t.Fatalf("a reference file: %v", body)
	}
	for _, p := range []string{"../escape.md", "/etc/passwd", ".onboarding.json"} {
		if r, _ := mustCall(t, cs, "mhp_lab", map[string]any{"op": "write", "id": "centrifuge-01", "path": p, "content": "x"}); !r.IsError {
			t.Errorf("write to %s accepted", p)
		}
	}
	if r, body := mustCall(t, cs, "mhp_lab", map[string]any{"op": "validate", "id": "centrifuge-01"}); r.IsError || body["valid"] != true {
		t.Fatalf("validate: %v", body)
	}
	// A second unit of the same model gets its own id.
	body = step(cs, map[string]any{"answers": map[string]any{"name": map[string]any{"nickname": "centrifuge"}}})
	if body["id"] != "centrifuge-02" {
		t.Fatalf("second unit: %v", body["id"])
	}
}

// A manual package hosted by the fleet takes the operator's answers through
// mhp_operator: the operator's connection is in process, with the token.
func TestFleetHostedManualDeviceTakesOperatorAnswers(t *testing.T) {
	home := t.TempDir()
	f, err := host.Open(host.Config{Home: home})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	dir := filepath.Join(home, host.DevicesDir, "ph-meter-01")
	os.MkdirAll(dir, 0o700)
	os.WriteFile(filepath.Join(dir, "DEVICE.md"), []byte("---\nid: ph-meter-01\nclass: ph_meter\ndescription: A benchtop pH meter read by a person.\n"+
		"driver: manual\n---\n\n# ph-meter-01\n\nRead the display.\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "descriptor.yaml"), []byte("signals:\n  - {name: ph, type: number}\n"), 0o600)
	e, err := f.Prepare(context.Background(), "ph-meter-01", host.AddOptions{})
	if err == nil {
		_, err = f.Commit(e)
	}
	if err != nil {
		t.Fatal(err)
	}
	p := mcpbridge.Policy{Enabled: true, AllowHardware: true, OperatorTools: true}
	b, err := mcpbridge.New(mcpbridge.Config{Fleet: f, Policy: &p, OperatorToken: "operator-token-0123456789"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	cs := session(t, b, nil)
	if res, body := mustCall(t, cs, "mhp_operator", map[string]any{"device": "ph-meter-01", "op": "record", "signal": "ph", "value": 7.2}); res.IsError {
		t.Fatalf("record: %v", body)
	}
	res, body := mustCall(t, cs, "mhp_read", map[string]any{"device": "ph-meter-01", "names": []string{"ph"}})
	if res.IsError || !strings.Contains(jsonOf(body), "7.2") {
		t.Fatalf("read after the operator recorded: %v", body)
	}
}
