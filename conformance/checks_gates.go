package conformance

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/openmhp/mhp-go"
)

// attempt is one actuating request: a write or an invoke.
type attempt struct {
	label string
	write *mhp.WriteRequest
	inv   *mhp.InvokeRequest
}

func wr(name string, v any) attempt {
	return attempt{label: fmt.Sprintf("write %s=%v", name, v), write: &mhp.WriteRequest{Name: name, Value: v}}
}

func wrApproved(name string, v any) attempt {
	return attempt{label: fmt.Sprintf("write %s=%v approved", name, v), write: &mhp.WriteRequest{Name: name, Value: v, Approved: true}}
}

func inv(name string, params map[string]any) attempt {
	return attempt{label: fmt.Sprintf("invoke %s %v", name, params), inv: &mhp.InvokeRequest{Name: name, Params: params}}
}

func invApproved(name string, params map[string]any) attempt {
	return attempt{label: fmt.Sprintf("invoke %s approved", name), inv: &mhp.InvokeRequest{Name: name, Params: params, Approved: true}}
}

func (a attempt) dry() attempt {
	a.label += " (dry run)"
	if a.write != nil {
		w := *a.write
		w.DryRun = true
		a.write = &w
	} else {
		i := *a.inv
		i.DryRun = true
		a.inv = &i
	}
	return a
}

// do sends the attempt as dev.
func (c *C) do(dev mhp.Device, a attempt) error {
	if a.write != nil {
		_, err := c.writeReq(dev, *a.write)
		return err
	}
	_, err := c.invoke(dev, *a.inv)
	return err
}

// refused sends each attempt and expects code, with nothing reaching the
// backend and the device state unchanged.
func (c *C) refused(dev mhp.Device, code mhp.Code, attempts ...attempt) {
	c.Helper()
	before := c.state()
	snap := c.snapshot()
	for _, a := range attempts {
		err := c.do(dev, a)
		if err == nil {
			c.Fatalf("%s: want %s, got success", a.label, code)
		}
		e, ok := mhp.AsError(err)
		if !ok || e.Code != code {
			c.Fatalf("%s: want %s, got %v", a.label, code, err)
		}
		if e.TS <= 0 {
			c.Fatalf("%s: %s carries no ts", a.label, code)
		}
	}
	c.noCallsSince(snap, fmt.Sprintf("every request was refused with %s", code))
	if after := c.state(); after != before {
		c.Fatalf("device state went %q -> %q after refusals", before, after)
	}
}

