package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// mhp skills install copies the three skills, is idempotent, and refuses
// to overwrite a changed same-name folder without --force.
func TestSkillsInstall(t *testing.T) {
	dir := t.TempDir()
	r := runIn(t, "", "skills", "install", dir)
	if r.code != 0 || strings.Count(r.stdout, ": install") != 3 {
		t.Fatalf("install: %+v", r)
	}
	skill := filepath.Join(dir, "mhp-operate-lab", "SKILL.md")
	if b, err := os.ReadFile(skill); err != nil || !strings.Contains(string(b), "name: mhp-operate-lab") {
		t.Fatalf("SKILL.md: %v", err)
	}
	if r := runIn(t, "", "skills", "install", dir); r.code != 0 || strings.Count(r.stdout, "up to date") != 3 {
		t.Fatalf("second install: %+v", r)
	}
	edited := []byte("my own notes\n")
	if err := os.WriteFile(skill, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	r = runIn(t, "", "skills", "install", dir)
	if r.code != exitRefused || !strings.Contains(r.stderr, "--force") {
		t.Fatalf("install over an edited skill: %+v", r)
	}
	if b, _ := os.ReadFile(skill); string(b) != string(edited) {
		t.Fatal("the edited skill was overwritten without --force")
	}
	if r := runIn(t, "", "skills", "install", dir, "--force"); r.code != 0 || !strings.Contains(r.stdout, "replace (--force)") {
		t.Fatalf("--force: %+v", r)
	}
	if b, _ := os.ReadFile(skill); string(b) == string(edited) {
		t.Fatal("--force did not replace the skill")
	}
}
