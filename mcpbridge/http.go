package mcpbridge

import (
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// HTTPOptions guard the Streamable HTTP endpoint.
type HTTPOptions struct {
	// Token, when set, must come as "Authorization: Bearer <token>" (401 otherwise).
	Token string
	// AllowedOrigins lists the browser origins allowed to call (403 for any
	// other Origin header); requests without an Origin (non-browser clients) pass.
	AllowedOrigins []string
	// Middleware is added to the MCP server's receiving side (e.g. metrics).
	Middleware []mcp.Middleware
}

// HTTPHandler serves the bridge over MCP Streamable HTTP, behind the bearer
// token and the Origin allow-list.
func (b *Bridge) HTTPHandler(opts HTTPOptions) http.Handler {
	srv := b.Server()
	srv.AddReceivingMiddleware(opts.Middleware...)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	return guard(opts, h)
}

func guard(opts HTTPOptions, next http.Handler) http.Handler {
	allowed := map[string]bool{}
	for _, o := range opts.AllowedOrigins {
		allowed[strings.TrimRight(o, "/")] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if origin := r.Header.Get("Origin"); origin != "" && !allowed[origin] {
			http.Error(w, "origin "+origin+" is not allowed", http.StatusForbidden)
			return
		}
		if opts.Token != "" {
			presented, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || subtle.ConstantTimeCompare([]byte(presented), []byte(opts.Token)) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="mhp-mcp"`)
				http.Error(w, "a valid bearer token is required", http.StatusUnauthorized)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}
