package wire

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/openmhp/mhp-go"
)

func checkTiers(ctx context.Context, c *checker) outcome {
	var notes []string
	for _, tier := range []string{mhp.DetailCard, mhp.DetailSummary, mhp.DetailFull} {
		v, err := c.main.result(ctx, "device/describe", map[string]any{"detail": tier})
		if err != nil {
			return failf("%s: %v", tier, err)
		}
		m, ok := v.(map[string]any)
		if !ok {
			return failf("%s: the answer is not an object: %s", tier, short(v))
		}
		if id := deviceID(m); id != c.desc.ID {
			return failf("%s names device %q, full %q", tier, id, c.desc.ID)
		}
		if st := str(m, "state"); !validState(st) {
			return failf("%s: state %q is not idle, busy, fault or estop", tier, st)
		}
		sig, set, act := parseItems(m["signals"]), parseItems(m["settings"]), parseItems(m["actions"])
		if len(sig) != len(c.desc.Signals) || len(set) != len(c.desc.Settings) || len(act) != len(c.desc.Actions) {
			return failf("%s lists %d/%d/%d signals/settings/actions, full %d/%d/%d", tier, len(sig), len(set), len(act),
				len(c.desc.Signals), len(c.desc.Settings), len(c.desc.Actions))
		}
		if d := str(m, "detail"); d != "" && d != tier {
			notes = append(notes, fmt.Sprintf("%s answered detail %q", tier, d))
		}
	}
	if len(notes) > 0 {
		return warnf("%s", strings.Join(notes, "; "))
	}
	return pass()
}

func checkUnknownDetail(ctx context.Context, c *checker) outcome {
	v, e, err := c.main.call(ctx, "device/describe", map[string]any{"detail": "__mhp_no_such_tier__"})
	if err != nil {
		return failf("no answer: %v", err)
	}
	if e == nil {
		m, _ := v.(map[string]any)
		return failf("an unknown tier was answered (%d keys) rather than refused %s", len(m), codeName(mhp.CodeInvalidParams))
	}
	if e.Code != mhp.CodeInvalidParams {
		return failf("an unknown tier was refused %s, not %s", e, codeName(mhp.CodeInvalidParams))
	}
	return pass()
}

func checkSelect(ctx context.Context, c *checker) outcome {
	var kind string
	var it item
	switch {
	case len(c.desc.Actions) > 0:
		kind, it = "actions", c.desc.Actions[0]
	case len(c.desc.Settings) > 0:
		kind, it = "settings", c.desc.Settings[0]
	case len(c.desc.Signals) > 0:
		kind, it = "signals", c.desc.Signals[0]
	default:
		return skipf("the device has no items to select")
	}
	v, err := c.main.result(ctx, "device/describe", map[string]any{"select": map[string]any{kind: []string{it.Name}}})
	if err != nil {
		return failf("select %s %s: %v", kind, it.Name, err)
	}
	m, _ := v.(map[string]any)
	got := parseItems(m[kind])
	var full []item
	for _, x := range got {
		if x.Full {
			full = append(full, x)
		}
	}
	if len(full) != 1 || full[0].Name != it.Name {
		return failf("select %s [%s] returned full specs of %d %s", kind, it.Name, len(full), kind)
	}
	for _, other := range []string{"signals", "settings", "actions"} {
		if other == kind {
			continue
		}
		for _, x := range parseItems(m[other]) {
			if x.Full {
				return failf("select %s [%s] also returned the full spec of %s %s", kind, it.Name, other, x.Name)
			}
		}
	}
	return passf("selected %s %s", kind, it.Name)
}

func checkSelectUnknown(ctx context.Context, c *checker) outcome {
	v, e, err := c.main.call(ctx, "device/describe", map[string]any{"select": map[string]any{"signals": []string{"__mhp_no_such_signal__"}}})
	if got, ok := refusal(v, e, err, mhp.CodeUnknownName); !ok {
		return failf("select of an unknown signal: %s (dropped silently?)", got)
	}
	return pass()
}

