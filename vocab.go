package mhp

// The protocol's vocabulary: every wire method name, the six gates and the
// keys of error data that more than one package writes or reads. Outcomes
// ([OutcomeUnknown], [OutcomeFailed], [OutcomeNotStarted]) and notification
// names ([NotifySignalsUpdate], ...) sit beside the types they describe.

// Core method names (spec §5): the methods every MHP server answers.
const (
	// MethodInitialize negotiates the version and opens the session; it
	// must come before any other method (§5.1).
	MethodInitialize = "initialize"
	// MethodPing feeds the watchdog (§6); it is never refused for load.
	MethodPing = "ping"
	// MethodDescribe returns the descriptor at a detail tier (§5.2).
	MethodDescribe = "device/describe"

	// MethodSignalsRead reads signals; no names reads them all (§5.3).
	MethodSignalsRead = "signals/read"
	// MethodSignalsSubscribe asks for notifications/signals/update (§5.3).
	MethodSignalsSubscribe = "signals/subscribe"
	// MethodSignalsUnsubscribe stops the updates of the named signals.
	MethodSignalsUnsubscribe = "signals/unsubscribe"

	// MethodSettingsWrite writes one setting through the six gates (§5.4, §7.1).
	MethodSettingsWrite = "settings/write"
	// MethodActionsInvoke starts an action as a job through the six gates
	// (§5.5, §7.1).
	MethodActionsInvoke = "actions/invoke"

	// MethodJobsStatus returns one job (§5.5).
	MethodJobsStatus = "jobs/status"
	// MethodJobsList lists the jobs the device remembers.
	MethodJobsList = "jobs/list"
	// MethodJobsCancel cancels a job.
	MethodJobsCancel = "jobs/cancel"
	// MethodJobsPause pauses a pausable job.
	MethodJobsPause = "jobs/pause"
	// MethodJobsResume resumes a paused job.
	MethodJobsResume = "jobs/resume"

	// MethodSessionAcquire takes the lease for ttl seconds (§5.7).
	MethodSessionAcquire = "session/acquire"
	// MethodSessionRenew extends the caller's lease.
	MethodSessionRenew = "session/renew"
	// MethodSessionRelease gives the lease back.
	MethodSessionRelease = "session/release"

	// MethodSafetyLimits reports the effective limits, interlocks and
	// approval levels (§5.6).
	MethodSafetyLimits = "safety/limits"
	// MethodSafetyEStop stops the device; it always works, from anyone (§5.6).
	MethodSafetyEStop = "safety/estop"
	// MethodSafetyReset returns the device to idle after estop or fault (§5.6).
	MethodSafetyReset = "safety/reset"

	// MethodResourcesList lists the device package's files (§4.3).
	MethodResourcesList = "resources/list"
	// MethodResourcesRead reads one file of the device package (§4.3).
	MethodResourcesRead = "resources/read"
)

// Extension method names: served by decorators in the device chain (saved
// methods, evidence, permits), or refused as unsupported by a server whose
// device has none.
const (
	// MethodMethodsList lists the saved methods.
	MethodMethodsList = "methods/list"
	// MethodMethodsFind searches the saved methods.
	MethodMethodsFind = "methods/find"
	// MethodMethodsGet returns one saved method.
	MethodMethodsGet = "methods/get"
	// MethodMethodsDiff compares two revisions of a saved method.
	MethodMethodsDiff = "methods/diff"
	// MethodMethodsSave saves a method.
	MethodMethodsSave = "methods/save"
	// MethodMethodsDelete deletes a saved method.
	MethodMethodsDelete = "methods/delete"

	// MethodEvidenceHead returns the head of the evidence chain.
	MethodEvidenceHead = "evidence/head"
	// MethodEvidenceList lists evidence records.
	MethodEvidenceList = "evidence/list"

	// MethodPermitsIssue issues a permit; it is an operator method.
	MethodPermitsIssue = "permits/issue"

	// MethodOperatorAnswer is a person's answer to an operator-run device
	// (driver: manual): a waiting job done, failed, could_not or cancelled,
	// a setting write confirmed, a stop confirmed. An operator method.
	MethodOperatorAnswer = "operator/answer"
	// MethodOperatorRecord records a reading a person took. An operator method.
	MethodOperatorRecord = "operator/record"
	// MethodOperatorPending lists what waits for the person. An operator method.
	MethodOperatorPending = "operator/pending"
)

