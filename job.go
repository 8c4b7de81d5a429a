package mhp

// JobState is where a job is in its life.
type JobState string

// Job states: queued -> running -> done | failed | cancelled, plus
// waiting_operator for operator-run instruments.
const (
	JobQueued          JobState = "queued"
	JobRunning         JobState = "running"
	JobWaitingOperator JobState = "waiting_operator"
	JobDone            JobState = "done"
	JobFailed          JobState = "failed"
	JobCancelled       JobState = "cancelled"
)

// Terminal reports whether the state is final.
func (s JobState) Terminal() bool { return s == JobDone || s == JobFailed || s == JobCancelled }

// Outcomes of a failed job: what is known of its effect on the device.
const (
	// OutcomeUnknown: the backend may or may not have acted; the device is latched in fault.
	OutcomeUnknown = "unknown"
	// OutcomeFailed: the backend reported that the work failed; its state is known.
	OutcomeFailed = "failed"
	// OutcomeNotStarted: the backend refused before anything took effect.
	OutcomeNotStarted = "not_started"
)

// Job is a unit of work started by actions/invoke.
type Job struct {
	ID       string         `json:"id"`
	Action   string         `json:"action"`
	Params   map[string]any `json:"params,omitempty"`
	Owner    string         `json:"owner,omitempty"`
	State    JobState       `json:"state"`
	Progress float64        `json:"progress"`
	// Extra carries progress details from the backend: eta_s, message, step, intermediate responses.
	Extra   map[string]any `json:"extra,omitempty"`
	Result  any            `json:"result,omitempty"`
	Error   *Error         `json:"error,omitempty"`
	Outcome string         `json:"outcome,omitempty"`
	// Started and Finished are device-clock Unix seconds.
	Started         float64 `json:"started,omitempty"`
	Finished        float64 `json:"finished,omitempty"`
	CancelRequested bool    `json:"cancel_requested,omitempty"`
	Paused          bool    `json:"paused,omitempty"`
}

// DeviceState is the device's state: idle, busy, fault or estop.
type DeviceState string

// Device states.
const (
	StateIdle  DeviceState = "idle"
	StateBusy  DeviceState = "busy"
	StateFault DeviceState = "fault"
	StateEStop DeviceState = "estop"
	// StateUnreachable is never reported by a device; a directory or client
	// uses it for a device that did not answer.
	StateUnreachable DeviceState = "unreachable"
)
