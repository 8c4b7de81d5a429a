package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/client"
	"github.com/openmhp/mhp-go/directory"
	"github.com/openmhp/mhp-go/mcpbridge"
)

// BridgeTokens is what the same three steps cost as the model reads them
// through mhp-mcp: each tool result's text content (the host's line, the
// fenced JSON), bytes / 4.
type BridgeTokens struct{ Find, Summary, Select, Path int }

// throughBridge runs find -> summary -> select as tool calls of an
// in-process mhp-mcp over the same directory and drivers.
func throughBridge(ctx context.Context, dir *directory.Directory, devices map[string]*binding.Driver, q directory.Query) (*BridgeTokens, error) {
	b, err := mcpbridge.New(mcpbridge.Config{Finder: dir, Simulated: func(string) bool { return true },
		Dial: func(ctx context.Context, target string) (*client.Device, error) {
			d, ok := devices[strings.TrimPrefix(target, "sim:")]
			if !ok {
				return nil, fmt.Errorf("no simulated device at %s", target)
			}
			return client.Connect(d, client.Options{}), nil
		}})
	if err != nil {
		return nil, err
	}
	defer b.Close()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := b.Server().Connect(ctx, st, nil)
	if err != nil {
		return nil, err
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "scale", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		return nil, err
	}
	defer cs.Close()
	call := func(tool string, args map[string]any) (string, error) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			return "", err
		}
		var text strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				text.WriteString(tc.Text)
			}
		}
		if res.IsError {
			return "", fmt.Errorf("%s: %s", tool, text.String())
		}
		return text.String(), nil
	}
	found, err := call("mhp_find", map[string]any{"query": q.Query, "class": q.Class, "state": q.State, "limit": q.Limit})
	if err != nil {
		return nil, err
	}
	id, err := firstID(found)
	if err != nil {
		return nil, err
	}
	summary, err := call("mhp_describe", map[string]any{"device": id})
	if err != nil {
		return nil, err
	}
	sel, err := call("mhp_describe", map[string]any{"device": id,
		"select": map[string]any{"actions": []string{"run_protocol"}, "settings": []string{"target_temperature"}}})
	if err != nil {
		return nil, err
	}
	t := &BridgeTokens{Find: len(found) / 4, Summary: len(summary) / 4, Select: len(sel) / 4}
	t.Path = t.Find + t.Summary + t.Select
	return t, nil
}

// firstID is the first result's id in mhp_find's fenced text.
func firstID(text string) (string, error) {
	_, body, ok := strings.Cut(text, mcpbridge.DeviceTextOpen+"\n")
	body, _, ok2 := strings.Cut(body, "\n"+mcpbridge.DeviceTextClose)
	if !ok || !ok2 {
		return "", fmt.Errorf("mhp_find's answer is not fenced: %.200s", text)
	}
	found, err := directory.DecodeFound([]byte(body))
	if err != nil {
		return "", err
	}
	if len(found) == 0 {
		return "", fmt.Errorf("mhp_find found nothing")
	}
	return found[0].ID, nil
}
