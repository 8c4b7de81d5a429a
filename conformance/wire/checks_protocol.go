package wire

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/openmhp/mhp-go"
)

// checks is every check in run order: protocol checks on raw frames, then
// read-only device checks, then dry-run gate checks, then the lease.
var checks = []Check{
	{ID: "initialize/required_first", Level: Must, Section: "§5.1",
		Sentence: "Servers MUST respond to initialize before any other method.", run: checkInitFirst},
	{ID: "initialize/version_negotiation", Level: Must, Section: "§6",
		Sentence: "A server MUST answer with the highest version it supports that is not newer than the client's", run: checkVersions},
	{ID: "initialize/capabilities", Level: Must, Section: "§5.1",
		Sentence: "Capabilities are booleans; a client MUST NOT call a method whose capability is false.", run: checkCapabilities},
	{ID: "initialize/device", Level: Should, Section: "§5.1",
		Sentence: `initialize result: "device":{"id","class","make","model"} names the device that describe describes`, run: checkInitDevice},
	{ID: "jsonrpc/parse_error", Level: Must, Section: "§5",
		Sentence: "All requests are JSON-RPC 2.0. (JSON-RPC 2.0: invalid JSON is answered -32700 Parse error)", run: checkParseError},
	{ID: "jsonrpc/invalid_request", Level: Should, Section: "§5",
		Sentence: `All requests are JSON-RPC 2.0. (JSON-RPC 2.0: a request whose "jsonrpc" is not "2.0" is answered -32600 Invalid Request)`, run: checkInvalidRequest},
	{ID: "jsonrpc/method_not_found", Level: Must, Section: "§5, §12",
		Sentence: "All requests are JSON-RPC 2.0. (§12 and JSON-RPC 2.0: an unknown method is answered -32601)", run: checkMethodNotFound},
	{ID: "http/mhp.json", Level: Must, Section: "§9",
		Sentence: "GET /mhp.json returns the descriptor with no handshake", run: checkDescriptorURL},
	{ID: "http/events", Level: Must, Section: "§9",
		Sentence: "GET /events is a Server-Sent Events stream of notifications.", run: checkEvents},
	{ID: "ping/state", Level: Must, Section: "§5.2",
		Sentence: `plus "state": "idle" | "busy" | "fault" | "estop"`, run: checkPing},
	{ID: "describe/tiers", Level: Must, Section: "§15",
		Sentence: "All device levels MUST support detail and select on device/describe.", run: checkTiers},
	{ID: "describe/unknown_detail", Level: Should, Section: "§3.1",
		Sentence: "device/describe takes a detail parameter. (JSON-RPC 2.0: invalid params are answered -32602; the spec requires no answer for an unknown tier)", run: checkUnknownDetail},
	{ID: "describe/select", Level: Must, Section: "§3.1",
		Sentence: "select fetches full specs for named items only", run: checkSelect},
	{ID: "describe/select_unknown", Level: Should, Section: "§3.1",
		Sentence: "select fetches full specs for named items only (an unknown name is best reported, UnknownName -32040; the spec requires no answer)", run: checkSelectUnknown},
	{ID: "read/all", Level: Must, Section: "§5.3",
		Sentence: "names omitted means all signals.", run: checkReadAll},
	{ID: "read/ts", Level: Should, Section: "§5.3",
		Sentence: `{"result":{"values":{...},"ts":1788991266.5}} (a read carries the device clock)`, run: checkReadTS},
	{ID: "read/unknown", Level: Must, Section: "§12",
		Sentence: "UnknownName (-32040): no such signal, setting, action, resource or method", run: checkReadUnknown},
	{ID: "write/unknown", Level: Must, Section: "§12",
		Sentence: "UnknownName (-32040): no such signal, setting, action, resource or method", run: checkWriteUnknown},
	{ID: "invoke/unknown", Level: Must, Section: "§12",
		Sentence: "UnknownName (-32040): no such signal, setting, action, resource or method", run: checkInvokeUnknown},
	{ID: "jobs/unknown", Level: Must, Section: "§12",
		Sentence: "JobNotFound (-32041): no such job", run: checkJobUnknown},
	{ID: "limits/consistent", Level: Must, Section: "§5.6",
		Sentence: "safety/limits returns the effective limits, interlocks and approval levels in one call", run: checkLimitsConsistent},
	{ID: "gates/limits", Level: Must, Section: "§7.1",
		Sentence: "Limits: Numeric range or enum: LimitViolation, with the limits in data.", run: checkGateLimits},
	{ID: "gates/types", Level: Must, Section: "§1, §5.4",
		Sentence: "A wrong value from an agent is refused, not obeyed. (§5.4: InvalidValue is raised before anything is sent)", run: checkGateTypes},
	{ID: "gates/forbid", Level: Must, Section: "§7.1",
		Sentence: "Approval: Forbidden for forbid items", run: checkGateForbid},
	{ID: "gates/confirm", Level: Must, Section: "§7.1",
		Sentence: "ApprovalRequired for confirm items sent without approved: true.", run: checkGateConfirm},
	{ID: "gates/undeclared_param", Level: Should, Section: "§7.4",
		Sentence: "Drivers SHOULD validate parameters against the same physical limits", run: checkUndeclaredParam},
	{ID: "lease/exclusive", Level: Must, Section: "§5.7",
		Sentence: "session/acquire {ttl} gives the calling session exclusive write and invoke rights until ttl seconds pass without session/renew, or until session/release.", run: checkLeaseExclusive},
	{ID: "errors/ts", Level: Should, Section: "§12",
		Sentence: "every error carries ts, the device clock at the refusal (in the error object or its data)", run: checkErrorTS},
	{ID: "session/client_header", Level: Should, Section: "§9",
		Sentence: "Clients SHOULD send an X-MHP-Client header so leases and audit logs can name them. (a client that sends only that header, as the reference client does, is served)", run: checkClientHeader},
	{ID: "estop/regardless_of_lease", Level: Must, Section: "§5.6",
		Sentence: "It MUST succeed regardless of lease, approval level or interlock state", run: checkEStopLeased, actuates: true},
	{ID: "estop/any_caller", Level: Should, Section: "§5.6",
		Sentence: "It is the one call an agent may always make. (estop from a client that never initialized is served)", run: checkEStopAnyCaller, actuates: true},
}

