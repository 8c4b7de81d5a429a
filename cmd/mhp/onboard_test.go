package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// mhp onboard: the interview in a terminal, plain words where an answer is
// one text, JSON elsewhere; the end of input keeps the answers for a resume.
func TestOnboardInTheTerminal(t *testing.T) {
	home := t.TempDir()
	first := strings.Join([]string{
		"balance",
		"manual",
		"Analytical balance, 0.1 mg readability up to 220 g; weighs powders and reagents into boats or vials.",
	}, "\n") + "\n"
	r := runIn(t, first, "onboard", "--home", home)
	if r.code != exitRefused || !strings.Contains(r.stderr, "resume with: mhp onboard balance-01") {
		t.Fatalf("interrupted interview: %+v", r)
	}
	rest := strings.Join([]string{
		`{"location": "weighing room, bench 1", "tags": ["weigh", "mass", "balance"], "class": "balance"}`,
		"",
		`[{"name": "mass", "type": "number", "unit": "g"}, {"name": "door_closed", "type": "boolean"}]`,
		`[]`,
		`[{"name": "tare", "duration": "short", "interlocks": ["door_closed"], "approval": "auto"}]`,
		"Close the draft door; tare; add the sample; read the mass",
		"Lift the sample off the pan.",
		"",
		"y",
	}, "\n") + "\n"
	r = runIn(t, rest, "onboard", "balance-01", "--home", home)
	if r.code != 0 || !strings.Contains(r.stdout, "added balance-01") || !strings.Contains(r.stdout, "descriptor.yaml") {
		t.Fatalf("resumed interview: %+v", r)
	}
	desc, err := os.ReadFile(filepath.Join(home, "devices", "balance-01", "descriptor.yaml"))
	if err != nil || !strings.Contains(string(desc), "interlocks:\n") {
		t.Fatalf("descriptor: %v\n%s", err, desc)
	}
	if r := runIn(t, "", "lab", "list", "--home", home); !strings.Contains(r.stdout, "balance-01") {
		t.Fatalf("not in the fleet: %s", r.stdout)
	}
}
