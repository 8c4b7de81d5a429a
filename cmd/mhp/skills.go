package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/openmhp/mhp-go/host"
	"github.com/openmhp/mhp-go/skills"
)

// skillsCmd runs `mhp skills list | install DIR [--force]`.
func (a *app) skillsCmd(ctx context.Context, args []string) int {
	p, err := parseArgs(args, flagSpec{"force": false, "dry-run": false})
	if err != nil {
		return a.usageError("skills: %v", err)
	}
	const use = "skills: usage: mhp skills list | install DIR [--force] [--dry-run]   (DIR: where the harness reads skills, e.g. ~/.claude/skills)"
	switch {
	case len(p.args) == 1 && p.args[0] == "list":
		for _, n := range skills.Names() {
			fmt.Fprintln(a.stdout, n)
		}
		return exitOK
	case len(p.args) == 2 && p.args[0] == "install":
	default:
		return a.usageError(use)
	}
	dir := expandHome(p.args[1])
	plan, err := planSkills(dir, p.has("force"))
	if err != nil {
		fmt.Fprintf(a.stderr, "mhp skills: %v\n", err)
		return exitRefused
	}
	for _, s := range plan {
		fmt.Fprintf(a.stdout, "%s: %s\n", filepath.Join(dir, s.name), s.action)
	}
	if p.has("dry-run") {
		return exitOK
	}
	for _, s := range plan {
		if s.action == "up to date" {
			continue
		}
		if err := installSkill(dir, s.name); err != nil {
			fmt.Fprintf(a.stderr, "mhp skills: %v\n", err)
			return exitRefused
		}
	}
	return exitOK
}

type skillPlan struct{ name, action string }

// planSkills says what installing into dir does to each skill: a changed
// folder of the same name is refused without force (it may hold the
// person's own edits), an identical one is left alone.
func planSkills(dir string, force bool) ([]skillPlan, error) {
	var out []skillPlan
	var changed []string
	for _, name := range skills.Names() {
		target := filepath.Join(dir, name)
		if _, err := os.Stat(target); errors.Is(err, os.ErrNotExist) {
			out = append(out, skillPlan{name, "install"})
			continue
		}
		same, err := sameTree(target, name)
		if err != nil {
			return nil, err
		}
		switch {
		case same:
			out = append(out, skillPlan{name, "up to date"})
		case force:
			out = append(out, skillPlan{name, "replace (--force)"})
		default:
			changed = append(changed, target)
		}
	}
	if len(changed) > 0 {
		return nil, fmt.Errorf("%s differ from the skills of this mhp (edited, or another version); nothing was installed: "+
			"move them aside, or give --force to replace them", strings.Join(changed, ", "))
	}
	return out, nil
}

// sameTree reports whether the folder holds exactly the embedded skill.
func sameTree(dir, name string) (bool, error) {
	want := map[string][]byte{}
	err := fs.WalkDir(skills.FS(), name, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(skills.FS(), p)
		want[strings.TrimPrefix(p, name+"/")] = b
		return err
	})
	if err != nil {
		return false, err
	}
	got := map[string][]byte{}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if len(got) > len(want) {
			return nil // more files than the skill has: not the same
		}
		rel, _ := filepath.Rel(dir, p)
		b, err := os.ReadFile(p)
		got[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil || len(got) != len(want) {
		return false, err
	}
	for k, w := range want {
		if !bytes.Equal(got[k], w) {
			return false, nil
		}
	}
	return true, nil
}

// installSkill writes a skill into a fresh folder beside the target and
// swaps it in, so a half-copied skill is never left in place.
func installSkill(dir, name string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(dir, "."+name+".new-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	err = fs.WalkDir(skills.FS(), name, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p, name), "/")
		dst := filepath.Join(tmp, filepath.FromSlash(rel))
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := fs.ReadFile(skills.FS(), p)
		if err != nil {
			return err
		}
		return host.WriteFileAtomic(dst, b, 0o644)
	})
	if err != nil {
		return err
	}
	target := filepath.Join(dir, name)
	old := filepath.Join(dir, "."+name+".old")
	_ = os.RemoveAll(old)
	if _, err := os.Stat(target); err == nil {
		if err := os.Rename(target, old); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp, target); err != nil {
		_ = os.Rename(old, target)
		return err
	}
	return os.RemoveAll(old)
}

// expandHome turns a leading ~/ into the home folder.
func expandHome(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if h, err := os.UserHomeDir(); err == nil {
			return filepath.Join(h, strings.TrimPrefix(strings.TrimPrefix(p, "~"), "/"))
		}
	}
	return filepath.Clean(p)
}
