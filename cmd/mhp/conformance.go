package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/client"
)

// `mhp conformance TARGET` checks a running server from the outside. The
// behavioural suite (package conformance) needs a fake backend it controls
// and the fixture device's names, so it cannot run against an arbitrary
// device; these checks can, because they need neither:
//
//   - protocol checks on raw frames: initialize first, version negotiation,
//     capabilities, malformed JSON (-32700, the connection survives), invalid
//     requests, unknown methods, /mhp.json and /events over HTTP;
//   - read-only checks: ping, every describe tier, select, unknown detail and
//     names, reading every signal, jobs/status of an unknown job, safety/limits
//     matching the descriptor, errors carrying ts;
//   - gate checks as dry runs derived from the device's own descriptor: out of
//     range and enum values, wrong types, forbid items, confirm items without
//     approval, undeclared action parameters;
//   - over HTTP, lease exclusivity between two sessions (acquire/release only).
//
// Nothing actuates: every write and invoke is a dry run, so the checks are
// safe against real hardware. Checks that do not apply (no settings with
// limits, a stdio target for lease exclusivity) are skipped with the reason.

// checkResult is one check's outcome.
type checkResult struct {
	Name   string `json:"name"`
	Status string `json:"status"` // pass, fail, skip
	Detail string `json:"detail,omitempty"`
}

const (
	statusPass = "pass"
	statusFail = "fail"
	statusSkip = "skip"
)

// conformanceCmd runs `mhp conformance TARGET`.
func (a *app) conformanceCmd(ctx context.Context, args []string) int {
	p, err := parseArgs(args, flagSpec{})
	if err != nil {
		return a.usageError("conformance: %v", err)
	}
	if len(p.args) != 1 || !isTarget(p.args[0]) {
		return a.usageError("conformance: usage: mhp conformance http://HOST:PORT | stdio:COMMAND")
	}
	token, err := a.token(p)
	if err != nil {
		return a.usageError("conformance: %v", err)
	}
	timeout, err := timeoutOf(p, 10*time.Second)
	if err != nil {
		return a.usageError("conformance: %v", err)
	}
	results, err := runWireChecks(ctx, p.args[0], token, timeout, a.stderr, a.quietLogger())
	if err != nil {
		return a.fail(err, p.has("json"))
	}
	failed := 0
	counts := map[string]int{}
	for _, r := range results {
		counts[r.Status]++
		if r.Status == statusFail {
			failed++
		}
	}
	if p.has("json") {
		a.printJSON(map[string]any{"target": p.args[0], "results": results, "passed": counts[statusPass],
			"failed": counts[statusFail], "skipped": counts[statusSkip]})
	} else {
		for _, r := range results {
			line := fmt.Sprintf("%-4s  %s", strings.ToUpper(r.Status), r.Name)
			if r.Detail != "" {
				line += ": " + r.Detail
			}
			fmt.Fprintln(a.stdout, line)
		}
		fmt.Fprintf(a.stdout, "\n%d passed, %d failed, %d skipped\n", counts[statusPass], counts[statusFail], counts[statusSkip])
	}
	if failed > 0 {
		return exitRefused
	}
	return exitOK
}

// wireChecker holds what the checks share.
type wireChecker struct {
	target, token string
	timeout       time.Duration
	stderr        io.Writer
	http          bool
	log           *slog.Logger
	dev           *client.Device // plain session: sees exactly what the server answers
	desc          *mhp.Description
}

type wireCheck struct {
	name string
	run  func(ctx context.Context, w *wireChecker) (status, detail string)
}

