package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// runIn runs the CLI with stdin (the person's answers).
func runIn(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	a, out, errb := testApp()
	a.stdin = strings.NewReader(stdin)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code := a.run(ctx, args)
	return result{code, out.String(), errb.String()}
}

// mhp lab: a simulated device is added without a question; hardware (any
// URL) asks the person, saying what becomes reachable, and only a yes adds it.
func TestLabVerbs(t *testing.T) {
	home := t.TempDir()
	url, _ := servePackage(t, tcPkg)
	if r := runIn(t, "", "lab", "add", "sim:arm", "--home", home); r.code != 0 || !strings.Contains(r.stdout, "added arm-01 (sim, simulated: true)") {
		t.Fatalf("add sim: %+v", r)
	}
	r := runIn(t, "n\n", "lab", "add", url, "--home", home)
	if r.code != exitRefused || !strings.Contains(r.stderr, "makes hardware reachable to the agent") || !strings.Contains(r.stderr, "run the actions run_protocol") {
		t.Fatalf("add hardware, person says no: %+v", r)
	}
	if r := runIn(t, "", "lab", "add", url, "--home", home); r.code != exitRefused {
		t.Fatalf("add hardware with no answer (end of input) must not add: %+v", r)
	}
	if r := runIn(t, "y\n", "lab", "add", url, "--home", home, "--location", "bench 3"); r.code != 0 || !strings.Contains(r.stdout, "added thermocycler-01 (remote, simulated: false)") {
		t.Fatalf("add hardware, person says yes: %+v", r)
	}
	if r := runIn(t, "", "lab", "add", tcPkg, "--home", home, "--yes"); r.code != exitRefused || !strings.Contains(r.stderr, "already in the fleet") {
		t.Fatalf("same id at another target: %+v", r)
	}
	if r := runIn(t, "", "lab", "add", tcPkg, "--twin", "--home", home); r.code != 0 || !strings.Contains(r.stdout, "thermocycler-01-sim (twin, simulated: true)") {
		t.Fatalf("add twin: %+v", r)
	}
	if r := runIn(t, "", "lab", "locate", "arm-01", "bench", "3,", "right", "--home", home); r.code != 0 {
		t.Fatalf("locate: %+v", r)
	}
	r = runIn(t, "", "lab", "list", "--json", "--home", home)
	var out struct {
		Devices []struct {
			ID, Kind, Location string
			Simulated          bool
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || len(out.Devices) != 3 {
		t.Fatalf("list: %v %+v", err, r)
	}
	if d := out.Devices[0]; d.ID != "arm-01" || d.Location != "bench 3, right" || !d.Simulated {
		t.Fatalf("arm entry %+v", d)
	}
	if d := out.Devices[1]; d.ID != "thermocycler-01" || d.Simulated || d.Location != "bench 3" {
		t.Fatalf("hardware entry %+v", d)
	}
	if r := runIn(t, "", "lab", "remove", "thermocycler-01", "--home", home); r.code != 0 {
		t.Fatalf("remove: %+v", r)
	}
	if r := runIn(t, "", "lab", "list", "--home", home); strings.Contains(r.stdout, "remote") {
		t.Fatalf("removed device listed: %s", r.stdout)
	}
}
