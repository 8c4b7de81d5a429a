package console

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/openmhp/mhp-go/auth"
)

// EStopAnswer is one device's answer to the lab's estop-all.
type EStopAnswer struct {
	Target string `json:"target"`
	ID     string `json:"id,omitempty"`
	// State is the device's state after the stop (estop), empty when it did not answer.
	State   string `json:"state,omitempty"`
	Stopped bool   `json:"stopped"`
	// Pending says the stop command had not finished within the device's
	// answer bound (it is in estop; its later notification says how the stop ended).
	Pending bool     `json:"pending,omitempty"`
	Cancel  []string `json:"cancelled,omitempty"`
	// Error says why the device did not confirm the stop (unreachable, refused, stop hook failed).
	Error string `json:"error,omitempty"`
	// Seconds is how long the device took to answer.
	Seconds float64 `json:"seconds"`
}

// LabConfig configures the lab page of a directory server.
type LabConfig struct {
	// Directory is the directory's JSON-RPC handler (directory.Directory.Handler). Required.
	Directory http.Handler
	// EStopAll stops every device the directory knows, in parallel, and
	// returns each device's answer; it must return within ctx. Required.
	EStopAll func(ctx context.Context, reason string) []EStopAnswer
	// Guard is the directory server's front door: every route behind its
	// Host check and authentication, the page and its assets public, POST
	// /lab/estop-all to any authenticated identity (viewer included, like
	// safety/estop). Zero: the Host check with Hosts and no credentials.
	Guard auth.Guard
	// Metrics, when set, serves GET /metrics (it checks the token itself).
	Metrics http.Handler
	// Hosts are extra trusted host names (see Config.Hosts).
	Hosts []string
	// EStopTimeout bounds estop-all; default 10s.
	EStopTimeout time.Duration
}

// Validate reports a missing handler.
func (c LabConfig) Validate() error {
	switch {
	case c.Directory == nil:
		return errors.New("console: LabConfig.Directory is required")
	case c.EStopAll == nil:
		return errors.New("console: LabConfig.EStopAll is required")
	case c.EStopTimeout < 0:
		return errors.New("console: LabConfig.EStopTimeout is negative")
	}
	return nil
}

// Lab returns the lab console: GET / (the lab page), GET /console/*, GET
// /metrics when configured, POST /lab/estop-all {reason} -> {answers}, and
// everything else to the directory behind the token. A request from a
// foreign browser origin gets 403.
func Lab(cfg LabConfig) (http.Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.EStopTimeout == 0 {
		cfg.EStopTimeout = 10 * time.Second
	}
	mux := http.NewServeMux()
	mountPages(mux, "lab.html")
	if cfg.Metrics != nil {
		mux.Handle("GET /metrics", cfg.Metrics)
	}
	mux.Handle("POST /lab/estop-all", auth.Require(auth.RoleViewer, "lab/estop-all", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p struct {
			Reason string `json:"reason"`
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 4096))
		if err == nil && len(body) > 0 {
			err = json.Unmarshal(body, &p)
		}
		if err != nil || len(p.Reason) > 512 {
			http.Error(w, "estop-all: want {\"reason\": \"...\"} (at most 512 characters)", http.StatusBadRequest)
			return
		}
		if p.Reason == "" {
			p.Reason = "lab console estop-all"
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), cfg.EStopTimeout)
		defer cancel()
		answers := cfg.EStopAll(ctx, p.Reason)
		if answers == nil {
			answers = []EStopAnswer{}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"answers": answers})
	})))
	mux.Handle("/", cfg.Directory)
	return foreignOrigin(cfg.Hosts, guarded(cfg.Guard, cfg.Hosts, mux)), nil
}

// foreignOrigin refuses (403) a browser request from any origin but the
// console's own, for handlers that have no origin check of their own.
func foreignOrigin(hosts []string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Origin") != "" && !SameOrigin(r, hosts) {
			http.Error(w, "origin "+r.Header.Get("Origin")+" is not allowed", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}
