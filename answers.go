package mhp

import (
	"encoding/json"
	"strings"
)

// JobDryRun is the state of the job key of a dry-run actions/invoke answer on
// the wire: no job exists. The reference SDK reads result["job"] on every
// invoke, so a dry run answers one (id empty, the action and the checked
// params, state "dryRun") next to dryRun, wouldRun and notes. In Go a dry
// run's [InvokeResult.Job] stays nil.
const JobDryRun JobState = "dryRun"

// invokeWire is InvokeResult's wire shape.
type invokeWire struct {
	Job      *Job           `json:"job,omitempty"`
	DryRun   bool           `json:"dryRun,omitempty"`
	WouldRun map[string]any `json:"wouldRun,omitempty"`
	Notes    *DryRunNotes   `json:"notes,omitempty"`
	// The reference puts the dry-run notes at the top level too.
	NeedsApproval bool   `json:"needsApproval,omitempty"`
	NeedsLease    bool   `json:"needsLease,omitempty"`
	LeaseHeldBy   string `json:"leaseHeldBy,omitempty"`
	BusyNow       any    `json:"busyNow,omitempty"`
}

// MarshalJSON writes a dry run with the reference's job key (state
// [JobDryRun]) and top-level notes as well as dryRun, wouldRun and notes.
func (r InvokeResult) MarshalJSON() ([]byte, error) {
	w := invokeWire{Job: r.Job, DryRun: r.DryRun, WouldRun: r.WouldRun, Notes: r.Notes}
	if r.DryRun && r.Job == nil {
		w.Job = &Job{Action: r.Action, Params: r.WouldRun, State: JobDryRun}
		if n := r.Notes; n != nil {
			w.NeedsApproval, w.NeedsLease, w.LeaseHeldBy = n.NeedsApproval, n.NeedsLease, n.LeaseHeldBy
			if n.BusyNow {
				w.BusyNow = true
			}
		}
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads our shape and the reference's: a job in state
// [JobDryRun] (or beside dryRun: true) is a dry run, not a job.
func (r *InvokeResult) UnmarshalJSON(b []byte) error {
	var w invokeWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*r = InvokeResult{Job: w.Job, DryRun: w.DryRun, WouldRun: w.WouldRun, Notes: w.Notes}
	if w.Job != nil && (w.DryRun || w.Job.State == JobDryRun) {
		r.Job, r.DryRun, r.Action = nil, true, w.Job.Action
		if r.WouldRun == nil {
			r.WouldRun = w.Job.Params
		}
	}
	if r.DryRun && r.Notes == nil {
		busy := w.BusyNow != nil && w.BusyNow != false && w.BusyNow != ""
		if n := (DryRunNotes{NeedsApproval: w.NeedsApproval, NeedsLease: w.NeedsLease, LeaseHeldBy: w.LeaseHeldBy, BusyNow: busy}); !n.Empty() {
			r.Notes = &n
		}
	}
	return nil
}

// writeWire is WriteResult's wire shape, with presence of applied and status.
type writeWire struct {
	OK         bool         `json:"ok"`
	Name       string       `json:"name"`
	Value      any          `json:"value"`
	Applied    *bool        `json:"applied,omitempty"`
	Status     string       `json:"status,omitempty"`
	DryRun     bool         `json:"dryRun,omitempty"`
	WouldWrite any          `json:"wouldWrite,omitempty"`
	Notes      *DryRunNotes `json:"notes,omitempty"`
}

// UnmarshalJSON reads the spec's write answer {ok, name, value} (no applied,
// no status: §5.4's shape, the reference's) as applied: the spec answers ok
// once the value was written. An explicit applied or status is kept.
func (r *WriteResult) UnmarshalJSON(b []byte) error {
	var w writeWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*r = WriteResult{OK: w.OK, Name: w.Name, Value: w.Value, Status: w.Status, DryRun: w.DryRun, WouldWrite: w.WouldWrite, Notes: w.Notes}
	switch {
	case w.Applied != nil:
		r.Applied = *w.Applied
	case w.Status != "":
		r.Applied = w.Status == WriteApplied
	case w.OK && !w.DryRun:
		r.Applied, r.Status = true, WriteApplied
	}
	return nil
}

// MarshalJSON writes verified as the device's text when it gave one (the
// reference's "all signals readable"), else as a boolean.
func (r ResetResult) MarshalJSON() ([]byte, error) {
	var verified any = r.Verified
	if r.Verified && r.VerifiedText != "" {
		verified = r.VerifiedText
	}
	return json.Marshal(struct {
		State       DeviceState       `json:"state"`
		Verified    any               `json:"verified"`
		Unavailable map[string]string `json:"unavailable,omitempty"`
	}{r.State, verified, r.Unavailable})
}

// UnmarshalJSON reads verified as a boolean or as the device's text (kept in
// VerifiedText; "false", "no", "unverified" and "" read as not verified).
func (r *ResetResult) UnmarshalJSON(b []byte) error {
	var w struct {
		State    DeviceState     `json:"state"`
		Verified json.RawMessage `json:"verified"`
		// VerifiedText is where a lenient reader that made verified a
		// boolean keeps the device's text.
		VerifiedText string            `json:"verifiedText"`
		Unavailable  map[string]string `json:"unavailable"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*r = ResetResult{State: w.State, VerifiedText: w.VerifiedText, Unavailable: w.Unavailable}
	if len(w.Verified) == 0 || string(w.Verified) == "null" {
		return nil
	}
	var text string
	if json.Unmarshal(w.Verified, &text) == nil {
		r.VerifiedText, r.Verified = text, VerifiedText(text)
		return nil
	}
	return json.Unmarshal(w.Verified, &r.Verified)
}

// VerifiedText reads a textual verified: false for "false", "no", "0", "",
// "unverified" and "not verified"; any other text (the reference's "all
// signals readable") says the recovery was verified.
func VerifiedText(s string) bool {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "false", "no", "0", "", "unverified", "not verified":
		return false
	}
	return true
}
