package mcpbridge

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// HTTPOptions guard the Streamable HTTP endpoint.
type HTTPOptions struct {
	// Token, when set, must come as "Authorization: Bearer <token>" (the
	// scheme in any case, RFC 9110 section 11.1); 401 otherwise.
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
	return guard(opts, b.trackStreams(h)) // trackStreams: signs of life for SessionIdle (idle.go)
}

func normOrigin(o string) string {
	return strings.ToLower(strings.TrimRight(strings.TrimSpace(o), "/"))
}

func guard(opts HTTPOptions, next http.Handler) http.Handler {
	allowed := map[string]bool{}
	for _, o := range opts.AllowedOrigins {
		allowed[normOrigin(o)] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if origin := r.Header.Get("Origin"); origin != "" && !allowed[normOrigin(origin)] {
			http.Error(w, "origin "+origin+" is not allowed (see --allow-origin)", http.StatusForbidden)
			return
		}
		if opts.Token != "" {
			scheme, presented, _ := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
			presented = strings.TrimSpace(presented)
			if !strings.EqualFold(scheme, "bearer") || subtle.ConstantTimeCompare([]byte(presented), []byte(opts.Token)) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="mhp-mcp"`)
				http.Error(w, "a valid bearer token is required", http.StatusUnauthorized)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// CheckExposure is the rule for serving HTTP: an address that is not
// loopback needs a token, unless insecure says the operator knows (the same
// rule as the device server). A host name other than localhost counts as
// not loopback.
func CheckExposure(addr, token string, insecure bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q: %w", addr, err)
	}
	if token != "" || insecure || isLoopback(host) {
		return nil
	}
	return errors.New("refusing to serve " + addr + " without a token: it is not a loopback address " +
		"(give --token-file, bind 127.0.0.1, or pass --insecure to serve it unauthenticated)")
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
