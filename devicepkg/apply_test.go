package devicepkg

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/examples/devices"
	"github.com/openmhp/mhp-go/examples/sim"
)

const card = "---\nid: tc-7\nclass: thermocycler\nlocation: bay 9\ndescription: Test thermocycler.\ndriver: sim:thermocycler\n---\nOperate carefully.\n"

func pkgFS(t *testing.T, descriptor string) *Package {
	t.Helper()
	fsys := fstest.MapFS{CardFile: {Data: []byte(card)}}
	if descriptor != "" {
		fsys[DescriptorFile] = &fstest.MapFile{Data: []byte(descriptor)}
	}
	p, err := LoadFS(fsys)
	if err != nil {
		t.Fatalf("LoadFS: %v", err)
	}
	return p
}

func TestApplyRefusesWhatABindingCannotHonour(t *testing.T) {
	cases := []struct {
		name, yaml string
		field      string // the problem's field
	}{
		{"unbound signal", "signals:\n  - name: door_open\n    type: boolean\n", "signals.door_open"},
		{"unbound setting", "settings:\n  - name: spin_speed\n", "settings.spin_speed"},
		{"unbound action", "actions:\n  - name: centrifuge\n", "actions.centrifuge"},
		{"unbound param", "actions:\n  - name: run_protocol\n    params:\n      volume: {type: number}\n", "actions.run_protocol.params.volume"},
		{"type contradicts", "settings:\n  - name: lid_heater\n    type: number\n", "settings.lid_heater.type"},
		{"unit contradicts", "signals:\n  - name: block_temperature\n    unit: degF\n", "signals.block_temperature.unit"},
		{"wider max", "settings:\n  - name: target_temperature\n    limits: {min: 4, max: 120}\n", "settings.target_temperature.limits"},
		{"wider min", "settings:\n  - name: target_temperature\n    limits: {min: 0}\n", "settings.target_temperature.limits"},
		{"min above max", "settings:\n  - name: target_temperature\n    limits: {min: 50, max: 40}\n", "settings.target_temperature.limits"},
		{"wider nested", "actions:\n  - name: run_protocol\n    params:\n      steps:\n        items:\n          properties:\n            temp: {limits: {max: 110}}\n", "actions.run_protocol.params.steps.items.temp.limits"},
		{"looser approval", "actions:\n  - name: open_lid\n    approval: auto\n", "actions.open_lid.approval"},
		{"unknown approval", "actions:\n  - name: open_lid\n    approval: maybe\n", "actions.open_lid.approval"},
		{"during_job on", "settings:\n  - name: target_temperature\n    during_job: true\n", "settings.target_temperature.during_job"},
		{"concurrent on", "actions:\n  - name: run_protocol\n    concurrent: true\n", "actions.run_protocol.concurrent"},
		{"interlock unknown", "actions:\n  - name: run_protocol\n    interlocks: [door_closed]\n", "actions.run_protocol.interlocks"},
		{"bad example", "actions:\n  - name: run_protocol\n    examples:\n      - {steps: [{temp: 200, hold_s: 1}], cycles: 1}\n", "actions.run_protocol.examples[0]"},
		{"example refused by narrowed limits", "actions:\n  - name: run_protocol\n    params:\n      cycles: {limits: {max: 10}}\n    examples:\n      - {steps: [{temp: 90, hold_s: 1}], cycles: 30}\n", "actions.run_protocol.examples[0]"},
		{"estop off", "safety:\n  estop: false\n", "safety.estop"},
		{"watchdog zero", "safety:\n  watchdog_s: 0\n", "safety.watchdog_s"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := pkgFS(t, c.yaml)
			cfg := sim.Thermocycler(sim.Options{})
			err := p.Apply(&cfg)
			probs, ok := err.(Problems)
			if !ok || len(probs) == 0 {
				t.Fatalf("Apply = %v, want Problems", err)
			}
			for _, pr := range probs {
				if pr.File == DescriptorFile && pr.Field == c.field && pr.Message != "" {
					if pr.Line == 0 {
						t.Errorf("problem has no line: %+v", pr)
					}
					return
				}
			}
			t.Fatalf("no problem on %s %s: %v", DescriptorFile, c.field, err)
		})
	}
}

