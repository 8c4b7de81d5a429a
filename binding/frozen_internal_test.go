package binding

import (
	"context"
	"testing"

	"github.com/openmhp/mhp-go"
)

func frozenTestConfig(id string, max float64, def any) Config {
	return Config{
		Device:  mhp.DeviceInfo{ID: id, Class: "test"},
		Signals: []Signal{{Spec: mhp.Signal{Name: "t", Type: mhp.TypeNumber}, Read: func(context.Context) (Sample, error) { return Sample{Value: 1.0}, nil }}},
		Settings: []Setting{{Spec: mhp.Setting{Name: "sp", Type: mhp.TypeNumber, Limits: mhp.Range(0, max)},
			Write: func(context.Context, any) (WriteStatus, error) { return Applied, nil }}},
		Actions: []Action{{Spec: mhp.Action{Name: "run", Params: mhp.Params{{Name: "n", Shape: &mhp.Shape{Type: mhp.TypeNumber, Default: def}}}},
			Run: func(context.Context, *Job) (any, error) { return nil, nil }}},
	}
}

// Drivers built from specs of the same content share one frozen copy of
// the spec parts and the descriptor lists; a different content does not; a
// change to the caller's config after New reaches neither.
func TestFrozenSpecsShared(t *testing.T) {
	mk := func(cfg Config) *Driver {
		d, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return d
	}
	cfgA := frozenTestConfig("a", 100, 1.0)
	a, b := mk(cfgA), mk(frozenTestConfig("b", 100, 1.0))
	c := mk(frozenTestConfig("c", 50, 1.0))
	e := mk(frozenTestConfig("e", 100, 1)) // an int default: another content
	la, lb, lc := a.settings.at("sp").Spec.Limits, b.settings.at("sp").Spec.Limits, c.settings.at("sp").Spec.Limits
	if la != lb || &a.desc.Settings[0] != &b.desc.Settings[0] {
		t.Fatalf("equal specs not shared: %p %p", la, lb)
	}
	if la == lc || *lc.Max != 50 {
		t.Fatalf("different specs shared: %p %p", la, lc)
	}
	if a.actions.at("run").Spec.Params[0].Shape == e.actions.at("run").Spec.Params[0].Shape {
		t.Fatal("a float64 and an int default were taken for one content")
	}
	if _, isInt := e.desc.Actions[0].Params[0].Shape.Default.(int); !isInt {
		t.Fatalf("the int default came back as %T", e.desc.Actions[0].Params[0].Shape.Default)
	}
	*cfgA.Settings[0].Spec.Limits.Max = 7 // the caller changes its own config
	cfgA.Actions[0].Spec.Params[0].Shape.Type = mhp.TypeString
	if *a.settings.at("sp").Spec.Limits.Max != 100 || *b.desc.Settings[0].Limits.Max != 100 ||
		a.desc.Actions[0].Params[0].Shape.Type != mhp.TypeNumber {
		t.Fatal("a change to the caller's config reached the frozen spec")
	}
	desc := a.Descriptor() // a copy: changing it changes no driver
	*desc.Settings[0].Limits.Max = 3
	if *b.desc.Settings[0].Limits.Max != 100 {
		t.Fatal("a change to a Descriptor copy reached the frozen spec")
	}
	if _, err := b.Write(mhp.WithSession(context.Background(), "s"), mhp.WriteRequest{Name: "sp", Value: 90.0}); err != nil {
		t.Fatalf("the gates of a driver sharing a frozen spec: %v", err)
	}
}

func TestContentKey(t *testing.T) {
	same := [][2]any{
		{map[string]any{"a": 1, "b": []any{2.0, "x"}}, map[string]any{"b": []any{2.0, "x"}, "a": 1}},
		{mhp.Range(0, 1), mhp.Range(0, 1)},
	}
	for _, p := range same {
		if contentKey(p[0]) != contentKey(p[1]) {
			t.Errorf("%v and %v keyed apart", p[0], p[1])
		}
	}
	differ := [][2]any{
		{1, 1.0}, {[]any(nil), []any{}}, {"a;", "a"}, {mhp.Range(0, 1), mhp.Range(0, 2)},
		{map[string]any{"a": "b"}, map[string]any{"a;": "b"}}, {(*mhp.Limits)(nil), &mhp.Limits{}},
	}
	for _, p := range differ {
		if contentKey(p[0]) == contentKey(p[1]) {
			t.Errorf("%#v and %#v keyed alike: %s", p[0], p[1], contentKey(p[0]))
		}
	}
}
