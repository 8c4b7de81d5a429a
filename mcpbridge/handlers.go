package mcpbridge

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/client"
	"github.com/openmhp/mhp-go/directory"
)

func (b *Bridge) find(ctx context.Context, _ *session, _ *mcp.CallToolRequest, args map[string]any) (any, error) {
	q := directory.Query{Query: argString(args, "query"), Class: argString(args, "class"), State: argString(args, "state"),
		Location: argString(args, "location"), Tags: argStrings(args, "tags"), Limit: int(argFloat(args, "limit", 0))}
	if live, ok := args["live"].(bool); ok {
		q.Live = &live
	}
	res, err := b.cfg.Finder.Search(ctx, q)
	if err != nil {
		return nil, err
	}
	// What the results share is said once (common), the rest per result.
	return directory.Compact(res)
}

// describe is discovery: allowed on hardware whatever the policy.
func (b *Bridge) describe(ctx context.Context, s *session, _ *mcp.CallToolRequest, args map[string]any) (any, error) {
	d, err := s.device(ctx, argString(args, "device"))
	if err != nil {
		return nil, err
	}
	if _, ok := args["methods"]; ok {
		return b.methodsOf(ctx, d, argString(args, "methods"))
	}
	req := mhp.DescribeRequest{Detail: argString(args, "detail")}
	if req.Detail == "" {
		req.Detail = mhp.DetailSummary
	}
	if sel, ok := args["select"].(map[string]any); ok {
		req.Select = &mhp.Selection{Signals: argStrings(sel, "signals"), Settings: argStrings(sel, "settings"), Actions: argStrings(sel, "actions")}
	}
	return d.Describe(ctx, req)
}

func (b *Bridge) read(ctx context.Context, s *session, _ *mcp.CallToolRequest, args map[string]any) (any, error) {
	d, err := s.gated(ctx, argString(args, "device"))
	if err != nil {
		return nil, err
	}
	return d.Read(ctx, argStrings(args, "names"))
}

// needsInput is a tool outcome that asks the host for a person's answer
// (MCP multi round-trip): the host elicits, then retries the same call with
// the response and the request state.
type needsInput struct {
	requests mcp.InputRequestMap
	state    string
}

// confirmation decides a confirm-gated request. On the first round it asks
// for an elicitation bound to this exact request and to the command id of
// its first attempt (an HMAC'd, single-use request state); on the retry it
// checks the state and the person's answer and returns that command id, so
// the confirmed request is the same intent to the device (a resend after a
// transport failure replays, never acts twice). Without elicitation there is
// no trusted channel, so the request stays refused.
func (b *Bridge) confirmation(req *mcp.CallToolRequest, refusal *mhp.Error, key, cmd, what, notes string) (approved bool, cmdOut string, ask *needsInput, err error) {
	if refusal == nil {
		refusal = mhp.Errorf(mhp.CodeApprovalRequired, "%s requires a person's confirmation", what).With(mhp.DataApproval, "confirm")
	}
	if req == nil || req.Session == nil {
		return false, "", nil, refusal.With("elicitation", "unavailable")
	}
	if resp, ok := req.Params.InputResponses["confirm"]; ok {
		cmd, ok := b.consumeState(req.Params.RequestState, key)
		if !ok {
			return false, "", nil, mhp.Errorf(mhp.CodeApprovalRequired, "%s: the confirmation does not match this request (stale, replayed or altered)", what).
				With(mhp.DataApproval, "confirm")
		}
		er, _ := resp.(*mcp.ElicitResult)
		if er != nil && er.Action == "accept" && er.Content["confirm"] == true {
			return true, cmd, nil, nil
		}
		action := "no answer"
		if er != nil {
			action = er.Action
		}
		return false, "", nil, mhp.Errorf(mhp.CodeApprovalRequired, "%s: the person did not confirm (%s)", what, action).
			With(mhp.DataApproval, "confirm").With("elicitation", action)
	}
	if ip := req.Session.InitializeParams(); ip == nil || ip.Capabilities == nil || ip.Capabilities.Elicitation == nil {
		return false, "", nil, refusal.With("elicitation", "unavailable: this MCP client cannot ask a person, so confirm-gated requests cannot run here")
	}
	msg := confirmMessage(what, notes)
	return false, "", &needsInput{
		requests: mcp.InputRequestMap{"confirm": &mcp.ElicitParams{Message: msg, RequestedSchema: map[string]any{
			"type": "object", "required": []string{"confirm"},
			"properties": map[string]any{"confirm": map[string]any{"type": "boolean", "title": "Go ahead", "description": mhp.Truncate(what, 1024)}}}}},
		state: b.newState(key, cmd),
	}, nil
}