func checkReadAll(ctx context.Context, c *checker) outcome {
	if len(c.desc.Signals) == 0 {
		return skipf("the device has no signals")
	}
	v, err := c.main.result(ctx, "signals/read", map[string]any{})
	if err != nil {
		return failf("%v", err)
	}
	m, _ := v.(map[string]any)
	values, ok := m["values"].(map[string]any)
	if !ok {
		return failf("the answer has no values object: %s", short(v))
	}
	unavailable, _ := m["unavailable"].(map[string]any)
	var missing []string
	for _, s := range c.desc.Signals {
		if _, ok := values[s.Name]; !ok {
			if _, un := unavailable[s.Name]; !un {
				missing = append(missing, s.Name)
			}
		}
	}
	if len(missing) > 0 {
		return failf("signals missing from a read without names: %s", strings.Join(missing, ", "))
	}
	return passf("%d signals, %d unavailable", len(c.desc.Signals), len(unavailable))
}

func checkReadTS(ctx context.Context, c *checker) outcome {
	v, err := c.main.result(ctx, "signals/read", map[string]any{})
	if err != nil {
		return failf("%v", err)
	}
	m, _ := v.(map[string]any)
	if ts, ok := num(m["ts"]); !ok || *ts <= 0 {
		return failf("the read carries no ts")
	}
	return pass()
}

func checkReadUnknown(ctx context.Context, c *checker) outcome {
	v, e, err := c.main.call(ctx, "signals/read", map[string]any{"names": []string{"__mhp_no_such_signal__"}})
	if got, ok := refusal(v, e, err, mhp.CodeUnknownName); !ok {
		return failf("%s, want %s", got, codeName(mhp.CodeUnknownName))
	}
	return pass()
}

func checkWriteUnknown(ctx context.Context, c *checker) outcome {
	v, e, err := c.main.call(ctx, "settings/write", map[string]any{"name": "__mhp_no_such_setting__", "value": 1, "dryRun": true})
	if got, ok := refusal(v, e, err, mhp.CodeUnknownName); !ok {
		return failf("%s, want %s", got, codeName(mhp.CodeUnknownName))
	}
	return pass()
}

func checkInvokeUnknown(ctx context.Context, c *checker) outcome {
	v, e, err := c.main.call(ctx, "actions/invoke", map[string]any{"name": "__mhp_no_such_action__", "params": map[string]any{}, "dryRun": true})
	if got, ok := refusal(v, e, err, mhp.CodeUnknownName); !ok {
		return failf("%s, want %s", got, codeName(mhp.CodeUnknownName))
	}
	return pass()
}

func checkJobUnknown(ctx context.Context, c *checker) outcome {
	v, e, err := c.main.call(ctx, "jobs/status", map[string]any{"id": "job_mhpwire0"})
	if got, ok := refusal(v, e, err, mhp.CodeJobNotFound); !ok {
		return failf("%s, want %s", got, codeName(mhp.CodeJobNotFound))
	}
	return pass()
}

// envelopeLimits reads one setting's limits from safety/limits in either
// shape: {"limits":{...},"approval":..} per item, or the bare limits.
func envelopeLimits(v any) lims {
	m, ok := v.(map[string]any)
	if !ok {
		return parseLims(v)
	}
	if inner, ok := m["limits"]; ok {
		return parseLims(inner)
	}
	if _, ok := m["approval"]; ok {
		return lims{} // an envelope without limits
	}
	return parseLims(m)
}