func gateChecks() []check {
	return []check{
		{name: "gates/state/estop_refuses_everything", run: func(c *C) {
			c.estop(c.Other, "conformance: gate check")
			c.refused(c.Dev, mhp.CodeEStopActive,
				wr(SettingSetpoint, 50.0), wr(SettingSetpoint, 500.0), wr(SettingMode, "warm\n"),
				wr(SettingForbidden, 1.0), wr(SettingConfirmed, 50.0), wr(SettingFan, true),
				inv(ActionRun, runParams()), inv(ActionQuick, nil), inv(ActionMonitor, nil),
				inv(ActionForbidden, nil), inv(ActionRun, map[string]any{"duration_s": -1.0}))
		}},
		{name: "gates/state/fault_refuses_everything", run: func(c *C) {
			c.fault()
			c.refused(c.Dev, mhp.CodeDeviceFault,
				wr(SettingSetpoint, 50.0), wr(SettingSetpoint, 500.0), wr(SettingForbidden, 1.0),
				wr(SettingConfirmed, 50.0), inv(ActionRun, runParams()), inv(ActionQuick, nil), inv(ActionForbidden, nil))
		}},
		{name: "gates/order/state_before_approval", run: func(c *C) {
			c.estop(c.Dev, "conformance: gate order")
			c.refused(c.Dev, mhp.CodeEStopActive, wr(SettingForbidden, 1.0), wr(SettingConfirmed, 1.0),
				inv(ActionForbidden, nil), inv(ActionConfirm, nil))
		}},
		{name: "gates/order/approval_before_interlocks", run: func(c *C) {
			// Needs an item that has both an approval level and interlocks.
			d, err := c.describe(c.Dev, mhp.DescribeRequest{Detail: mhp.DetailFull})
			c.ok(err, "describe")
			var atts []attempt
			var codes []mhp.Code
			var locks []string
			for _, s := range d.Settings {
				if s.Approval != mhp.ApprovalAuto && s.Approval != "" && len(s.Interlocks) > 0 {
					atts, locks = append(atts, wr(s.Name, 1.0)), append(locks, s.Interlocks...)
					codes = append(codes, approvalCode(s.Approval))
				}
			}
			for _, a := range d.Actions {
				if a.Approval != mhp.ApprovalAuto && a.Approval != "" && len(a.Interlocks) > 0 {
					atts, locks = append(atts, inv(a.Name, paramsFor(a.Name))), append(locks, a.Interlocks...)
					codes = append(codes, approvalCode(a.Approval))
				}
			}
			if len(atts) == 0 {
				c.Skip("the fixture has no item with both an approval level and interlocks")
			}
			for _, l := range locks {
				c.B.SetSignal(l, false)
			}
			for i, a := range atts {
				c.refused(c.Dev, codes[i], a)
			}
		}},
		{name: "gates/order/interlocks_before_limits", run: func(c *C) {
			c.B.SetSignal(SignalDoorClosed, false)
			c.refused(c.Dev, mhp.CodeInterlockOpen,
				inv(ActionRun, map[string]any{"duration_s": 99999.0}),
				inv(ActionRun, map[string]any{"duration_s": "ten"}),
				inv(ActionRun, map[string]any{"undeclared": 1.0}),
				inv(ActionRun, nil))
		}},
		{name: "gates/order/limits_before_lease", run: func(c *C) {
			c.acquire(c.Other, time.Minute)
			c.refused(c.Dev, mhp.CodeLimitViolation, wr(SettingSetpoint, 500.0), wr(SettingMode, "warm"),
				inv(ActionRun, map[string]any{"duration_s": 99999.0}))
			c.refused(c.Dev, mhp.CodeInvalidValue, wr(SettingSetpoint, "500"), wr(SettingMode, "heat\r\n"),
				inv(ActionRun, map[string]any{"duration_s": true}))
			c.refused(c.Dev, mhp.CodeNotLeased, wr(SettingSetpoint, 50.0))
		}},
		{name: "gates/order/lease_before_busy", run: func(c *C) {
			c.acquire(c.Dev, time.Minute)
			c.startBlocked(c.Dev, ActionRun)
			c.refused(c.Other, mhp.CodeNotLeased, wr(SettingSetpoint, 50.0), inv(ActionQuick, nil), inv(ActionRun, runParams()))
			c.refused(c.Dev, mhp.CodeDeviceBusy, wr(SettingSetpoint, 50.0), inv(ActionQuick, nil))
		}},
		{name: "gates/order/approval_before_limits", run: func(c *C) {
			c.refused(c.Dev, mhp.CodeApprovalRequired, wr(SettingConfirmed, 50.0), wr(SettingConfirmed, "x"))
			c.refused(c.Dev, mhp.CodeForbidden, wr(SettingForbidden, "500"), wrApproved(SettingForbidden, math.MaxFloat64))
			c.refused(c.Dev, mhp.CodeLimitViolation, wrApproved(SettingConfirmed, 50.0))
		}},
		{name: "gates/order/approval_before_lease_and_busy", run: func(c *C) {
			c.acquire(c.Other, time.Minute)
			c.refused(c.Dev, mhp.CodeApprovalRequired, wr(SettingConfirmed, 5.0), inv(ActionConfirm, nil))
			c.refused(c.Dev, mhp.CodeForbidden, wr(SettingForbidden, 1.0), inv(ActionForbidden, nil))
			c.startBlocked(c.Other, ActionRun)
			c.refused(c.Other, mhp.CodeApprovalRequired, wr(SettingConfirmed, 5.0), inv(ActionConfirm, nil))
		}},
		{name: "gates/order/limits_before_busy", run: func(c *C) {
			c.startBlocked(c.Dev, ActionRun)
			c.refused(c.Dev, mhp.CodeLimitViolation, wr(SettingSetpoint, 500.0), inv(ActionProfile, map[string]any{
				"steps": []any{map[string]any{"temp": 150.0, "hold_s": 1.0}}, "cycles": 1}))
			c.refused(c.Dev, mhp.CodeInvalidValue, wr(SettingSetpoint, nil), inv(ActionQuick, map[string]any{"x": 1.0}))
		}},
		{name: "gates/unknown_name", run: func(c *C) {
			c.refused(c.Dev, mhp.CodeUnknownName, wr("no_such_setting", 1.0), inv("no_such_action", nil),
				wr("no_such_setting", 1.0).dry(), wr(SignalTemperature, 1.0))
		}},
	}
}

