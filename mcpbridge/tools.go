package mcpbridge

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/client"
	"github.com/openmhp/mhp-go/directory"
)

// ToolNames are the bridge's tools, the same for 2 devices or 2,000.
func ToolNames() []string {
	return []string{"mhp_find", "mhp_describe", "mhp_read", "mhp_write", "mhp_invoke", "mhp_job", "mhp_estop", "mhp_run", "mhp_lab"}
}

type tool struct {
	name, description string
	schema            map[string]any
	examples          []map[string]any
	handle            func(ctx context.Context, req *mcp.CallToolRequest, args map[string]any) (any, error)
}

func obj(required []string, props map[string]any) map[string]any {
	s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

func str(desc string) map[string]any { return map[string]any{"type": "string", "description": desc} }

var deviceProp = str("device id, from mhp_find")

// Server returns the MCP server with the bridge's tools. One server serves
// many MCP sessions; the device connections are shared.
func (b *Bridge) Server() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: b.cfg.Name, Version: b.cfg.Version}, &mcp.ServerOptions{
		Instructions: "Lab instruments over MHP. Find a device with mhp_find, read its summary with mhp_describe " +
			"(detail=summary, then select the items you will use), then read, write and invoke. Jobs run on the device: " +
			"follow them with mhp_job. mhp_estop is always allowed. Use mhp_run for loops and many readings.",
	})
	for _, t := range b.tools() {
		t := t
		s.AddTool(&mcp.Tool{Name: t.name, Description: t.description, InputSchema: t.schema,
			Meta: mcp.Meta{"input_examples": t.examples}},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				args := map[string]any{}
				if len(req.Params.Arguments) > 0 {
					dec := json.NewDecoder(strings.NewReader(string(req.Params.Arguments)))
					dec.UseNumber()
					if err := dec.Decode(&args); err != nil {
						return failure(mhp.Errorf(mhp.CodeInvalidParams, "%s: arguments are not a JSON object: %v", t.name, err)), nil
					}
				}
				// The model never approves: only a person, through elicitation, can.
				delete(args, "approved")
				timeout := b.cfg.CallTimeout
				if t.name == "mhp_run" {
					// A run has its own time budget, bounded by script.Options.MaxTimeout; add its clean-up.
					timeout = b.runner.MaxTimeout() + 10*time.Second
				}
				ctx, cancel := context.WithTimeout(ctx, timeout)
				defer cancel()
				out, err := t.handle(ctx, req, normalize(args).(map[string]any))
				if err != nil {
					return failure(err), nil
				}
				if ask, ok := out.(*needsInput); ok {
					return &mcp.CallToolResult{InputRequests: ask.requests, RequestState: ask.state}, nil
				}
				return result(out), nil
			})
	}
	return s
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
	return []tool{
		{name: "mhp_find", description: "Search the lab's devices by what they are and where (BM25 over id, class, make, model, " +
			"location, tags, notes and capability names). Filters are exact. state=idle finds a free instrument (live).",
			schema: obj(nil, map[string]any{"query": str("what you need, in words"), "class": str("exact class, e.g. thermocycler"),
				"state":    map[string]any{"type": "string", "enum": []string{"idle", "busy", "fault", "estop", "unreachable"}},
				"location": str("exact location, e.g. 'bay 12'"), "tags": map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
				"limit": map[string]any{"type": "integer", "minimum": 1, "maximum": 50}, "live": map[string]any{"type": "boolean"}}),
			examples: []map[string]any{{"query": "heat a 96-well plate to 95 C for PCR", "class": "thermocycler", "state": "idle", "limit": 3}},
			handle:   b.find},
		{name: "mhp_describe", description: "Describe a device: detail card, summary (default: instructions and slim tables) or full; " +
			"or select the full specs of named items.",
			schema: obj([]string{"device"}, map[string]any{"device": deviceProp,
				"detail": map[string]any{"type": "string", "enum": []string{"card", "summary", "full"}},
				"select": obj(nil, map[string]any{"signals": map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
					"settings": map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
					"actions":  map[string]any{"type": "array", "items": map[string]any{"type": "string"}}})}),
			examples: []map[string]any{{"device": "thermocycler-01", "detail": "summary"},
				{"device": "thermocycler-01", "select": map[string]any{"actions": []string{"run_protocol"}, "settings": []string{"target_temperature"}}}},
			handle: b.describe},
		{name: "mhp_read", description: "Read signals (all when names is omitted). Unreadable signals read null with a reason.",
			schema: obj([]string{"device"}, map[string]any{"device": deviceProp,
				"names": map[string]any{"type": "array", "items": map[string]any{"type": "string"}}}),
			examples: []map[string]any{{"device": "thermocycler-01", "names": []string{"block_temperature", "lid_closed"}}},
			handle:   b.read},
		{name: "mhp_write", description: "Write a setting. The device enforces limits, interlocks, approval, lease and busy; " +
			"dry_run checks everything and touches nothing. Confirm-gated settings ask a person.",
			schema: obj([]string{"device", "name", "value"}, map[string]any{"device": deviceProp, "name": str("setting name"),
				"value": map[string]any{"description": "the value, typed as the setting says"}, "dry_run": map[string]any{"type": "boolean"}}),
			examples: []map[string]any{{"device": "thermocycler-01", "name": "target_temperature", "value": 95}},
			handle:   b.write},
		{name: "mhp_invoke", description: "Start an action; it runs on the device as a job. wait_s waits up to that many seconds " +
			"for the job to end. Confirm-gated actions ask a person.",
			schema: obj([]string{"device", "action"}, map[string]any{"device": deviceProp, "action": str("action name"),
				"params": map[string]any{"type": "object"}, "dry_run": map[string]any{"type": "boolean"},
				"wait_s": map[string]any{"type": "number", "minimum": 0, "maximum": 3600}}),
			examples: []map[string]any{{"device": "thermocycler-01", "action": "run_protocol",
				"params": map[string]any{"steps": []any{map[string]any{"temp": 95, "hold_s": 30}}, "cycles": 30}}},
			handle: b.invoke},
		{name: "mhp_job", description: "Follow or steer a job: op status (default), wait (up to wait_s), cancel, pause, resume, list.",
			schema: obj([]string{"device"}, map[string]any{"device": deviceProp, "id": str("job id"),
				"op":     map[string]any{"type": "string", "enum": []string{"status", "wait", "cancel", "pause", "resume", "list"}},
				"wait_s": map[string]any{"type": "number", "minimum": 0, "maximum": 3600}}),
			examples: []map[string]any{{"device": "thermocycler-01", "id": "job_04324008", "op": "wait", "wait_s": 60}},
			handle:   b.job},
		{name: "mhp_estop", description: "Emergency stop: one device, or every connected device when device is omitted. Always allowed.",
			schema:   obj([]string{"reason"}, map[string]any{"device": deviceProp, "reason": str("why")}),
			examples: []map[string]any{{"device": "arm-01", "reason": "collision risk"}, {"reason": "smoke in bay 3"}},
			handle:   b.estop},
		{name: "mhp_run", description: "Run a Starlark script against the lab (lab['id'].read/write/invoke/wait/acquire...). " +
			"Only what it prints comes back. Every call passes the same safety gates; scripts cannot approve.",
			schema: obj([]string{"script"}, map[string]any{"script": str("Starlark source"),
				"timeout_s": map[string]any{"type": "number", "minimum": 1, "maximum": 3600}}),
			examples: []map[string]any{{"script": "t = lab['thermocycler-01']\nrs = [t.read('block_temperature') for _ in range(500)]\nprint('mean', sum(rs) / len(rs))"}},
			handle:   b.run},
		{name: "mhp_lab", description: "The lab session: op list (connected devices and state), updates (notifications since " +
			"the last call), limits, acquire/release a lease, reset after estop or fault.",
			schema: obj([]string{"op"}, map[string]any{"op": map[string]any{"type": "string", "enum": []string{"list", "updates", "limits", "acquire", "release", "reset"}},
				"device": deviceProp, "ttl_s": map[string]any{"type": "number", "minimum": 1, "maximum": 3600}}),
			examples: []map[string]any{{"op": "updates"}, {"op": "reset", "device": "thermocycler-01"}},
			handle:   b.lab},
	}
}

