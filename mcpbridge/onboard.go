package mcpbridge

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/onboard"
)

// onboardOps are mhp_lab's ops of the onboarding interview (Config.Onboard).
func onboardOps() []string { return []string{"onboard", "new", "write", "validate"} }

func onboardProps() map[string]any {
	return map[string]any{"answers": map[string]any{"type": "object"}, "path": strProp(), "content": strProp()}
}

// onboardOp runs an interview op; ok is false for an op that is not one.
// A change to a live package's limits is put to the person (elicitation)
// and goes through only on their yes.
func (b *Bridge) onboardOp(ctx context.Context, req *mcp.CallToolRequest, op string, args map[string]any) (out any, ok bool, err error) {
	iv := b.cfg.Onboard
	if iv == nil || !strings.Contains(" onboard new write validate ", " "+op+" ") {
		return nil, false, nil
	}
	id := argString(args, "id")
	run := func(confirmed bool) (any, error) {
		switch op {
		case "onboard":
			raw := map[string]json.RawMessage{}
			if a, ok := args["answers"].(map[string]any); ok {
				for k, v := range a {
					b, err := json.Marshal(v)
					if err != nil {
						return nil, err
					}
					raw[k] = b
				}
			}
			return iv.Step(ctx, id, raw, confirmed)
		case "new":
			return iv.New(ctx, id)
		case "write":
			return iv.WriteFile(ctx, id, argString(args, "path"), []byte(argString(args, "content")), confirmed)
		}
		return iv.Package(ctx, id)
	}
	key := jsonText([]any{"lab-" + op, args})
	if _, answered := req.Params.InputResponses["confirm"]; answered {
		if ok, _, _, cerr := b.confirmation(req, nil, key, "", "Change a live package", ""); !ok {
			return nil, true, cerr
		}
		out, err := run(true)
		b.dropDevice(id)
		return out, true, err
	}
	out, err = run(false)
	var nc *onboard.NeedsConfirmation
	if errors.As(err, &nc) {
		what := "Change the live package " + nc.ID + ": " + strings.Join(nc.What, "; ") + ". The agent wrote this; only you can let it change limits or approvals."
		refusal := mhp.Errorf(mhp.CodeApprovalRequired, "%s", nc.Error()).With(mhp.DataApproval, "confirm")
		_, _, ask, cerr := b.confirmation(req, refusal, key, "", what, "")
		if ask != nil {
			return ask, true, nil
		}
		return nil, true, cerr
	}
	return out, true, err
}
