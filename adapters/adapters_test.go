package adapters_test

import (
	"context"
	"strings"
	"testing"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/binding"
)

type fakeConfig struct {
	adapters.Common `yaml:",inline"`
	Endpoint        string `yaml:"endpoint"`
}

func fakeFactory(ctx context.Context, src adapters.Source) (*binding.Driver, error) {
	var cfg fakeConfig
	if err := src.Decode(&cfg); err != nil {
		return nil, err
	}
	var bc binding.Config
	cfg.Apply(&bc)
	bc.Settings = []binding.Setting{{Spec: mhp.Setting{Name: "sp", Type: mhp.TypeNumber, Limits: mhp.Range(0, 100)},
		Write: func(context.Context, any) (binding.WriteStatus, error) { return binding.Applied, nil }}}
	return adapters.Options{Refine: src.Refine}.NewDriver(bc)
}

func TestRegistry(t *testing.T) {
	r := adapters.NewRegistry()
	if err := r.Register("fake", fakeFactory); err != nil {
		t.Fatal(err)
	}
	if err := r.Register("fake", fakeFactory); err == nil {
		t.Fatal("a kind registered twice")
	}
	ctx := context.Background()
	good := "adapter: fake\ndevice: {id: f-1, class: test}\nendpoint: x\n"
	d, err := r.Build(ctx, adapters.Source{Path: "f.yaml", Data: []byte(good)})
	if err != nil || d.Descriptor().ID != "f-1" {
		t.Fatalf("build: %v", err)
	}
	for name, tc := range map[string]struct{ body, want string }{
		"no adapter":    {"device: {id: x}\n", "no `adapter:` field"},
		"unknown kind":  {"adapter: plc9000\n", `adapter "plc9000" is not registered`},
		"unknown field": {good + "endpont: typo\n", "endpont"},
	} {
		_, err := r.Build(ctx, adapters.Source{Path: "f.yaml", Data: []byte(tc.body)})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, tc.want)
		}
	}
	// A refinement narrows the generated bindings before the driver exists.
	narrowed, err := r.Build(ctx, adapters.Source{Path: "f.yaml", Data: []byte(good), Refine: func(c *binding.Config) error {
		c.Settings[0].Spec.Limits = mhp.Range(0, 50)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := narrowed.Write(ctx, mhp.WriteRequest{Name: "sp", Value: 60.0}); mhp.CodeOf(err) != mhp.CodeLimitViolation {
		t.Fatalf("refined limit not enforced: %v", err)
	}
}

func TestActionOverride(t *testing.T) {
	yes, no := true, false
	spec := mhp.Action{Name: "aspirate", Duration: mhp.DurationLong, Cancellable: true, Interlocks: []string{"ready"},
		Params: mhp.Params{{Name: "volume", Shape: &mhp.Shape{Type: mhp.TypeNumber, Unit: "uL", Notes: "from the backend"}}}}
	o := adapters.ActionOverride{Approval: mhp.ApprovalConfirm, Interlocks: []string{"ready", "door_closed"},
		Cancellable: &no, Concurrent: &yes, Notes: "bench notes",
		Params: map[string]*mhp.Shape{"volume": {Limits: mhp.Range(1, 200)}}}
	if err := o.ApplyTo(&spec); err != nil {
		t.Fatal(err)
	}
	v, _ := spec.Params.Get("volume")
	if spec.Approval != mhp.ApprovalConfirm || spec.Cancellable || !spec.Concurrent || spec.Notes != "bench notes" ||
		len(spec.Interlocks) != 2 || v.Unit != "uL" || v.Notes != "from the backend" || *v.Limits.Max != 200 {
		t.Fatalf("override applied wrongly: %+v / %+v", spec, v)
	}
	typed := adapters.OverlayShape(v, &mhp.Shape{Type: mhp.TypeInteger})
	if typed.Type != mhp.TypeInteger || typed.Unit != "" {
		t.Fatalf("a typed override must replace the shape: %+v", typed)
	}
	bad := adapters.ActionOverride{Params: map[string]*mhp.Shape{"volum": {Limits: mhp.Range(0, 1)}}}
	if err := bad.ApplyTo(&spec); err == nil || !strings.Contains(err.Error(), `"volum"`) {
		t.Fatalf("a misspelt param override was accepted: %v", err)
	}
}
