package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
)

// jsonDevice passes every request, answer, error and notification of a
// device through encoding/json, as a client over a transport sees them. It
// shows the suite relies on nothing but what survives the wire.
type jsonDevice struct{ dev mhp.Device }

// through round-trips v through JSON into a fresh T.
func through[T any](v T) (T, error) {
	var out T
	b, err := json.Marshal(v)
	if err != nil {
		return out, fmt.Errorf("encode: %w", err)
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return out, fmt.Errorf("decode: %w", err)
	}
	return out, nil
}

// wireErr is the error a client decodes from a JSON-RPC error object.
func wireErr(err error) error {
	if err == nil {
		return nil
	}
	e, ok := mhp.AsError(err)
	if !ok {
		e = &mhp.Error{Code: mhp.CodeInternal, Message: err.Error()}
	}
	out, terr := through(e)
	if terr != nil {
		return terr
	}
	return out
}

// call sends req through JSON, runs f and brings the answer back through JSON.
func call[Q, A any](req Q, f func(Q) (A, error)) (A, error) {
	var zero A
	in, err := through(req)
	if err != nil {
		return zero, err // the client cannot encode the request (NaN)
	}
	ans, err := f(in)
	if err != nil {
		return zero, wireErr(err)
	}
	return through(ans)
}

func (j jsonDevice) Describe(ctx context.Context, req mhp.DescribeRequest) (*mhp.Description, error) {
	return call(req, func(r mhp.DescribeRequest) (*mhp.Description, error) { return j.dev.Describe(ctx, r) })
}
func (j jsonDevice) Read(ctx context.Context, names []string) (*mhp.ReadResult, error) {
	return call(names, func(n []string) (*mhp.ReadResult, error) { return j.dev.Read(ctx, n) })
}
func (j jsonDevice) Subscribe(ctx context.Context, names []string) (*mhp.SubscribeResult, error) {
	return call(names, func(n []string) (*mhp.SubscribeResult, error) { return j.dev.Subscribe(ctx, n) })
}
func (j jsonDevice) Unsubscribe(ctx context.Context, names []string) error {
	return wireErr(j.dev.Unsubscribe(ctx, names))
}
func (j jsonDevice) Write(ctx context.Context, req mhp.WriteRequest) (*mhp.WriteResult, error) {
	return call(req, func(r mhp.WriteRequest) (*mhp.WriteResult, error) { return j.dev.Write(ctx, r) })
}
func (j jsonDevice) Invoke(ctx context.Context, req mhp.InvokeRequest) (*mhp.InvokeResult, error) {
	return call(req, func(r mhp.InvokeRequest) (*mhp.InvokeResult, error) { return j.dev.Invoke(ctx, r) })
}
func (j jsonDevice) Job(ctx context.Context, id string) (*mhp.Job, error) {
	return call(id, func(id string) (*mhp.Job, error) { return j.dev.Job(ctx, id) })
}
func (j jsonDevice) Jobs(ctx context.Context, req mhp.JobsRequest) ([]mhp.Job, error) {
	return call(req, func(r mhp.JobsRequest) ([]mhp.Job, error) { return j.dev.Jobs(ctx, r) })
}
func (j jsonDevice) CancelJob(ctx context.Context, id string) (*mhp.Job, error) {
	return call(id, func(id string) (*mhp.Job, error) { return j.dev.CancelJob(ctx, id) })
}
func (j jsonDevice) PauseJob(ctx context.Context, id string) (*mhp.Job, error) {
	return call(id, func(id string) (*mhp.Job, error) { return j.dev.PauseJob(ctx, id) })
}
func (j jsonDevice) ResumeJob(ctx context.Context, id string) (*mhp.Job, error) {
	return call(id, func(id string) (*mhp.Job, error) { return j.dev.ResumeJob(ctx, id) })
}
func (j jsonDevice) Acquire(ctx context.Context, ttl time.Duration) (*mhp.Lease, error) {
	return call(ttl, func(ttl time.Duration) (*mhp.Lease, error) { return j.dev.Acquire(ctx, ttl) })
}
func (j jsonDevice) Renew(ctx context.Context) (*mhp.Lease, error) {
	return call(struct{}{}, func(struct{}) (*mhp.Lease, error) { return j.dev.Renew(ctx) })
}
func (j jsonDevice) Release(ctx context.Context) error { return wireErr(j.dev.Release(ctx)) }
func (j jsonDevice) Limits(ctx context.Context) (*mhp.LimitsReport, error) {
	return call(struct{}{}, func(struct{}) (*mhp.LimitsReport, error) { return j.dev.Limits(ctx) })
}
func (j jsonDevice) EStop(ctx context.Context, reason string) (*mhp.EStopResult, error) {
	return call(reason, func(r string) (*mhp.EStopResult, error) { return j.dev.EStop(ctx, r) })
}
func (j jsonDevice) Reset(ctx context.Context) (*mhp.ResetResult, error) {
	return call(struct{}{}, func(struct{}) (*mhp.ResetResult, error) { return j.dev.Reset(ctx) })
}
func (j jsonDevice) Ping(ctx context.Context) (*mhp.PingResult, error) {
	return call(struct{}{}, func(struct{}) (*mhp.PingResult, error) { return j.dev.Ping(ctx) })
}
func (j jsonDevice) Listen(fn func(mhp.Notification)) func() {
	return j.dev.Listen(func(n mhp.Notification) {
		if out, err := through(n); err == nil {
			fn(out)
		}
	})
}
func (j jsonDevice) EndSession(ctx context.Context) { j.dev.EndSession(ctx) }

// TestSuiteThroughJSON runs the suite with every value passing through JSON,
// skipping what JSON cannot carry, as a wire harness does.
func TestSuiteThroughJSON(t *testing.T) {
	Run(t, func(t *testing.T, opt Options) *Fixture {
		f := MemoryHarness(t, opt)
		f.Device, f.Other = jsonDevice{f.Device}, jsonDevice{f.Other}
		f.Skip = WireSkips()
		return f
	})
}
