// Package binding turns lists of Signal, Setting and Action bindings into a
// complete MHP driver (the BoundDriver): every write and invoke passes the six
// gates (state, approval, interlocks, limits, lease, busy) before a binding's
// hook runs; long work runs as jobs whose terminal state comes from the
// backend; leases, the watchdog, estop, fault and reset, bounded job history
// and notifications are inherited. Ecosystem adapters (opcua, sila2, ros2,
// madsci, pylabrobot, mqtt) are built on it.
//
// The error contract of hooks:
//   - return an [*mhp.Error] when the backend refused before anything took
//     effect: the request fails with that error and the device state is unchanged;
//   - return any other error when the effect is unknown (a timeout or lost
//     connection after sending): the device latches in fault with outcome "unknown";
//   - an action's Run returns [ErrCancelled] only when the backend confirmed that
//     the work stopped because of a cancel, and Failed(err) when the backend
//     reported a failure whose effect is known.
//
// Estop is the one call that always works. It latches at once, asks every
// job to cancel, cancels every write in flight and runs the EStop hook,
// answering within [Config.EStopAnswerTimeout] whatever the hook does. The stop
// is the last word the backend hears: a Write hook or Run that was at the
// backend when the estop latched is waited for, and when the last of them
// returns the EStop hook runs once more; such a write is never answered ok
// (EStopActive, with data.outcome saying whether it may have taken effect),
// and a reset is refused until they have all returned.
package binding

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/openmhp/mhp-go"
)

// ErrCancelled is returned by an action's Run when the backend confirmed that
// the work stopped because it was cancelled. Only then does the job end
// "cancelled"; a Run that returns nil after a cancel ends "done".
var ErrCancelled = errors.New("cancelled: the backend confirmed the work stopped")

// ErrUnavailable is returned (or wrapped) by a signal's Read when the value
// cannot be had: disconnected, stale, bad quality. The signal reads null and
// an interlock on it is open.
var ErrUnavailable = errors.New("signal unavailable")

// Unavailable returns an error wrapping [ErrUnavailable] with a reason.
func Unavailable(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUnavailable, fmt.Sprintf(format, args...))
}

// FailedError is a failure the backend reported with a known outcome (a SiLA
// defined execution error, a ROS goal ABORTED, a MADSci action failed).
type FailedError struct {
	Err error
	// Data is added to the job error's data (error identifiers, node errors).
	Data map[string]any
}

func (e *FailedError) Error() string { return "backend reported failure: " + e.Err.Error() }
func (e *FailedError) Unwrap() error { return e.Err }

// Failed marks err as a failure the backend reported: the job ends failed
// with outcome "failed" and the device does not latch in fault (unless the
// action sets FaultOnFailure).
func Failed(err error, data map[string]any) error { return &FailedError{Err: err, Data: data} }

// Sample is one reading of a signal.
type Sample struct {
	Value any
	// Time is when the backend measured or sent the value; zero means now.
	Time time.Time
}

// Signal binds a readable value. Read must honour its context's deadline:
// the driver reads interlocks live on every write and invoke, under a
// deadline, and a read that outlives [Config.InterlockTimeout] counts as
// unavailable (the interlock is open).
type Signal struct {
	Spec mhp.Signal
	// Read returns the current value; wrap [ErrUnavailable] when there is none.
	Read func(ctx context.Context) (Sample, error)
	// Pushed says the adapter publishes updates itself with [Driver.PublishSignal],
	// so subscriptions do not poll Read.
	Pushed bool
}

// WriteStatus says what a setting's Write knows of its effect.
type WriteStatus int

const (
	// Applied: the backend confirmed the value took effect.
	Applied WriteStatus = iota
	// Sent: the command went out but nothing confirmed it took effect.
	Sent
)

// Setting binds a writable value. Spec.Limits and Spec.Approval are enforced
// before Write runs; Write receives the checked, normalised value (float64
// for numbers, int64 for integers).
type Setting struct {
	Spec  mhp.Setting
	Write func(ctx context.Context, value any) (WriteStatus, error)

	shape *mhp.Shape // Spec's value shape, made once by New
}

// Action binds invokable work. Run executes in its own goroutine under a
// context that is cancelled by jobs/cancel, estop and the action's Timeout;
// its result goes into the job. Params are checked against Spec.Params (and
// Validate) before Run.
type Action struct {
	Spec mhp.Action
	Run  func(ctx context.Context, job *Job) (any, error)
	// Validate checks a whole request after the shapes passed; it must not touch
	// the backend (it runs for dry runs too). Its error is InvalidValue unless
	// it returns an [*mhp.Error].
	Validate func(params map[string]any) error
	// Pause and Resume ask the backend; without them a pausable action pauses
	// cooperatively at [Job.Checkpoint].
	Pause  func(ctx context.Context, job *Job) error
	Resume func(ctx context.Context, job *Job) error
	// Timeout bounds Run; zero means [Config.JobTimeout].
	Timeout time.Duration
	// FaultOnFailure latches the device in fault even when the backend
	// reported the failure (Failed).
	FaultOnFailure bool
}