// commandID is a fresh command id for one intent on d, or "" for a dry run
// (it acts on nothing) or a device that does not honour command ids. The
// bridge names the intent itself (the client would otherwise), so that the
// first attempt and its confirmed resend share the id.
func (b *Bridge) commandID(d *client.Device, dry bool) string {
	if dry || b.cfg.Client.Plain || !d.Info().Capabilities.CommandIDs {
		return ""
	}
	return client.NewCommandID()
}

func (b *Bridge) itemNotes(ctx context.Context, d *client.Device, sel mhp.Selection) string {
	desc, err := d.Describe(ctx, mhp.DescribeRequest{Select: &sel})
	if err != nil {
		return ""
	}
	for _, s := range desc.Settings {
		return mhp.Truncate(s.Notes, 1024)
	}
	for _, a := range desc.Actions {
		return mhp.Truncate(a.Notes, 1024)
	}
	return ""
}

func (b *Bridge) write(ctx context.Context, s *session, req *mcp.CallToolRequest, args map[string]any) (any, error) {
	id := argString(args, "device")
	d, err := s.gated(ctx, id)
	if err != nil {
		return nil, err
	}
	w := mhp.WriteRequest{Name: argString(args, "name"), Value: args["value"], PermitID: argString(args, "permit_id")}
	w.DryRun, _ = args["dry_run"].(bool)
	key := jsonText([]any{"write", id, w.Name, w.Value, w.DryRun, w.PermitID})
	what := fmt.Sprintf("Write %s = %v on %s", w.Name, jsonText(w.Value), id)
	if _, answered := req.Params.InputResponses["confirm"]; !answered {
		w.CommandID = b.commandID(d, w.DryRun)
		res, err := d.Write(ctx, w)
		me, ok := mhp.AsError(err)
		if !ok || me.Code != mhp.CodeApprovalRequired || w.PermitID != "" {
			return res, err // a refused permit is the answer: the operator approved something else
		}
		_, _, ask, cerr := b.confirmation(req, me, key, w.CommandID, what, b.itemNotes(ctx, d, mhp.Selection{Settings: []string{w.Name}}))
		if ask != nil {
			return ask, nil
		}
		return nil, cerr
	}
	ok, cmd, _, cerr := b.confirmation(req, nil, key, "", what, "")
	if !ok {
		return nil, cerr
	}
	w.Approved, w.CommandID = true, cmd
	return d.Write(ctx, w)
}

func (b *Bridge) invoke(ctx context.Context, s *session, req *mcp.CallToolRequest, args map[string]any) (any, error) {
	id := argString(args, "device")
	inv := mhp.InvokeRequest{Name: argString(args, "action"), Method: argString(args, "method"), PermitID: argString(args, "permit_id")}
	if inv.Name == "" && inv.Method == "" {
		return nil, mhp.Errorf(mhp.CodeInvalidParams, "mhp_invoke: name an action, or a saved method (method)").With(mhp.DataField, "action")
	}
	d, err := s.gated(ctx, id)
	if err != nil {
		return nil, err
	}
	inv.Params, _ = args["params"].(map[string]any)
	inv.DryRun, _ = args["dry_run"].(bool)
	key := jsonText([]any{"invoke", id, inv.Name, inv.Method, inv.Params, inv.DryRun, inv.PermitID})
	what := fmt.Sprintf("Run %s on %s", inv.Name, id)
	if inv.Method != "" {
		what = fmt.Sprintf("Run saved method %s on %s", inv.Method, id)
	}
	if len(inv.Params) > 0 {
		what += " with " + jsonText(inv.Params)
	}
	var res *mhp.InvokeResult
	if _, answered := req.Params.InputResponses["confirm"]; !answered {
		inv.CommandID = b.commandID(d, inv.DryRun)
		res, err = d.Invoke(ctx, inv)
		if me, ok := mhp.AsError(err); ok && me.Code == mhp.CodeApprovalRequired && inv.PermitID == "" {
			notes := ""
			if inv.Name != "" {
				notes = b.itemNotes(ctx, d, mhp.Selection{Actions: []string{inv.Name}})
			}
			_, _, ask, cerr := b.confirmation(req, me, key, inv.CommandID, what, notes)
			if ask != nil {
				return ask, nil
			}
			return nil, cerr
		}
	} else {
		ok, cmd, _, cerr := b.confirmation(req, nil, key, "", what, "")
		if !ok {
			return nil, cerr
		}
		inv.Approved, inv.CommandID = true, cmd
		res, err = d.Invoke(ctx, inv)
	}
	if err != nil || res.Job == nil {
		return res, err
	}
	if wait := argFloat(args, "wait_s", 0); wait > 0 {
		// This call started the job: a cancelled call cancels it.
		return b.wait(ctx, req, d, res.Job.ID, wait, true)
	}
	return res, nil
}
