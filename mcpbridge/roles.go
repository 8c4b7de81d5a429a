package mcpbridge

import (
	"context"
	"net/http"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/auth"
	"github.com/openmhp/mhp-go/client"
	"github.com/openmhp/mhp-go/host"
)

// Roles per MCP caller. Over Streamable HTTP behind credentials, each MCP
// session belongs to the identity that opened it (package auth: a named
// credential, a client certificate), and everything the bridge sends a
// device for it is checked against that identity's role with the table the
// MHP servers use (auth.Need: read, describe, find are a viewer's; write,
// invoke, cancel, lease, reset an agent's; operator answers and permits an
// operator's; estop anyone's). The check is the session's connection's own
// gate (client.Options.Gate), so no tool can forget it: a refused call never
// leaves the bridge. The tools that change the host's fleet (mhp_lab scan,
// add, remove, locate, onboard, new, write, validate) need an agent: they
// change what every client of the host can reach, or make the host probe
// the network, which a viewer (who only observes) must not. The operator
// tools (mhp_permit, mhp_operator) need an operator. Over stdio, or over
// HTTP without credentials, there is no caller and nothing changes; the host
// policy applies on top either way.
//
// The caller's identity also reaches the devices as data: an in-process
// (fleet-hosted) device's call carries it in its context (auth.FromContext)
// under a session labelled "<name>/mhp-mcp#<hex>", so receipts, leases and
// the guard name the caller; a remote device sees the bridge's own
// credential (that is what authenticates) and a session the bridge opens
// with clientInfo.name set to the caller's name, so its label names the
// caller too. The label is data, never a trust decision at the device.

// passKey is where the caller's *auth.Pass travels in the MCP SDK's
// TokenInfo.Extra, from the HTTP request to the tool call.
const passKey = "mhp.pass"

// fleetRole is the least role of the mhp_lab ops that change the fleet.
const fleetRole = auth.RoleAgent

// placeholderBearer stands in for a credential the guard already checked
// (a client certificate carries none) so the SDK's bearer middleware runs;
// the verifier never looks at it, only at the guard's pass.
const placeholderBearer = "Bearer mhp-guard-pass"

// callerPass hands the pass the guard put in an HTTP request's context to
// the MCP session (req.Extra.TokenInfo), and binds the session to it: the
// SDK refuses a request of another identity on the session. A request
// without a pass, or one the guard let in without credentials, is served
// as before.
func callerPass(next http.Handler) http.Handler {
	verified := sdkauth.RequireBearerToken(func(ctx context.Context, _ string, _ *http.Request) (*sdkauth.TokenInfo, error) {
		p := auth.PassFrom(ctx)
		if p == nil {
			return nil, sdkauth.ErrInvalidToken
		}
		id := p.Identity()
		return &sdkauth.TokenInfo{UserID: id.Via + ":" + id.Name + ":" + string(id.Role), Extra: map[string]any{passKey: p}}, nil
	}, &sdkauth.RequireBearerTokenOptions{AllowMissingExpiration: true})(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := auth.PassFrom(r.Context()); p == nil || !authenticated(p) {
			next.ServeHTTP(w, r)
			return
		}
		r2 := r.Clone(r.Context())
		r2.Header.Set("Authorization", placeholderBearer)
		verified.ServeHTTP(w, r2)
	})
}

// authenticated reports whether p names an identity a credential proved
// (not the guard's "none" of a server without credentials).
func authenticated(p *auth.Pass) bool {
	return p != nil && p.Identity().Via != "" && p.Identity().Via != "none"
}

// callerOf returns the pass of the MCP caller of req, nil without one.
func callerOf(req *mcp.CallToolRequest) *auth.Pass {
	if req == nil || req.Extra == nil || req.Extra.TokenInfo == nil {
		return nil
	}
	p, _ := req.Extra.TokenInfo.Extra[passKey].(*auth.Pass)
	return p
}

// toolKey is the context key of the tool a device call is made for.
type toolKey struct{}

// toolRole is the least role of the tool call itself, beyond what each
// device method it sends needs: an operator tool an operator's, a fleet
// change an agent's; "" when the device methods decide alone.
func (b *Bridge) toolRole(t tool, args map[string]any) auth.Role {
	if t.operator {
		return auth.RoleOperator
	}
	if t.name == "mhp_lab" {
		switch argString(args, "op") {
		case "scan", "add", "remove", "locate", "onboard", "new", "write", "validate":
			return fleetRole
		}
	}
	return ""
}