// runWireChecks connects, fetches the full descriptor, and runs every check.
// The error is for a target that cannot be reached at all.
func runWireChecks(ctx context.Context, target, token string, timeout time.Duration, stderr io.Writer, log *slog.Logger) ([]checkResult, error) {
	opts := client.Options{ClientName: "mhp-conformance", Token: token, Timeout: timeout, Plain: true, Stderr: stderr, Logger: log, AllowStdio: true}
	dctx, cancel := context.WithTimeout(ctx, timeout)
	dev, err := client.Dial(dctx, target, opts)
	cancel()
	if err != nil {
		return nil, err
	}
	defer dev.Close()
	dctx, cancel = context.WithTimeout(ctx, timeout)
	desc, err := dev.Describe(dctx, mhp.DescribeRequest{Detail: mhp.DetailFull})
	cancel()
	if err != nil {
		return nil, err
	}
	w := &wireChecker{target: target, token: token, timeout: timeout, stderr: stderr, log: log, dev: dev, desc: desc,
		http: strings.HasPrefix(target, "http")}
	var out []checkResult
	for _, c := range wireChecks() {
		cctx, cancel := context.WithTimeout(ctx, 3*timeout)
		status, detail := safeRun(cctx, w, c)
		cancel()
		out = append(out, checkResult{Name: c.name, Status: status, Detail: detail})
		if ctx.Err() != nil {
			break
		}
	}
	return out, nil
}

func safeRun(ctx context.Context, w *wireChecker, c wireCheck) (status, detail string) {
	defer func() {
		if p := recover(); p != nil {
			status, detail = statusFail, fmt.Sprintf("check panicked: %v", p)
		}
	}()
	return c.run(ctx, w)
}

func pass() (string, string)                    { return statusPass, "" }
func passf(f string, a ...any) (string, string) { return statusPass, fmt.Sprintf(f, a...) }
func failf(f string, a ...any) (string, string) { return statusFail, fmt.Sprintf(f, a...) }
func skipf(f string, a ...any) (string, string) { return statusSkip, fmt.Sprintf(f, a...) }
func codeName(c mhp.Code) string                { return fmt.Sprintf("%s (%d)", c, int(c)) }
func gotCode(err error) string                  { return describeErr(err) }
func okOr(err error, want mhp.Code) (bool, string) {
	e, ok := mhp.AsError(err)
	return ok && e.Code == want, gotCode(err)
}
func describeErr(err error) string {
	if err == nil {
		return "no error"
	}
	if e, ok := mhp.AsError(err); ok {
		return fmt.Sprintf("%s: %s", codeName(e.Code), e.Message)
	}
	return err.Error()
}

// raw opens a raw connection; with init it runs initialize first.
func (w *wireChecker) raw(ctx context.Context, init bool) (rawConn, error) {
	c, err := dialRaw(w.target, w.token, w.stderr)
	if err != nil {
		return nil, err
	}
	if init {
		r, err := rawCall(ctx, c, 0, "initialize", initParams(mhp.ProtocolVersion))
		if err != nil {
			c.close()
			return nil, err
		}
		if r.Error != nil {
			c.close()
			return nil, r.Error
		}
	}
	return c, nil
}

func wireChecks() []wireCheck {
	return []wireCheck{
		{"initialize/required_first", checkInitFirst},
		{"initialize/version_negotiation", checkVersions},
		{"initialize/capabilities", checkCapabilities},
		{"jsonrpc/parse_error_survives", checkParseError},
		{"jsonrpc/invalid_request", checkInvalidRequest},
		{"jsonrpc/method_not_found", checkMethodNotFound},
		{"http/mhp.json", checkDescriptorURL},
		{"http/events", checkEvents},
		{"ping/state", checkPing},
		{"describe/tiers", checkTiers},
		{"describe/unknown_detail", checkUnknownDetail},
		{"describe/select", checkSelect},
		{"read/all", checkReadAll},
		{"read/unknown", checkReadUnknown},
		{"write/unknown", checkWriteUnknown},
		{"invoke/unknown", checkInvokeUnknown},
		{"jobs/unknown", checkJobUnknown},
		{"limits/consistent", checkLimitsConsistent},
		{"gates/limits", checkGateLimits},
		{"gates/types", checkGateTypes},
		{"gates/forbid", checkGateForbid},
		{"gates/confirm_dry_run", checkGateConfirm},
		{"gates/undeclared_param", checkUndeclaredParam},
		{"lease/exclusive", checkLeaseExclusive},
		{"errors/ts", checkErrorTS},
	}
}