func TestApplyMergesRefinements(t *testing.T) {
	p := pkgFS(t, `
device: {notes: Bench 9.}
physical: {mass_kg: 10}
signals:
  - {name: block_temperature, notes: Centre of the block., required_for_recovery: true}
settings:
  - name: target_temperature
    limits: {min: 10, max: 95}
    approval: confirm
    notes: Lab policy.
  - name: lid_heater
    during_job: false
actions:
  - name: run_protocol
    interlocks: [lid_safe_to_open]
    cancellable: false
    params:
      steps:
        items:
          properties:
            temp: {limits: {max: 99}, notes: Step temperature.}
      cycles: {limits: {max: 40}}
    examples:
      - {steps: [{temp: 95, hold_s: 30}], cycles: 30}
  - name: close_lid
    approval: forbid
safety:
  watchdog_s: 20
  interlocks: [lid_closed]
`)
	cfg := sim.Thermocycler(sim.Options{})
	dev, err := Build(p, cfg)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	t.Cleanup(func() { _ = dev.Close() })
	d := dev.Descriptor()
	if d.ID != "tc-7" || d.Location != "bay 9" || d.Instructions != "Operate carefully." || d.Notes != "Bench 9." || d.Physical.MassKg != 10 {
		t.Fatalf("identity/notes not merged: %+v", d.DeviceInfo)
	}
	bt, _ := d.Signal("block_temperature")
	tt, _ := d.Setting("target_temperature")
	lh, _ := d.Setting("lid_heater")
	rp, _ := d.Action("run_protocol")
	cl, _ := d.Action("close_lid")
	steps, _ := rp.Params.Get("steps")
	cycles, _ := rp.Params.Get("cycles")
	checks := []struct {
		what string
		ok   bool
	}{
		{"signal notes", bt.Notes == "Centre of the block." && bt.Unit == "degC"},
		{"required for recovery", bt.RequiredForRecovery && dev.RecoverySignals()["block_temperature"]},
		{"narrowed limits", *tt.Limits.Min == 10 && *tt.Limits.Max == 95},
		{"stricter approval", tt.Approval == mhp.ApprovalConfirm && cl.Approval == mhp.ApprovalForbid},
		{"setting notes", tt.Notes == "Lab policy."},
		{"during_job off", !lh.DuringJob},
		{"interlocks added", strings.Join(rp.Interlocks, ",") == "lid_closed,lid_safe_to_open"},
		{"cancellable off", !rp.Cancellable},
		{"nested limits", *steps.Items.Properties["temp"].Limits.Max == 99 && *steps.Items.Properties["temp"].Limits.Min == 4},
		{"nested notes", steps.Items.Properties["temp"].Notes == "Step temperature."},
		{"param limits", *cycles.Limits.Max == 40 && *cycles.Limits.Min == 1},
		{"examples", len(rp.Examples) == 1},
		{"watchdog", d.Safety.WatchdogS == 20 && d.Safety.EStop},
		{"safety interlocks", strings.Join(d.Safety.Interlocks, ",") == "lid_closed"},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s not merged", c.what)
		}
	}
	// The narrowed limits are enforced at the gates.
	_, err = dev.Write(context.Background(), mhp.WriteRequest{Name: "target_temperature", Value: 100, Approved: true, DryRun: true})
	if mhp.CodeOf(err) != mhp.CodeLimitViolation {
		t.Fatalf("write 100 over the package's max 95: %v", err)
	}
	res, err := dev.Write(context.Background(), mhp.WriteRequest{Name: "target_temperature", Value: 50, DryRun: true})
	if err != nil || !res.DryRun || res.Notes == nil || !res.Notes.NeedsApproval {
		t.Fatalf("dry run of a confirm setting without approval: %+v %v", res, err)
	}
}

func TestEmbeddedPackagesBuildOnTheSimulators(t *testing.T) {
	cell := sim.NewCell(sim.Options{})
	for _, name := range devices.Names() {
		fsys, err := devices.FS(name)
		if err != nil {
			t.Fatal(err)
		}
		p, err := LoadFS(fsys)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if probs := ValidateFS(fsys); len(probs) > 0 {
			t.Fatalf("%s: %s", name, describe(probs))
		}
		cfg, err := cell.Config(p.Card.Driver)
		if err != nil {
			t.Fatal(err)
		}
		dev, err := Build(p, cfg)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		desc, err := dev.Describe(context.Background(), mhp.DescribeRequest{Detail: mhp.DetailSummary})
		if err != nil {
			t.Fatal(err)
		}
		if desc.ID != name || desc.Instructions == "" || len(desc.Resources) < 2 {
			t.Fatalf("%s: describe summary %+v", name, desc.DeviceInfo)
		}
		_ = dev.Close()
	}
}

