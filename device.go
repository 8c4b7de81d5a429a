package mhp

import (
	"context"
	"encoding/json"
	"time"
)

// Device is one MHP device in process: every primitive of the protocol as a
// Go method. binding.Driver implements it; the transport serves any Device on
// the wire, and the client's device handle implements it over the wire, so
// the same code (and the conformance suite) runs either side.
//
// The caller's session travels in the context ([WithSession]); leases belong to
// sessions.
type Device interface {
	Describe(ctx context.Context, req DescribeRequest) (*Description, error)
	Read(ctx context.Context, names []string) (*ReadResult, error)
	// Subscribe asks for notifications/signals/update for the named signals
	// (all when empty) on this session; Unsubscribe stops them.
	Subscribe(ctx context.Context, names []string) (*SubscribeResult, error)
	Unsubscribe(ctx context.Context, names []string) error
	Write(ctx context.Context, req WriteRequest) (*WriteResult, error)
	Invoke(ctx context.Context, req InvokeRequest) (*InvokeResult, error)
	Job(ctx context.Context, id string) (*Job, error)
	Jobs(ctx context.Context, req JobsRequest) ([]Job, error)
	CancelJob(ctx context.Context, id string) (*Job, error)
	PauseJob(ctx context.Context, id string) (*Job, error)
	ResumeJob(ctx context.Context, id string) (*Job, error)
	Acquire(ctx context.Context, ttl time.Duration) (*Lease, error)
	Renew(ctx context.Context) (*Lease, error)
	Release(ctx context.Context) error
	Limits(ctx context.Context) (*LimitsReport, error)
	EStop(ctx context.Context, reason string) (*EStopResult, error)
	Reset(ctx context.Context) (*ResetResult, error)
	// Ping answers the device state and feeds the watchdog for the session.
	Ping(ctx context.Context) (*PingResult, error)
	// Listen registers fn for every notification the device publishes, in
	// order; fn must not block. The returned func stops delivery.
	Listen(fn func(Notification)) (stop func())
	// EndSession forgets a session: its subscriptions are dropped and its
	// lease released (a transport calls it when a connection closes). On a
	// device with a watchdog the lease is not released: a holder that went
	// away is silent, so the watchdog fails safe when its window runs out;
	// a client handing control back calls Release first.
	EndSession(ctx context.Context)
}

// ResourceProvider is implemented by devices served from a device package.
type ResourceProvider interface {
	ListResources(ctx context.Context) ([]string, error)
	ReadResource(ctx context.Context, path string) (*Resource, error)
}

// Resource is a package file's content, capped.
type Resource struct {
	Path      string `json:"path"`
	Text      string `json:"text"`
	Truncated bool   `json:"truncated,omitempty"`
}

type sessionKey struct{}

// WithSession returns ctx carrying the caller's session id.
func WithSession(ctx context.Context, session string) context.Context {
	return context.WithValue(ctx, sessionKey{}, session)
}

// SessionFrom returns the session id in ctx, or "" for an anonymous caller.
func SessionFrom(ctx context.Context) string {
	s, _ := ctx.Value(sessionKey{}).(string)
	return s
}

// Detail tiers of device/describe.
const (
	DetailCard    = "card"
	DetailSummary = "summary"
	DetailFull    = "full"
)

// DescribeRequest asks for a tier, or for named items with Select.
type DescribeRequest struct {
	Detail string     `json:"detail,omitempty"`
	Select *Selection `json:"select,omitempty"`
}

// Selection names the items whose full specs device/describe returns.
type Selection struct {
	Signals  []string `json:"signals,omitempty"`
	Settings []string `json:"settings,omitempty"`
	Actions  []string `json:"actions,omitempty"`
}

