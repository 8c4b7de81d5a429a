package devicepkg

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

type fileField struct{ file, field string }

func TestValidate(t *testing.T) {
	cases := []struct {
		dir  string
		want []fileField // every problem, by file and field
	}{
		{"../examples/devices/thermocycler-01", nil},
		{"../examples/devices/arm-01", nil},
		{"testdata/good-minimal", nil},
		{"testdata/no-card", []fileField{{"DEVICE.md", ""}}},
		{"testdata/no-frontmatter", []fileField{{"DEVICE.md", ""}}},
		{"testdata/bad-card", []fileField{
			{"DEVICE.md", "id"}, {"DEVICE.md", "class"}, {"DEVICE.md", "description"}, {"DEVICE.md", "driver"},
			{"DEVICE.md", "mhp"}, {"DEVICE.md", "tags[1]"}, {"DEVICE.md", "body"},
		}},
		{"testdata/unknown-field", []fileField{{"descriptor.yaml", ""}}},
		{"testdata/bad-script", []fileField{{"scripts/broken.star", ""}}},
		{"testdata/bad-descriptor", []fileField{
			{"descriptor.yaml", "physical.mass_kg"},
			{"descriptor.yaml", "physical.footprint_mm"},
			{"descriptor.yaml", "signals.block_temperature.type"},
			{"descriptor.yaml", "signals.Lid-Closed"},
			{"descriptor.yaml", "signals.block_temperature"},
			{"descriptor.yaml", "signals[3].name"},
			{"descriptor.yaml", "settings.target_temperature.limits"},
			{"descriptor.yaml", "settings.target_temperature.approval"},
			{"descriptor.yaml", "settings.lid_heater.limits"},
			{"descriptor.yaml", "settings.mode.limits"},
			{"descriptor.yaml", "settings.mode.interlocks"},
			{"descriptor.yaml", "actions.run_protocol.duration"},
			{"descriptor.yaml", "actions.run_protocol.examples[0]"},
			{"descriptor.yaml", "actions.run_protocol.examples[1]"},
			{"descriptor.yaml", "actions.open_lid.approval"},
			{"descriptor.yaml", "safety.interlocks"},
			{"descriptor.yaml", "safety.watchdog_s"},
			{"descriptor.yaml", "safety.estop"},
		}},
	}
	for _, c := range cases {
		t.Run(filepath.Base(c.dir), func(t *testing.T) {
			probs := Validate(c.dir)
			var got []string
			for _, p := range probs {
				if p.File == "" || p.Message == "" {
					t.Errorf("problem without file or message: %+v", p)
				}
				got = append(got, p.File+"|"+p.Field)
			}
			var want []string
			for _, w := range c.want {
				want = append(want, w.file+"|"+w.field)
			}
			sort.Strings(got)
			sort.Strings(want)
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("problems:\n%s\nwant (file|field):\n%s", describe(probs), strings.Join(want, "\n"))
			}
		})
	}
}

func describe(ps []Problem) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "  %s|%s  (%s)\n", p.File, p.Field, p.String())
	}
	return b.String()
}

func TestValidateReportsLines(t *testing.T) {
	probs := Validate("testdata/bad-descriptor")
	for _, p := range probs {
		if p.Field == "settings.target_temperature.limits" {
			if p.Line != 13 {
				t.Fatalf("line %d, want 13 (the item's line)", p.Line)
			}
			if !strings.Contains(p.String(), "descriptor.yaml:13: settings.target_temperature.limits: min 105 is above max 4") {
				t.Fatalf("String() = %q", p.String())
			}
			return
		}
	}
	t.Fatal("no limits problem")
}

func TestValidateFlagsEscapingSymlink(t *testing.T) {
	dir := copyPackage(t, "../examples/devices/thermocycler-01")
	outside := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(outside, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "references", "secret.md")); err != nil {
		t.Skipf("symlinks unavailable: %v", err)
	}
	probs := Validate(dir)
	if len(probs) != 1 || probs[0].File != "references/secret.md" || !strings.Contains(probs[0].Message, "leaves the package") {
		t.Fatalf("problems: %s", describe(probs))
	}
}

func TestValidateDescriptionLength(t *testing.T) {
	for _, n := range []struct {
		length int
		ok     bool
	}{{1023, true}, {1024, false}} {
		dir := t.TempDir()
		card := fmt.Sprintf("---\nid: s-1\nclass: sensor\ndriver: sim:arm\ndescription: %s\n---\nBody.\n", strings.Repeat("é", n.length))
		if err := os.WriteFile(filepath.Join(dir, CardFile), []byte(card), 0o644); err != nil {
			t.Fatal(err)
		}
		probs := Validate(dir)
		if (len(probs) == 0) != n.ok {
			t.Errorf("description of %d characters: %s", n.length, describe(probs))
		}
	}
}

// copyPackage copies a package folder into a temporary directory.
func copyPackage(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if info.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}
