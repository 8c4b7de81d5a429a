package mhp

import (
	"context"
	"time"
)

type renewTTLKey struct{}

// WithRenewTTL returns ctx carrying the ttl a session/renew asks for (the
// reference SDK's heartbeat sends one on every renew): [Device.Renew] keeps
// its signature, and a device that supports it (the binding driver; a client
// forwards it on the wire) extends the lease to now+ttl and keeps ttl for
// later renewals. The transport bounds ttl as for session/acquire.
func WithRenewTTL(ctx context.Context, ttl time.Duration) context.Context {
	return context.WithValue(ctx, renewTTLKey{}, ttl)
}

// RenewTTLFrom returns the ttl WithRenewTTL put in ctx (ok false: none; the
// lease keeps the ttl it was acquired with).
func RenewTTLFrom(ctx context.Context) (time.Duration, bool) {
	ttl, ok := ctx.Value(renewTTLKey{}).(time.Duration)
	return ttl, ok && ttl > 0
}
