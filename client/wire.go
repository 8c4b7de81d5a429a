package client

import (
	"context"
	"time"

	"github.com/openmhp/mhp-go"
)

// wire is mhp.Device over a conn: every primitive is one JSON-RPC call.
type wire struct {
	c       conn
	ls      *listeners
	timeout time.Duration
	gate    Gate // Options.Gate: asked before every request is sent
}

func (w *wire) call(ctx context.Context, method string, params, out any) error {
	if w.gate != nil {
		var err error
		if ctx, err = w.gate(ctx, method); err != nil {
			return err
		}
	}
	if w.timeout > 0 {
		if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > w.timeout {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, w.timeout)
			defer cancel()
		}
	}
	return w.c.call(ctx, method, params, out)
}

type namesReq struct {
	Names []string `json:"names,omitempty"`
}

type idReq struct {
	ID string `json:"id"`
}

type jobResp struct {
	Job *mhp.Job `json:"job"`
}

func (w *wire) Describe(ctx context.Context, req mhp.DescribeRequest) (*mhp.Description, error) {
	var out mhp.Description
	if err := w.call(ctx, mhp.MethodDescribe, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (w *wire) Read(ctx context.Context, names []string) (*mhp.ReadResult, error) {
	var out mhp.ReadResult
	if err := w.call(ctx, mhp.MethodSignalsRead, namesReq{names}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (w *wire) Subscribe(ctx context.Context, names []string) (*mhp.SubscribeResult, error) {
	var out mhp.SubscribeResult
	if err := w.call(ctx, mhp.MethodSignalsSubscribe, namesReq{names}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (w *wire) Unsubscribe(ctx context.Context, names []string) error {
	return w.call(ctx, mhp.MethodSignalsUnsubscribe, namesReq{names}, nil)
}

func (w *wire) Write(ctx context.Context, req mhp.WriteRequest) (*mhp.WriteResult, error) {
	var out mhp.WriteResult
	if err := w.call(ctx, mhp.MethodSettingsWrite, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (w *wire) Invoke(ctx context.Context, req mhp.InvokeRequest) (*mhp.InvokeResult, error) {
	var out mhp.InvokeResult
	if err := w.call(ctx, mhp.MethodActionsInvoke, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (w *wire) job(ctx context.Context, method, id string) (*mhp.Job, error) {
	var out jobResp
	if err := w.call(ctx, method, idReq{id}, &out); err != nil {
		return nil, err
	}
	if out.Job == nil {
		return nil, mhp.Errorf(mhp.CodeInternal, "%s: the answer has no job", method)
	}
	return out.Job, nil
}

func (w *wire) Job(ctx context.Context, id string) (*mhp.Job, error) {
	return w.job(ctx, mhp.MethodJobsStatus, id)
}

func (w *wire) Jobs(ctx context.Context, req mhp.JobsRequest) ([]mhp.Job, error) {
	var out struct {
		Jobs []mhp.Job `json:"jobs"`
	}
	if err := w.call(ctx, mhp.MethodJobsList, req, &out); err != nil {
		return nil, err
	}
	return out.Jobs, nil
}

func (w *wire) CancelJob(ctx context.Context, id string) (*mhp.Job, error) {
	return w.job(ctx, mhp.MethodJobsCancel, id)
}

func (w *wire) PauseJob(ctx context.Context, id string) (*mhp.Job, error) {
	return w.job(ctx, mhp.MethodJobsPause, id)
}

func (w *wire) ResumeJob(ctx context.Context, id string) (*mhp.Job, error) {
	return w.job(ctx, mhp.MethodJobsResume, id)
}

func (w *wire) Acquire(ctx context.Context, ttl time.Duration) (*mhp.Lease, error) {
	var params any
	if ttl != 0 {
		params = map[string]any{"ttl": ttl.Seconds()}
	}
	var out mhp.Lease
	if err := w.call(ctx, mhp.MethodSessionAcquire, params, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (w *wire) Renew(ctx context.Context) (*mhp.Lease, error) {
	var params any
	if ttl, ok := mhp.RenewTTLFrom(ctx); ok {
		params = map[string]any{"ttl": ttl.Seconds()}
	}
	var out mhp.Lease
	if err := w.call(ctx, mhp.MethodSessionRenew, params, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (w *wire) Release(ctx context.Context) error {
	return w.call(ctx, mhp.MethodSessionRelease, nil, nil)
}

func (w *wire) Limits(ctx context.Context) (*mhp.LimitsReport, error) {
	var out mhp.LimitsReport
	if err := w.call(ctx, mhp.MethodSafetyLimits, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (w *wire) EStop(ctx context.Context, reason string) (*mhp.EStopResult, error) {
	var params any
	if reason != "" {
		params = map[string]any{"reason": reason}
	}
	var out mhp.EStopResult
	if err := w.call(ctx, mhp.MethodSafetyEStop, params, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (w *wire) Reset(ctx context.Context) (*mhp.ResetResult, error) {
	var out mhp.ResetResult
	if err := w.call(ctx, mhp.MethodSafetyReset, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (w *wire) Ping(ctx context.Context) (*mhp.PingResult, error) {
	var out mhp.PingResult
	if err := w.call(ctx, mhp.MethodPing, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (w *wire) Listen(fn func(mhp.Notification)) func() { return w.ls.add(fn) }

func (w *wire) EndSession(ctx context.Context) { _ = w.c.endSession(ctx) }

// ListResources implements mhp.ResourceProvider over the wire.
func (w *wire) ListResources(ctx context.Context) ([]string, error) {
	var out struct {
		Resources []string `json:"resources"`
	}
	if err := w.call(ctx, mhp.MethodResourcesList, nil, &out); err != nil {
		return nil, err
	}
	return out.Resources, nil
}

// ReadResource implements mhp.ResourceProvider over the wire.
func (w *wire) ReadResource(ctx context.Context, path string) (*mhp.Resource, error) {
	var out mhp.Resource
	if err := w.call(ctx, mhp.MethodResourcesRead, map[string]any{"path": path}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
