package mcpbridge

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/client"
)

// operatorTool is mhp_operator, an operator tool: the person at an
// operator-run instrument (driver: manual) answers through it — a job in
// waiting_operator done, failed, could_not or cancelled, a setting write
// confirmed, the stop confirmed, a reading recorded, or what waits for them
// listed. It calls the device's operator methods (operator/answer,
// operator/record, operator/pending) over the operator's own connection,
// made with the operator token the operator gave the bridge, never an
// argument; the model cannot answer for the person without it.
func (b *Bridge) operatorTool() tool {
	return tool{name: "mhp_operator", operator: true,
		description: "Operator of a manual device: answer a waiting job, setting or estop; record a reading; list pending.",
		schema: obj([]string{"device", "op"}, map[string]any{"device": deviceProp(), "op": enum("answer", "record", "pending"),
			"job": strProp(), "setting": strProp(), "estop": boolProp(),
			"outcome": enum("done", "failed", "could_not", "cancelled"), "note": strProp(),
			"values": map[string]any{"type": "object"}, "signal": strProp(), "value": map[string]any{}}),
		handle: b.operatorAnswer}
}

func (b *Bridge) operatorAnswer(ctx context.Context, s *session, _ *mcp.CallToolRequest, args map[string]any) (any, error) {
	if b.cfg.OperatorToken == "" {
		return nil, mhp.Errorf(mhp.CodeForbidden, "no operator token: start mhp-mcp with --operator-token-file to answer for the operator").
			With(mhp.DataReason, mhp.ReasonOperatorRequired)
	}
	var method string
	params := map[string]any{}
	switch argString(args, "op") {
	case "answer":
		method = mhp.MethodOperatorAnswer
		for _, k := range []string{"job", "setting", "estop", "outcome", "note", "values"} {
			if v, ok := args[k]; ok {
				params[k] = v
			}
		}
	case "record":
		method = mhp.MethodOperatorRecord
		params["signal"], params["value"] = argString(args, "signal"), args["value"]
		if n := argString(args, "note"); n != "" {
			params["note"] = n
		}
	default:
		method = mhp.MethodOperatorPending
	}
	d, err := b.operatorConn(ctx, s, argString(args, "device"))
	if err != nil {
		return nil, err
	}
	defer d.Close()
	var out map[string]any
	if err := d.Call(ctx, method, params, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// operatorConn is the operator's own connection to device id (mhp_permit,
// mhp_operator): the id resolved and the hardware gate applied first, then
// the directory's target dialled with the operator token. The caller
// closes it.
func (b *Bridge) operatorConn(ctx context.Context, s *session, id string) (*client.Device, error) {
	if _, err := s.gated(ctx, id); err != nil { // resolve the id and apply the hardware gate first
		return nil, err
	}
	res, err := b.cfg.Finder.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if res == nil || res.Target == "" {
		return nil, mhp.Errorf(mhp.CodeUnknownName, "device %q has no target in the directory", id).With(mhp.DataName, id)
	}
	d, err := s.operatorDial(ctx, res.Target)
	if err != nil {
		return nil, fmt.Errorf("operator connection to %s: %w", mhp.Truncate(id, 120), err)
	}
	return d, nil
}
