package manual

import (
	"context"
	"sort"
	"time"

	"github.com/openmhp/mhp-go"
)

// AnswerRequest is operator/answer's params: exactly one of Job, Setting
// or EStop says what is answered.
type AnswerRequest struct {
	Job     string `json:"job,omitempty"`
	Setting string `json:"setting,omitempty"`
	EStop   bool   `json:"estop,omitempty"`
	// Outcome is done, failed, could_not or cancelled.
	Outcome string `json:"outcome"`
	Note    string `json:"note,omitempty"`
	// Values are what the person recorded (signal -> value; for a
	// setting, the value they set under the setting's name).
	Values map[string]any `json:"values,omitempty"`
}

// AnswerResult is operator/answer's result.
type AnswerResult struct {
	OK      bool     `json:"ok"`
	Outcome string   `json:"outcome"`
	By      Person   `json:"by"`
	Job     *mhp.Job `json:"job,omitempty"`
	Setting string   `json:"setting,omitempty"`
	// Applied says whether a setting is now confirmed at Value.
	Applied bool `json:"applied,omitempty"`
	Value   any  `json:"value,omitempty"`
	EStop   bool `json:"estop,omitempty"`
}

// RecordRequest is operator/record's params.
type RecordRequest struct {
	Signal string `json:"signal"`
	Value  any    `json:"value"`
	Note   string `json:"note,omitempty"`
}

// RecordResult is operator/record's result.
type RecordResult struct {
	OK     bool    `json:"ok"`
	Signal string  `json:"signal"`
	Value  any     `json:"value"`
	At     float64 `json:"ts"`
	By     Person  `json:"by"`
}

// Pending is operator/pending's result: what waits for the person.
type Pending struct {
	Jobs     []PendingJob     `json:"jobs"`
	Settings []PendingSetting `json:"settings"`
	// EStop is the stop asked and not yet confirmed.
	EStop *PendingSetting `json:"estop,omitempty"`
}

// PendingJob is a job in waiting_operator.
type PendingJob struct {
	Job         string  `json:"job"`
	Action      string  `json:"action"`
	Instruction string  `json:"instruction"`
	Since       float64 `json:"since"`
}

// PendingSetting is a write (or the estop) waiting for confirmation.
type PendingSetting struct {
	Setting     string  `json:"setting,omitempty"`
	Value       any     `json:"value,omitempty"`
	Instruction string  `json:"instruction"`
	RequestedBy string  `json:"requested_by"`
	Since       float64 `json:"since"`
}

// OperatorWireMethods implements mhp.OperatorExtension: the person's
// answers, served only with the operator token.
func (o *operator) OperatorWireMethods() map[string]mhp.WireMethod {
	return map[string]mhp.WireMethod{
		mhp.MethodOperatorAnswer:  mhp.Handle(mhp.MethodOperatorAnswer, o.answer),
		mhp.MethodOperatorRecord:  mhp.Handle(mhp.MethodOperatorRecord, o.recordMethod),
		mhp.MethodOperatorPending: mhp.Handle(mhp.MethodOperatorPending, func(context.Context, struct{}) (*Pending, error) { return o.pending(), nil }),
	}
}

func (o *operator) recordMethod(ctx context.Context, req RecordRequest) (*RecordResult, error) {
	r, err := o.record(ctx, req.Signal, req.Value, req.Note)
	if err != nil {
		return nil, err
	}
	o.notify(mhp.NotifyOperatorAnswer, map[string]any{"kind": "record", "signal": req.Signal, "value": r.value,
		"note": r.note, "by": r.by.Label(), "person": r.by})
	return &RecordResult{OK: true, Signal: req.Signal, Value: r.value, At: mhp.UnixSeconds(r.at), By: r.by}, nil
}

func validOutcome(s string) bool {
	switch s {
	case OutcomeDone, OutcomeFailed, OutcomeCouldNot, OutcomeCancelled:
		return true
	}
	return false
}