// allowTool refuses a tool call the session's caller may not make (nil
// without a caller), and returns the context its device calls carry: the
// tool's name, for a refusal to say, and the caller's pass.
func (s *session) allowTool(ctx context.Context, t tool, args map[string]any) (context.Context, error) {
	ctx = context.WithValue(ctx, toolKey{}, t.name)
	if s.who == nil {
		return ctx, nil
	}
	// The device calls of this tool call are the caller's, on whichever
	// connection they go (mhp_estop of all goes on other sessions' too).
	ctx = auth.WithPass(ctx, s.who)
	if need := s.b.toolRole(t, args); need != "" {
		if e := auth.Authorize(s.who.Identity(), t.name, need); e != nil {
			return ctx, e.With("tool", t.name)
		}
	}
	return ctx, nil
}

// gate is the check of every method the session's connections send for its
// caller (client.Options.Gate): the caller's role against auth.Need of the
// method, refused with auth's role refusal naming the tool, the method, the
// role and the role needed; a call let through carries the caller's pass.
func (s *session) gate(ctx context.Context, method string) (context.Context, error) {
	id := s.who.Identity()
	if e := auth.Authorize(id, method, auth.Need(method, false)); e != nil {
		if tool, ok := ctx.Value(toolKey{}).(string); ok {
			e = e.With("tool", tool)
		}
		return ctx, e
	}
	if auth.PassFrom(ctx) == nil {
		ctx = auth.WithPass(ctx, s.who)
	}
	return ctx, nil
}

// dialOptions are the client options of the session's connection to
// target: the bridge's, with the caller's gate and name when there is a
// caller (an in-process session is labelled name/clientName#hex; a remote
// one, which the device labels, <bridge's credential>/name#hex).
func (s *session) dialOptions(opts client.Options, target, clientName string) client.Options {
	if s.who == nil {
		return opts
	}
	name := s.who.Identity().Name
	if name == "" {
		name = "caller"
	}
	opts.Gate = s.gate
	opts.ClientID = "" // one per connection: two callers are never one client
	if host.IsHosted(target) {
		opts.Owner, opts.ClientName = name, clientName
	} else {
		opts.ClientName = name
	}
	return opts
}

// dial connects the session to target: through Config.DialWith when the
// bridge can give each connection its caller's options (the default dial,
// a fleet, or DialWith set), else through Config.Dial, which only a
// session without a caller, or an operator's (whom no method refuses), may
// use: a gate it cannot install is a call refused, never one let through.
func (s *session) dial(ctx context.Context, target string) (*client.Device, error) {
	if s.who == nil {
		return s.b.cfg.Dial(ctx, target)
	}
	if s.b.cfg.DialWith != nil {
		return s.b.cfg.DialWith(ctx, target, s.dialOptions(s.b.cfg.Client, target, "mhp-mcp"))
	}
	if s.who.Identity().Role.Allows(auth.RoleOperator) {
		return s.b.cfg.Dial(ctx, target)
	}
	return nil, mhp.Errorf(mhp.CodeServerError, "this bridge's Config.Dial cannot carry the caller's role to the device; "+
		"give Config.DialWith so %s (role %s) is checked per method", s.who.Identity().Name, s.who.Identity().Role).
		With(mhp.DataReason, auth.ReasonRoleForbidden).With("role", string(s.who.Identity().Role))
}

// sameCaller refuses a tool call on an MCP session by another identity than
// the one that opened it (the SDK binds a session to its opener too; this
// is the bridge's own word): two identities never share a session's device
// connections, hence never a lease.
func sameCaller(opener, caller *auth.Pass) error {
	if opener == caller || (opener != nil && caller != nil && opener.Identity() == caller.Identity()) {
		return nil
	}
	who := "no identity"
	if caller != nil {
		who = caller.Identity().Name
	}
	return mhp.Errorf(mhp.CodeServerError, "this MCP session belongs to another identity; %s must open its own", who).
		With(mhp.DataReason, auth.ReasonRoleForbidden)
}

// operatorDial is the bridge's default operator connection (mhp_permit,
// mhp_operator): its dial and options, so an operator caller's connection
// can carry the caller's name and gate too.
type operatorDial struct {
	dial func(ctx context.Context, target string, opts client.Options) (*client.Device, error)
	opts client.Options
}

// operatorDial connects the operator's own connection to target: named for
// the caller (name/mhp-mcp-operator#hex in process) when there is one and
// the bridge made the operator dial, else Config.OperatorDial as before.
// Only an operator gets here (toolRole).
func (s *session) operatorDial(ctx context.Context, target string) (*client.Device, error) {
	if s.who == nil || s.b.op.dial == nil {
		return s.b.cfg.OperatorDial(ctx, target)
	}
	return s.b.op.dial(ctx, target, s.dialOptions(s.b.op.opts, target, "mhp-mcp-operator"))
}