// ReadResult is the answer of signals/read.
type ReadResult struct {
	Values map[string]any `json:"values"`
	// TS is the device clock at the read, Unix seconds.
	TS float64 `json:"ts"`
	// Times holds each value's own timestamp where the backend gave one
	// (source timestamp, arrival time).
	Times map[string]float64 `json:"times,omitempty"`
	// Unavailable names signals that could not be read (their value is null) and why.
	Unavailable map[string]string `json:"unavailable,omitempty"`
}

// SubscribeResult is the answer of signals/subscribe.
type SubscribeResult struct {
	Subscribed []string `json:"subscribed"`
}

// WriteRequest is settings/write.
type WriteRequest struct {
	Name     string `json:"name"`
	Value    any    `json:"value"`
	Approved bool   `json:"approved,omitempty"`
	DryRun   bool   `json:"dryRun,omitempty"`
	// CommandID names the caller's intent: a retry with the same id and the
	// same request replays the first answer and never acts twice.
	CommandID string `json:"commandId,omitempty"`
	// PermitID is an operator's single-use approval of exactly this request.
	PermitID string `json:"permitId,omitempty"`
}

// WriteResult is the answer of settings/write. Applied is false when the
// backend took the command but nothing confirmed it took effect (Status "sent").
type WriteResult struct {
	OK      bool   `json:"ok"`
	Name    string `json:"name"`
	Value   any    `json:"value"`
	Applied bool   `json:"applied"`
	Status  string `json:"status,omitempty"`
	// DryRun fields: what would have been written and the problems a real write would meet.
	DryRun     bool         `json:"dryRun,omitempty"`
	WouldWrite any          `json:"wouldWrite,omitempty"`
	Notes      *DryRunNotes `json:"notes,omitempty"`
}

// Write statuses.
const (
	WriteApplied = "applied"
	WriteSent    = "sent"
)

// DryRunNotes are the approval, lease and busy problems a dry run found.
type DryRunNotes struct {
	NeedsApproval bool   `json:"needsApproval,omitempty"`
	NeedsLease    bool   `json:"needsLease,omitempty"`
	LeaseHeldBy   string `json:"leaseHeldBy,omitempty"`
	BusyNow       bool   `json:"busyNow,omitempty"`
}

// Empty reports whether the dry run found no problems.
func (n *DryRunNotes) Empty() bool {
	return n == nil || (!n.NeedsApproval && !n.NeedsLease && n.LeaseHeldBy == "" && !n.BusyNow)
}

// InvokeRequest is actions/invoke.
type InvokeRequest struct {
	Name     string         `json:"name"`
	Params   map[string]any `json:"params,omitempty"`
	Approved bool           `json:"approved,omitempty"`
	DryRun   bool           `json:"dryRun,omitempty"`
	// CommandID names the caller's intent: a retry with the same id and the
	// same request replays the first answer and never acts twice.
	CommandID string `json:"commandId,omitempty"`
	// PermitID is an operator's single-use approval of exactly this request.
	PermitID string `json:"permitId,omitempty"`
	// Method runs a saved method (003 section 5.8): its action with its params,
	// Params overriding them key by key.
	Method string `json:"method,omitempty"`
	// Project and Compound label the run (003 section 5.8, M6/M7); they travel
	// with the request to the device and its evidence.
	Project  string `json:"project,omitempty"`
	Compound string `json:"compound,omitempty"`
}

// InvokeResult is the answer of actions/invoke: the job, or for a dry run the
// checked parameters and notes.
type InvokeResult struct {
	Job      *Job           `json:"job,omitempty"`
	DryRun   bool           `json:"dryRun,omitempty"`
	WouldRun map[string]any `json:"wouldRun,omitempty"`
	Notes    *DryRunNotes   `json:"notes,omitempty"`
	// Action is the action a dry run checked (the wire's job key names it).
	Action string `json:"-"`
}

// JobsRequest filters jobs/list.
type JobsRequest struct {
	// Active limits the list to jobs not yet terminal.
	Active bool `json:"active,omitempty"`
	// Limit caps the number returned (newest first); zero means all kept.
	Limit int `json:"limit,omitempty"`
}