func checkInitFirst(ctx context.Context, c *checker) outcome {
	conn, err := c.dial()
	if err != nil {
		return failf("%v", err)
	}
	defer conn.Close()
	// signals/read, not ping or estop: those may be served to anyone.
	r, err := conn.Call(ctx, "signals/read", map[string]any{})
	if err != nil {
		return failf("signals/read before initialize: no answer: %v", err)
	}
	if r.Error == nil {
		return failf("signals/read before initialize was answered: %.200s", r.Result)
	}
	return passf("refused with %s", r.Error)
}

var dateVersion = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`)

func checkVersions(ctx context.Context, c *checker) outcome {
	answer := func(ask string) (string, *Error, error) {
		conn, err := c.dial()
		if err != nil {
			return "", nil, err
		}
		defer conn.Close()
		r, err := conn.Call(ctx, "initialize", InitParams(ask, "mhp-wire"))
		if err != nil {
			return "", nil, err
		}
		if r.Error != nil {
			return "", r.Error, nil
		}
		var res struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		_ = json.Unmarshal(r.Result, &res)
		return res.ProtocolVersion, nil, nil
	}
	newest, e, err := answer("9999-12-31")
	if err != nil || e != nil {
		return failf("initialize asking 9999-12-31: %v%v", err, errString(e))
	}
	if !dateVersion.MatchString(newest) {
		return failf("protocolVersion %q is not a date string (YYYY-MM-DD)", newest)
	}
	got, e, err := answer(newest)
	if err != nil || e != nil || got != newest {
		return failf("client asked the server's newest %s, server answered %q%v%v", newest, got, errString(e), errOr(err))
	}
	for _, ask := range []string{mhp.ProtocolVersion, mhp.ProtocolVersionMinimum, "2020-01-01"} {
		got, e, err := answer(ask)
		if err != nil {
			return failf("initialize %s: %v", ask, err)
		}
		if e != nil {
			continue // a server that speaks nothing this old refuses: allowed
		}
		if got > ask {
			return failf("client asked %s, server answered %q: newer than the client's", ask, got)
		}
	}
	return passf("newest %s", newest)
}

func errString(e *Error) string {
	if e == nil {
		return ""
	}
	return ": " + e.String()
}

func errOr(err error) string {
	if err == nil {
		return ""
	}
	return ": " + err.Error()
}

func checkCapabilities(ctx context.Context, c *checker) outcome {
	caps, ok := c.main.init["capabilities"].(map[string]any)
	if !ok {
		return failf("initialize result has no capabilities object: %s", short(c.main.init))
	}
	var missing, odd []string
	for _, k := range []string{"signals", "settings", "actions", "subscribe", "lease", "estop"} {
		v, present := caps[k]
		if !present {
			missing = append(missing, k)
			continue
		}
		if _, ok := v.(bool); !ok {
			return failf("capabilities.%s is %s, want a boolean", k, short(v))
		}
	}
	for k, v := range caps {
		if _, ok := v.(bool); !ok {
			odd = append(odd, k)
		}
	}
	sort.Strings(odd)
	switch {
	case len(missing) > 0:
		return warnf("capabilities lack %s (a client reads a missing one as false)", strings.Join(missing, ", "))
	case len(odd) > 0:
		return warnf("capabilities %s are not booleans (extra keys; the spec's are)", strings.Join(odd, ", "))
	}
	return pass()
}

func checkInitDevice(ctx context.Context, c *checker) outcome {
	d, ok := c.main.init["device"].(map[string]any)
	if !ok {
		return failf("initialize result has no device object")
	}
	if id := str(d, "id"); id != c.desc.ID {
		return failf("initialize names device %q, describe %q", id, c.desc.ID)
	}
	return pass()
}

func checkParseError(ctx context.Context, c *checker) outcome {
	s, err := c.open(ctx)
	if err != nil {
		return failf("%v", err)
	}
	defer s.close()
	r, err := s.c.Send(ctx, []byte(`{"jsonrpc":"2.0","id":7,"method":`))
	if err != nil {
		return failf("malformed JSON: %v", err)
	}
	if r.Error == nil || r.Error.Code != mhp.CodeParseError {
		return failf("malformed JSON answered %s, want %s", r.Error, codeName(mhp.CodeParseError))
	}
	if _, e, err := s.call(ctx, "device/describe", map[string]any{"detail": "card"}); err != nil || e != nil {
		return failf("the connection did not survive a parse error: %v%v", errOr(err), errString(e))
	}
	return pass()
}

func checkInvalidRequest(ctx context.Context, c *checker) outcome {
	s, err := c.open(ctx)
	if err != nil {
		return failf("%v", err)
	}
	defer s.close()
	r, err := s.c.Send(ctx, []byte(`{"jsonrpc":"1.0","id":9,"method":"ping"}`))
	if err != nil {
		return failf("%v", err)
	}
	if r.Error == nil || r.Error.Code != mhp.CodeInvalidRequest {
		return failf(`a request with "jsonrpc":"1.0" answered %s, want %s`, r.Error, codeName(mhp.CodeInvalidRequest))
	}
	return pass()
}

func checkMethodNotFound(ctx context.Context, c *checker) outcome {
	_, e, err := c.main.call(ctx, "mhp/no_such_method", map[string]any{})
	if got, ok := refusal(nil, e, err, mhp.CodeMethodNotFound); !ok {
		return failf("unknown method: %s, want %s", got, codeName(mhp.CodeMethodNotFound))
	}
	return pass()
}

func checkDescriptorURL(ctx context.Context, c *checker) outcome {
	if !c.http() {
		return skipf("HTTP only")
	}
	conn, err := c.dial()
	if err != nil {
		return failf("%v", err)
	}
	defer conn.Close()
	resp, err := conn.Get(ctx, "/mhp.json")
	if err != nil {
		return failf("%v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return failf("GET /mhp.json without a handshake: HTTP %d", resp.StatusCode)
	}
	var d map[string]any
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxAnswer)).Decode(&d); err != nil {
		return failf("GET /mhp.json is not a JSON object: %v", err)
	}
	if id := deviceID(d); id != c.desc.ID {
		return failf("GET /mhp.json names %q, describe %q", id, c.desc.ID)
	}
	return pass()
}

func checkEvents(ctx context.Context, c *checker) outcome {
	if !c.http() {
		return skipf("HTTP only (stdio interleaves notifications)")
	}
	s, err := c.open(ctx)
	if err != nil {
		return failf("%v", err)
	}
	defer s.close()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	resp, err := s.c.Get(sctx, "/events")
	if err != nil {
		return failf("GET /events: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return failf("GET /events: HTTP %d, Content-Type %q, want 200 text/event-stream", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	// The first bytes may be a keep-alive minutes away: wait briefly only.
	first := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(resp.Body).ReadString('\n')
		first <- strings.TrimSpace(line)
	}()
	t := time.NewTimer(500 * time.Millisecond)
	defer t.Stop()
	select {
	case l := <-first:
		if l != "" && !strings.HasPrefix(l, ":") && !strings.Contains(l, ":") {
			return failf("GET /events: %q is not an SSE line", l)
		}
		return passf("stream opened (%s)", l)
	case <-t.C:
		return passf("stream opened (no event yet)")
	}
}

func validState(s string) bool {
	switch mhp.DeviceState(s) {
	case mhp.StateIdle, mhp.StateBusy, mhp.StateFault, mhp.StateEStop:
		return true
	}
	return false
}

func checkPing(ctx context.Context, c *checker) outcome {
	v, err := c.main.result(ctx, "ping", nil)
	if err != nil {
		return failf("%v", err)
	}
	m, _ := v.(map[string]any)
	st := str(m, "state")
	if !validState(st) {
		return failf("ping state %q is not idle, busy, fault or estop", st)
	}
	return passf("state %s", st)
}