func checkInitFirst(ctx context.Context, w *wireChecker) (string, string) {
	c, err := w.raw(ctx, false)
	if err != nil {
		return failf("%v", err)
	}
	defer c.close()
	r, err := rawCall(ctx, c, 1, "ping", nil)
	if err != nil {
		return failf("ping before initialize: %v", err)
	}
	if r.Error == nil {
		return failf("ping before initialize was answered: %s", r.Result)
	}
	return passf("refused with %s", codeName(r.Error.Code))
}

func checkVersions(ctx context.Context, w *wireChecker) (string, string) {
	cases := []struct{ ask, want string }{
		{mhp.ProtocolVersion, mhp.ProtocolVersion},
		{"2026-09-10", mhp.ProtocolVersionMinimum},
		{"2099-01-01", mhp.ProtocolVersion},
		{"2020-01-01", ""}, // older than any: refused
	}
	for _, k := range cases {
		c, err := w.raw(ctx, false)
		if err != nil {
			return failf("%v", err)
		}
		r, err := rawCall(ctx, c, 1, "initialize", initParams(k.ask))
		c.close()
		if err != nil {
			return failf("initialize %s: %v", k.ask, err)
		}
		if k.want == "" {
			if r.Error == nil {
				return failf("initialize %s (older than any supported) was accepted", k.ask)
			}
			continue
		}
		if r.Error != nil {
			return failf("initialize %s: %s", k.ask, describeErr(r.Error))
		}
		var res struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		_ = json.Unmarshal(r.Result, &res)
		if res.ProtocolVersion != k.want {
			return failf("client asked %s, server answered %q, want %s", k.ask, res.ProtocolVersion, k.want)
		}
	}
	return pass()
}

func checkCapabilities(ctx context.Context, w *wireChecker) (string, string) {
	c, err := w.raw(ctx, false)
	if err != nil {
		return failf("%v", err)
	}
	defer c.close()
	r, err := rawCall(ctx, c, 1, "initialize", initParams(mhp.ProtocolVersion))
	if err != nil || r.Error != nil {
		return failf("initialize: %v %v", err, r)
	}
	var res struct {
		Device       map[string]any `json:"device"`
		Capabilities map[string]any `json:"capabilities"`
	}
	if err := json.Unmarshal(r.Result, &res); err != nil {
		return failf("initialize result: %v", err)
	}
	for _, k := range []string{"signals", "settings", "actions", "subscribe", "lease", "estop"} {
		if _, ok := res.Capabilities[k].(bool); !ok {
			return failf("capabilities.%s is %v, want a boolean", k, res.Capabilities[k])
		}
	}
	if id, _ := res.Device["id"].(string); id != w.desc.ID {
		return failf("initialize names device %q, describe %q", id, w.desc.ID)
	}
	return pass()
}

func checkParseError(ctx context.Context, w *wireChecker) (string, string) {
	c, err := w.raw(ctx, true)
	if err != nil {
		return failf("%v", err)
	}
	defer c.close()
	r, err := rawSend(ctx, c, []byte(`{"jsonrpc":"2.0","id":7,"method":`))
	if err != nil {
		return failf("malformed JSON: %v", err)
	}
	if r.Error == nil || r.Error.Code != mhp.CodeParseError {
		return failf("malformed JSON answered %s, want %s", describeErr(errOrNil(r.Error)), codeName(mhp.CodeParseError))
	}
	r, err = rawCall(ctx, c, 8, "ping", nil)
	if err != nil || r.Error != nil {
		return failf("the connection did not survive: %v %v", err, errOrNil(r.Error))
	}
	return pass()
}

