package transport

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/openmhp/mhp-go"
)

// method is one entry of the explicit method table: ctx carries the session
// (mhp.WithSession); params is the raw params object (nil when absent).
type method func(ctx context.Context, ss *session, params json.RawMessage) (any, error)

// DefaultLeaseTTL is the ttl of a session/acquire that names none.
const DefaultLeaseTTL = 60 * time.Second

// Methods returns the names of the methods a server answers (besides
// initialize), sorted.
func (s *Server) Methods() []string {
	out := make([]string, 0, len(s.methods))
	for m := range s.methods {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

type namesParams struct {
	Names []string `json:"names"`
}

type idParams struct {
	ID string `json:"id"`
}

// addExtensions adds the extra wire methods of the device's decorator chain
// (evidence, saved methods: mhp.Extension) after the built-in table, which
// they never override, and the operator-only ones (permits/issue:
// mhp.OperatorExtension), which answer only a request that carried the
// operator token (Options.OperatorToken, HTTP header Mhp-Operator).
func (s *Server) addExtensions() {
	for name, fn := range mhp.WireExtensions(s.dev) {
		// Built-ins are never overridden, except the answers of a device
		// that is not method-capable, which a methods store replaces.
		if _, taken := s.methods[name]; !taken || strings.HasPrefix(name, "methods/") {
			fn := fn
			s.methods[name] = func(ctx context.Context, _ *session, p json.RawMessage) (any, error) { return fn(ctx, p) }
			if name == "methods/list" {
				s.methodsCapable = true
			}
		}
	}
	for name, fn := range mhp.OperatorExtensions(s.dev) {
		if _, taken := s.methods[name]; taken {
			continue
		}
		name, fn := name, fn
		s.methods[name] = func(ctx context.Context, _ *session, p json.RawMessage) (any, error) {
			if !isOperator(ctx) {
				return nil, s.errorf(mhp.CodeServerError, "%s is an operator method: it needs the operator token (%s header), which agents do not hold", name, mhp.HeaderOperator).
					With("reason", "operator_required")
			}
			return fn(ctx, p)
		}
	}
}

type operatorKey struct{}

// withOperator marks ctx as carrying the operator token.
func withOperator(ctx context.Context) context.Context {
	return context.WithValue(ctx, operatorKey{}, true)
}

func isOperator(ctx context.Context) bool { v, _ := ctx.Value(operatorKey{}).(bool); return v }

// methodTable is the explicit table of every method after initialize. No
// reflection: a method not listed here is MethodNotFound.
func (s *Server) methodTable() map[string]method {
	dev := s.dev
	t := map[string]method{
		"ping": func(ctx context.Context, _ *session, p json.RawMessage) (any, error) {
			if err := s.decode("ping", p, &struct{}{}); err != nil {
				return nil, err
			}
			return dev.Ping(ctx)
		},
		"device/describe": func(ctx context.Context, _ *session, p json.RawMessage) (any, error) {
			var req mhp.DescribeRequest
			if err := s.decode("device/describe", p, &req); err != nil {
				return nil, err
			}
			return dev.Describe(ctx, req)
		},
		"signals/read": func(ctx context.Context, _ *session, p json.RawMessage) (any, error) {
			var req namesParams
			if err := s.decode("signals/read", p, &req); err != nil {
				return nil, err
			}
			return dev.Read(ctx, req.Names)
		},
		"signals/subscribe": func(ctx context.Context, ss *session, p json.RawMessage) (any, error) {
			var req namesParams
			if err := s.decode("signals/subscribe", p, &req); err != nil {
				return nil, err
			}
			res, err := dev.Subscribe(ctx, req.Names)
			if err != nil {
				return nil, err
			}
			ss.subscribe(res.Subscribed)
			return res, nil
		},
		"signals/unsubscribe": func(ctx context.Context, ss *session, p json.RawMessage) (any, error) {
			var req namesParams
			if err := s.decode("signals/unsubscribe", p, &req); err != nil {
				return nil, err
			}
			if err := dev.Unsubscribe(ctx, req.Names); err != nil {
				return nil, err
			}
			ss.unsubscribe(req.Names)
			return map[string]any{"ok": true}, nil
		},
		"settings/write": func(ctx context.Context, _ *session, p json.RawMessage) (any, error) {
			var req struct {
				Name      *string         `json:"name"`
				Value     json.RawMessage `json:"value"`
				Approved  bool            `json:"approved"`
				DryRun    bool            `json:"dryRun"`
				CommandID string          `json:"commandId"`
				PermitID  string          `json:"permitId"`
			}
			if err := s.decode("settings/write", p, &req); err != nil {
				return nil, err
			}
			if req.Name == nil {
				return nil, missing("settings/write", "name").At(s.clk.Now())
			}
			if len(req.Value) == 0 {
				return nil, missing("settings/write", "value").At(s.clk.Now())
			}
			var v any
			if err := json.Unmarshal(req.Value, &v); err != nil {
				var te *json.UnmarshalTypeError
				if errors.As(err, &te) && overflow(te) {
					return nil, s.errorf(mhp.CodeInvalidValue, "settings/write: value: %s is not a finite number (it overflows a double)",
						mhp.Truncate(strings.TrimPrefix(te.Value, "number "), 64)).With("field", "value")
				}
				return nil, s.errorf(mhp.CodeInvalidParams, "settings/write: value: %v", err).With("field", "value")
			}
			return dev.Write(ctx, mhp.WriteRequest{Name: *req.Name, Value: v, Approved: req.Approved, DryRun: req.DryRun,
				CommandID: req.CommandID, PermitID: req.PermitID})
		},
		"actions/invoke": func(ctx context.Context, _ *session, p json.RawMessage) (any, error) {
			var req struct {
				Name      *string        `json:"name"`
				Params    map[string]any `json:"params"`
				Approved  bool           `json:"approved"`
				DryRun    bool           `json:"dryRun"`
				CommandID string         `json:"commandId"`
				PermitID  string         `json:"permitId"`
				Method    *string        `json:"method"`
				Project   *string        `json:"project"`
				Compound  *string        `json:"compound"`
			}
			if err := s.decode("actions/invoke", p, &req); err != nil {
				return nil, err
			}
			if !s.methodsCapable && (req.Method != nil || req.Project != nil || req.Compound != nil) {
				return nil, s.errorf(mhp.CodeNotSupported, "actions/invoke: method, project and compound need the methods capability, which this device does not have").
					With("capability", "methods")
			}
			if req.Name == nil && req.Method == nil {
				return nil, missing("actions/invoke", "name").At(s.clk.Now())
			}
			str := func(p *string) string {
				if p == nil {
					return ""
				}
				return *p
			}
			return dev.Invoke(ctx, mhp.InvokeRequest{Name: str(req.Name), Params: req.Params, Approved: req.Approved, DryRun: req.DryRun,
				CommandID: req.CommandID, PermitID: req.PermitID, Method: str(req.Method), Project: str(req.Project), Compound: str(req.Compound)})
		},
		"jobs/status": s.jobMethod("jobs/status", dev.Job),
		"jobs/cancel": s.jobMethod("jobs/cancel", dev.CancelJob),
		"jobs/pause":  s.jobMethod("jobs/pause", dev.PauseJob),
		"jobs/resume": s.jobMethod("jobs/resume", dev.ResumeJob),
		"jobs/list": func(ctx context.Context, _ *session, p json.RawMessage) (any, error) {
			var req mhp.JobsRequest
			if err := s.decode("jobs/list", p, &req); err != nil {
				return nil, err
			}
			if req.Limit < 0 {
				return nil, s.errorf(mhp.CodeInvalidParams, "jobs/list: limit %d is negative", req.Limit).With("field", "limit")
			}
			jobs, err := dev.Jobs(ctx, req)
			if err != nil {
				return nil, err
			}
			if jobs == nil {
				jobs = []mhp.Job{}
			}
			return map[string]any{"jobs": jobs}, nil
		},
		"session/acquire": func(ctx context.Context, ss *session, p json.RawMessage) (any, error) {
			var req struct {
				TTL *float64 `json:"ttl"`
			}
			if err := s.decode("session/acquire", p, &req); err != nil {
				return nil, err
			}
			ttl := DefaultLeaseTTL
			if req.TTL != nil {
				lo, hi := MinLeaseTTL.Seconds(), MaxLeaseTTL.Seconds()
				if math.IsNaN(*req.TTL) || *req.TTL < lo || *req.TTL > hi {
					return nil, s.errorf(mhp.CodeInvalidParams, "session/acquire: ttl %v is not in [%v, %v] seconds", *req.TTL, lo, hi).
						With("field", "ttl").With("min", lo).With("max", hi)
				}
				ttl = time.Duration(*req.TTL * float64(time.Second))
			}
			l, err := dev.Acquire(ctx, ttl)
			s.noteLease(ss, l, err)
			return l, err
		},
		"session/renew": func(ctx context.Context, ss *session, p json.RawMessage) (any, error) {
			if err := s.decode("session/renew", p, &struct{}{}); err != nil {
				return nil, err
			}
			l, err := dev.Renew(ctx)
			s.noteLease(ss, l, err)
			return l, err
		},
		"session/release": func(ctx context.Context, ss *session, p json.RawMessage) (any, error) {
			if err := s.decode("session/release", p, &struct{}{}); err != nil {
				return nil, err
			}
			if err := dev.Release(ctx); err != nil {
				return nil, err
			}
			ss.setLease(time.Time{})
			return map[string]any{"ok": true}, nil
		},
		"safety/limits": func(ctx context.Context, _ *session, p json.RawMessage) (any, error) {
			if err := s.decode("safety/limits", p, &struct{}{}); err != nil {
				return nil, err
			}
			return dev.Limits(ctx)
		},
		"safety/estop": func(ctx context.Context, _ *session, p json.RawMessage) (any, error) {
			var req struct {
				Reason string `json:"reason"`
			}
			if err := s.decode("safety/estop", p, &req); err != nil {
				// An estop is never refused for its params: stop anyway.
				req.Reason = "estop (unreadable params)"
			}
			// The reason is kept in every session's event buffer and the
			// device's state: capped.
			return dev.EStop(ctx, mhp.Truncate(req.Reason, MaxReason))
		},
		"safety/reset": func(ctx context.Context, _ *session, p json.RawMessage) (any, error) {
			if err := s.decode("safety/reset", p, &struct{}{}); err != nil {
				return nil, err
			}
			return dev.Reset(ctx)
		},
		"methods/list": s.noMethods("methods/list"),
		"methods/find": s.noMethods("methods/find"),
	}
	for _, m := range []string{"methods/get", "methods/diff", "methods/save", "methods/delete"} {
		t[m] = s.notMethodCapable(m)
	}
	if rp, ok := mhp.Find[mhp.ResourceProvider](dev); ok {
		t["resources/list"] = func(ctx context.Context, _ *session, p json.RawMessage) (any, error) {
			if err := s.decode("resources/list", p, &struct{}{}); err != nil {
				return nil, err
			}
			list, err := rp.ListResources(ctx)
			if err != nil {
				return nil, err
			}
			if list == nil {
				list = []string{}
			}
			return map[string]any{"resources": list}, nil
		}
		t["resources/read"] = func(ctx context.Context, _ *session, p json.RawMessage) (any, error) {
			var req struct {
				Path *string `json:"path"`
			}
			if err := s.decode("resources/read", p, &req); err != nil {
				return nil, err
			}
			if req.Path == nil {
				return nil, missing("resources/read", "path").At(s.clk.Now())
			}
			return rp.ReadResource(ctx, *req.Path)
		}
	} else {
		notRes := func(name string) method {
			return func(context.Context, *session, json.RawMessage) (any, error) {
				return nil, s.errorf(mhp.CodeNotSupported, "%s: this device serves no resources (capability resources is false)", name).
					With("capability", "resources")
			}
		}
		t["resources/list"] = notRes("resources/list")
		t["resources/read"] = notRes("resources/read")
	}
	return t
}

// noteLease records a lease granted to ss (for eviction: a session holding
// a lease is never evicted for room).
func (s *Server) noteLease(ss *session, l *mhp.Lease, err error) {
	if err != nil || l == nil || ss == nil {
		return
	}
	ss.setLease(s.clk.Now().Add(time.Duration(l.TTL * float64(time.Second))))
}

// decode decodes params strictly, stamping refusals with the server clock.
func (s *Server) decode(name string, p json.RawMessage, dst any) error {
	if err := decodeParams(name, p, dst); err != nil {
		return err.At(s.clk.Now())
	}
	return nil
}

func (s *Server) jobMethod(name string, call func(context.Context, string) (*mhp.Job, error)) method {
	return func(ctx context.Context, _ *session, p json.RawMessage) (any, error) {
		var req struct {
			ID *string `json:"id"`
		}
		if err := s.decode(name, p, &req); err != nil {
			return nil, err
		}
		if req.ID == nil {
			return nil, missing(name, "id").At(s.clk.Now())
		}
		job, err := call(ctx, *req.ID)
		if err != nil {
			return nil, err
		}
		return map[string]any{"job": job}, nil
	}
}

// noMethods answers methods/list and methods/find on a device that is not
// method-capable: an empty list, whatever the filters.
func (s *Server) noMethods(name string) method {
	return func(_ context.Context, _ *session, p json.RawMessage) (any, error) {
		var ignored map[string]any
		if len(p) > 0 {
			if err := json.Unmarshal(p, &ignored); err != nil {
				return nil, paramsError(name, err)
			}
		}
		return map[string]any{"methods": []any{}}, nil
	}
}

func (s *Server) notMethodCapable(name string) method {
	return func(context.Context, *session, json.RawMessage) (any, error) {
		return nil, s.errorf(mhp.CodeNotSupported, "%s: this device is not method-capable (capability methods is false)", name).
			With("capability", "methods")
	}
}
