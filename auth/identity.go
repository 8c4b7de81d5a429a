// Package auth decides who a request is and what it may do: one room every
// server calls (transport, serve-directory, the console, metrics and the MCP
// bridge's HTTP side), not a copy per server.
//
// An [Identity] is what the transport authenticated (a client certificate or a
// bearer token); its [Role] bounds the methods it may call. The identity
// travels in the request's context ([WithIdentity], [FromContext]) down to the
// device, so leases, job owners, operator answers, notifications and evidence
// can name who acted.
package auth

import "context"

// Role is what an identity may do on a device. Roles are ordered: each one
// allows everything the one before it allows.
type Role string

// The three roles, weakest first.
const (
	// RoleViewer may describe, read, subscribe, see jobs, resources and ping,
	// and estop (estop is served to every authenticated identity).
	RoleViewer Role = "viewer"
	// RoleAgent is a viewer that may also write, invoke, control jobs, hold
	// leases and reset as the spec allows.
	RoleAgent Role = "agent"
	// RoleOperator is an agent that may also issue permits and call the
	// operator methods.
	RoleOperator Role = "operator"
)

// rank orders the roles; an unknown role ranks below viewer.
func (r Role) rank() int {
	switch r {
	case RoleViewer:
		return 1
	case RoleAgent:
		return 2
	case RoleOperator:
		return 3
	}
	return 0
}

// Valid reports whether r is one of the three roles.
func (r Role) Valid() bool { return r.rank() > 0 }

// Allows reports whether an identity with role r may do what needs role need.
func (r Role) Allows(need Role) bool { return r.rank() > 0 && r.rank() >= need.rank() }

// Identity is who a request is, as the transport authenticated it.
type Identity struct {
	// Name is the identity's name from the credentials file ("alice"), or
	// the name the legacy token flags stand for.
	Name string
	// Role bounds what the identity may call.
	Role Role
	// Via says how it was authenticated: "cert", "token", or "none" when the
	// server runs without credentials (loopback, today's behaviour).
	Via string
}

// identityKey is the context key of a request's *Pass: its identity and
// the guard that let it in, one value (one context node per request).
type identityKey struct{}

// Pass is a request a [Guard] let in: who it is, and the authenticator of
// the guard that decided (a guard behind one with the same authenticator
// does not decide again). A Pass is immutable; one may be shared by every
// request it stands for.
type Pass struct {
	id      Identity
	by      *Authenticator
	guarded bool // a guard decided (not WithIdentity)
}

// Identity is who the request is.
func (p *Pass) Identity() Identity { return p.id }

// IdentityKey returns the context key [WithIdentity], [WithPass] and
// [FromContext] use. A context type of its own that carries the identity
// among other values (one node for several, as the transport's per-call
// context is) answers Value(IdentityKey()) with the request's *Pass.
func IdentityKey() any { return identityKey{} }

// WithIdentity returns ctx carrying id (no guard decided it).
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, &Pass{id: id})
}

// WithPass returns ctx carrying p, as [Guard.Wrap] gives the handler behind
// it; a nil p returns ctx.
func WithPass(ctx context.Context, p *Pass) context.Context {
	if p == nil {
		return ctx
	}
	return context.WithValue(ctx, identityKey{}, p)
}

// PassFrom returns the *Pass in ctx, nil when there is none.
func PassFrom(ctx context.Context) *Pass {
	p, _ := ctx.Value(identityKey{}).(*Pass)
	return p
}

// FromContext returns the identity in ctx and whether there was one.
func FromContext(ctx context.Context) (Identity, bool) {
	if p := PassFrom(ctx); p != nil {
		return p.id, true
	}
	return Identity{}, false
}