func approvalCode(a mhp.Approval) mhp.Code {
	if a == mhp.ApprovalForbid {
		return mhp.CodeForbidden
	}
	return mhp.CodeApprovalRequired
}

// valueCase is one invalid setting value.
type valueCase struct {
	name    string
	setting string
	value   any
	code    mhp.Code
	check   func(c *C, e *mhp.Error)
}

func wantRange(min, max float64) func(c *C, e *mhp.Error) {
	return func(c *C, e *mhp.Error) {
		c.Helper()
		lo, okLo := dataNum(e, "min")
		hi, okHi := dataNum(e, "max")
		if !okLo || !okHi || lo != min || hi != max {
			c.Fatalf("LimitViolation data %v, want min %v max %v", e.Data, min, max)
		}
	}
}

func valueChecks() []check {
	cases := []valueCase{
		{"string_for_number", SettingSetpoint, "500", mhp.CodeInvalidValue, nil},
		{"null", SettingSetpoint, nil, mhp.CodeInvalidValue, nil},
		{"nan", SettingSetpoint, math.NaN(), mhp.CodeInvalidValue, nil},
		{"inf", SettingSetpoint, math.Inf(1), mhp.CodeInvalidValue, nil},
		{"negative_inf", SettingSetpoint, math.Inf(-1), mhp.CodeInvalidValue, nil},
		{"bool_on_number", SettingSetpoint, true, mhp.CodeInvalidValue, nil},
		{"object_on_number", SettingSetpoint, map[string]any{"value": 50.0}, mhp.CodeInvalidValue, nil},
		{"number_on_boolean", SettingFan, 1.0, mhp.CodeInvalidValue, nil},
		{"string_on_boolean", SettingFan, "true", mhp.CodeInvalidValue, nil},
		{"crlf_in_string", SettingMode, "heat\r\n", mhp.CodeInvalidValue, nil},
		{"nul_in_string", SettingMode, "he\x00at", mhp.CodeInvalidValue, nil},
		{"number_on_string", SettingMode, 1.0, mhp.CodeInvalidValue, nil},
		{"over_max", SettingSetpoint, 100.5, mhp.CodeLimitViolation, wantRange(0, 100)},
		{"below_min", SettingSetpoint, -0.5, mhp.CodeLimitViolation, wantRange(0, 100)},
		{"enum_miss", SettingMode, "warm", mhp.CodeLimitViolation, func(c *C, e *mhp.Error) {
			c.Helper()
			for _, v := range []string{"idle", "heat", "cool"} {
				if !contains(e.Data["enum"], v) {
					c.Fatalf("LimitViolation data %v, want enum [idle heat cool]", e.Data)
				}
			}
		}},
	}
	var out []check
	for _, vc := range cases {
		out = append(out, check{name: "values/" + vc.name, run: func(c *C) {
			before := c.written(vc.setting)
			snap := c.snapshot()
			for _, dry := range []bool{false, true} {
				_, err := c.writeReq(c.Dev, mhp.WriteRequest{Name: vc.setting, Value: vc.value, DryRun: dry})
				e := c.expect(err, vc.code)
				if vc.check != nil {
					vc.check(c, e)
				}
			}
			c.noCallsSince(snap, "the value was refused")
			c.wantWritten(vc.setting, before, "a refused value never reaches the backend")
			c.wantState(mhp.StateIdle, "a refused value does not change the device state")
		}})
	}
	out = append(out,
		check{name: "values/valid_write_applied", run: func(c *C) {
			r := c.mustWrite(c.Dev, SettingSetpoint, 37.5)
			if !r.OK || r.Name != SettingSetpoint || !sameValue(r.Value, 37.5) || !r.Applied || r.Status != mhp.WriteApplied {
				c.Fatalf("write answer %+v, want ok, name setpoint, value 37.5, applied", r)
			}
			c.wantWritten(SettingSetpoint, 37.5, "the write was applied")
			if n := c.B.Calls(SettingSetpoint); n != 1 {
				c.Fatalf("setpoint reached the backend %d times, want once", n)
			}
			c.mustWrite(c.Dev, SettingMode, "heat")
			c.wantWritten(SettingMode, "heat", "the enum member was written")
			c.mustWrite(c.Dev, SettingFan, true)
			c.wantWritten(SettingFan, true, "the boolean was written")
		}},
		check{name: "values/bounds_inclusive", run: func(c *C) {
			for _, v := range []float64{0, 100} {
				c.mustWrite(c.Dev, SettingSetpoint, v)
				c.wantWritten(SettingSetpoint, v, "a bound is inside the limits")
			}
		}},
	)
	return out
}

