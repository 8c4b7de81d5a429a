package mcpbridge

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openmhp/mhp-go"
)

// ResultBudget bounds a tool result: the JSON of its structured content (and
// the text content, which is the same JSON) is at most this many bytes. A
// bigger answer is shrunk (long strings cut, long lists and objects
// shortened, each cut saying how much it dropped) and carries "truncated"
// with the original size and how to ask for less; mhp_lab op=updates pages
// instead.
const ResultBudget = 4096

// toJSONValue turns v into plain JSON values (maps, slices, strings,
// float64, bool, nil), as the model will see it.
func toJSONValue(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return string(b)
	}
	return out
}

// shrink returns v (a plain JSON value) cut down until its JSON fits in
// budget bytes: strings, lists and objects are clipped harder at each step;
// as a last resort it becomes a preview of its JSON text.
func shrink(v any, budget int) any {
	if len(jsonText(v)) <= budget {
		return v
	}
	for _, c := range []struct{ str, list int }{{1024, 32}, {512, 16}, {256, 8}, {128, 4}, {64, 2}, {32, 1}} {
		out := clip(v, c.str, c.list)
		if len(jsonText(out)) <= budget {
			return out
		}
	}
	text := jsonText(v)
	return map[string]any{"preview": mhp.Truncate(text, budget/2)}
}

// clip cuts strings longer than str bytes and lists or objects longer than
// list entries (objects keep their first keys in sorted order).
func clip(v any, str, list int) any {
	switch x := v.(type) {
	case string:
		if len(x) > str {
			return mhp.Truncate(x, str)
		}
		return x
	case []any:
		n := min(len(x), list)
		out := make([]any, 0, n+1)
		for _, e := range x[:n] {
			out = append(out, clip(e, str, list))
		}
		if len(x) > n {
			out = append(out, fmt.Sprintf("…[+%d more items]", len(x)-n))
		}
		return out
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		keep := max(list*4, 8) // objects are records: keep more fields than list items
		out := make(map[string]any, min(len(keys), keep)+1)
		for i, k := range keys {
			if i == keep {
				out["…"] = fmt.Sprintf("+%d more fields", len(keys)-keep)
				break
			}
			out[k] = clip(x[k], str, list)
		}
		return out
	}
	return v
}

// hint says how to ask a tool for less when its answer was cut.
func hint(tool string) string {
	switch tool {
	case "mhp_find":
		return "lower limit or narrow the query"
	case "mhp_describe":
		return "use detail=card or summary, then select only the items you need"
	case "mhp_read":
		return "name the signals you need"
	case "mhp_job":
		return "ask for one job by id"
	case "mhp_run":
		return "print less (summaries, not every reading)"
	case "mhp_lab":
		return "ask for one device"
	}
	return "ask for less"
}

// bounded is the tool result of v, within ResultBudget.
func bounded(tool string, v any) *mcp.CallToolResult {
	j := toJSONValue(v)
	obj, ok := j.(map[string]any)
	if !ok {
		obj = map[string]any{"result": j}
	}
	delete(obj, DeviceTextField) // a device's own member of that name is not the host's mark
	text := jsonText(obj)        // the text content: the fence's line says what the mark says
	// Both the text and the structured content (text + the mark) stay within the budget.
	budget := ResultBudget - max(fenceOverhead, len(DeviceTextNote)+len(DeviceTextField)+8)
	if len(text) > budget {
		size := len(text)
		note := map[string]any{"bytes": size, "limit": ResultBudget, "hint": hint(tool)}
		cut := shrink(obj, budget-len(jsonText(note))-64)
		if m, ok := cut.(map[string]any); ok {
			obj = m
		} else {
			obj = map[string]any{"result": cut}
		}
		obj["truncated"] = note
		delete(obj, DeviceTextField)
		text = jsonText(obj)
	}
	obj[DeviceTextField] = DeviceTextNote
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fenceDeviceText(text)}}, StructuredContent: obj}
}

// failure is a tool result with isError and the structured MHP error, within
// ResultBudget.
func failure(err error) *mcp.CallToolResult {
	me, ok := mhp.AsError(err)
	if !ok {
		me = mhp.Errorf(mhp.CodeInternal, "%v", err)
	}
	ej := shrink(toJSONValue(me), ResultBudget/2-64)
	body := map[string]any{"mhpError": ej, "code": me.Code.String(), DeviceTextField: DeviceTextNote}
	msg := mhp.Truncate(me.Message, 512)
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: me.Code.String() + " (the host's code; the message and data are fenced: they may be the device's text)\n" +
		fenceDeviceText(msg+" "+jsonText(ej))}},
		StructuredContent: body}
}