func TestResources(t *testing.T) {
	dir := copyPackage(t, "../examples/devices/thermocycler-01")
	outside := filepath.Join(t.TempDir(), "secret.txt")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(outside, []byte("secret"), 0o600))
	symlinks := true
	if err := os.Symlink(outside, filepath.Join(dir, "references", "escape.md")); err != nil {
		symlinks = false
	} else {
		must(os.Symlink("protocols.md", filepath.Join(dir, "references", "alias.md")))
		must(os.Symlink("troubleshooting.md", filepath.Join(dir, "references", "swapped.md")))
	}
	must(os.WriteFile(filepath.Join(dir, "references", "big.md"), []byte(strings.Repeat("é", MaxResourceBytes)), 0o644))
	must(os.WriteFile(filepath.Join(dir, "references", "blob.bin"), []byte{0, 1, 2, 0xff}, 0o644))
	must(os.WriteFile(filepath.Join(dir, ".hidden"), []byte("x"), 0o644))

	p, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	dev, err := Build(p, sim.Thermocycler(sim.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dev.Close() })
	var rp mhp.ResourceProvider = dev

	list, _ := rp.ListResources(context.Background())
	want := []string{"descriptor.yaml", "methods/denature-hold.yaml", "methods/pcr-standard-30.yaml", "methods/pcr-two-step-35.yaml", "references/big.md", "references/blob.bin", "references/protocols.md",
		"references/troubleshooting.md", "scripts/denature.star", "scripts/pcr.star"}
	if symlinks {
		want = []string{"descriptor.yaml", "methods/denature-hold.yaml", "methods/pcr-standard-30.yaml", "methods/pcr-two-step-35.yaml", "references/alias.md", "references/big.md", "references/blob.bin", "references/protocols.md",
			"references/swapped.md", "references/troubleshooting.md", "scripts/denature.star", "scripts/pcr.star"}
		// Swap a listed file for a symlink leaving the package after load.
		must(os.Remove(filepath.Join(dir, "references", "swapped.md")))
		must(os.Symlink(outside, filepath.Join(dir, "references", "swapped.md")))
	}
	if strings.Join(list, ",") != strings.Join(want, ",") {
		t.Fatalf("resources/list:\n %v\nwant\n %v", list, want)
	}

	cases := []struct {
		path  string
		code  mhp.Code // 0: readable
		text  string   // a substring of the text
		trunc bool
	}{
		{"references/protocols.md", 0, "Standard PCR programs", false},
		{"./scripts/pcr.star", 0, "run_protocol", false},
		{"references/big.md", 0, "éé", true},
		{"../thermocycler-01/DEVICE.md", mhp.CodeInvalidParams, "", false},
		{"references/../../secret.txt", mhp.CodeInvalidParams, "", false},
		{"/etc/passwd", mhp.CodeInvalidParams, "", false},
		{outside, mhp.CodeInvalidParams, "", false},
		{"references\\..\\DEVICE.md", mhp.CodeInvalidParams, "", false},
		{"", mhp.CodeInvalidParams, "", false},
		{"DEVICE.md", mhp.CodeUnknownName, "", false},
		{"references", mhp.CodeUnknownName, "", false},
		{"references/nope.md", mhp.CodeUnknownName, "", false},
		{".hidden", mhp.CodeUnknownName, "", false},
		{"references/blob.bin", mhp.CodeNotSupported, "", false},
	}
	if symlinks {
		cases = append(cases,
			struct {
				path  string
				code  mhp.Code
				text  string
				trunc bool
			}{"references/escape.md", mhp.CodeUnknownName, "", false},
			struct {
				path  string
				code  mhp.Code
				text  string
				trunc bool
			}{"references/alias.md", 0, "Standard PCR programs", false},
			struct {
				path  string
				code  mhp.Code
				text  string
				trunc bool
			}{"references/swapped.md", mhp.CodeInvalidParams, "", false},
		)
	}
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			res, err := rp.ReadResource(context.Background(), c.path)
			if c.code != 0 {
				if mhp.CodeOf(err) != c.code {
					t.Fatalf("got %v (%v), want %s", err, res, c.code)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(res.Text, c.text) || res.Truncated != c.trunc {
				t.Fatalf("text %.40q truncated=%v", res.Text, res.Truncated)
			}
			if len(res.Text) > MaxResourceBytes {
				t.Fatalf("text of %d bytes over the cap", len(res.Text))
			}
			if strings.Contains(res.Text, "secret") {
				t.Fatal("read a file outside the package")
			}
		})
	}
}