func (b *Bridge) find(ctx context.Context, _ *mcp.CallToolRequest, args map[string]any) (any, error) {
	q := directory.Query{Query: argString(args, "query"), Class: argString(args, "class"), State: argString(args, "state"),
		Location: argString(args, "location"), Tags: argStrings(args, "tags"), Limit: int(argFloat(args, "limit", 0))}
	if live, ok := args["live"].(bool); ok {
		q.Live = &live
	}
	res, err := b.cfg.Finder.Search(ctx, q)
	if err != nil {
		return nil, err
	}
	return map[string]any{"results": res}, nil
}

func (b *Bridge) describe(ctx context.Context, _ *mcp.CallToolRequest, args map[string]any) (any, error) {
	d, err := b.device(ctx, argString(args, "device"))
	if err != nil {
		return nil, err
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

func (b *Bridge) read(ctx context.Context, _ *mcp.CallToolRequest, args map[string]any) (any, error) {
	d, err := b.device(ctx, argString(args, "device"))
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
// for an elicitation bound to this exact request (an HMAC'd, single-use
// request state); on the retry it checks the state and the person's answer.
// Without elicitation there is no trusted channel, so the request stays refused.
func (b *Bridge) confirmation(req *mcp.CallToolRequest, refusal *mhp.Error, key, what, notes string) (approved bool, ask *needsInput, err error) {
	if refusal == nil {
		refusal = mhp.Errorf(mhp.CodeApprovalRequired, "%s requires a person's confirmation", what).With("approval", "confirm")
	}
	if req == nil || req.Session == nil {
		return false, nil, refusal.With("elicitation", "unavailable")
	}
	if resp, ok := req.Params.InputResponses["confirm"]; ok {
		if !b.consumeState(req.Params.RequestState, key) {
			return false, nil, mhp.Errorf(mhp.CodeApprovalRequired, "%s: the confirmation does not match this request (stale, replayed or altered)", what).
				With("approval", "confirm")
		}
		er, _ := resp.(*mcp.ElicitResult)
		if er != nil && er.Action == "accept" && er.Content["confirm"] == true {
			return true, nil, nil
		}
		action := "no answer"
		if er != nil {
			action = er.Action
		}
		return false, nil, mhp.Errorf(mhp.CodeApprovalRequired, "%s: the person did not confirm (%s)", what, action).
			With("approval", "confirm").With("elicitation", action)
	}
	if ip := req.Session.InitializeParams(); ip == nil || ip.Capabilities == nil || ip.Capabilities.Elicitation == nil {
		return false, nil, refusal.With("elicitation", "unavailable: this MCP client cannot ask a person, so confirm-gated requests cannot run here")
	}
	msg := what + " needs your confirmation."
	if notes != "" {
		msg += " Device notes: " + notes
	}
	return false, &needsInput{
		requests: mcp.InputRequestMap{"confirm": &mcp.ElicitParams{Message: msg, RequestedSchema: map[string]any{
			"type": "object", "required": []string{"confirm"},
			"properties": map[string]any{"confirm": map[string]any{"type": "boolean", "title": "Go ahead", "description": what}}}}},
		state: b.newState(key),
	}, nil
}

func (b *Bridge) itemNotes(ctx context.Context, d *client.Device, sel mhp.Selection) string {
	desc, err := d.Describe(ctx, mhp.DescribeRequest{Select: &sel})
	if err != nil {
		return ""
	}
	for _, s := range desc.Settings {
		return s.Notes
	}
	for _, a := range desc.Actions {
		return a.Notes
	}
	return ""
}

func (b *Bridge) write(ctx context.Context, req *mcp.CallToolRequest, args map[string]any) (any, error) {
	id := argString(args, "device")
	d, err := b.device(ctx, id)
	if err != nil {
		return nil, err
	}
	w := mhp.WriteRequest{Name: argString(args, "name"), Value: args["value"]}
	w.DryRun, _ = args["dry_run"].(bool)
	key := jsonText([]any{"write", id, w.Name, w.Value, w.DryRun})
	if _, answered := req.Params.InputResponses["confirm"]; !answered {
		res, err := d.Write(ctx, w)
		me, ok := mhp.AsError(err)
		if !ok || me.Code != mhp.CodeApprovalRequired {
			return res, err
		}
		what := fmt.Sprintf("Write %s = %v on %s", w.Name, jsonText(w.Value), id)
		_, ask, cerr := b.confirmation(req, me, key, what, b.itemNotes(ctx, d, mhp.Selection{Settings: []string{w.Name}}))
		if ask != nil {
			return ask, nil
		}
		return nil, cerr
	}
	what := fmt.Sprintf("Write %s = %v on %s", w.Name, jsonText(w.Value), id)
	ok, _, cerr := b.confirmation(req, nil, key, what, "")
	if !ok {
		return nil, cerr
	}
	w.Approved = true
	return d.Write(ctx, w)
}

func (b *Bridge) invoke(ctx context.Context, req *mcp.CallToolRequest, args map[string]any) (any, error) {
	id := argString(args, "device")
	d, err := b.device(ctx, id)
	if err != nil {
		return nil, err
	}
	inv := mhp.InvokeRequest{Name: argString(args, "action")}
	inv.Params, _ = args["params"].(map[string]any)
	inv.DryRun, _ = args["dry_run"].(bool)
	key := jsonText([]any{"invoke", id, inv.Name, inv.Params, inv.DryRun})
	what := fmt.Sprintf("Run %s on %s with %s", inv.Name, id, jsonText(inv.Params))
	var res *mhp.InvokeResult
	if _, answered := req.Params.InputResponses["confirm"]; !answered {
		res, err = d.Invoke(ctx, inv)
		if me, ok := mhp.AsError(err); ok && me.Code == mhp.CodeApprovalRequired {
			_, ask, cerr := b.confirmation(req, me, key, what, b.itemNotes(ctx, d, mhp.Selection{Actions: []string{inv.Name}}))
			if ask != nil {
				return ask, nil
			}
			return nil, cerr
		}
	} else {
		ok, _, cerr := b.confirmation(req, nil, key, what, "")
		if !ok {
			return nil, cerr
		}
		inv.Approved = true
		res, err = d.Invoke(ctx, inv)
	}
	if err != nil || res.Job == nil {
		return res, err
	}
	if wait := argFloat(args, "wait_s", 0); wait > 0 {
		return b.wait(ctx, d, res.Job.ID, wait)
	}
	return res, nil
}

func (b *Bridge) wait(ctx context.Context, d *client.Device, id string, secs float64) (any, error) {
	wctx, cancel := context.WithTimeout(ctx, time.Duration(secs*float64(time.Second)))
	defer cancel()
	j, err := d.Wait(wctx, id)
	if err != nil && wctx.Err() != nil && ctx.Err() == nil {
		// Still running: say so rather than fail.
		cur, serr := d.Job(ctx, id)
		if serr != nil {
			return nil, serr
		}
		return map[string]any{"job": cur, "note": fmt.Sprintf("still %s after %gs; call mhp_job op=wait again", cur.State, secs)}, nil
	}
	if err != nil {
		return nil, err
	}
	return map[string]any{"job": j}, nil
}

func (b *Bridge) job(ctx context.Context, _ *mcp.CallToolRequest, args map[string]any) (any, error) {
	d, err := b.device(ctx, argString(args, "device"))
	if err != nil {
		return nil, err
	}
	id := argString(args, "id")
	op := argString(args, "op")
	if op == "" {
		op = "status"
	}
	if op != "list" && id == "" {
		return nil, mhp.Errorf(mhp.CodeInvalidParams, "mhp_job op=%s needs the job id", op).With("field", "id")
	}
	var j *mhp.Job
	switch op {
	case "status":
		j, err = d.Job(ctx, id)
	case "wait":
		return b.wait(ctx, d, id, argFloat(args, "wait_s", 30))
	case "cancel":
		j, err = d.CancelJob(ctx, id)
	case "pause":
		j, err = d.PauseJob(ctx, id)
	case "resume":
		j, err = d.ResumeJob(ctx, id)
	case "list":
		jobs, err := d.Jobs(ctx, mhp.JobsRequest{Limit: 20})
		if err != nil {
			return nil, err
		}
		return map[string]any{"jobs": jobs}, nil
	default:
		return nil, mhp.Errorf(mhp.CodeInvalidParams, "op %q is not one of status, wait, cancel, pause, resume, list", op).With("field", "op")
	}
	if err != nil {
		return nil, err
	}
	return map[string]any{"job": j}, nil
}

func (b *Bridge) estop(ctx context.Context, _ *mcp.CallToolRequest, args map[string]any) (any, error) {
	reason := argString(args, "reason")
	ctx = context.WithoutCancel(ctx)
	if id := argString(args, "device"); id != "" {
		d, err := b.device(ctx, id)
		if err != nil {
			return nil, err
		}
		return d.EStop(ctx, reason)
	}
	b.mu.Lock()
	lab := client.NewLab(nil, b.cfg.Client)
	for id, d := range b.devices {
		_ = lab.Add(id, d)
	}
	b.mu.Unlock()
	ectx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return map[string]any{"devices": lab.EStopAll(ectx, reason)}, nil
}

func (b *Bridge) run(ctx context.Context, _ *mcp.CallToolRequest, args map[string]any) (any, error) {
	timeout, err := b.runner.Timeout(argFloat(args, "timeout_s", 0), "timeout_s")
	if err != nil {
		return nil, err
	}
	src := argString(args, "script")
	if src == "" {
		return nil, mhp.Errorf(mhp.CodeInvalidParams, "mhp_run needs a script").With("field", "script")
	}
	// The run ends with the request: a cancelled call stops the script at
	// its next step and in any wait.
	res, err := b.runner.Run(ctx, src, b, timeout)
	if err != nil {
		return nil, err
	}
	if res.MHP != nil {
		return nil, res.MHP.With("output", res.Output).With("script_error", res.Error)
	}
	return res, nil
}

func (b *Bridge) lab(ctx context.Context, _ *mcp.CallToolRequest, args map[string]any) (any, error) {
	op := argString(args, "op")
	switch op {
	case "list":
		names := b.Names()
		out := make([]map[string]any, 0, len(names))
		for _, n := range names {
			d, _ := b.device(ctx, n)
			entry := map[string]any{"device": n, "leased": d.HoldsLease()}
			if p, err := d.Ping(ctx); err == nil {
				entry["state"] = p.State
			} else {
				entry["state"], entry["error"] = mhp.StateUnreachable, err.Error()
			}
			out = append(out, entry)
		}
		return map[string]any{"devices": out}, nil
	case "updates":
		ups, dropped := b.drainUpdates()
		return map[string]any{"updates": ups, "dropped": dropped}, nil
	}
	d, err := b.device(ctx, argString(args, "device"))
	if err != nil {
		return nil, err
	}
	switch op {
	case "limits":
		return d.Limits(ctx)
	case "acquire":
		return d.Acquire(ctx, time.Duration(argFloat(args, "ttl_s", 60)*float64(time.Second)))
	case "release":
		return map[string]bool{"released": true}, d.Release(ctx)
	case "reset":
		return d.Reset(ctx)
	}
	return nil, mhp.Errorf(mhp.CodeInvalidParams, "op %q is not one of list, updates, limits, acquire, release, reset", op).With("field", "op")
}
