package client

import (
	"context"
	"encoding/hex"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/auth"
)

// Gate is a connection's own check of every method before it leaves: over
// the wire before the request is sent, in process before the device is
// called. A non-nil error is the call's answer and nothing reaches the
// device; the context it returns is the one the call goes on with (in
// process, the device sees its values: who the call is made for).
type Gate func(ctx context.Context, method string) (context.Context, error)

// gated is an in-process device behind a [Gate]: every primitive asks the
// gate first, with the MHP method it stands for.
type gated struct {
	dev  mhp.Device
	gate Gate
}

var (
	_ mhp.Device           = (*gated)(nil)
	_ mhp.ResourceProvider = (*gated)(nil)
	_ mhp.Unwrapper        = (*gated)(nil)
)

// Unwrap returns the device behind the gate, so its interfaces stay findable
// (mhp.Find); its extensions are gated by [Device.Call].
func (g *gated) Unwrap() mhp.Device { return g.dev }

// call asks the gate about method, then runs fn with the context it gave.
func gatedCall[T any](g *gated, ctx context.Context, method string, fn func(context.Context) (T, error)) (T, error) {
	ctx, err := g.gate(ctx, method)
	if err != nil {
		var zero T
		return zero, err
	}
	return fn(ctx)
}

func (g *gated) Describe(ctx context.Context, req mhp.DescribeRequest) (*mhp.Description, error) {
	return gatedCall(g, ctx, mhp.MethodDescribe, func(ctx context.Context) (*mhp.Description, error) { return g.dev.Describe(ctx, req) })
}

func (g *gated) Read(ctx context.Context, names []string) (*mhp.ReadResult, error) {
	return gatedCall(g, ctx, mhp.MethodSignalsRead, func(ctx context.Context) (*mhp.ReadResult, error) { return g.dev.Read(ctx, names) })
}

func (g *gated) Subscribe(ctx context.Context, names []string) (*mhp.SubscribeResult, error) {
	return gatedCall(g, ctx, mhp.MethodSignalsSubscribe, func(ctx context.Context) (*mhp.SubscribeResult, error) { return g.dev.Subscribe(ctx, names) })
}

func (g *gated) Unsubscribe(ctx context.Context, names []string) error {
	_, err := gatedCall(g, ctx, mhp.MethodSignalsUnsubscribe, func(ctx context.Context) (struct{}, error) { return struct{}{}, g.dev.Unsubscribe(ctx, names) })
	return err
}

func (g *gated) Write(ctx context.Context, req mhp.WriteRequest) (*mhp.WriteResult, error) {
	return gatedCall(g, ctx, mhp.MethodSettingsWrite, func(ctx context.Context) (*mhp.WriteResult, error) { return g.dev.Write(ctx, req) })
}

func (g *gated) Invoke(ctx context.Context, req mhp.InvokeRequest) (*mhp.InvokeResult, error) {
	return gatedCall(g, ctx, mhp.MethodActionsInvoke, func(ctx context.Context) (*mhp.InvokeResult, error) { return g.dev.Invoke(ctx, req) })
}

func (g *gated) Job(ctx context.Context, id string) (*mhp.Job, error) {
	return gatedCall(g, ctx, mhp.MethodJobsStatus, func(ctx context.Context) (*mhp.Job, error) { return g.dev.Job(ctx, id) })
}

func (g *gated) Jobs(ctx context.Context, req mhp.JobsRequest) ([]mhp.Job, error) {
	return gatedCall(g, ctx, mhp.MethodJobsList, func(ctx context.Context) ([]mhp.Job, error) { return g.dev.Jobs(ctx, req) })
}

func (g *gated) CancelJob(ctx context.Context, id string) (*mhp.Job, error) {
	return gatedCall(g, ctx, mhp.MethodJobsCancel, func(ctx context.Context) (*mhp.Job, error) { return g.dev.CancelJob(ctx, id) })
}