// paramCase is one invalid set of action params.
type paramCase struct {
	name   string
	action string
	params map[string]any
	code   mhp.Code
	field  string // the path the error must name, when set
}

func steps(items ...map[string]any) []any {
	out := make([]any, len(items))
	for i, it := range items {
		out[i] = it
	}
	return out
}

func paramChecks() []check {
	ok := map[string]any{"temp": 95.0, "hold_s": 30.0}
	cases := []paramCase{
		{"missing", ActionRun, map[string]any{}, mhp.CodeInvalidValue, "duration_s"},
		{"undeclared", ActionRun, map[string]any{"duration_s": 1.0, "speed": 3.0}, mhp.CodeInvalidValue, "speed"},
		{"undeclared_on_paramless", ActionQuick, map[string]any{"now": true}, mhp.CodeInvalidValue, "now"},
		{"out_of_range", ActionRun, map[string]any{"duration_s": 4000.0}, mhp.CodeLimitViolation, "duration_s"},
		{"wrong_type", ActionRun, map[string]any{"duration_s": "10"}, mhp.CodeInvalidValue, "duration_s"},
		{"null", ActionRun, map[string]any{"duration_s": nil}, mhp.CodeInvalidValue, "duration_s"},
		{"nested_element_out_of_range", ActionProfile, map[string]any{
			"steps": steps(ok, map[string]any{"temp": 150.0, "hold_s": 1.0}), "cycles": 3}, mhp.CodeLimitViolation, "steps[1].temp"},
		{"nested_below_min", ActionProfile, map[string]any{
			"steps": steps(map[string]any{"temp": 50.0, "hold_s": -1.0}), "cycles": 3}, mhp.CodeLimitViolation, "steps[0].hold_s"},
		{"nested_missing_field", ActionProfile, map[string]any{
			"steps": steps(ok, map[string]any{"temp": 50.0}), "cycles": 3}, mhp.CodeInvalidValue, "steps[1].hold_s"},
		{"nested_undeclared_field", ActionProfile, map[string]any{
			"steps": steps(map[string]any{"temp": 50.0, "hold_s": 1.0, "ramp": 2.0}), "cycles": 3}, mhp.CodeInvalidValue, "steps[0].ramp"},
		{"nested_wrong_container", ActionProfile, map[string]any{"steps": "95 for 30 s", "cycles": 3}, mhp.CodeInvalidValue, "steps"},
		{"bool_as_integer", ActionProfile, map[string]any{"steps": steps(ok), "cycles": true}, mhp.CodeInvalidValue, "cycles"},
		{"fraction_on_integer", ActionProfile, map[string]any{"steps": steps(ok), "cycles": 2.5}, mhp.CodeInvalidValue, "cycles"},
		{"integer_out_of_range", ActionProfile, map[string]any{"steps": steps(ok), "cycles": 100}, mhp.CodeLimitViolation, "cycles"},
		{"string_in_nested_number", ActionProfile, map[string]any{
			"steps": steps(map[string]any{"temp": "9\n5", "hold_s": 1.0}), "cycles": 3}, mhp.CodeInvalidValue, "steps[0].temp"},
	}
	var out []check
	for _, pc := range cases {
		out = append(out, check{name: "params/" + pc.name, run: func(c *C) {
			snap := c.snapshot()
			for _, dry := range []bool{false, true} {
				_, err := c.invoke(c.Dev, mhp.InvokeRequest{Name: pc.action, Params: pc.params, DryRun: dry})
				e := c.expect(err, pc.code)
				if pc.field != "" {
					field, _ := e.Data[mhp.DataField].(string)
					if field != pc.field && !strings.Contains(e.Message, pc.field) {
						c.Fatalf("dryRun=%v: error %q (data %v) does not name %s", dry, e.Message, e.Data, pc.field)
					}
				}
			}
			c.noCallsSince(snap, "the params were refused")
			c.noJobs()
			c.wantState(mhp.StateIdle, "refused params do not change the device state")
		}})
	}
	out = append(out,
		check{name: "params/valid_dry_run", run: func(c *C) {
			r, err := c.invoke(c.Dev, mhp.InvokeRequest{Name: ActionProfile, Params: profileParams(), DryRun: true})
			c.ok(err, "dry run of valid params")
			if !r.DryRun || r.Job != nil {
				c.Fatalf("dry run answer %+v: want dryRun and no job", r)
			}
			if !sameValue(r.WouldRun["cycles"], 3) || len(normalise(r.WouldRun["steps"]).([]any)) != 2 {
				c.Fatalf("wouldRun %v does not carry the checked params", r.WouldRun)
			}
			if n := c.B.Calls(ActionProfile); n != 0 {
				c.Fatalf("a dry run reached the backend (%d calls)", n)
			}
			c.noJobs()
		}},
		check{name: "params/valid_invoke_runs", run: func(c *C) {
			j := c.start(c.Dev, ActionProfile, profileParams())
			j = c.waitTerminal(j.ID)
			if j.State != mhp.JobDone {
				c.Fatalf("valid profile ended %s: %+v", j.State, j.Error)
			}
			if n := c.B.Calls(ActionProfile); n != 1 {
				c.Fatalf("profile reached the backend %d times, want once", n)
			}
		}},
	)
	return out
}

