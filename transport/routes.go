package transport

import (
	"net/http"
	"strings"

	"github.com/openmhp/mhp-go/auth"
)

// routes is the router behind [Server.Handler]: the four routes of the wire
// (POST /rpc, GET /events, DELETE /session, GET /mhp.json) matched by a
// switch, with a ServeMux's answers (404; 405 with Allow; GET also answers
// HEAD), so a server costs no ServeMux of its own. A server with extra
// routes ([Options.Handlers]) gets a ServeMux holding them and the four.
func (s *Server) routes() http.Handler {
	if len(s.opts.Handlers) > 0 {
		mux := http.NewServeMux()
		mux.HandleFunc("POST /rpc", func(w http.ResponseWriter, r *http.Request) { s.serveRPC(w, r, auth.PassFrom(r.Context())) })
		mux.HandleFunc("GET /events", s.serveEvents)
		mux.HandleFunc("DELETE /session", s.serveEndSession)
		mux.HandleFunc("GET /mhp.json", s.serveDescriptor)
		for pattern, h := range s.opts.Handlers {
			mux.Handle(pattern, h)
		}
		return mux
	}
	return http.HandlerFunc(s.route)
}

// route serves one request of a server without extra routes.
func (s *Server) route(w http.ResponseWriter, r *http.Request) {
	var allow string
	var h func(http.ResponseWriter, *http.Request)
	switch r.URL.Path {
	case "/rpc":
		allow, h = http.MethodPost, func(w http.ResponseWriter, r *http.Request) { s.serveRPC(w, r, auth.PassFrom(r.Context())) }
	case "/events":
		allow, h = http.MethodGet, s.serveEvents
	case "/session":
		allow, h = http.MethodDelete, s.serveEndSession
	case "/mhp.json":
		allow, h = http.MethodGet, s.serveDescriptor
	default:
		http.NotFound(w, r)
		return
	}
	if r.Method == allow || (allow == http.MethodGet && r.Method == http.MethodHead) {
		h(w, r)
		return
	}
	methods := []string{allow}
	if allow == http.MethodGet {
		methods = append(methods, http.MethodHead)
	}
	w.Header().Set("Allow", strings.Join(methods, ", "))
	http.Error(w, http.StatusText(http.StatusMethodNotAllowed), http.StatusMethodNotAllowed)
}
