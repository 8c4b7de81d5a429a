package transport

import (
	"context"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/auth"
)

// callCtx is the context of one HTTP request's device call, in one node:
// the request's context without its cancellation (a hook cut off mid-write
// would turn a dropped connection into an unknown outcome), the identity
// the guard let in (auth.FromContext), the operator mark, and the session
// label (mhp.SessionFrom) once the session is known. It stands for what
// context.WithoutCancel, auth.WithIdentity, an operator mark and
// mhp.WithSession would build as four or five nodes, one allocation each.
// It is made per request and filled before the device sees it; nothing
// changes it after.
type callCtx struct {
	context.Context     // context.WithoutCancel(r.Context())
	pass            any // the *auth.Pass (nil: none)
	label           any // the session label, a string (nil: not set)
	operator        bool
}

// The keys a callCtx answers.
var (
	sessionKey  = mhp.SessionKey()
	identityKey = auth.IdentityKey()
)

// newCallCtx is the device context of an HTTP request served as p.
func newCallCtx(r context.Context, p *auth.Pass) *callCtx {
	c := &callCtx{Context: context.WithoutCancel(r)}
	if p != nil {
		c.pass = p
		c.operator = p.Identity().Role.Allows(auth.RoleOperator)
	}
	return c
}

// Value answers the session, the identity and the operator mark, and asks
// the request's context for anything else.
func (c *callCtx) Value(key any) any {
	switch key {
	case sessionKey:
		if c.label != nil {
			return c.label
		}
	case identityKey:
		if c.pass != nil {
			return c.pass
		}
	case operatorKey{}:
		if c.operator {
			return true
		}
	}
	return c.Context.Value(key)
}

// anonymousLabel is AnonymousLabel as a context value (boxed once).
var anonymousLabel any = AnonymousLabel

// deviceContext is the context of a device call for the session labelled
// label: an HTTP request's callCtx gets the label (labelV is it boxed,
// nil to box it here); any other context is wrapped as before.
func deviceContext(ctx context.Context, label string, labelV any) context.Context {
	if c, ok := ctx.(*callCtx); ok {
		if labelV == nil {
			labelV = label
		}
		c.label = labelV
		return c
	}
	return mhp.WithSession(context.WithoutCancel(ctx), label)
}
