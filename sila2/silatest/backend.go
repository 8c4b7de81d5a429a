package silatest

import (
	"context"
	"errors"
	"time"

	"github.com/openmhp/mhp-go/sila2"
)

// ErrNotFaked is what a [Backend] or [Execution] method answers when its
// func field is nil.
var ErrNotFaked = errors.New("silatest: not faked")

// Backend is a fake [sila2.Backend] as a struct of funcs, for driving the
// adapter without a server: give it to sila2.New in sila2.Options.Backend
// together with the Feature Definitions it pretends to serve. A nil field
// answers [ErrNotFaked], except Subscribe, which then delivers nothing
// until ctx ends (a quiet observable property).
type Backend struct {
	// PropertyFunc reads a property.
	PropertyFunc func(ctx context.Context, feature, property string) (any, error)
	// SubscribeFunc follows an observable property.
	SubscribeFunc func(ctx context.Context, feature, property string, fn func(any) error) error
	// CallFunc runs an unobservable command.
	CallFunc func(ctx context.Context, feature, command string, params map[string]any) (map[string]any, error)
	// StartFunc initiates an observable command.
	StartFunc func(ctx context.Context, feature, command string, params map[string]any) (sila2.Execution, error)
}

var _ sila2.Backend = (*Backend)(nil)

// Property calls PropertyFunc.
func (b *Backend) Property(ctx context.Context, feature, property string) (any, error) {
	if b.PropertyFunc == nil {
		return nil, ErrNotFaked
	}
	return b.PropertyFunc(ctx, feature, property)
}

// Subscribe calls SubscribeFunc; without one it waits for ctx.
func (b *Backend) Subscribe(ctx context.Context, feature, property string, fn func(any) error) error {
	if b.SubscribeFunc == nil {
		<-ctx.Done()
		return ctx.Err()
	}
	return b.SubscribeFunc(ctx, feature, property, fn)
}

// Call calls CallFunc.
func (b *Backend) Call(ctx context.Context, feature, command string, params map[string]any) (map[string]any, error) {
	if b.CallFunc == nil {
		return nil, ErrNotFaked
	}
	return b.CallFunc(ctx, feature, command, params)
}

// Start calls StartFunc.
func (b *Backend) Start(ctx context.Context, feature, command string, params map[string]any) (sila2.Execution, error) {
	if b.StartFunc == nil {
		return nil, ErrNotFaked
	}
	return b.StartFunc(ctx, feature, command, params)
}

// Execution is a fake [sila2.Execution] (an observable command as the
// client sees it, unlike [Exec], the server's side) as a struct of funcs.
// A nil FollowFunc, ResultFunc or CancelFunc answers [ErrNotFaked]; a nil
// IntermediateFunc delivers nothing.
type Execution struct {
	// ExecutionUUID is the command execution UUID; default
	// [DefaultExecutionUUID].
	ExecutionUUID string
	// LifetimeOfExecution is the lifetime the server granted; 0: unbounded.
	LifetimeOfExecution time.Duration
	// FollowFunc follows _Info until the command ends.
	FollowFunc func(ctx context.Context, fn func(sila2.ExecInfo)) (sila2.ExecInfo, error)
	// IntermediateFunc follows _Intermediate.
	IntermediateFunc func(ctx context.Context, fn func(map[string]any)) error
	// ResultFunc reads _Result.
	ResultFunc func(ctx context.Context) (map[string]any, error)
	// CancelFunc asks CancelController to cancel.
	CancelFunc func(ctx context.Context) error
}

var _ sila2.Execution = (*Execution)(nil)

// DefaultExecutionUUID is the UUID of an [Execution] that sets none.
const DefaultExecutionUUID = "6a2f7a3e-0000-4000-8000-000000000001"

// UUID returns ExecutionUUID, or DefaultExecutionUUID.
func (x *Execution) UUID() string {
	if x.ExecutionUUID == "" {
		return DefaultExecutionUUID
	}
	return x.ExecutionUUID
}

// Lifetime returns LifetimeOfExecution.
func (x *Execution) Lifetime() time.Duration { return x.LifetimeOfExecution }

// Follow calls FollowFunc.
func (x *Execution) Follow(ctx context.Context, fn func(sila2.ExecInfo)) (sila2.ExecInfo, error) {
	if x.FollowFunc == nil {
		return sila2.ExecInfo{}, ErrNotFaked
	}
	return x.FollowFunc(ctx, fn)
}

// Intermediate calls IntermediateFunc; without one it returns at once.
func (x *Execution) Intermediate(ctx context.Context, fn func(map[string]any)) error {
	if x.IntermediateFunc == nil {
		return nil
	}
	return x.IntermediateFunc(ctx, fn)
}

// Result calls ResultFunc.
func (x *Execution) Result(ctx context.Context) (map[string]any, error) {
	if x.ResultFunc == nil {
		return nil, ErrNotFaked
	}
	return x.ResultFunc(ctx)
}

// Cancel calls CancelFunc.
func (x *Execution) Cancel(ctx context.Context) error {
	if x.CancelFunc == nil {
		return ErrNotFaked
	}
	return x.CancelFunc(ctx)
}