func (g *gated) PauseJob(ctx context.Context, id string) (*mhp.Job, error) {
	return gatedCall(g, ctx, mhp.MethodJobsPause, func(ctx context.Context) (*mhp.Job, error) { return g.dev.PauseJob(ctx, id) })
}

func (g *gated) ResumeJob(ctx context.Context, id string) (*mhp.Job, error) {
	return gatedCall(g, ctx, mhp.MethodJobsResume, func(ctx context.Context) (*mhp.Job, error) { return g.dev.ResumeJob(ctx, id) })
}

func (g *gated) Acquire(ctx context.Context, ttl time.Duration) (*mhp.Lease, error) {
	return gatedCall(g, ctx, mhp.MethodSessionAcquire, func(ctx context.Context) (*mhp.Lease, error) { return g.dev.Acquire(ctx, ttl) })
}

func (g *gated) Renew(ctx context.Context) (*mhp.Lease, error) {
	return gatedCall(g, ctx, mhp.MethodSessionRenew, func(ctx context.Context) (*mhp.Lease, error) { return g.dev.Renew(ctx) })
}

func (g *gated) Release(ctx context.Context) error {
	_, err := gatedCall(g, ctx, mhp.MethodSessionRelease, func(ctx context.Context) (struct{}, error) { return struct{}{}, g.dev.Release(ctx) })
	return err
}

func (g *gated) Limits(ctx context.Context) (*mhp.LimitsReport, error) {
	return gatedCall(g, ctx, mhp.MethodSafetyLimits, func(ctx context.Context) (*mhp.LimitsReport, error) { return g.dev.Limits(ctx) })
}

func (g *gated) EStop(ctx context.Context, reason string) (*mhp.EStopResult, error) {
	return gatedCall(g, ctx, mhp.MethodSafetyEStop, func(ctx context.Context) (*mhp.EStopResult, error) { return g.dev.EStop(ctx, reason) })
}

func (g *gated) Reset(ctx context.Context) (*mhp.ResetResult, error) {
	return gatedCall(g, ctx, mhp.MethodSafetyReset, func(ctx context.Context) (*mhp.ResetResult, error) { return g.dev.Reset(ctx) })
}

func (g *gated) Ping(ctx context.Context) (*mhp.PingResult, error) {
	return gatedCall(g, ctx, mhp.MethodPing, func(ctx context.Context) (*mhp.PingResult, error) { return g.dev.Ping(ctx) })
}

// Listen is not a method sent to the device: notifications of this
// connection's session reach it as they would without the gate.
func (g *gated) Listen(fn func(mhp.Notification)) func() { return g.dev.Listen(fn) }

// EndSession is the connection closing, not a request: it always reaches the
// device (its subscriptions and lease must end).
func (g *gated) EndSession(ctx context.Context) { g.dev.EndSession(ctx) }

func (g *gated) ListResources(ctx context.Context) ([]string, error) {
	return gatedCall(g, ctx, mhp.MethodResourcesList, func(ctx context.Context) ([]string, error) {
		rp, ok := mhp.Find[mhp.ResourceProvider](g.dev)
		if !ok {
			return nil, errNoResources()
		}
		return rp.ListResources(ctx)
	})
}

func (g *gated) ReadResource(ctx context.Context, path string) (*mhp.Resource, error) {
	return gatedCall(g, ctx, mhp.MethodResourcesRead, func(ctx context.Context) (*mhp.Resource, error) {
		rp, ok := mhp.Find[mhp.ResourceProvider](g.dev)
		if !ok {
			return nil, errNoResources()
		}
		return rp.ReadResource(ctx, path)
	})
}

// ownedLabel is an in-process session label naming its owner, as a
// transport names an authenticated client's session: owner/client#hex.
func ownedLabel(owner, client string, suffix []byte) string {
	return auth.LabelPart(owner, "id") + "/" + auth.LabelPart(client, "client") + "#" + hex.EncodeToString(suffix)
}