// noJobs fails if any job exists.
func (c *C) noJobs() {
	c.Helper()
	ctx, cancel := c.call()
	defer cancel()
	jobs, err := c.Other.Jobs(ctx, mhp.JobsRequest{})
	c.ok(err, mhp.MethodJobsList)
	if len(jobs) != 0 {
		c.Fatalf("a refused or dry-run invoke created jobs: %+v", jobs)
	}
}

func dryRunChecks() []check {
	return []check{
		{name: "dryrun/write_touches_nothing", run: func(c *C) {
			rec := c.record(c.Dev)
			r, err := c.writeReq(c.Dev, mhp.WriteRequest{Name: SettingSetpoint, Value: 50.0, DryRun: true})
			c.ok(err, "dry-run write")
			if !r.DryRun || !sameValue(r.WouldWrite, 50.0) {
				c.Fatalf("dry-run answer %+v: want dryRun and wouldWrite 50", r)
			}
			if !r.Notes.Empty() {
				c.Fatalf("an unobstructed dry run reports problems: %+v", r.Notes)
			}
			if n := c.B.Calls(SettingSetpoint); n != 0 {
				c.Fatalf("a dry run reached the backend (%d calls)", n)
			}
			c.wantWritten(SettingSetpoint, 20.0, "a dry run writes nothing")
			// A real write afterwards: its notification arrives; none for the dry run.
			c.mustWrite(c.Dev, SettingMode, "heat")
			rec.wait(c, "settings/changed for mode", func(n mhp.Notification) bool {
				return n.Method == mhp.NotifySettingsChanged && n.Params["name"] == SettingMode
			}, nil)
			if n, found := rec.find(func(n mhp.Notification) bool {
				return n.Method == mhp.NotifySettingsChanged && n.Params["name"] == SettingSetpoint
			}); found {
				c.Fatalf("a dry run published settings/changed: %+v", n)
			}
		}},
		{name: "dryrun/invoke_touches_nothing", run: func(c *C) {
			rec := c.record(c.Dev)
			r, err := c.invoke(c.Dev, mhp.InvokeRequest{Name: ActionRun, Params: runParams(), DryRun: true})
			c.ok(err, "dry-run invoke")
			if !r.DryRun || r.Job != nil || !sameValue(r.WouldRun["duration_s"], 10.0) {
				c.Fatalf("dry-run answer %+v: want dryRun, no job, wouldRun duration_s 10", r)
			}
			if n := c.B.Calls(ActionRun); n != 0 {
				c.Fatalf("a dry run reached the backend (%d calls)", n)
			}
			c.noJobs()
			c.wantState(mhp.StateIdle, "a dry run starts nothing")
			if n, found := rec.find(method(mhp.NotifyJobsStarted)); found {
				c.Fatalf("a dry run published jobs/started: %+v", n)
			}
		}},
		{name: "dryrun/notes_needs_approval", run: func(c *C) {
			r, err := c.writeReq(c.Dev, mhp.WriteRequest{Name: SettingConfirmed, Value: 5.0, DryRun: true})
			c.ok(err, "dry-run write of a confirm setting")
			if r.Notes == nil || !r.Notes.NeedsApproval {
				c.Fatalf("dry-run notes %+v, want needsApproval", r.Notes)
			}
			ri, err := c.invoke(c.Dev, mhp.InvokeRequest{Name: ActionConfirm, DryRun: true})
			c.ok(err, "dry-run invoke of a confirm action")
			if ri.Notes == nil || !ri.Notes.NeedsApproval {
				c.Fatalf("dry-run notes %+v, want needsApproval", ri.Notes)
			}
			if c.B.Calls(SettingConfirmed)+c.B.Calls(ActionConfirm) != 0 {
				c.Fatalf("a dry run reached the backend")
			}
		}},
		{name: "dryrun/notes_lease_held_by_other", run: func(c *C) {
			l := c.acquire(c.Other, time.Minute)
			r, err := c.writeReq(c.Dev, mhp.WriteRequest{Name: SettingSetpoint, Value: 50.0, DryRun: true})
			c.ok(err, "dry-run write under another's lease")
			if r.Notes == nil || r.Notes.LeaseHeldBy != l.Holder {
				c.Fatalf("dry-run notes %+v, want leaseHeldBy %q", r.Notes, l.Holder)
			}
			ri, err := c.invoke(c.Dev, mhp.InvokeRequest{Name: ActionQuick, DryRun: true})
			c.ok(err, "dry-run invoke under another's lease")
			if ri.Notes == nil || ri.Notes.LeaseHeldBy != l.Holder {
				c.Fatalf("dry-run invoke notes %+v, want leaseHeldBy %q", ri.Notes, l.Holder)
			}
		}},
		{name: "dryrun/notes_needs_lease", opt: Options{WatchdogS: WatchdogS}, run: func(c *C) {
			r, err := c.writeReq(c.Dev, mhp.WriteRequest{Name: SettingSetpoint, Value: 50.0, DryRun: true})
			c.ok(err, "dry-run write without the lease on a watchdog device")
			if r.Notes == nil || !r.Notes.NeedsLease {
				c.Fatalf("dry-run notes %+v, want needsLease", r.Notes)
			}
		}},
		{name: "dryrun/notes_busy_now", run: func(c *C) {
			c.startBlocked(c.Dev, ActionRun)
			r, err := c.writeReq(c.Dev, mhp.WriteRequest{Name: SettingSetpoint, Value: 50.0, DryRun: true})
			c.ok(err, "dry-run write while busy")
			if r.Notes == nil || !r.Notes.BusyNow {
				c.Fatalf("dry-run notes %+v, want busyNow", r.Notes)
			}
			ri, err := c.invoke(c.Dev, mhp.InvokeRequest{Name: ActionQuick, DryRun: true})
			c.ok(err, "dry-run invoke while busy")
			if ri.Notes == nil || !ri.Notes.BusyNow {
				c.Fatalf("dry-run invoke notes %+v, want busyNow", ri.Notes)
			}
			if n := c.B.Calls(ActionQuick) + c.B.Calls(SettingSetpoint); n != 0 {
				c.Fatalf("a dry run reached the backend")
			}
		}},
		{name: "dryrun/other_gates_still_refuse", run: func(c *C) {
			c.refused(c.Dev, mhp.CodeLimitViolation, wr(SettingSetpoint, 500.0).dry(), inv(ActionRun, map[string]any{"duration_s": 4000.0}).dry())
			c.refused(c.Dev, mhp.CodeInvalidValue, wr(SettingSetpoint, "50").dry())
			c.refused(c.Dev, mhp.CodeForbidden, wr(SettingForbidden, 1.0).dry(), inv(ActionForbidden, nil).dry())
			c.B.SetSignal(SignalDoorClosed, false)
			c.refused(c.Dev, mhp.CodeInterlockOpen, inv(ActionRun, runParams()).dry())
			c.estop(c.Other, "conformance: dry run in estop")
			c.refused(c.Dev, mhp.CodeEStopActive, wr(SettingSetpoint, 50.0).dry(), inv(ActionQuick, nil).dry())
		}},
	}
}