// errOrNil turns a nil *mhp.Error into a nil error.
func errOrNil(e *mhp.Error) error {
	if e == nil {
		return nil
	}
	return e
}

func checkInvalidRequest(ctx context.Context, w *wireChecker) (string, string) {
	c, err := w.raw(ctx, true)
	if err != nil {
		return failf("%v", err)
	}
	defer c.close()
	r, err := rawSend(ctx, c, []byte(`{"jsonrpc":"1.0","id":9,"method":"ping"}`))
	if err != nil {
		return failf("%v", err)
	}
	if r.Error == nil || r.Error.Code != mhp.CodeInvalidRequest {
		return failf("jsonrpc 1.0 request answered %s, want %s", describeErr(errOrNil(r.Error)), codeName(mhp.CodeInvalidRequest))
	}
	return pass()
}

func checkMethodNotFound(ctx context.Context, w *wireChecker) (string, string) {
	c, err := w.raw(ctx, true)
	if err != nil {
		return failf("%v", err)
	}
	defer c.close()
	r, err := rawCall(ctx, c, 10, "mhp/no_such_method", map[string]any{})
	if err != nil {
		return failf("%v", err)
	}
	if r.Error == nil || r.Error.Code != mhp.CodeMethodNotFound {
		return failf("unknown method answered %s, want %s", describeErr(errOrNil(r.Error)), codeName(mhp.CodeMethodNotFound))
	}
	return pass()
}

func checkDescriptorURL(ctx context.Context, w *wireChecker) (string, string) {
	if !w.http {
		return skipf("HTTP only")
	}
	h := &httpRaw{base: strings.TrimRight(w.target, "/"), token: w.token, hc: &http.Client{}}
	resp, err := h.get(ctx, "/mhp.json")
	if err != nil {
		return failf("%v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return failf("GET /mhp.json: HTTP %d", resp.StatusCode)
	}
	var d map[string]any
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&d); err != nil {
		return failf("GET /mhp.json is not JSON: %v", err)
	}
	if d["id"] != w.desc.ID {
		return failf("GET /mhp.json names %v, want %s", d["id"], w.desc.ID)
	}
	return pass()
}

