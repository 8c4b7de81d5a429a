package mcpbridge

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/client"
	"github.com/openmhp/mhp-go/evidence"
	mhpguard "github.com/openmhp/mhp-go/guard"
	"github.com/openmhp/mhp-go/methods"
)

// evidencePage is the default page of mhp_evidence: receipts are a few
// hundred bytes each, and the whole result must fit in ResultBudget.
const evidencePage = 6 // receipts name the identity in their session label ("alice/client#8hex"): 8 no longer fit

// evidence answers mhp_evidence: the device's evidence head and one page of
// its receipts in chain order: the latest ones, or those after a seq, or
// those of a command id or session label; "next" is the after of the
// following page. On a host's shared log the head is the log's and the
// receipts are the device's only (its server's evidence/list keeps to them). Reading receipts acts on
// nothing, so it is open like describe.
func (b *Bridge) evidence(ctx context.Context, s *session, _ *mcp.CallToolRequest, args map[string]any) (any, error) {
	d, err := s.device(ctx, argString(args, "device"))
	if err != nil {
		return nil, err
	}
	var head evidence.Head
	if err := d.Call(ctx, mhp.MethodEvidenceHead, struct{}{}, &head); err != nil {
		return nil, noEvidence(err)
	}
	q := evidence.Query{After: uint64(max(argFloat(args, "after", 0), 0)), Limit: evidencePage,
		CommandID: argString(args, "command_id"), Session: argString(args, "session")}
	switch {
	case args["after"] != nil || q.CommandID != "" || q.Session != "":
	case head.Log != "":
		// A host's shared log: its seqs count every device's receipts, so the
		// device's latest are asked for by name (a server with a shared log
		// knows "latest"; the device's handle keeps the page to its own).
		q.Latest = true
	case head.Seq > evidencePage:
		q.After = head.Seq - evidencePage // no cursor, no filter: the latest receipts
	}
	var page evidence.Page
	if err := d.Call(ctx, mhp.MethodEvidenceList, q, &page); err != nil {
		return nil, noEvidence(err)
	}
	out := map[string]any{"head": head, "entries": page.Entries}
	if page.Next != 0 {
		out["next"] = page.Next
		out["note"] = fmt.Sprintf("more receipts: call again with after=%d", page.Next)
	}
	return out, nil
}

// noEvidence names a device that keeps no evidence.
func noEvidence(err error) error {
	if e, ok := mhp.AsError(err); ok && e.Code == mhp.CodeMethodNotFound {
		return mhp.Errorf(mhp.CodeNotSupported, "this device keeps no evidence (serve it with --evidence DIR)").
			With(mhp.DataReason, "no_evidence")
	}
	return err
}

// methodsOf answers mhp_describe's methods argument: the device's saved
// methods, all of them for "" (methods/list), the one method in full when the
// text is its exact name (methods/get), else those matching the text
// (methods/find).
func (b *Bridge) methodsOf(ctx context.Context, d *client.Device, query string) (any, error) {
	var res methods.ListResult
	var err error
	if query == "" {
		err = d.Call(ctx, mhp.MethodMethodsList, methods.ListRequest{}, &res)
	} else {
		var m methods.Method
		if d.Call(ctx, mhp.MethodMethodsGet, methods.GetRequest{Name: query}, &m) == nil {
			return &m, nil
		}
		err = d.Call(ctx, mhp.MethodMethodsFind, methods.FindRequest{Query: query, Limit: 10}, &res)
	}
	if e, ok := mhp.AsError(err); ok && e.Code == mhp.CodeMethodNotFound {
		return nil, mhp.Errorf(mhp.CodeNotSupported, "this device serves no saved methods").With(mhp.DataReason, "no_methods")
	}
	if err != nil {
		return nil, err
	}
	return &res, nil
}

// permit answers mhp_permit, an operator tool: it issues a single-use permit
// for exactly one request through the operator's own connection to the
// device, made with the operator token the operator gave the bridge
// (Config.OperatorToken, never an argument). The permit's id is what the
// agent passes as permit_id to mhp_write or mhp_invoke.
func (b *Bridge) permit(ctx context.Context, s *session, _ *mcp.CallToolRequest, args map[string]any) (any, error) {
	if b.cfg.OperatorToken == "" {
		return nil, mhp.Errorf(mhp.CodeForbidden, "no operator token: start mhp-mcp with --operator-token-file to issue permits").
			With(mhp.DataReason, mhp.ReasonOperatorRequired)
	}
	d, err := b.operatorConn(ctx, s, argString(args, "device"))
	if err != nil {
		return nil, err
	}
	defer d.Close()
	req := mhpguard.PermitRequest{Name: argString(args, "name"), Note: argString(args, "note"), TTL: argFloat(args, "ttl_s", 0)}
	_, hasValue := args["value"]
	switch argString(args, "for") {
	case "write":
		req.Method = mhp.MethodSettingsWrite
		if !hasValue || args["params"] != nil {
			return nil, mhp.Errorf(mhp.CodeInvalidParams, "a write permit takes the value the agent will write (value), not params").With(mhp.DataField, "value")
		}
		req.Value = args["value"]
	case "invoke":
		req.Method = mhp.MethodActionsInvoke
		if hasValue {
			return nil, mhp.Errorf(mhp.CodeInvalidParams, "an invoke permit takes params, not value").With(mhp.DataField, "value")
		}
		req.Params, _ = args["params"].(map[string]any)
	}
	var p mhpguard.Permit
	if err := d.Call(ctx, mhp.MethodPermitsIssue, req, &p); err != nil {
		return nil, err
	}
	return map[string]any{"permit": p, "note": "give permit_id " + p.ID + " to the agent for exactly this request; single use"}, nil
}
