package mcpbridge

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/host"
)

// fleetOps are mhp_lab's ops over the host's fleet (Config.Fleet).
func fleetOps() []string { return []string{"scan", "add", "remove", "locate"} }

// fleetProps are mhp_lab's arguments of the fleet ops.
func fleetProps() map[string]any {
	return map[string]any{"target": strProp(), "twin": boolProp(), "id": strProp(), "location": strProp(),
		"hosts": namesProp(), "force": boolProp()}
}

// fleetOp runs a fleet op of mhp_lab; ok is false for an op that is not one.
// The tools stay thin: every decision is the host package's, except asking
// the person, which is the bridge's (elicitation).
func (b *Bridge) fleetOp(ctx context.Context, req *mcp.CallToolRequest, op string, args map[string]any) (out any, ok bool, err error) {
	f := b.cfg.Fleet
	if f == nil {
		return nil, false, nil
	}
	switch op {
	case "scan":
		found, err := f.Scan(ctx, host.ScanOptions{Hosts: argStrings(args, "hosts"), Browse: true})
		if err != nil {
			return nil, true, err
		}
		return map[string]any{"found": found, "next": "op=add target=<target> adds one (hardware asks the person first)"}, true, nil
	case "add":
		out, err := b.fleetAdd(ctx, req, args)
		return out, true, err
	case "remove":
		id := argString(args, "device")
		force, _ := args["force"].(bool)
		e, err := f.Remove(ctx, id, force)
		if err != nil {
			return nil, true, err
		}
		b.dropDevice(id)
		return map[string]any{"removed": e.ID, "target": e.Target}, true, nil
	case "locate":
		e, err := f.Locate(argString(args, "device"), argString(args, "location"))
		if err != nil {
			return nil, true, err
		}
		return map[string]any{"device": e.ID, "location": e.Location}, true, nil
	}
	return nil, false, nil
}

// fleetAdd adds to the fleet. Anything not simulated is put to the person
// first (elicitation), saying what becomes reachable to the agent; without
// elicitation it is refused, never added silently.
func (b *Bridge) fleetAdd(ctx context.Context, req *mcp.CallToolRequest, args map[string]any) (any, error) {
	twin, _ := args["twin"].(bool)
	target := argString(args, "target")
	e, err := b.cfg.Fleet.Prepare(ctx, target, host.AddOptions{Twin: twin, ID: argString(args, "id"), Location: argString(args, "location")})
	if err != nil {
		return nil, err
	}
	if !e.Simulated {
		key := jsonText([]any{"lab-add", target, twin, e.ID, e.Target, argString(args, "location")})
		what := "Add hardware to the lab: " + e.Reach()
		if _, answered := req.Params.InputResponses["confirm"]; !answered {
			refusal := mhp.Errorf(mhp.CodeApprovalRequired, "adding %s (hardware) needs a person's yes", e.ID).With(mhp.DataApproval, "confirm")
			_, _, ask, cerr := b.confirmation(req, refusal, key, "", what, "")
			if ask != nil {
				return ask, nil
			}
			return nil, cerr
		}
		if ok, _, _, cerr := b.confirmation(req, nil, key, "", what, ""); !ok {
			return nil, cerr
		}
	}
	added, err := b.cfg.Fleet.Commit(e)
	if err != nil {
		return nil, err
	}
	b.dropDevice(added.ID) // a re-added device is reached afresh
	return map[string]any{"added": added, "reachable": added.Reach()}, nil
}

// dropDevice closes every session's connection to a device id, so the next
// call resolves it again (after a remove or a re-add).
func (b *Bridge) dropDevice(id string) {
	for _, s := range b.allSessions() {
		s.mu.Lock()
		d := s.devices[id]
		stop := s.stops[id]
		delete(s.devices, id)
		delete(s.stops, id)
		delete(s.sim, id)
		s.mu.Unlock()
		if stop != nil {
			stop()
		}
		if d != nil {
			d.Close()
		}
	}
}

// fleetList is the fleet's entries for mhp_lab op=list.
func (b *Bridge) fleetList() (any, error) {
	list, err := b.cfg.Fleet.List()
	if err != nil {
		return nil, err
	}
	out := make([]map[string]any, 0, len(list))
	for _, e := range list {
		m := map[string]any{"id": e.ID, "kind": e.Kind, "simulated": e.Simulated}
		if e.Location != "" {
			m["location"] = e.Location
		}
		if e.Card.Class != "" {
			m["class"] = e.Card.Class
		}
		out = append(out, m)
	}
	return out, nil
}

// fleetNote explains an empty fleet.
func fleetNote(n int) string {
	if n > 0 {
		return ""
	}
	return "the fleet is empty: op=scan finds MHP servers, op=add target=URL|folder|config adds one, op=onboard interviews the owner of an instrument with no MHP server"
}