func checkEvents(ctx context.Context, w *wireChecker) (string, string) {
	if !w.http {
		return skipf("HTTP only (stdio interleaves notifications)")
	}
	c, err := w.raw(ctx, true)
	if err != nil {
		return failf("%v", err)
	}
	defer c.close()
	h := c.(*httpRaw)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	resp, err := h.get(sctx, "/events")
	if err != nil {
		return failf("GET /events: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return failf("GET /events: HTTP %d, %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil {
		return failf("GET /events: no data: %v", err)
	}
	return passf("stream opened (%s)", strings.TrimSpace(line))
}

func checkPing(ctx context.Context, w *wireChecker) (string, string) {
	r, err := w.dev.Ping(ctx)
	if err != nil {
		return failf("%s", describeErr(err))
	}
	switch r.State {
	case mhp.StateIdle, mhp.StateBusy, mhp.StateFault, mhp.StateEStop:
		return passf("state %s", r.State)
	}
	return failf("state %q is not idle, busy, fault or estop", r.State)
}

func checkTiers(ctx context.Context, w *wireChecker) (string, string) {
	for _, tier := range []string{mhp.DetailCard, mhp.DetailSummary, mhp.DetailFull} {
		d, err := w.dev.Describe(ctx, mhp.DescribeRequest{Detail: tier})
		if err != nil {
			return failf("%s: %s", tier, describeErr(err))
		}
		if d.ID != w.desc.ID || d.Detail != tier {
			return failf("%s: id %q detail %q", tier, d.ID, d.Detail)
		}
		if len(d.Signals) != len(w.desc.Signals) || len(d.Settings) != len(w.desc.Settings) || len(d.Actions) != len(w.desc.Actions) {
			return failf("%s lists %d/%d/%d items, full %d/%d/%d", tier, len(d.Signals), len(d.Settings), len(d.Actions),
				len(w.desc.Signals), len(w.desc.Settings), len(w.desc.Actions))
		}
	}
	if w.desc.MHP == "" {
		return failf("full tier has no mhp version")
	}
	return pass()
}

func checkUnknownDetail(ctx context.Context, w *wireChecker) (string, string) {
	_, err := w.dev.Describe(ctx, mhp.DescribeRequest{Detail: "everything"})
	if ok, got := okOr(err, mhp.CodeInvalidParams); !ok {
		return failf("detail \"everything\": %s, want %s", got, codeName(mhp.CodeInvalidParams))
	}
	return pass()
}

func checkSelect(ctx context.Context, w *wireChecker) (string, string) {
	_, err := w.dev.Describe(ctx, mhp.DescribeRequest{Select: &mhp.Selection{Signals: []string{"__mhp_no_such_signal__"}}})
	if ok, got := okOr(err, mhp.CodeUnknownName); !ok {
		return failf("select of an unknown signal: %s, want %s", got, codeName(mhp.CodeUnknownName))
	}
	if len(w.desc.Actions) == 0 {
		return passf("unknown name refused; no action to select")
	}
	name := w.desc.Actions[0].Name
	d, err := w.dev.Describe(ctx, mhp.DescribeRequest{Select: &mhp.Selection{Actions: []string{name}}})
	if err != nil {
		return failf("select %s: %s", name, describeErr(err))
	}
	if len(d.Actions) != 1 || d.Actions[0].Name != name || len(d.Signals)+len(d.Settings) != 0 {
		return failf("select %s returned %d actions, %d signals, %d settings", name, len(d.Actions), len(d.Signals), len(d.Settings))
	}
	return pass()
}

func checkReadAll(ctx context.Context, w *wireChecker) (string, string) {
	r, err := w.dev.Read(ctx, nil)
	if err != nil {
		return failf("%s", describeErr(err))
	}
	missing, unavailable := []string{}, 0
	for _, s := range w.desc.Signals {
		if _, ok := r.Values[s.Name]; !ok {
			if _, un := r.Unavailable[s.Name]; !un {
				missing = append(missing, s.Name)
			}
		}
		if _, un := r.Unavailable[s.Name]; un {
			unavailable++
		}
	}
	if len(missing) > 0 {
		return failf("signals missing from a full read: %s", strings.Join(missing, ", "))
	}
	if r.TS == 0 {
		return failf("read has no ts")
	}
	return passf("%d signals, %d unavailable", len(w.desc.Signals), unavailable)
}

func checkReadUnknown(ctx context.Context, w *wireChecker) (string, string) {
	_, err := w.dev.Read(ctx, []string{"__mhp_no_such_signal__"})
	if ok, got := okOr(err, mhp.CodeUnknownName); !ok {
		return failf("%s, want %s", got, codeName(mhp.CodeUnknownName))
	}
	return pass()
}

func checkWriteUnknown(ctx context.Context, w *wireChecker) (string, string) {
	_, err := w.dev.Write(ctx, mhp.WriteRequest{Name: "__mhp_no_such_setting__", Value: 1, DryRun: true})
	if ok, got := okOr(err, mhp.CodeUnknownName); !ok {
		return failf("%s, want %s", got, codeName(mhp.CodeUnknownName))
	}
	return pass()
}

func checkInvokeUnknown(ctx context.Context, w *wireChecker) (string, string) {
	_, err := w.dev.Invoke(ctx, mhp.InvokeRequest{Name: "__mhp_no_such_action__", DryRun: true})
	if ok, got := okOr(err, mhp.CodeUnknownName); !ok {
		return failf("%s, want %s", got, codeName(mhp.CodeUnknownName))
	}
	return pass()
}

func checkJobUnknown(ctx context.Context, w *wireChecker) (string, string) {
	_, err := w.dev.Job(ctx, "job_mhpconf")
	if ok, got := okOr(err, mhp.CodeJobNotFound); !ok {
		return failf("%s, want %s", got, codeName(mhp.CodeJobNotFound))
	}
	return pass()
}

func checkLimitsConsistent(ctx context.Context, w *wireChecker) (string, string) {
	r, err := w.dev.Limits(ctx)
	if err != nil {
		return failf("%s", describeErr(err))
	}
	for _, s := range w.desc.Settings {
		env, ok := r.Settings[s.Name]
		if !ok {
			return failf("safety/limits has no setting %s", s.Name)
		}
		if env.Approval != s.Approval && !(s.Approval == "" && env.Approval == mhp.ApprovalAuto) {
			return failf("%s: approval %q in limits, %q in the descriptor", s.Name, env.Approval, s.Approval)
		}
		a, _ := json.Marshal(env.Limits)
		b, _ := json.Marshal(s.Limits)
		if string(a) != string(b) {
			return failf("%s: limits %s in safety/limits, %s in the descriptor", s.Name, a, b)
		}
	}
	if r.EStop != w.desc.Safety.EStop {
		return failf("estop %v in safety/limits, %v in the descriptor", r.EStop, w.desc.Safety.EStop)
	}
	return pass()
}

// gateable reports whether a dry run on the setting reaches the value gate:
// not forbidden and no interlock (an open one would answer first).
func gateable(s mhp.Setting) bool { return s.Approval != mhp.ApprovalForbid && len(s.Interlocks) == 0 }

func (w *wireChecker) actuatable(ctx context.Context) (bool, string) {
	p, err := w.dev.Ping(ctx)
	if err != nil {
		return false, describeErr(err)
	}
	if p.State == mhp.StateEStop || p.State == mhp.StateFault {
		return false, fmt.Sprintf("device in %s: the state gate answers first", p.State)
	}
	return true, ""
}

func checkGateLimits(ctx context.Context, w *wireChecker) (string, string) {
	if ok, why := w.actuatable(ctx); !ok {
		return skipf("%s", why)
	}
	tried := 0
	for _, s := range w.desc.Settings {
		if !gateable(s) || s.Limits.Empty() {
			continue
		}
		var bad []any
		l := s.Limits
		if l.Max != nil && (s.Type == mhp.TypeNumber || s.Type == mhp.TypeInteger) {
			bad = append(bad, math.Floor(*l.Max)+1)
		}
		if l.Min != nil && (s.Type == mhp.TypeNumber || s.Type == mhp.TypeInteger) {
			bad = append(bad, math.Ceil(*l.Min)-1)
		}
		if len(l.Enum) > 0 && s.Type == mhp.TypeString {
			bad = append(bad, "__mhp_not_in_enum__")
		}
		for _, v := range bad {
			tried++
			_, err := w.dev.Write(ctx, mhp.WriteRequest{Name: s.Name, Value: v, DryRun: true})
			e, ok := mhp.AsError(err)
			if !ok || e.Code != mhp.CodeLimitViolation {
				return failf("%s=%v (dry run): %s, want %s", s.Name, v, gotCode(err), codeName(mhp.CodeLimitViolation))
			}
			_, hasMax := e.Data["max"]
			_, hasMin := e.Data["min"]
			_, hasEnum := e.Data["enum"]
			if !hasMax && !hasMin && !hasEnum {
				return failf("%s=%v: LimitViolation without the limits in data", s.Name, v)
			}
		}
	}
	if tried == 0 {
		return skipf("no setting with limits that a dry run can reach")
	}
	return passf("%d out-of-limits values refused", tried)
}

func checkGateTypes(ctx context.Context, w *wireChecker) (string, string) {
	if ok, why := w.actuatable(ctx); !ok {
		return skipf("%s", why)
	}
	tried := 0
	for _, s := range w.desc.Settings {
		if !gateable(s) {
			continue
		}
		var bad []any
		switch s.Type {
		case mhp.TypeNumber, mhp.TypeInteger:
			bad = []any{"not a number", nil, true}
		case mhp.TypeBoolean:
			bad = []any{1, "true", nil}
		case mhp.TypeString:
			bad = []any{"bell\a", 5, nil}
		default:
			continue
		}
		for _, v := range bad {
			tried++
			_, err := w.dev.Write(ctx, mhp.WriteRequest{Name: s.Name, Value: v, DryRun: true})
			if ok, got := okOr(err, mhp.CodeInvalidValue); !ok {
				return failf("%s (%s) = %#v (dry run): %s, want %s", s.Name, s.Type, v, got, codeName(mhp.CodeInvalidValue))
			}
		}
	}
	if tried == 0 {
		return skipf("no typed setting that a dry run can reach")
	}
	return passf("%d ill-typed values refused", tried)
}

func checkGateForbid(ctx context.Context, w *wireChecker) (string, string) {
	if ok, why := w.actuatable(ctx); !ok {
		return skipf("%s", why)
	}
	tried := 0
	for _, s := range w.desc.Settings {
		if s.Approval == mhp.ApprovalForbid {
			tried++
			_, err := w.dev.Write(ctx, mhp.WriteRequest{Name: s.Name, Value: 0, DryRun: true, Approved: true})
			if ok, got := okOr(err, mhp.CodeForbidden); !ok {
				return failf("setting %s (forbid): %s, want %s", s.Name, got, codeName(mhp.CodeForbidden))
			}
		}
	}
	for _, a := range w.desc.Actions {
		if a.Approval == mhp.ApprovalForbid {
			tried++
			_, err := w.dev.Invoke(ctx, mhp.InvokeRequest{Name: a.Name, DryRun: true, Approved: true})
			if ok, got := okOr(err, mhp.CodeForbidden); !ok {
				return failf("action %s (forbid): %s, want %s", a.Name, got, codeName(mhp.CodeForbidden))
			}
		}
	}
	if tried == 0 {
		return skipf("no forbid items")
	}
	return passf("%d forbid items refused", tried)
}

// validValue picks a value the setting's limits accept, if one is obvious.
func validValue(s mhp.Setting) (any, bool) {
	l := s.Limits
	switch {
	case l != nil && len(l.Enum) > 0:
		return l.Enum[0], true
	case s.Type == mhp.TypeBoolean:
		return false, true
	case (s.Type == mhp.TypeNumber || s.Type == mhp.TypeInteger) && l != nil && l.Min != nil:
		return math.Ceil(*l.Min), true
	case (s.Type == mhp.TypeNumber || s.Type == mhp.TypeInteger) && l != nil && l.Max != nil:
		return math.Floor(*l.Max), true
	case (s.Type == mhp.TypeNumber || s.Type == mhp.TypeInteger) && l.Empty():
		return 0, true
	}
	return nil, false
}

func checkGateConfirm(ctx context.Context, w *wireChecker) (string, string) {
	if ok, why := w.actuatable(ctx); !ok {
		return skipf("%s", why)
	}
	tried := 0
	for _, s := range w.desc.Settings {
		if s.Approval != mhp.ApprovalConfirm || len(s.Interlocks) > 0 {
			continue
		}
		v, ok := validValue(s)
		if !ok {
			continue
		}
		tried++
		res, err := w.dev.Write(ctx, mhp.WriteRequest{Name: s.Name, Value: v, DryRun: true})
		if err != nil {
			if ok, _ := okOr(err, mhp.CodeApprovalRequired); ok {
				continue // refusing is acceptable too
			}
			return failf("%s (confirm) dry run: %s", s.Name, describeErr(err))
		}
		if res.Notes == nil || !res.Notes.NeedsApproval {
			return failf("%s (confirm): a dry run without approval reports no needsApproval note", s.Name)
		}
	}
	for _, a := range w.desc.Actions {
		if a.Approval != mhp.ApprovalConfirm {
			continue
		}
		tried++
		_, err := w.dev.Invoke(ctx, mhp.InvokeRequest{Name: a.Name})
		// A real invoke without approval: the approval gate refuses before anything runs.
		if ok, got := okOr(err, mhp.CodeApprovalRequired); !ok {
			if e, isMHP := mhp.AsError(err); isMHP && (e.Code == mhp.CodeEStopActive || e.Code == mhp.CodeDeviceFault) {
				continue
			}
			return failf("action %s (confirm) without approval: %s, want %s", a.Name, got, codeName(mhp.CodeApprovalRequired))
		}
	}
	if tried == 0 {
		return skipf("no confirm items")
	}
	return passf("%d confirm items gated", tried)
}

func checkUndeclaredParam(ctx context.Context, w *wireChecker) (string, string) {
	if ok, why := w.actuatable(ctx); !ok {
		return skipf("%s", why)
	}
	tried := 0
	for _, a := range w.desc.Actions {
		if a.Approval == mhp.ApprovalForbid || len(a.Interlocks) > 0 {
			continue
		}
		tried++
		_, err := w.dev.Invoke(ctx, mhp.InvokeRequest{Name: a.Name, Params: map[string]any{"__mhp_undeclared__": 1}, DryRun: true, Approved: true})
		if ok, got := okOr(err, mhp.CodeInvalidValue); !ok {
			return failf("%s with an undeclared parameter (dry run): %s, want %s", a.Name, got, codeName(mhp.CodeInvalidValue))
		}
	}
	if tried == 0 {
		return skipf("no action a dry run can reach")
	}
	return passf("%d actions refused an undeclared parameter", tried)
}

func checkLeaseExclusive(ctx context.Context, w *wireChecker) (string, string) {
	if !w.http {
		return skipf("stdio: each connection is its own driver process")
	}
	opts := client.Options{ClientName: "mhp-conformance-a", Token: w.token, Timeout: w.timeout, Stderr: w.stderr, Logger: w.log}
	a, err := client.Dial(ctx, w.target, opts)
	if err != nil {
		return failf("second session: %s", describeErr(err))
	}
	defer a.Close()
	opts.ClientName, opts.Plain = "mhp-conformance-b", true
	b, err := client.Dial(ctx, w.target, opts)
	if err != nil {
		return failf("third session: %s", describeErr(err))
	}
	defer b.Close()
	if _, err := a.Acquire(ctx, 30*time.Second); err != nil {
		if ok, _ := okOr(err, mhp.CodeNotLeased); ok {
			return skipf("another client holds the lease")
		}
		return failf("acquire: %s", describeErr(err))
	}
	_, err = b.Acquire(ctx, 30*time.Second)
	if ok, got := okOr(err, mhp.CodeNotLeased); !ok {
		_ = a.Release(ctx)
		return failf("a second session acquired a held lease: %s, want %s", got, codeName(mhp.CodeNotLeased))
	}
	if err := a.Release(ctx); err != nil {
		return failf("release: %s", describeErr(err))
	}
	if _, err := b.Acquire(ctx, 30*time.Second); err != nil {
		return failf("acquire after release: %s", describeErr(err))
	}
	if err := b.Release(ctx); err != nil {
		return failf("release: %s", describeErr(err))
	}
	return pass()
}

func checkErrorTS(ctx context.Context, w *wireChecker) (string, string) {
	before := time.Now()
	_, err := w.dev.Read(ctx, []string{"__mhp_no_such_signal__"})
	after := time.Now()
	e, ok := mhp.AsError(err)
	if !ok {
		return failf("no refusal: %v", err)
	}
	if e.TS == 0 {
		return failf("the refusal carries no ts")
	}
	at := mhp.FromUnixSeconds(e.TS)
	skew := time.Duration(0)
	if at.Before(before) {
		skew = before.Sub(at)
	} else if at.After(after) {
		skew = at.Sub(after)
	}
	return passf("ts present (device clock %s from this host's)", skew.Round(time.Millisecond))
}
