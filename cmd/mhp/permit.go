package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/guard"
)

// permitVerb runs `mhp TARGET permit settings/write|actions/invoke NAME [VALUE|JSON]
// --operator-token-file F [--ttl S] [--note TEXT]`: an operator's single-use
// approval of exactly that request, printed as its permitId for the agent.
func permitVerb(ctx context.Context, v *verbCtx) int {
	method, name := v.args[0], v.args[1]
	req := guard.PermitRequest{Method: method, Name: name, Note: v.p.flags["note"]}
	switch method {
	case mhp.MethodSettingsWrite, "write":
		req.Method = mhp.MethodSettingsWrite
		if len(v.args) != 3 {
			return v.usageError("permit: a settings/write permit needs the VALUE it approves")
		}
		req.Value = parseValue(v.args[2])
	case mhp.MethodActionsInvoke, "invoke":
		req.Method = mhp.MethodActionsInvoke
		if len(v.args) == 3 {
			params, err := invokeParams(v.args[2:])
			if err != nil {
				return v.usageError("permit: %v", err)
			}
			req.Params = params
		}
	default:
		return v.usageError("permit: METHOD is settings/write (write) or actions/invoke (invoke), not %q", method)
	}
	if t, ok := v.p.flags["ttl"]; ok {
		secs, err := strconv.ParseFloat(t, 64)
		if err != nil {
			return v.usageError("permit: --ttl %q is not a number of seconds", t)
		}
		req.TTL = secs
	}
	var p guard.Permit
	if err := v.d.Call(ctx, mhp.MethodPermitsIssue, req, &p); err != nil {
		return v.fail(err, v.json)
	}
	if v.json {
		return v.printJSON(p)
	}
	fmt.Fprintf(v.stdout, "%s\n", p.ID)
	digest := p.ParamsDigest
	if len(digest) > 16 {
		digest = digest[:16]
	}
	fmt.Fprintf(v.stderr, "permit for %s %s (params digest %s…), single use, expires at %.0f; the agent sends permitId %q\n",
		p.Method, p.Name, digest, p.Expires, p.ID)
	return exitOK
}