func approvalChecks() []check {
	return []check{
		{name: "approval/confirm_needs_approved", run: func(c *C) {
			c.refused(c.Dev, mhp.CodeApprovalRequired, wr(SettingConfirmed, 5.0))
			r, err := c.writeReq(c.Dev, mhp.WriteRequest{Name: SettingConfirmed, Value: 5.0, Approved: true})
			c.ok(err, "approved write of a confirm setting")
			if !r.OK {
				c.Fatalf("approved write answer %+v", r)
			}
			c.wantWritten(SettingConfirmed, 5.0, "approved:true passes a confirm setting")
		}},
		{name: "approval/confirm_action", run: func(c *C) {
			c.refused(c.Dev, mhp.CodeApprovalRequired, inv(ActionConfirm, nil))
			r, err := c.invoke(c.Dev, mhp.InvokeRequest{Name: ActionConfirm, Approved: true})
			c.ok(err, "approved invoke of a confirm action")
			if j := c.waitTerminal(r.Job.ID); j.State != mhp.JobDone {
				c.Fatalf("approved confirm action ended %s", j.State)
			}
		}},
		{name: "approval/forbid_never", run: func(c *C) {
			c.refused(c.Dev, mhp.CodeForbidden, wr(SettingForbidden, 1.0), wrApproved(SettingForbidden, 1.0),
				inv(ActionForbidden, nil), invApproved(ActionForbidden, nil))
			c.acquire(c.Dev, time.Minute)
			c.refused(c.Dev, mhp.CodeForbidden, wrApproved(SettingForbidden, 1.0), invApproved(ActionForbidden, nil))
		}},
	}
}