// The six gates of settings/write and actions/invoke, in the order the
// server evaluates them (spec §7.1). A refusal names its gate in data.gate
// ([DataGate]); [Gates] lists them in order.
const (
	// GateState refuses in estop (EStopActive) or fault (DeviceFault).
	GateState = "state"
	// GateApproval refuses forbid items and confirm items sent without
	// approved: true.
	GateApproval = "approval"
	// GateInterlocks reads each named interlock signal live; any falsy
	// value is InterlockOpen.
	GateInterlocks = "interlocks"
	// GateLimits checks numeric ranges and enums: LimitViolation.
	GateLimits = "limits"
	// GateLease refuses while another client holds an unexpired lease.
	GateLease = "lease"
	// GateBusy refuses while a non-concurrent job runs: DeviceBusy.
	GateBusy = "busy"
)

// Gates returns the six gate names in spec order (§7.1).
func Gates() []string {
	return []string{GateState, GateApproval, GateInterlocks, GateLimits, GateLease, GateBusy}
}

// Keys of Error.Data that more than one package writes or reads.
const (
	// DataGate names the gate that refused ([GateState], ...).
	DataGate = "gate"
	// DataField names the params member (or header) that was refused.
	DataField = "field"
	// DataReason is a machine-readable word for why a request was refused
	// ("not_initialized", "duplicate_member", ...).
	DataReason = "reason"
	// DataOutcome says whether the device acted: [OutcomeUnknown],
	// [OutcomeFailed] or [OutcomeNotStarted].
	DataOutcome = "outcome"
	// DataHolder is the label of the session that holds the lease.
	DataHolder = "holder"
	// DataLimit is the limit that was reached (a count, a size).
	DataLimit = "limit"
	// DataMin and [DataMax] are a range's bounds (spec §5.4: "data":{"min","max"}).
	DataMin = "min"
	// DataMax is the upper bound of a range; see [DataMin].
	DataMax = "max"
	// DataInterlock names the interlock signal that is open.
	DataInterlock = "interlock"
	// DataName names the signal, setting, action or item refused.
	DataName = "name"
	// DataKind is the kind of item refused ("setting", "action", ...).
	DataKind = "kind"
	// DataMethod names the JSON-RPC method concerned.
	DataMethod = "method"
	// DataCapability names the capability a refused method needs.
	DataCapability = "capability"
	// DataApproval is the approval level that refused ("forbid", "confirm").
	DataApproval = "approval"
	// DataValue is the value that was refused or read.
	DataValue = "value"
	// DataPattern is the pattern a string failed to match.
	DataPattern = "pattern"
	// DataBackendError is the backend's own error text, capped.
	DataBackendError = "backend_error"
	// DataHTTPStatus is the HTTP status a backend answered.
	DataHTTPStatus = "http_status"
)

// Values of data.reason ([DataReason]) that a server writes and a client or
// another package matches.
const (
	// ReasonNotInitialized: a request came before initialize (-32000).
	ReasonNotInitialized = "not_initialized"
	// ReasonSessionUnknown: the HTTP session named is unknown or expired
	// (-32000); the client initializes again.
	ReasonSessionUnknown = "session_unknown"
	// ReasonOperatorRequired: an operator method was called without the
	// operator token ([HeaderOperator]).
	ReasonOperatorRequired = "operator_required"
	// ReasonLeaseRequired: the device has a watchdog and the caller holds
	// no lease (NotLeased, gate lease); the client acquires one and retries.
	ReasonLeaseRequired = "lease_required"
	// ReasonBackendUnavailable: the driver's link to its backend is down;
	// nothing was sent (outcome not_started).
	ReasonBackendUnavailable = "backend_unavailable"
	// ReasonBackendLock: the backend refused its own lock when the lease
	// was taken.
	ReasonBackendLock = "backend_lock"
)
