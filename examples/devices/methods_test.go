package devices

import (
	"testing"

	"github.com/openmhp/mhp-go/devicepkg"
	"github.com/openmhp/mhp-go/methods"
)

// TestShippedMethodsFitTheDescriptor: every saved method of the demo
// packages names a declared action and passes that action's params check,
// so running it meets only the live gates.
func TestShippedMethodsFitTheDescriptor(t *testing.T) {
	total := 0
	for _, name := range Names() {
		fsys, err := FS(name)
		if err != nil {
			t.Fatal(err)
		}
		pkg, err := devicepkg.LoadFS(fsys)
		if err != nil {
			t.Fatal(err)
		}
		store, err := methods.OpenFS(fsys, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, s := range store.List("") {
			m, _ := store.Get(s.Name)
			var found bool
			for _, a := range pkg.Descriptor.Actions {
				if a.Name != m.Action {
					continue
				}
				found = true
				if _, e := a.Params.Check(a.Name, m.Params); e != nil {
					t.Errorf("%s: method %s: %v", name, m.Name, e)
				}
			}
			if !found {
				t.Errorf("%s: method %s runs undeclared action %q", name, m.Name, m.Action)
			}
			total++
		}
		for _, a := range pkg.Descriptor.Actions {
			if len(a.Examples) == 0 {
				t.Errorf("%s: action %s carries no examples", name, a.Name)
			}
		}
	}
	if total < 3 {
		t.Fatalf("the demo packages ship %d methods, want the PCR methods", total)
	}
}
