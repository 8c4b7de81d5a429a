package mcpbridge_test

import (
	"context"
	"strings"
	"testing"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/client"
	"github.com/openmhp/mhp-go/mcpbridge"
)

// TestSelfTaggedSimulatedGainsNothing: an OPC UA adapter's device that adds
// "simulated" to its own tags is still hardware under the default policy;
// only the host's flag makes a device simulated.
func TestSelfTaggedSimulatedGainsNothing(t *testing.T) {
	var writes int
	drv, err := binding.New(binding.Config{
		Device: mhp.DeviceInfo{ID: "plc-01", Class: "reactor", Make: "Siemens", Model: "S7-1500 (OPC UA)",
			Tags: []string{"opcua", "simulated"}, Description: "simulated"},
		Settings: []binding.Setting{{Spec: mhp.Setting{Name: "setpoint", Type: mhp.TypeNumber, Limits: mhp.Range(0, 100)},
			Write: func(context.Context, any) (binding.WriteStatus, error) { writes++; return binding.Applied, nil }}},
		EStop: func(context.Context) error { return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drv.Close() })
	for _, hostSays := range []bool{false, true} {
		named := &mcpbridge.Named{Targets: map[string]string{"plc-01": "mem:plc"}}
		if hostSays {
			named.Simulated = map[string]bool{"plc-01": true}
		}
		b, err := mcpbridge.New(mcpbridge.Config{Finder: named,
			Dial: func(context.Context, string) (*client.Device, error) {
				return client.Connect(drv, client.Options{}), nil
			}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		cs := session(t, b, nil)
		res, body := mustCall(t, cs, "mhp_write", map[string]any{"device": "plc-01", "name": "setpoint", "value": 5})
		if !hostSays && (!res.IsError || errCode(body) != float64(mhp.CodeForbidden) || writes != 0) {
			t.Fatalf("a self-tagged simulated OPC UA device was written (writes %d): %s", writes, text(res))
		}
		if hostSays && (res.IsError || writes != 1) {
			t.Fatalf("the host's simulated flag did not allow the write: %s", text(res))
		}
		_, lab := mustCall(t, cs, "mhp_lab", map[string]any{"op": "list"})
		devs, _ := lab["devices"].([]any)
		if len(devs) != 1 || devs[0].(map[string]any)["simulated"] != hostSays {
			t.Fatalf("mhp_lab list tells the model simulated=%v, want the host's %v", devs, hostSays)
		}
	}
}

// TestPolicyDuplicateAndUnknownKeys: a second allow_hardware does not turn
// it on; misspelt or unknown keys are refused; a disabled policy with
// operator_tools says why.
func TestPolicyDuplicateAndUnknownKeys(t *testing.T) {
	for _, doc := range []string{
		`{"enabled": true, "allow_hardware": false, "allow_hardware": true}`,
		`{"enabled": true, "enabled": true}`,
		`{"enabled": true, "allow_hardwar": true}`,
		`{"enabled": true} {"allow_hardware": true}`,
		`[true]`,
	} {
		if p, err := mcpbridge.ParsePolicy([]byte(doc)); err == nil {
			t.Errorf("policy %s accepted as %+v", doc, p)
		}
	}
	p, err := mcpbridge.ParsePolicy([]byte(`{"operator_tools": true}`))
	if err != nil {
		t.Fatal(err)
	}
	if w := strings.Join(p.Warnings(), "\n"); !strings.Contains(w, "operator_tools is true but enabled is not") {
		t.Fatalf("warnings of operator_tools without enabled = %q", w)
	}
	if p, _ := mcpbridge.ParsePolicy([]byte(`{"enabled": true, "operator_tools": true}`)); len(p.Warnings()) != 0 {
		t.Fatalf("an enabled policy warns: %v", p.Warnings())
	}
}