func interlockChecks() []check {
	wantLock := func(c *C) {
		c.Helper()
		before := c.B.Calls(ActionRun)
		_, err := c.invoke(c.Dev, mhp.InvokeRequest{Name: ActionRun, Params: runParams()})
		e := c.expect(err, mhp.CodeInterlockOpen)
		if e.Data[mhp.DataInterlock] != SignalDoorClosed && !strings.Contains(e.Message, SignalDoorClosed) {
			c.Fatalf("InterlockOpen %q (data %v) does not name %s", e.Message, e.Data, SignalDoorClosed)
		}
		if c.B.Calls(ActionRun) != before {
			c.Fatalf("an interlocked action reached the backend")
		}
		ctx, cancel := c.call()
		defer cancel()
		active, err := c.Other.Jobs(ctx, mhp.JobsRequest{Active: true})
		c.ok(err, mhp.MethodJobsList)
		if len(active) != 0 {
			c.Fatalf("an interlocked invoke created a job: %+v", active)
		}
	}
	return []check{
		{name: "interlocks/open_when_false", run: func(c *C) {
			c.B.SetSignal(SignalDoorClosed, false)
			wantLock(c)
		}},
		{name: "interlocks/open_when_unavailable", run: func(c *C) {
			c.B.SetUnavailable(SignalDoorClosed, true)
			wantLock(c)
		}},
		{name: "interlocks/open_unless_exactly_true", run: func(c *C) {
			for _, v := range []any{"true", 1.0, "ERROR"} {
				c.B.SetSignal(SignalDoorClosed, v)
				wantLock(c)
			}
		}},
		{name: "interlocks/read_live", run: func(c *C) {
			c.B.SetSignal(SignalDoorClosed, false)
			wantLock(c)
			c.B.SetSignal(SignalDoorClosed, true)
			j := c.start(c.Dev, ActionRun, runParams())
			c.waitTerminal(j.ID)
			c.B.SetSignal(SignalDoorClosed, false)
			wantLock(c)
		}},
	}
}
