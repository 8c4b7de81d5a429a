package mcpbridge_test

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openmhp/mhp-go/mcpbridge"
)

// TestInputExamplesPassTheirSchemas: every input example tools/list
// teaches is accepted by its tool's own schema (a call with it is never
// refused with reason schema), with the fleet and operator tools listed
// too: an example the validator refuses would teach the model a wrong
// call. (The devices the examples name are not in this lab; what the call
// says about that is not the point.)
func TestInputExamplesPassTheirSchemas(t *testing.T) {
	p := mcpbridge.Policy{Enabled: true, OperatorTools: true}
	cs := session(t, onboardBridgeWith(t, t.TempDir(), mcpbridge.Config{Policy: &p, OperatorToken: "op-tok"}), nil)
	res, err := cs.ListTools(context.Background(), &mcp.ListToolsParams{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, tl := range res.Tools {
		examples, _ := tl.Meta["input_examples"].([]any)
		for _, ex := range examples {
			args, ok := ex.(map[string]any)
			if !ok {
				t.Fatalf("%s: example %v is not an object", tl.Name, ex)
			}
			n++
			_, body := mustCall(t, cs, tl.Name, args)
			e, _ := body["mhpError"].(map[string]any)
			data, _ := e["data"].(map[string]any)
			if data["reason"] == "schema" {
				t.Errorf("%s: its example %v is refused by its schema: %v", tl.Name, args, e["message"])
			}
		}
	}
	if n < 4 {
		t.Fatalf("%d input examples listed, want one each for mhp_find, mhp_describe, mhp_invoke, mhp_run", n)
	}
}