func checkLimitsConsistent(ctx context.Context, c *checker) outcome {
	v, err := c.main.result(ctx, "safety/limits", nil)
	if err != nil {
		return failf("%v", err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return failf("the answer is not an object: %s", short(v))
	}
	settings, _ := m["settings"].(map[string]any)
	for _, s := range c.desc.Settings {
		env, ok := settings[s.Name]
		if !ok {
			if s.Limits.empty() {
				continue
			}
			return failf("safety/limits has no setting %s, whose descriptor limits are %s", s.Name, s.Limits)
		}
		if got := envelopeLimits(env); !got.equal(s.Limits) {
			return failf("%s: limits %s in safety/limits, %s in the descriptor", s.Name, got, s.Limits)
		}
	}
	// The approval levels' shape is left open by the spec: not compared.
	if e, ok := m["estop"].(bool); ok && c.desc.EStop != nil && e != *c.desc.EStop {
		return failf("estop %v in safety/limits, %v in the descriptor", e, *c.desc.EStop)
	}
	return passf("%d settings agree with the descriptor", len(c.desc.Settings))
}

// gateable reports whether a dry run on the item reaches the value gate:
// not forbidden and no interlock (an open one would answer first).
func gateable(it item) bool {
	return it.Approval != string(mhp.ApprovalForbid) && len(it.Interlocks) == 0
}

// actuatable reports whether the state gate lets requests through.
func (c *checker) actuatable(ctx context.Context) (bool, string) {
	v, err := c.main.result(ctx, "ping", nil)
	if err != nil {
		return false, err.Error()
	}
	m, _ := v.(map[string]any)
	if st := str(m, "state"); st == string(mhp.StateEStop) || st == string(mhp.StateFault) {
		return false, fmt.Sprintf("device in %s: the state gate answers first", st)
	}
	return true, ""
}

func numeric(t string) bool { return t == mhp.TypeNumber || t == mhp.TypeInteger }

func checkGateLimits(ctx context.Context, c *checker) outcome {
	if ok, why := c.actuatable(ctx); !ok {
		return skipf("%s", why)
	}
	tried := 0
	for _, s := range c.desc.Settings {
		if !gateable(s) || s.Limits.empty() {
			continue
		}
		var bad []any
		l := s.Limits
		if l.Max != nil && (numeric(s.Type) || s.Type == "") {
			bad = append(bad, math.Floor(*l.Max)+1)
		}
		if l.Min != nil && (numeric(s.Type) || s.Type == "") {
			bad = append(bad, math.Ceil(*l.Min)-1)
		}
		if len(l.Enum) > 0 && s.Type == mhp.TypeString {
			bad = append(bad, "__mhp_not_in_enum__")
		}
		for _, val := range bad {
			tried++
			r, e, err := c.main.call(ctx, "settings/write", map[string]any{"name": s.Name, "value": val, "dryRun": true})
			if got, ok := refusal(r, e, err, mhp.CodeLimitViolation); !ok {
				return failf("%s=%v (dry run): %s, want %s", s.Name, val, got, codeName(mhp.CodeLimitViolation))
			}
			d := e.DataMap()
			_, hasMax := d["max"]
			_, hasMin := d["min"]
			_, hasEnum := d["enum"]
			if !hasMax && !hasMin && !hasEnum {
				return failf("%s=%v: LimitViolation without the limits in data (%s)", s.Name, val, short(e.Data))
			}
		}
	}
	if tried == 0 {
		return skipf("no setting with limits that a dry run can reach")
	}
	return passf("%d out-of-limits values refused", tried)
}

func checkGateTypes(ctx context.Context, c *checker) outcome {
	if ok, why := c.actuatable(ctx); !ok {
		return skipf("%s", why)
	}
	tried, otherCode := 0, []string{}
	for _, s := range c.desc.Settings {
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
		for _, val := range bad {
			tried++
			r, e, err := c.main.call(ctx, "settings/write", map[string]any{"name": s.Name, "value": val, "dryRun": true})
			got, refused := refusal(r, e, err)
			if !refused {
				return failf("%s (%s) = %#v (dry run): %s, want a refusal (InvalidValue)", s.Name, s.Type, val, got)
			}
			if e.Code != mhp.CodeInvalidValue {
				otherCode = append(otherCode, fmt.Sprintf("%s=%#v: %s", s.Name, val, e))
			}
		}
	}
	if tried == 0 {
		return skipf("no typed setting that a dry run can reach")
	}
	if len(otherCode) > 0 {
		return warnf("refused, but not with %s: %s", codeName(mhp.CodeInvalidValue), strings.Join(otherCode, "; "))
	}
	return passf("%d ill-typed values refused", tried)
}

func checkGateForbid(ctx context.Context, c *checker) outcome {
	if ok, why := c.actuatable(ctx); !ok {
		return skipf("%s", why)
	}
	tried := 0
	for _, s := range c.desc.Settings {
		if s.Approval == string(mhp.ApprovalForbid) {
			tried++
			r, e, err := c.main.call(ctx, "settings/write", map[string]any{"name": s.Name, "value": 0, "dryRun": true, "approved": true})
			if got, ok := refusal(r, e, err, mhp.CodeForbidden); !ok {
				return failf("setting %s (forbid): %s, want %s", s.Name, got, codeName(mhp.CodeForbidden))
			}
		}
	}
	for _, a := range c.desc.Actions {
		if a.Approval == string(mhp.ApprovalForbid) {
			tried++
			r, e, err := c.main.call(ctx, "actions/invoke", map[string]any{"name": a.Name, "params": map[string]any{}, "dryRun": true, "approved": true})
			if got, ok := refusal(r, e, err, mhp.CodeForbidden); !ok {
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
func validValue(s item) (any, bool) {
	l := s.Limits
	switch {
	case len(l.Enum) > 0:
		return l.Enum[0], true
	case s.Type == mhp.TypeBoolean:
		return false, true
	case numeric(s.Type) && l.Min != nil:
		return math.Ceil(*l.Min), true
	case numeric(s.Type) && l.Max != nil:
		return math.Floor(*l.Max), true
	case numeric(s.Type):
		return 0, true
	}
	return nil, false
}

// needsApproval reads a dry run's approval note: notes.needsApproval, or
// needsApproval at the top level of the result.
func needsApproval(v any) bool {
	m, _ := v.(map[string]any)
	if b, _ := m["needsApproval"].(bool); b {
		return true
	}
	n, _ := m["notes"].(map[string]any)
	b, _ := n["needsApproval"].(bool)
	return b
}

func checkGateConfirm(ctx context.Context, c *checker) outcome {
	if ok, why := c.actuatable(ctx); !ok {
		return skipf("%s", why)
	}
	tried := 0
	check := func(what string, r any, e *Error, err error) outcome {
		tried++
		if err != nil {
			return failf("%s: no answer: %v", what, err)
		}
		if e != nil {
			if e.Code == mhp.CodeApprovalRequired {
				return pass() // refusing a dry run is acceptable too
			}
			return failf("%s: %s", what, e)
		}
		if !needsApproval(r) {
			return failf("%s: a dry run without approval reports no needsApproval: %s", what, short(r))
		}
		return pass()
	}
	for _, s := range c.desc.Settings {
		if s.Approval != string(mhp.ApprovalConfirm) || len(s.Interlocks) > 0 {
			continue
		}
		val, ok := validValue(s)
		if !ok {
			continue
		}
		r, e, err := c.main.call(ctx, "settings/write", map[string]any{"name": s.Name, "value": val, "dryRun": true})
		if o := check("setting "+s.Name+" (confirm) dry run", r, e, err); o.status != Pass {
			return o
		}
	}
	for _, a := range c.desc.Actions {
		if a.Approval != string(mhp.ApprovalConfirm) || len(a.Interlocks) > 0 || len(a.Params) > 0 {
			continue // parameters we cannot fill would be refused first
		}
		r, e, err := c.main.call(ctx, "actions/invoke", map[string]any{"name": a.Name, "params": map[string]any{}, "dryRun": true})
		if o := check("action "+a.Name+" (confirm) dry run", r, e, err); o.status != Pass {
			return o
		}
	}
	if tried == 0 {
		return skipf("no confirm item a dry run can reach")
	}
	return passf("%d confirm items gated", tried)
}

func checkUndeclaredParam(ctx context.Context, c *checker) outcome {
	if ok, why := c.actuatable(ctx); !ok {
		return skipf("%s", why)
	}
	tried := 0
	var accepted []string
	for _, a := range c.desc.Actions {
		if !gateable(a) {
			continue
		}
		tried++
		_, e, err := c.main.call(ctx, "actions/invoke", map[string]any{"name": a.Name,
			"params": map[string]any{"__mhp_undeclared__": 1}, "dryRun": true, "approved": true})
		if err != nil {
			return failf("%s: no answer: %v", a.Name, err)
		}
		if e == nil {
			accepted = append(accepted, a.Name)
		}
	}
	if tried == 0 {
		return skipf("no action a dry run can reach")
	}
	if len(accepted) > 0 {
		return failf("a dry run with an undeclared parameter was accepted by %s", strings.Join(accepted, ", "))
	}
	return passf("%d actions refused an undeclared parameter", tried)
}

func checkLeaseExclusive(ctx context.Context, c *checker) outcome {
	if !c.http() {
		return skipf("stdio: each connection is its own driver process")
	}
	if caps, _ := c.main.init["capabilities"].(map[string]any); caps["lease"] == false {
		return skipf("capability lease is false")
	}
	a, err := c.open(ctx)
	if err != nil {
		return failf("first client: %v", err)
	}
	defer a.close()
	b, err := c.open(ctx)
	if err != nil {
		return failf("second client: %v", err)
	}
	defer b.close()
	ttl := map[string]any{"ttl": 30}
	if _, e, err := a.call(ctx, "session/acquire", ttl); err != nil || e != nil {
		if e != nil && e.Code == mhp.CodeNotLeased {
			return skipf("another client holds the lease")
		}
		return failf("acquire: %v%v", errOr(err), errString(e))
	}
	release := func(s *session) error {
		_, e, err := s.call(ctx, "session/release", nil)
		if err != nil {
			return err
		}
		if e != nil {
			return e.Err()
		}
		return nil
	}
	r, e, err := b.call(ctx, "session/acquire", ttl)
	if got, ok := refusal(r, e, err, mhp.CodeNotLeased); !ok {
		_ = release(a)
		_ = release(b)
		return failf("a second client acquired a held lease: %s, want %s", got, codeName(mhp.CodeNotLeased))
	}
	if err := release(a); err != nil {
		return failf("release: %v", err)
	}
	if _, e, err := b.call(ctx, "session/acquire", ttl); err != nil || e != nil {
		return failf("acquire after the holder released: %v%v", errOr(err), errString(e))
	}
	if err := release(b); err != nil {
		return failf("release: %v", err)
	}
	return pass()
}

func checkErrorTS(ctx context.Context, c *checker) outcome {
	before := time.Now()
	_, e, err := c.main.call(ctx, "signals/read", map[string]any{"names": []string{"__mhp_no_such_signal__"}})
	after := time.Now()
	if err != nil {
		return failf("no answer: %v", err)
	}
	if e == nil {
		return skipf("an unknown signal was not refused (read/unknown reports it)")
	}
	if e.TS == 0 {
		return failf("the refusal carries no ts (neither error.ts nor error.data.ts)")
	}
	at := mhp.FromUnixSeconds(e.TS)
	skew := time.Duration(0)
	if at.Before(before) {
		skew = before.Sub(at)
	} else if at.After(after) {
		skew = at.Sub(after)
	}
	return passf("ts in %s (device clock %s from this host's)", e.TSAt, skew.Round(time.Millisecond))
}
