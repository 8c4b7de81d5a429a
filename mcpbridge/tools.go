package mcpbridge

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openmhp/mhp-go"
)

// ToolNames are the bridge's tools, the same for 2 devices or 2,000.
func ToolNames() []string {
	return []string{"mhp_find", "mhp_describe", "mhp_read", "mhp_write", "mhp_invoke", "mhp_job", "mhp_estop", "mhp_run", "mhp_lab", "mhp_evidence"}
}

// OperatorToolNames are the tools listed besides ToolNames when the host
// policy has operator_tools and the operator gave a token (Config.OperatorToken).
func OperatorToolNames() []string { return []string{"mhp_permit", "mhp_operator"} }

// A tool is one MCP tool of the bridge. Operator tools (a person's
// decisions: mhp_permit; mhp_lab's reset is an operator op) are listed only
// when the host policy allows them. Examples are kept where they teach what a
// schema cannot (a query's phrasing, a selection, an action's params, a
// script). tools/list is 3,902 bytes with the default policy, 4,374 with
// the host's fleet and interview ops, 4,932 on an operator's host listing
// mhp_permit and mhp_operator too (TestToolsListSize holds each); of the
// 4,374, the SDK's result framing is 141, the descriptions 803, the
// examples 376, the input schemas 2,479 and the tools' keys the rest. JSON
// Schema $defs would not help: each tool's inputSchema stands alone, and a
// $ref is longer than the {"type":"string"} it replaces.
type tool struct {
	name, description string
	schema            map[string]any
	examples          []map[string]any
	operator          bool
	handle            func(ctx context.Context, s *session, req *mcp.CallToolRequest, args map[string]any) (any, error)
}

// Schema pieces shared by the tools: short, because every host sends the
// whole tools/list to the model on every turn (ResultBudget's sibling).
func obj(required []string, props map[string]any) map[string]any {
	s := map[string]any{"type": "object", "properties": props} // closed: see validate
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

func str(desc string) map[string]any { return map[string]any{"type": "string", "description": desc} }

func enum(vals ...string) map[string]any { return map[string]any{"type": "string", "enum": vals} }

func num(lo, hi float64) map[string]any {
	return map[string]any{"type": "number", "minimum": lo, "maximum": hi}
}

// deviceProp is an id from mhp_find (said once, in the instructions).
func deviceProp() map[string]any { return strProp() }

func strProp() map[string]any  { return map[string]any{"type": "string"} }
func boolProp() map[string]any { return map[string]any{"type": "boolean"} }
func waitProp() map[string]any { return num(0, maxWait) }

func namesProp() map[string]any {
	return map[string]any{"type": "array", "items": map[string]any{"type": "string"}}
}

// maxWait is the largest wait_s and timeout_s the schemas allow.
const maxWait = 3600

// Server returns the MCP server with the bridge's tools. One server serves
// many MCP sessions; each session has its own device connections.
func (b *Bridge) Server() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: b.cfg.Name, Version: b.cfg.Version}, &mcp.ServerOptions{
		Instructions: "Lab instruments over MHP. mhp_find a device (its id is the device argument of the other tools), " +
			"mhp_describe it (summary, then select what you use), then read, write, invoke; follow jobs with mhp_job. " +
			"Confirm-gated writes and actions ask a person through the host. mhp_estop is always allowed. " +
			"mhp_run for loops. Unknown arguments are refused.",
	})
	// An elicitation the SDK fulfils for the client (clients without
	// multi-round-trip) fails as a Go error when the answer has the wrong
	// shape or the client refuses: that is the person's answer not being
	// readable, a tool result, not a JSON-RPC error with code 0.
	s.AddReceivingMiddleware(confirmationFailures, b.touchSessions)
	if !b.policy.Enabled {
		// Seed 001: no tools listed, every call refused, no device contacted.
		s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
			return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
				if method == "tools/call" {
					return failure(forbidden("enabled", "every tool call")), nil
				}
				return next(ctx, method, req)
			}
		})
		return s
	}
	for _, t := range b.tools() {
		if t.operator && (!b.policy.OperatorTools || b.cfg.OperatorToken == "") {
			continue
		}
		var meta mcp.Meta
		if len(t.examples) > 0 {
			meta = mcp.Meta{"input_examples": t.examples}
		}
		s.AddTool(&mcp.Tool{Name: t.name, Description: t.description, InputSchema: t.schema, Meta: meta},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return b.call(ctx, t, req), nil
			})
	}
	return s
}