func (o *operator) answer(ctx context.Context, req AnswerRequest) (*AnswerResult, error) {
	m := mhp.MethodOperatorAnswer
	n := 0
	for _, set := range []bool{req.Job != "", req.Setting != "", req.EStop} {
		if set {
			n++
		}
	}
	if n != 1 {
		return nil, mhp.Errorf(mhp.CodeInvalidParams, "%s: name exactly one of job, setting or estop", m).With(mhp.DataField, "job")
	}
	if !validOutcome(req.Outcome) {
		return nil, mhp.Errorf(mhp.CodeInvalidParams, "%s: outcome %q: want done, failed, could_not or cancelled", m, req.Outcome).
			With(mhp.DataField, "outcome")
	}
	by := PersonFrom(ctx)
	note := mhp.Truncate(req.Note, 4096)
	res := &AnswerResult{OK: true, Outcome: req.Outcome, By: by}
	switch {
	case req.Setting != "":
		return o.answerSetting(ctx, req, by, note, res)
	case req.EStop:
		o.mu.Lock()
		asked := o.estop != nil && !o.stopOK
		if asked && req.Outcome == OutcomeDone {
			o.stopOK = true
		}
		o.mu.Unlock()
		if !asked {
			return nil, mhp.Errorf(mhp.CodeInvalidParams, "%s: no stop is waiting for confirmation", m).With(mhp.DataField, "estop")
		}
		res.EStop = true
		o.notify(mhp.NotifyOperatorAnswer, map[string]any{"kind": "estop", "outcome": req.Outcome, "note": note,
			"by": by.Label(), "person": by})
		return res, nil
	}
	// A job: the recorded values are checked first, so a refused answer
	// leaves the job waiting.
	o.mu.Lock()
	w, ok := o.jobs[req.Job]
	o.mu.Unlock()
	if !ok {
		return nil, mhp.Errorf(mhp.CodeJobNotFound, "%s: job %q is not waiting for an operator", m, req.Job).With(mhp.DataField, "job")
	}
	if err := o.checkValues(req.Values); err != nil {
		return nil, err
	}
	o.mu.Lock()
	_, still := o.jobs[req.Job]
	delete(o.jobs, req.Job)
	o.mu.Unlock()
	if !still {
		return nil, mhp.Errorf(mhp.CodeJobNotFound, "%s: job %q was answered already", m, req.Job).With(mhp.DataField, "job")
	}
	for _, k := range sorted(req.Values) {
		_, _ = o.record(ctx, k, req.Values[k], note)
	}
	a := answer{outcome: req.Outcome, note: note, values: req.Values, by: by, at: o.now()}
	w.answer <- a
	o.notify(mhp.NotifyOperatorAnswer, map[string]any{"kind": "job", "job": req.Job, "action": w.action, "outcome": req.Outcome,
		"note": note, "values": req.Values, "by": by.Label(), "person": by})
	res.Job = o.settled(ctx, req.Job)
	return res, nil
}

// checkValues refuses values naming no signal or of the wrong type.
func (o *operator) checkValues(values map[string]any) error {
	for _, k := range sorted(values) {
		typ, ok := o.types[k]
		if !ok {
			return mhp.Errorf(mhp.CodeUnknownName, "%s: values: no signal %q", mhp.MethodOperatorAnswer, k).With(mhp.DataField, "values")
		}
		if _, err := checkValue(typ, values[k]); err != nil {
			return mhp.Errorf(mhp.CodeInvalidValue, "%s: values.%s: %v", mhp.MethodOperatorAnswer, k, err).With(mhp.DataField, "values")
		}
	}
	return nil
}

// settled returns the job once the driver has finished it (within 2 s),
// else its current snapshot.
func (o *operator) settled(ctx context.Context, id string) *mhp.Job {
	if o.drv == nil {
		return nil
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		j, err := o.drv.Job(ctx, id)
		if err != nil {
			return nil
		}
		if j.State.Terminal() || time.Now().After(deadline) {
			return j
		}
		t := time.NewTimer(5 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return j
		}
	}
}

func (o *operator) answerSetting(ctx context.Context, req AnswerRequest, by Person, note string, res *AnswerResult) (*AnswerResult, error) {
	m := mhp.MethodOperatorAnswer
	o.mu.Lock()
	r, ok := o.requests[req.Setting]
	o.mu.Unlock()
	if !ok {
		return nil, mhp.Errorf(mhp.CodeUnknownName, "%s: no write of %q is waiting for confirmation", m, req.Setting).
			With(mhp.DataField, "setting")
	}
	value := r.value
	if v, ok := req.Values[req.Setting]; ok {
		value = v
	}
	o.mu.Lock()
	delete(o.requests, req.Setting)
	o.mu.Unlock()
	res.Setting = req.Setting
	applied := req.Outcome == OutcomeDone
	params := map[string]any{"name": req.Setting, "requested": r.value, "requested_by": r.by.Label(), "applied": applied,
		"outcome": req.Outcome, "note": note, "by": by.Label(), "person": by}
	if applied {
		params["value"] = value
		res.Applied, res.Value = true, value
	}
	o.notify(mhp.NotifySettingsChanged, params)
	o.notify(mhp.NotifyOperatorAnswer, map[string]any{"kind": "setting", "setting": req.Setting, "outcome": req.Outcome,
		"value": value, "note": note, "by": by.Label(), "person": by})
	return res, nil
}

func (o *operator) pending() *Pending {
	o.mu.Lock()
	defer o.mu.Unlock()
	p := &Pending{Jobs: []PendingJob{}, Settings: []PendingSetting{}}
	for id, w := range o.jobs {
		p.Jobs = append(p.Jobs, PendingJob{Job: id, Action: w.action, Instruction: w.instruction, Since: mhp.UnixSeconds(w.since)})
	}
	sort.Slice(p.Jobs, func(i, j int) bool { return p.Jobs[i].Since < p.Jobs[j].Since })
	for _, name := range sorted(o.requests) {
		r := o.requests[name]
		p.Settings = append(p.Settings, PendingSetting{Setting: name, Value: r.value, Instruction: r.instruction,
			RequestedBy: r.by.Label(), Since: mhp.UnixSeconds(r.at)})
	}
	if o.estop != nil && !o.stopOK {
		p.EStop = &PendingSetting{Instruction: o.estop.instruction, RequestedBy: o.estop.by.Label(), Since: mhp.UnixSeconds(o.estop.at)}
	}
	return p
}
