package mcpbridge

import (
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/auth"
)

// HTTPOptions guard the Streamable HTTP endpoint.
type HTTPOptions struct {
	// Guard is the endpoint's front door (package auth): the Host check and
	// authentication (client certificate, bearer token), the same as every
	// other server's. Zero: built from Token.
	Guard auth.Guard
	// Token, when set and Guard has no authenticator, must come as
	// "Authorization: Bearer <token>" (the scheme in any case, RFC 9110
	// section 11.1); 401 otherwise.
	Token string
	// AllowedOrigins lists the browser origins allowed to call (403 for any
	// other Origin header); requests without an Origin (non-browser clients)
	// pass. A trailing "/" on either side is ignored, and so is case.
	AllowedOrigins []string
	// SessionTimeout closes an MCP session idle this long (its MHP sessions
	// and leases end with it); default 30 minutes.
	SessionTimeout time.Duration
	// Middleware is added to the MCP server's receiving side (e.g. metrics).
	Middleware []mcp.Middleware
}

// HTTPHandler serves the bridge over MCP Streamable HTTP, behind the bearer
// token and the Origin allow-list; a body over MaxLine is refused (413).
// Each MCP session gets its own device connections, so its own MHP sessions
// and leases.
func (b *Bridge) HTTPHandler(opts HTTPOptions) http.Handler {
	srv := b.Server()
	if opts.SessionTimeout <= 0 {
		opts.SessionTimeout = 30 * time.Minute
	}
	srv.AddReceivingMiddleware(opts.Middleware...)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{SessionTimeout: opts.SessionTimeout, MaxRequestBodyBytes: MaxLine})
	return guard(opts, b.trackStreams(callerPass(h))) // callerPass: the caller's role and name (roles.go) // trackStreams: signs of life for SessionIdle (idle.go)
}

func normOrigin(o string) string {
	return strings.ToLower(strings.TrimRight(strings.TrimSpace(o), "/"))
}

func guard(opts HTTPOptions, next http.Handler) http.Handler {
	allowed := map[string]bool{}
	for _, o := range opts.AllowedOrigins {
		allowed[normOrigin(o)] = true
	}
	g := opts.Guard
	if g.Auth == nil && opts.Token != "" {
		a, err := auth.New(auth.Config{Token: opts.Token})
		if err == nil {
			g.Auth = a
		}
	}
	inner := g.Wrap(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if origin := r.Header.Get("Origin"); origin != "" && !allowed[normOrigin(origin)] {
			auth.WriteRefusal(w, r, http.StatusForbidden, mhp.Errorf(mhp.CodeServerError,
				"origin %s is not allowed (see --allow-origin)", mhp.Truncate(origin, 200)).With(mhp.DataReason, "origin_forbidden"))
			return
		}
		inner.ServeHTTP(w, r)
	})
}
