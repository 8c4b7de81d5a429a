package binding

import (
	"maps"

	"github.com/openmhp/mhp-go"
)

// ---- operator-run work (waiting_operator) ----

// WaitOperator puts the running job in waiting_operator (spec §9.1): a
// person must do the work and answer. The instruction goes into the job's
// extra ("instruction") with extra's entries, and is published as
// notifications/jobs/progress and notifications/operator/instruction
// {job, action, text}. The job stays there until Run returns, which ends
// it as usual. It does nothing on a finished job.
func (j *Job) WaitOperator(instruction string, extra map[string]any) {
	d := j.d
	d.locked(func() {
		r, ok := d.jobs[j.id]
		if !ok || r.job.State.Terminal() {
			return
		}
		x := maps.Clone(extra)
		if x == nil {
			x = map[string]any{}
		}
		x["instruction"] = instruction
		r.job.State = mhp.JobWaitingOperator
		r.job.Extra = x
		d.enqueueLocked(mhp.NotifyJobsProgress, map[string]any{"job": r.job})
		d.enqueueLocked(mhp.NotifyOperatorInstruct, map[string]any{"job": j.id, "action": j.action, "text": instruction})
	})
}

// Notify publishes an adapter's own notification (an operator instruction
// for a setting or the estop, an operator's answer) to the driver's
// listeners, stamped with the device state and time like the driver's own.
// params is not kept.
func (d *Driver) Notify(method string, params map[string]any) {
	p := maps.Clone(params)
	if p == nil {
		p = map[string]any{}
	}
	d.locked(func() { d.enqueueLocked(method, p) })
}
