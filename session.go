package mhp

import (
	"context"
	"time"
)

// AsSession returns a view of dev whose every call is made as session id:
// the in-process way to give two callers distinct sessions (and so distinct
// leases) on one device. id is a public name, as a transport's session label
// is: a device only ever sees labels in its context (never a transport's
// session secret), and echoes them as lease holders, job owners and the
// "by" of notifications.
func AsSession(dev Device, id string) Device { return &sessionView{dev: dev, id: id} }

type sessionView struct {
	dev Device
	id  string
}

func (s *sessionView) ctx(ctx context.Context) context.Context { return WithSession(ctx, s.id) }

func (s *sessionView) Describe(ctx context.Context, req DescribeRequest) (*Description, error) {
	return s.dev.Describe(s.ctx(ctx), req)
}
func (s *sessionView) Read(ctx context.Context, names []string) (*ReadResult, error) {
	return s.dev.Read(s.ctx(ctx), names)
}
func (s *sessionView) Subscribe(ctx context.Context, names []string) (*SubscribeResult, error) {
	return s.dev.Subscribe(s.ctx(ctx), names)
}
func (s *sessionView) Unsubscribe(ctx context.Context, names []string) error {
	return s.dev.Unsubscribe(s.ctx(ctx), names)
}
func (s *sessionView) Write(ctx context.Context, req WriteRequest) (*WriteResult, error) {
	return s.dev.Write(s.ctx(ctx), req)
}
func (s *sessionView) Invoke(ctx context.Context, req InvokeRequest) (*InvokeResult, error) {
	return s.dev.Invoke(s.ctx(ctx), req)
}
func (s *sessionView) Job(ctx context.Context, id string) (*Job, error) {
	return s.dev.Job(s.ctx(ctx), id)
}
func (s *sessionView) Jobs(ctx context.Context, req JobsRequest) ([]Job, error) {
	return s.dev.Jobs(s.ctx(ctx), req)
}
func (s *sessionView) CancelJob(ctx context.Context, id string) (*Job, error) {
	return s.dev.CancelJob(s.ctx(ctx), id)
}
func (s *sessionView) PauseJob(ctx context.Context, id string) (*Job, error) {
	return s.dev.PauseJob(s.ctx(ctx), id)
}
func (s *sessionView) ResumeJob(ctx context.Context, id string) (*Job, error) {
	return s.dev.ResumeJob(s.ctx(ctx), id)
}
func (s *sessionView) Acquire(ctx context.Context, ttl time.Duration) (*Lease, error) {
	return s.dev.Acquire(s.ctx(ctx), ttl)
}
func (s *sessionView) Renew(ctx context.Context) (*Lease, error) { return s.dev.Renew(s.ctx(ctx)) }
func (s *sessionView) Release(ctx context.Context) error         { return s.dev.Release(s.ctx(ctx)) }
func (s *sessionView) Limits(ctx context.Context) (*LimitsReport, error) {
	return s.dev.Limits(s.ctx(ctx))
}
func (s *sessionView) EStop(ctx context.Context, reason string) (*EStopResult, error) {
	return s.dev.EStop(s.ctx(ctx), reason)
}
func (s *sessionView) Reset(ctx context.Context) (*ResetResult, error) {
	return s.dev.Reset(s.ctx(ctx))
}
func (s *sessionView) Ping(ctx context.Context) (*PingResult, error) { return s.dev.Ping(s.ctx(ctx)) }
func (s *sessionView) Listen(fn func(Notification)) func()           { return s.dev.Listen(fn) }
func (s *sessionView) EndSession(ctx context.Context)                { s.dev.EndSession(s.ctx(ctx)) }

// SessionKey returns the context key [WithSession] and [SessionFrom] use. A
// context type of its own that carries the session among other values (one
// node for several, as a transport's per-call context is) answers
// Value(SessionKey()) with the session as a string.
func SessionKey() any { return sessionKey{} }
