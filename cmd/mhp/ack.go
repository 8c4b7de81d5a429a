package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/manual"
)

// The verbs a person at an operator-run instrument (driver: manual) uses;
// they call operator methods, so they need --operator-token-file.
func init() {
	verbs["ack"] = verb{usage: "ack JOB|estop done|failed|could_not|cancelled [NOTE...] --operator-token-file F", min: 2, max: -1, run: ackVerb}
	verbs["confirm"] = verb{usage: "confirm SETTING [VALUE] [--note TEXT] --operator-token-file F", min: 1, max: 2, run: confirmVerb}
	verbs["record"] = verb{usage: "record SIGNAL VALUE [--note TEXT] --operator-token-file F", min: 2, max: 2, run: recordVerb}
	verbs["pending"] = verb{usage: "pending --operator-token-file F", run: pendingVerb}
}

// ackVerb runs `mhp TARGET ack JOB OUTCOME [NOTE...]`: the person's answer
// to a job in waiting_operator (or, with JOB "estop", the confirmation that
// they stopped the instrument).
func ackVerb(ctx context.Context, v *verbCtx) int {
	req := manual.AnswerRequest{Outcome: v.args[1], Note: strings.Join(v.args[2:], " ")}
	if v.args[0] == "estop" {
		req.EStop = true
	} else {
		req.Job = v.args[0]
	}
	var res manual.AnswerResult
	if err := v.d.Call(ctx, mhp.MethodOperatorAnswer, req, &res); err != nil {
		return v.fail(err, v.json)
	}
	if v.json {
		return v.printJSON(res)
	}
	switch {
	case res.Job != nil:
		fmt.Fprintf(v.stdout, "%s: %s by %s; job %s\n", res.Job.ID, res.Outcome, res.By.Label(), res.Job.State)
	default:
		fmt.Fprintf(v.stdout, "estop: %s by %s\n", res.Outcome, res.By.Label())
	}
	return exitOK
}

// confirmVerb runs `mhp TARGET confirm SETTING [VALUE]`: the person set the
// setting (to VALUE when they set something else than was asked).
func confirmVerb(ctx context.Context, v *verbCtx) int {
	req := manual.AnswerRequest{Setting: v.args[0], Outcome: manual.OutcomeDone, Note: v.p.flags["note"]}
	if len(v.args) == 2 {
		req.Values = map[string]any{v.args[0]: parseValue(v.args[1])}
	}
	var res manual.AnswerResult
	if err := v.d.Call(ctx, mhp.MethodOperatorAnswer, req, &res); err != nil {
		return v.fail(err, v.json)
	}
	if v.json {
		return v.printJSON(res)
	}
	fmt.Fprintf(v.stdout, "%s = %v applied, confirmed by %s\n", res.Setting, res.Value, res.By.Label())
	return exitOK
}

// recordVerb runs `mhp TARGET record SIGNAL VALUE`: a reading the person took.
func recordVerb(ctx context.Context, v *verbCtx) int {
	req := manual.RecordRequest{Signal: v.args[0], Value: parseValue(v.args[1]), Note: v.p.flags["note"]}
	var res manual.RecordResult
	if err := v.d.Call(ctx, mhp.MethodOperatorRecord, req, &res); err != nil {
		return v.fail(err, v.json)
	}
	if v.json {
		return v.printJSON(res)
	}
	fmt.Fprintf(v.stdout, "%s = %v recorded by %s\n", res.Signal, res.Value, res.By.Label())
	return exitOK
}

// pendingVerb runs `mhp TARGET pending`: what waits for the person.
func pendingVerb(ctx context.Context, v *verbCtx) int {
	var p manual.Pending
	if err := v.d.Call(ctx, mhp.MethodOperatorPending, struct{}{}, &p); err != nil {
		return v.fail(err, v.json)
	}
	if v.json {
		return v.printJSON(p)
	}
	for _, j := range p.Jobs {
		fmt.Fprintf(v.stdout, "job %s (%s): %s\n", j.Job, j.Action, j.Instruction)
	}
	for _, s := range p.Settings {
		fmt.Fprintf(v.stdout, "setting %s = %v (asked by %s): %s\n", s.Setting, s.Value, s.RequestedBy, s.Instruction)
	}
	if p.EStop != nil {
		fmt.Fprintf(v.stdout, "estop (asked by %s): %s\n", p.EStop.RequestedBy, p.EStop.Instruction)
	}
	if len(p.Jobs) == 0 && len(p.Settings) == 0 && p.EStop == nil {
		fmt.Fprintln(v.stdout, "nothing waits for the operator")
	}
	return exitOK
}