// call runs one tools/call: decode, validate against the schema, strip the
// model's approval, bound the time (longer by the wait the call asks for)
// and the size of the answer.
func (b *Bridge) call(ctx context.Context, t tool, req *mcp.CallToolRequest) *mcp.CallToolResult {
	args := map[string]any{}
	if raw := strings.TrimSpace(string(req.Params.Arguments)); raw != "" && raw != "null" {
		dec := json.NewDecoder(strings.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&args); err != nil {
			return failure(mhp.Errorf(mhp.CodeInvalidParams, "%s: arguments are not a JSON object: %v", t.name, err).With(mhp.DataField, "arguments"))
		}
	}
	// The model never approves: only a person, through elicitation, or an
	// operator's permit can.
	delete(args, "approved")
	if p, ok := args["permitId"]; ok && (t.name == "mhp_write" || t.name == "mhp_invoke") {
		if _, both := args["permit_id"]; !both {
			args["permit_id"] = p // the wire's spelling, accepted too
			delete(args, "permitId")
		}
	}
	if err := validate(t.name, t.schema, args); err != nil {
		return failure(err)
	}
	args = normalize(args).(map[string]any)
	s, err := b.session(req)
	if err != nil && t.name == "mhp_estop" {
		s, err = b.local, nil // estop is anyone's, whatever the limits
	}
	if err != nil {
		return failure(err)
	}
	ctx, err = s.allowTool(ctx, t, args) // the caller's role (roles.go)
	if err != nil {
		return failure(err)
	}
	if t.name != "mhp_estop" {
		if err := s.enter(); err != nil {
			return failure(err)
		}
		defer s.leave()
	}
	extra := max(argFloat(args, "wait_s", 0), argFloat(args, "timeout_s", 0))
	if t.name == "mhp_job" && argString(args, "op") == "wait" && args["wait_s"] == nil {
		extra = defaultJobWait
	}
	if t.name == "mhp_run" {
		// A run has its own time budget, bounded by the runner's maximum; the
		// call's deadline leaves room for it and its clean-up.
		extra = b.runner.MaxTimeout().Seconds() + 10
	}
	ctx, cancel := context.WithTimeout(ctx, b.cfg.CallTimeout+time.Duration(extra*float64(time.Second)))
	defer cancel()
	out, err := t.handle(ctx, s, req, args)
	if err != nil {
		return failure(err)
	}
	if ask, ok := out.(*needsInput); ok {
		return &mcp.CallToolResult{InputRequests: ask.requests, RequestState: ask.state}
	}
	return bounded(t.name, out)
}

// normalize turns json.Number into float64 throughout.
func normalize(v any) any {
	switch x := v.(type) {
	case json.Number:
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = normalize(e)
		}
	case []any:
		for i, e := range x {
			x[i] = normalize(e)
		}
	}
	return v
}

func argString(args map[string]any, k string) string { s, _ := args[k].(string); return s }

