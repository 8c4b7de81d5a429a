package onboard

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/devicepkg"
	"github.com/openmhp/mhp-go/host"
	"github.com/openmhp/mhp-go/serial"
)

func serialInterview(t *testing.T) (*Interview, *host.Fleet) {
	t.Helper()
	reg := adapters.NewRegistry()
	if err := serial.Register(reg); err != nil {
		t.Fatal(err)
	}
	f, err := host.Open(host.Config{Home: t.TempDir(), Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	iv, err := NewInterview(Config{Fleet: f})
	if err != nil {
		t.Fatal(err)
	}
	return iv, f
}

func raw(t *testing.T, m map[string]any) map[string]json.RawMessage {
	t.Helper()
	out := map[string]json.RawMessage{}
	for k, v := range m {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		out[k] = b
	}
	return out
}

func hotplate(stop map[string]any) map[string]any {
	return map[string]any{
		"kind": map[string]any{"kind": "serial", "port": "/dev/serial/by-id/usb-IKA-if00", "baud": 9600, "data_bits": 7, "parity": "even"},
		"purpose": map[string]any{"description": "Magnetic hotplate stirrer for beakers and flasks up to 300 degC and 1500 rpm.",
			"never_for": "unattended heating of flammable solvents"},
		"place":    map[string]any{"location": "fume hood 2", "tags": []string{"heating", "stirring"}, "class": "hotplate"},
		"physical": map[string]any{"hazards": "hot plate"},
		"signals": []any{map[string]any{"name": "plate_temperature", "type": "number", "unit": "degC", "query": "IN_PV_2",
			"reply": "^(?P<value>-?[0-9.]+) 2$"}},
		"settings": []any{map[string]any{"name": "target_temperature", "type": "number", "unit": "degC", "min": 20, "max": 300,
			"command": "OUT_SP_1 {value}"}},
		"actions":   []any{map[string]any{"name": "start_heating", "duration": "short", "commands": []string{"START_1"}}},
		"procedure": map[string]any{"steps": []string{"Set the target", "Start heating"}},
		"stop":      stop,
		"docs":      map[string]any{"references": map[string]string{"namur.md": "IN_PV_2 reads the plate."}},
	}
}

// A serial instrument's package: serial.yaml in the agreed shape, built by
// the serial adapter through the registry for validation; a heater with no
// stop command does not validate, and then nothing final is written.
func TestSerialPackageIsStagedAndValidated(t *testing.T) {
	iv, f := serialInterview(t)
	ctx := context.Background()
	rep, err := iv.Step(ctx, "", raw(t, map[string]any{"name": map[string]any{"make": "IKA", "model": "C-MAG HS 7"}}), false)
	if err != nil || rep.ID != "c-mag-hs-7-01" {
		t.Fatalf("start: %+v %v", rep, err)
	}
	rep, err = iv.Step(ctx, rep.ID, raw(t, hotplate(map[string]any{"estop": "switch it off at the mains"})), false)
	if err != nil || rep.Result == nil {
		t.Fatalf("all answers: %+v %v", rep, err)
	}
	if rep.Result.Valid || !strings.Contains(jsonOf(rep.Result.Problems), "estop") {
		t.Fatalf("a hotplate with no stop command validated: %+v", rep.Result)
	}
	dir, _ := f.DeviceDir(rep.ID)
	if _, err := os.Stat(filepath.Join(dir, devicepkg.CardFile)); !os.IsNotExist(err) {
		t.Fatal("a final file was written although validation failed")
	}
	if _, err := os.Stat(filepath.Join(dir, stagedDir, SerialFile)); err != nil {
		t.Fatalf("not staged: %v", err)
	}
	// The person gives the stop commands: the corrected answer finishes it.
	rep, err = iv.Step(ctx, rep.ID, raw(t, map[string]any{"stop": map[string]any{"estop": "STOP_1 over the line; the mains switch",
		"commands": []string{"STOP_1"}, "watchdog_s": 30, "watchdog": "OUT_WD1@{seconds}"}}), false)
	if err != nil || rep.Result == nil || !rep.Result.Valid {
		t.Fatalf("corrected: %+v %v", rep.Result, err)
	}
	if len(rep.Result.Card) < 3 {
		t.Fatalf("safety card %+v", rep.Result.Card)
	}
	for _, p := range rep.Result.Card {
		if !p.Held {
			t.Errorf("safety probe did not hold: %+v", p)
		}
	}
	cfg, _ := os.ReadFile(filepath.Join(dir, SerialFile))
	for _, want := range []string{"adapter: serial", "data_bits: 7", "parity: even", "OUT_SP_1 {value}", "approval: confirm", "OUT_WD1@{seconds}"} {
		if !strings.Contains(string(cfg), want) {
			t.Errorf("serial.yaml lacks %q:\n%s", want, cfg)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "references", "namur.md")); err != nil {
		t.Fatal(err)
	}
	if probs := devicepkg.Validate(dir); len(probs) > 0 {
		t.Fatalf("written package: %v", probs)
	}
}

// The adapter kind calls the Discover hook; without one it says so and
// asks for a config file.
func TestAdapterKindUsesTheDiscoverHook(t *testing.T) {
	iv, _ := serialInterview(t)
	ctx := context.Background()
	rep, _ := iv.Step(ctx, "", raw(t, map[string]any{"name": map[string]any{"nickname": "plc"}}), false)
	kind := map[string]any{"kind": map[string]any{"kind": "adapter", "layer": "opcua", "target": "opc.tcp://plc:4840"}}
	rep, err := iv.Step(ctx, rep.ID, raw(t, kind), false)
	if err != nil || !strings.Contains(strings.Join(rep.Refused["kind"], " "), "discovery isn't available") {
		t.Fatalf("without the hook: %+v %v", rep, err)
	}
	iv.cfg.Discover = func(_ context.Context, k, target string) ([]byte, string, error) {
		return []byte("adapter: " + k + "\n"), "2 variables at " + target, nil
	}
	rep, err = iv.Step(ctx, rep.ID, raw(t, kind), false)
	if err != nil || len(rep.Refused) > 0 || !strings.Contains(rep.Note, "2 variables at opc.tcp://plc:4840") {
		t.Fatalf("with the hook: %+v %v", rep, err)
	}
}

// A package write never leaves the package: not by "..", an absolute path,
// a dot-file, nor a symlink inside it that points out.
func TestWriteStaysInsideThePackage(t *testing.T) {
	iv, f := serialInterview(t)
	ctx := context.Background()
	res, err := iv.New(ctx, "scope")
	if err != nil || res.ID != "scope-01" {
		t.Fatalf("new: %+v %v", res, err)
	}
	dir, _ := f.DeviceDir(res.ID)
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dir, "references")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"../x.md", "/tmp/x.md", ".onboarding.json", "references/x.md", `a\b.md`} {
		if _, err := iv.WriteFile(ctx, res.ID, p, []byte("x"), false); err == nil {
			t.Errorf("write to %q accepted", p)
		}
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Fatalf("a write left the package: %v", entries)
	}
	if _, err := iv.WriteFile(ctx, res.ID, "notes.md", make([]byte, MaxFileBytes+1), false); err == nil {
		t.Fatal("an oversized file was written")
	}
	if r, err := iv.WriteFile(ctx, res.ID, "notes.md", []byte("fine"), false); err != nil || r.Files["notes.md"] != 4 {
		t.Fatalf("a plain write: %+v %v", r, err)
	}
}
