package conformance

import (
	"strings"
	"testing"

	"github.com/openmhp/mhp-go"
)

// TestDefaultOutsideShape: the describe/defaults_within_own_shape check
// catches an enum default published by value (plrbridge's `default: 1` for
// an enum of names), nested too, and passes a default the shape admits.
func TestDefaultOutsideShape(t *testing.T) {
	enum := func(def any) *mhp.Shape {
		return &mhp.Shape{Type: mhp.TypeString, Limits: &mhp.Limits{Enum: []any{"FRONT", "BACK"}}, Default: def}
	}
	if bad := defaultOutsideShape("move_plate.direction", enum(1.0)); !strings.Contains(bad, "move_plate.direction") {
		t.Fatalf("default 1 for an enum of names: %q, want it caught", bad)
	}
	nested := &mhp.Shape{Type: mhp.TypeObject, Properties: map[string]*mhp.Shape{"dir": enum("LEFT")}}
	if bad := defaultOutsideShape("p", nested); !strings.Contains(bad, "p.dir") {
		t.Fatalf("nested bad default: %q", bad)
	}
	if bad := defaultOutsideShape("move_plate.direction", enum("FRONT")); bad != "" {
		t.Fatalf("a default inside the enum: %q", bad)
	}
}