func argStrings(args map[string]any, k string) []string {
	list, _ := args[k].([]any)
	out := make([]string, 0, len(list))
	for _, e := range list {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func argFloat(args map[string]any, k string, def float64) float64 {
	if f, ok := args[k].(float64); ok {
		return f
	}
	return def
}

func (b *Bridge) tools() []tool {
	labOps := []string{"list", "updates", "limits", "acquire", "release"}
	labDesc := "list: devices, policy; updates: paged notifications; limits; acquire/release: lease"
	if b.policy.OperatorTools {
		labOps = append(labOps, "reset")
		labDesc += "; reset: after estop/fault"
	}
	labProps := map[string]any{"op": nil, "device": deviceProp(), "ttl_s": num(1, maxWait)}
	if b.cfg.Fleet != nil {
		labOps = append(labOps, fleetOps()...)
		labDesc += "; scan hosts; add target (URL/folder/config; twin); remove; locate"
		for k, v := range fleetProps() {
			labProps[k] = v
		}
	}
	if b.cfg.Fleet != nil && b.cfg.Onboard != nil {
		labOps = append(labOps, onboardOps()...)
		labDesc += "; onboard answers, id; new/write/validate: package files (id, path, content)"
		for k, v := range onboardProps() {
			labProps[k] = v
		}
	}
	labProps["op"] = enum(labOps...)
	return []tool{
		{name: "mhp_find", description: "Find devices by task words; filters exact; state=idle: free; fields all share: in common.",
			schema: obj(nil, map[string]any{"query": strProp(), "class": strProp(),
				"state": enum("idle", "busy", "fault", "estop", "unreachable"), "location": strProp(), "tags": namesProp(),
				"limit": map[string]any{"type": "integer", "minimum": 1, "maximum": 50}, "live": boolProp()}),
			examples: []map[string]any{{"query": "PCR at 95 C in bay 2", "state": "idle"}},
			handle:   b.find},
		{name: "mhp_describe", description: "Summary by default; select: items' full specs; methods: saved methods ('' all, text finds, a name in full).",
			schema: obj([]string{"device"}, map[string]any{"device": deviceProp(), "detail": enum("card", "summary", "full"),
				"select":  obj(nil, map[string]any{"signals": namesProp(), "settings": namesProp(), "actions": namesProp()}),
				"methods": strProp()}),
			examples: []map[string]any{{"device": "tc-01", "select": map[string]any{"actions": []string{"run_protocol"}}}},
			handle:   b.describe},
		{name: "mhp_read", description: "Read signals (all without names).",
			schema: obj([]string{"device"}, map[string]any{"device": deviceProp(), "names": namesProp()}),
			handle: b.read},
		{name: "mhp_write", description: "Write a setting (typed value); dry_run only checks.",
			schema: obj([]string{"device", "name", "value"}, map[string]any{"device": deviceProp(), "name": strProp(),
				"value": map[string]any{}, "dry_run": boolProp(), "permit_id": strProp()}),
			handle: b.write},
		{name: "mhp_invoke", description: "Start an action or saved method as a job; wait_s waits.",
			schema: obj([]string{"device"}, map[string]any{"device": deviceProp(), "action": strProp(), "method": strProp(),
				"params": map[string]any{"type": "object"}, "dry_run": boolProp(), "wait_s": waitProp(), "permit_id": strProp()}),
			examples: []map[string]any{{"device": "tc-01", "action": "run_protocol",
				"params": map[string]any{"steps": []any{map[string]any{"temp": 95, "hold_s": 30}}, "cycles": 30}, "wait_s": 60}},
			handle: b.invoke},
		{name: "mhp_job", description: "Job op, default status; wait: wait_s, default 30.",
			schema: obj([]string{"device"}, map[string]any{"device": deviceProp(), "id": strProp(),
				"op": enum("status", "wait", "cancel", "pause", "resume", "list"), "wait_s": waitProp()}),
			handle: b.job},
		{name: "mhp_estop", description: "Emergency stop a device (none: all connected).",
			schema: obj([]string{"reason"}, map[string]any{"device": deviceProp(), "reason": strProp()}),
			handle: b.estop},
		{name: "mhp_run", description: "Starlark: lab['id'].read/write/invoke/wait/acquire; returns its prints; same gates.",
			schema:   obj([]string{"script"}, map[string]any{"script": strProp(), "timeout_s": num(1, maxWait)}),
			examples: []map[string]any{{"script": "print(sum([lab['tc-01'].read('temp') for _ in range(500)]) / 500)"}},
			handle:   b.run},
		{name: "mhp_lab", description: labDesc + ".",
			schema: obj([]string{"op"}, labProps),
			handle: b.lab},
		{name: "mhp_evidence", description: "Receipts: chain head, latest page (or after seq); filters exact.",
			schema: obj([]string{"device"}, map[string]any{"device": deviceProp(), "command_id": strProp(), "session": strProp(),
				"after": map[string]any{"type": "integer"}}),
			handle: b.evidence},
		{name: "mhp_permit", operator: true, description: "Operator: a single-use permit for one exact write (value) or invoke (params); the agent passes its permit_id.",
			schema: obj([]string{"device", "for", "name"}, map[string]any{"device": deviceProp(), "for": enum("write", "invoke"),
				"name": strProp(), "value": map[string]any{}, "params": map[string]any{"type": "object"}, "ttl_s": num(1, maxWait), "note": strProp()}),
			handle: b.permit},
		b.operatorTool(), // operator.go
	}
}