// Lease is a session's exclusive right to actuate.
type Lease struct {
	Holder  string  `json:"holder"`
	TTL     float64 `json:"ttl"`
	Expires float64 `json:"expires"`
}

// LimitsReport is safety/limits: the effective envelope in one answer.
type LimitsReport struct {
	Settings   map[string]SettingEnvelope `json:"settings"`
	Actions    map[string]ActionEnvelope  `json:"actions"`
	Interlocks []string                   `json:"interlocks,omitempty"`
	WatchdogS  float64                    `json:"watchdog_s,omitempty"`
	EStop      bool                       `json:"estop"`
}

// SettingEnvelope is one setting's limits and approval.
type SettingEnvelope struct {
	Limits     *Limits  `json:"limits,omitempty"`
	Unit       string   `json:"unit,omitempty"`
	Approval   Approval `json:"approval"`
	Interlocks []string `json:"interlocks,omitempty"`
	DuringJob  bool     `json:"during_job,omitempty"`
}

// ActionEnvelope is one action's approval, interlocks and parameter limits.
type ActionEnvelope struct {
	Approval   Approval           `json:"approval"`
	Interlocks []string           `json:"interlocks,omitempty"`
	Limits     map[string]*Limits `json:"limits,omitempty"`
}

// EStopResult is the answer of safety/estop. The device is in estop either
// way. Stopped is true only when the stop command finished without error
// before the answer; StopError says why it failed, and StopPending that it
// had not finished within the answer bound (a later notifications/safety/estop
// carries its final "stopped").
//
// Cancelling lists the jobs whose cancel was requested; what each job then
// did is the backend's word alone and arrives as its jobs/finished
// notification (or jobs/status): a job listed here may still end done or failed.
type EStopResult struct {
	State       DeviceState `json:"state"`
	Stopped     bool        `json:"stopped"`
	StopPending bool        `json:"stop_pending,omitempty"`
	StopError   string      `json:"stop_error,omitempty"`
	Cancelling  []string    `json:"cancelling,omitempty"`
}

// UnmarshalJSON decodes an estop answer, also from a driver that names the
// job list "cancelled" (the field's earlier name).
func (r *EStopResult) UnmarshalJSON(b []byte) error {
	type plain EStopResult
	var v struct {
		plain
		Cancelled []string `json:"cancelled"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*r = EStopResult(v.plain)
	if r.Cancelling == nil {
		r.Cancelling = v.Cancelled
	}
	return nil
}

// ResetResult is the answer of safety/reset.
type ResetResult struct {
	State    DeviceState `json:"state"`
	Verified bool        `json:"verified"`
	// Unavailable names the signals that read unavailable during the
	// verification without blocking it (neither an interlock nor marked
	// required_for_recovery), each with the reason.
	Unavailable map[string]string `json:"unavailable,omitempty"`
	// VerifiedText is the device's own account of the verification when it
	// gave one instead of a boolean (the reference: "all signals readable");
	// on the wire it is the verified member.
	VerifiedText string `json:"-"`
}

// PingResult is the answer of ping.
type PingResult struct {
	State DeviceState `json:"state"`
	TS    float64     `json:"ts"`
	// Backend is the driver's link to its backend, when the driver tracks one.
	Backend *BackendLink `json:"backend,omitempty"`
}

// BackendLink is the state of a driver's link to the backend it fronts (a
// PLC, a SiLA 2 server, a rosbridge, a node). Drivers that track their link
// report it in ping and device/describe; while Connected is false, signals
// read unavailable and writes and invokes are refused before anything is sent
// (data.outcome "not_started").
type BackendLink struct {
	Connected bool `json:"connected"`
	// Since is when the link entered this state, Unix seconds.
	Since float64 `json:"since"`
	// Error is why the link is down (the last connect or transport error).
	Error string `json:"error,omitempty"`
}
