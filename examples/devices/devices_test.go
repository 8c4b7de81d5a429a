package devices_test

import (
	"context"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/devicepkg"
	"github.com/openmhp/mhp-go/examples/devices"
	"github.com/openmhp/mhp-go/examples/sim"
	"github.com/openmhp/mhp-go/script"
)

// cell builds both embedded packages on one simulated cell.
func cell(t *testing.T) (script.Devices, map[string]fs.FS) {
	t.Helper()
	c := sim.NewCell(sim.Options{Speed: 20000, Tick: time.Millisecond})
	lab := script.Devices{}
	files := map[string]fs.FS{}
	for _, name := range devices.Names() {
		fsys, err := devices.FS(name)
		if err != nil {
			t.Fatal(err)
		}
		files[name] = fsys
		pkg, err := devicepkg.LoadFS(fsys)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := c.Config(pkg.Card.Driver)
		if err != nil {
			t.Fatal(err)
		}
		dev, err := devicepkg.Build(pkg, cfg)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		t.Cleanup(func() { _ = dev.Close() })
		lab[name] = mhp.AsSession(dev, "script-"+name)
	}
	return lab, files
}

func runScript(t *testing.T, lab script.Devices, fsys fs.FS, path string, edit func(string) string) string {
	t.Helper()
	src, err := fs.ReadFile(fsys, path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(src)
	if edit != nil {
		text = edit(text)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := script.Run(ctx, text, lab, script.Options{Filename: path, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.Error != "" {
		t.Fatalf("%s: %s\noutput:\n%s", path, res.Error, res.Output)
	}
	return res.Output
}

func invokeWait(t *testing.T, d mhp.Device, name string) {
	t.Helper()
	ctx := context.Background()
	res, err := d.Invoke(ctx, mhp.InvokeRequest{Name: name, Approved: true})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	j, err := script.WaitJob(ctx, d, res.Job.ID, time.Millisecond)
	if err != nil || j.State != mhp.JobDone {
		t.Fatalf("%s: %v %v", name, j, err)
	}
}

// TestPackageScriptsRunTheWholeCell runs every shipped script through the
// script runner, in the order a person would: load, close the lid (a
// person's confirmation, done here in Go), PCR, open the lid, unload.
func TestPackageScriptsRunTheWholeCell(t *testing.T) {
	lab, files := cell(t)
	tc := lab["thermocycler-01"]

	// Loading into a closed thermocycler is refused by the cell before the arm moves.
	invokeWait(t, tc, sim.TCCloseLid)
	ctx := context.Background()
	res, err := script.Run(ctx, "arm = lab['arm-01']\narm.acquire(60)\narm.wait(arm.invoke('pick_plate', location='deck_A1'))\narm.wait(arm.invoke('place_plate', location='thermocycler'))\n",
		lab, script.Options{Timeout: 30 * time.Second})
	if err != nil || res.MHP == nil || res.MHP.Code != mhp.CodeInterlockOpen {
		t.Fatalf("placing into a closed thermocycler: %+v %v", res, err)
	}
	// The plate is in the gripper now; put it back so the script starts clean.
	if _, err := script.Run(ctx, "arm = lab['arm-01']\narm.acquire(60)\narm.wait(arm.invoke('place_plate', location='deck_A1'))\n", lab, script.Options{}); err != nil {
		t.Fatal(err)
	}
	invokeWait(t, tc, sim.TCOpenLid)

	out := runScript(t, lab, files["arm-01"], "scripts/load_thermocycler.star", nil)
	if !strings.Contains(out, "to the thermocycler") {
		t.Fatalf("load: %q", out)
	}
	invokeWait(t, tc, sim.TCCloseLid)
	out = runScript(t, lab, files["thermocycler-01"], "scripts/pcr.star", func(s string) string {
		return strings.Replace(s, "CYCLES = 30", "CYCLES = 3", 1)
	})
	if !strings.Contains(out, "state done cycles 3") {
		t.Fatalf("pcr: %q", out)
	}
	out = runScript(t, lab, files["thermocycler-01"], "scripts/denature.star", nil)
	if !strings.Contains(out, "done") {
		t.Fatalf("denature: %q", out)
	}
	invokeWait(t, tc, sim.TCOpenLid)
	out = runScript(t, lab, files["arm-01"], "scripts/unload_thermocycler.star", nil)
	if !strings.Contains(out, "plate back at deck_A1") {
		t.Fatalf("unload: %q", out)
	}
	r, err := lab["arm-01"].Read(ctx, []string{sim.ArmOccupied, sim.ArmHolding})
	if err != nil {
		t.Fatal(err)
	}
	if occ := r.Values[sim.ArmOccupied].([]any); len(occ) != 1 || occ[0] != "deck_A1" || r.Values[sim.ArmHolding] != false {
		t.Fatalf("end state %v", r.Values)
	}
}

func TestEmbeddedPackagesAreValid(t *testing.T) {
	for _, name := range devices.Names() {
		fsys, err := devices.FS(name)
		if err != nil {
			t.Fatal(err)
		}
		if probs := devicepkg.ValidateFS(fsys); len(probs) > 0 {
			t.Errorf("%s: %v", name, devicepkg.Problems(probs))
		}
		if probs := devicepkg.Validate(name); len(probs) > 0 {
			t.Errorf("%s on disk: %v", name, devicepkg.Problems(probs))
		}
	}
}
