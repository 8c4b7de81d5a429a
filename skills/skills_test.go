package skills

import (
	"io/fs"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// Every skill has the Agent Skills front matter (its name is its folder),
// a short description, and every reference it links exists.
func TestSkillsAreWellFormed(t *testing.T) {
	link := regexp.MustCompile(`\]\((references/[^)]+)\)`)
	for _, name := range Names() {
		b, err := fs.ReadFile(FS(), name+"/SKILL.md")
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		if !strings.HasPrefix(s, "---\n") {
			t.Fatalf("%s: no front matter", name)
		}
		end := strings.Index(s[4:], "\n---\n")
		var front struct {
			Name, Description, License string
			Metadata                   map[string]string
		}
		if err := yaml.Unmarshal([]byte(s[4:4+end]), &front); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if front.Name != name || front.License == "" || len(front.Metadata) == 0 {
			t.Errorf("%s: front matter %+v", name, front)
		}
		if n := len(front.Description); n < 80 || n > 1024 {
			t.Errorf("%s: description of %d characters", name, n)
		}
		if lines := strings.Count(s, "\n"); lines > 150 {
			t.Errorf("%s: SKILL.md has %d lines; keep it short, move detail to references/", name, lines)
		}
		refs := link.FindAllStringSubmatch(s, -1)
		if len(refs) == 0 {
			t.Errorf("%s links no reference", name)
		}
		for _, m := range refs {
			if _, err := fs.Stat(FS(), name+"/"+m[1]); err != nil {
				t.Errorf("%s links %s: %v", name, m[1], err)
			}
		}
	}
}
