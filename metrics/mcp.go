package metrics

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCPMiddleware counts MCP tool calls by tool and outcome (mhp_mcp_tool_calls_total):
// "ok", "error" (the tool answered isError: a refusal or a failure the
// agent reads), or "invalid" (refused before any tool ran, e.g. an unknown
// tool; its name is not used as a label, so a client cannot grow the set).
// Add it to an mcp.Server with AddReceivingMiddleware.
func (m *Metrics) MCPMiddleware() mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if method != "tools/call" {
				return res, err
			}
			tool, outcome := "invalid", "invalid"
			if err == nil {
				if r, ok := req.(*mcp.CallToolRequest); ok && r.Params != nil {
					tool = r.Params.Name
				}
				outcome = "ok"
				if r, ok := res.(*mcp.CallToolResult); ok && r.IsError {
					outcome = "error"
				}
			}
			m.ObserveToolCall(tool, outcome)
			return res, err
		}
	}
}
