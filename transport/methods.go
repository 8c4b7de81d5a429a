package transport

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/openmhp/mhp-go"
)

// method is one entry of the explicit method table: s is the server
// answering (the table of built-ins is built once per process and shared by
// every server); ctx carries the session label (mhp.WithSession); ss is the
// caller's session (nil for a safety/estop or ping served without one);
// params is the raw params object (nil when absent).
type method func(s *Server, ctx context.Context, ss *session, params json.RawMessage) (any, error)

// entry is one named method of the table.
type entry struct {
	name string
	fn   method
}

// handle adapts a typed method to the table, as mhp.Handle does for
// extensions: params are decoded strictly into Req by mhp.DecodeAs (the one
// params decoder, mhp.DecodeParams), then fn runs with the caller's session
// and its result is the answer.
func handle[Req, Res any](name string, fn func(s *Server, ctx context.Context, ss *session, req Req) (Res, error)) entry {
	return entry{name, func(s *Server, ctx context.Context, ss *session, p json.RawMessage) (any, error) {
		req, err := mhp.DecodeAs[Req](name, p)
		if err != nil {
			return nil, err
		}
		return fn(s, ctx, ss, req)
	}}
}

// bare adapts a device call (a method expression of mhp.Device) that takes
// no params (only {} or none pass).
func bare[Res any](call func(mhp.Device, context.Context) (Res, error)) func(*Server, context.Context, *session, struct{}) (Res, error) {
	return func(s *Server, ctx context.Context, _ *session, _ struct{}) (Res, error) { return call(s.dev, ctx) }
}

// plain adapts a device call whose params are its request type.
func plain[Req, Res any](call func(mhp.Device, context.Context, Req) (Res, error)) func(*Server, context.Context, *session, Req) (Res, error) {
	return func(s *Server, ctx context.Context, _ *session, req Req) (Res, error) { return call(s.dev, ctx, req) }
}

// wire lifts a wire method of the device chain (mhp.Extension) into the table.
func wire(fn mhp.WireMethod) method {
	return func(_ *Server, ctx context.Context, _ *session, p json.RawMessage) (any, error) { return fn(ctx, p) }
}

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

// addExtensions adds the extra wire methods of the device's decorator chain
// (evidence, saved methods: mhp.Extension) after the built-in table, which
// they never override, and the operator-only ones (permits/issue:
// mhp.OperatorExtension), which answer only a request that carried the
// operator token (Options.OperatorToken, HTTP header Mhp-Operator).
func (s *Server) addExtensions() {
	ext, op := mhp.WireExtensions(s.dev), mhp.OperatorExtensions(s.dev)
	if len(ext) == 0 && len(op) == 0 {
		return // the shared table serves
	}
	s.methods = maps.Clone(s.methods)
	for name, fn := range ext {
		// Built-ins are never overridden, except the answers of a device
		// that is not method-capable, which a methods store replaces.
		if _, taken := s.methods[name]; !taken || strings.HasPrefix(name, "methods/") {
			s.methods[name] = wire(fn)
			if name == mhp.MethodMethodsList {
				s.methodsCapable = true
			}
		}
	}
	for name, fn := range op {
		if _, taken := s.methods[name]; taken {
			continue
		}
		name, fn := name, fn
		if s.opMethods == nil {
			s.opMethods = map[string]bool{}
		}
		s.opMethods[name] = true
		s.methods[name] = func(s *Server, ctx context.Context, _ *session, p json.RawMessage) (any, error) {
			if !isOperator(ctx) {
				return nil, s.errorf(mhp.CodeServerError, "%s is an operator method: it needs the operator token (%s header), which agents do not hold", name, mhp.HeaderOperator).
					With(mhp.DataReason, mhp.ReasonOperatorRequired)
			}
			return fn(ctx, p)
		}
	}
}

// operatorKey marks a device call whose request carried the operator
// token (callCtx answers it).
type operatorKey struct{}

func isOperator(ctx context.Context) bool { v, _ := ctx.Value(operatorKey{}).(bool); return v }

// builtinMethods is the explicit table of every method after initialize, one
// line per method, built once per process and shared by every server (a
// server whose device chain adds extensions gets its own copy, see
// addExtensions). No reflection: a method not listed here is MethodNotFound.
var builtinMethods = sync.OnceValue(func() map[string]method {
	table := []entry{
		handle(mhp.MethodPing, bare(mhp.Device.Ping)),
		handleFast(mhp.MethodDescribe, fastDescribe, (*Server).describe), // describe.go: encoded once per tier
		handleFast(mhp.MethodSignalsRead, fastNames, (*Server).read),     // params.go: the usual params read by a scan
		handle(mhp.MethodSignalsSubscribe, (*Server).subscribe),
		handle(mhp.MethodSignalsUnsubscribe, (*Server).unsubscribe),
		handleFast(mhp.MethodSettingsWrite, fastWrite, (*Server).write),
		handle(mhp.MethodActionsInvoke, (*Server).invoke),
		jobMethod(mhp.MethodJobsStatus, mhp.Device.Job),
		jobMethod(mhp.MethodJobsCancel, mhp.Device.CancelJob),
		jobMethod(mhp.MethodJobsPause, mhp.Device.PauseJob),
		jobMethod(mhp.MethodJobsResume, mhp.Device.ResumeJob),
		handle(mhp.MethodJobsList, (*Server).jobs),
		handle(mhp.MethodSessionAcquire, (*Server).acquire),
		handle(mhp.MethodSessionRenew, (*Server).renew),
		handle(mhp.MethodSessionRelease, (*Server).release),
		handle(mhp.MethodSafetyLimits, bare(mhp.Device.Limits)),
		{mhp.MethodSafetyEStop, (*Server).estop},
		handle(mhp.MethodSafetyReset, bare(mhp.Device.Reset)),
		handle(mhp.MethodMethodsList, noMethods),
		handle(mhp.MethodMethodsFind, noMethods),
		notMethodCapable(mhp.MethodMethodsGet),
		notMethodCapable(mhp.MethodMethodsDiff),
		notMethodCapable(mhp.MethodMethodsSave),
		notMethodCapable(mhp.MethodMethodsDelete),
		handle(mhp.MethodResourcesList, (*Server).listResources),
		handle(mhp.MethodResourcesRead, (*Server).readResource),
	}
	t := make(map[string]method, len(table))
	for _, e := range table {
		t[e.name] = e.fn
	}
	return t
})

type namesParams struct {
	Names []string `json:"names"`
}

func (s *Server) read(ctx context.Context, _ *session, req namesParams) (*mhp.ReadResult, error) {
	return s.dev.Read(ctx, req.Names)
}

// subscribe records the signals the device accepted on the session, which
// then receives their updates.
func (s *Server) subscribe(ctx context.Context, ss *session, req namesParams) (*mhp.SubscribeResult, error) {
	res, err := s.dev.Subscribe(ctx, req.Names)
	if err != nil {
		return nil, err
	}
	ss.subscribe(res.Subscribed)
	return res, nil
}

func (s *Server) unsubscribe(ctx context.Context, ss *session, req namesParams) (map[string]any, error) {
	if err := s.dev.Unsubscribe(ctx, req.Names); err != nil {
		return nil, err
	}
	ss.unsubscribe(req.Names)
	return map[string]any{"ok": true}, nil
}

type writeParams struct {
	Name      *string         `json:"name"`
	Value     json.RawMessage `json:"value"`
	Approved  bool            `json:"approved"`
	DryRun    bool            `json:"dryRun"`
	CommandID string          `json:"commandId"`
	PermitID  string          `json:"permitId"`
}

// write checks that name and value are present and the value is a JSON
// value the device can hold (a finite number), then writes.
func (s *Server) write(ctx context.Context, _ *session, req writeParams) (*mhp.WriteResult, error) {
	const name = mhp.MethodSettingsWrite
	if req.Name == nil {
		return nil, missing(name, "name").At(s.clk.Now())
	}
	if len(req.Value) == 0 {
		return nil, missing(name, "value").At(s.clk.Now())
	}
	v, ok := fastValue(req.Value)
	if ok {
		return s.dev.Write(ctx, mhp.WriteRequest{Name: *req.Name, Value: v, Approved: req.Approved, DryRun: req.DryRun,
			CommandID: req.CommandID, PermitID: req.PermitID})
	}
	if err := json.Unmarshal(req.Value, &v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && mhp.NumberOverflows(te) {
			return nil, s.errorf(mhp.CodeInvalidValue, "settings/write: value: %s is not a finite number (it overflows a double)",
				mhp.Truncate(strings.TrimPrefix(te.Value, "number "), 64)).With(mhp.DataField, "value")
		}
		return nil, s.errorf(mhp.CodeInvalidParams, "settings/write: value: %v", err).With(mhp.DataField, "value")
	}
	return s.dev.Write(ctx, mhp.WriteRequest{Name: *req.Name, Value: v, Approved: req.Approved, DryRun: req.DryRun,
		CommandID: req.CommandID, PermitID: req.PermitID})
}

type invokeParams struct {
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

// invoke refuses a saved-method call on a device that is not method-capable
// and an invoke that names neither an action nor a method, then invokes.
func (s *Server) invoke(ctx context.Context, _ *session, req invokeParams) (*mhp.InvokeResult, error) {
	if !s.methodsCapable && (req.Method != nil || req.Project != nil || req.Compound != nil) {
		return nil, s.errorf(mhp.CodeNotSupported, "actions/invoke: method, project and compound need the methods capability, which this device does not have").
			With(mhp.DataCapability, "methods")
	}
	if req.Name == nil && req.Method == nil {
		return nil, missing(mhp.MethodActionsInvoke, "name").At(s.clk.Now())
	}
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	return s.dev.Invoke(ctx, mhp.InvokeRequest{Name: str(req.Name), Params: req.Params, Approved: req.Approved, DryRun: req.DryRun,
		CommandID: req.CommandID, PermitID: req.PermitID, Method: str(req.Method), Project: str(req.Project), Compound: str(req.Compound)})
}

// jobMethod is jobs/status, jobs/cancel, jobs/pause or jobs/resume: an id
// is required; the answer is {"job": ...}.
func jobMethod(name string, call func(mhp.Device, context.Context, string) (*mhp.Job, error)) entry {
	return handle(name, func(s *Server, ctx context.Context, _ *session, req struct {
		ID *string `json:"id"`
	}) (map[string]any, error) {
		if req.ID == nil {
			return nil, missing(name, "id").At(s.clk.Now())
		}
		job, err := call(s.dev, ctx, *req.ID)
		if err != nil {
			return nil, err
		}
		return map[string]any{"job": job}, nil
	})
}

func (s *Server) jobs(ctx context.Context, _ *session, req mhp.JobsRequest) (map[string]any, error) {
	if req.Limit < 0 {
		return nil, s.errorf(mhp.CodeInvalidParams, "jobs/list: limit %d is negative", req.Limit).With(mhp.DataField, "limit")
	}
	jobs, err := s.dev.Jobs(ctx, req)
	if err != nil {
		return nil, err
	}
	if jobs == nil {
		jobs = []mhp.Job{}
	}
	return map[string]any{"jobs": jobs}, nil
}

type acquireParams struct {
	TTL *float64 `json:"ttl"`
}

// acquire takes the lease for ttl seconds (DefaultLeaseTTL when none is
// named; MinLeaseTTL to MaxLeaseTTL) and records it on the session.
func (s *Server) acquire(ctx context.Context, ss *session, req acquireParams) (*mhp.Lease, error) {
	ttl := DefaultLeaseTTL
	if req.TTL != nil {
		var err error
		if ttl, err = s.leaseTTL(mhp.MethodSessionAcquire, *req.TTL); err != nil {
			return nil, err
		}
	}
	l, err := s.dev.Acquire(ctx, ttl)
	s.noteLease(ss, l, err)
	return l, err
}

// leaseTTL bounds a ttl of session/acquire or session/renew.
func (s *Server) leaseTTL(method string, v float64) (time.Duration, error) {
	lo, hi := MinLeaseTTL.Seconds(), MaxLeaseTTL.Seconds()
	if math.IsNaN(v) || v < lo || v > hi {
		return 0, s.errorf(mhp.CodeInvalidParams, "%s: ttl %v is not in [%v, %v] seconds", method, v, lo, hi).
			With(mhp.DataField, "ttl").With(mhp.DataMin, lo).With(mhp.DataMax, hi)
	}
	return time.Duration(v * float64(time.Second)), nil
}

// renew extends the caller's lease; a ttl (as the reference SDK's heartbeat
// sends, bounded as for acquire) becomes the lease's ttl. The answer names
// the new expiry.
func (s *Server) renew(ctx context.Context, ss *session, req acquireParams) (*mhp.Lease, error) {
	if req.TTL != nil {
		ttl, err := s.leaseTTL(mhp.MethodSessionRenew, *req.TTL)
		if err != nil {
			return nil, err
		}
		ctx = mhp.WithRenewTTL(ctx, ttl)
	}
	l, err := s.dev.Renew(ctx)
	s.noteLease(ss, l, err)
	return l, err
}

func (s *Server) release(ctx context.Context, ss *session, _ struct{}) (map[string]any, error) {
	if err := s.dev.Release(ctx); err != nil {
		return nil, err
	}
	ss.setLease(time.Time{})
	return map[string]any{"ok": true}, nil
}

// estop is never refused for its params: unreadable ones stop anyway.
func (s *Server) estop(ctx context.Context, _ *session, p json.RawMessage) (any, error) {
	var req struct {
		Reason string `json:"reason"`
	}
	if err := mhp.DecodeParams(mhp.MethodSafetyEStop, p, &req); err != nil {
		req.Reason = "estop (unreadable params)"
	}
	// The reason is kept in every session's event buffer and the device's
	// state: capped.
	return s.dev.EStop(ctx, mhp.Truncate(req.Reason, MaxReason))
}

// noteLease records a lease granted to ss (for eviction: a session holding
// a lease is never evicted for room).
func (s *Server) noteLease(ss *session, l *mhp.Lease, err error) {
	if err != nil || l == nil || ss == nil {
		return
	}
	ss.setLease(s.clk.Now().Add(time.Duration(l.TTL * float64(time.Second))))
}

// noMethods answers methods/list and methods/find on a device that is not
// method-capable: an empty list, whatever the filters.
func noMethods(*Server, context.Context, *session, map[string]any) (map[string]any, error) {
	return map[string]any{"methods": []any{}}, nil
}

func notMethodCapable(name string) entry {
	return entry{name, func(s *Server, _ context.Context, _ *session, _ json.RawMessage) (any, error) {
		return nil, s.errorf(mhp.CodeNotSupported, "%s: this device is not method-capable (capability methods is false)", name).
			With(mhp.DataCapability, "methods")
	}}
}

func (s *Server) listResources(ctx context.Context, _ *session, _ struct{}) (map[string]any, error) {
	if s.resources == nil {
		return nil, s.noResources(mhp.MethodResourcesList)
	}
	list, err := s.resources.ListResources(ctx)
	if err != nil {
		return nil, err
	}
	if list == nil {
		list = []string{}
	}
	return map[string]any{"resources": list}, nil
}

type pathParams struct {
	Path *string `json:"path"`
}

func (s *Server) readResource(ctx context.Context, _ *session, req pathParams) (*mhp.Resource, error) {
	if s.resources == nil {
		return nil, s.noResources(mhp.MethodResourcesRead)
	}
	if req.Path == nil {
		return nil, missing(mhp.MethodResourcesRead, "path").At(s.clk.Now())
	}
	return s.resources.ReadResource(ctx, *req.Path)
}

// noResources is the refusal of a resources method on a device that serves none.
func (s *Server) noResources(name string) *mhp.Error {
	return s.errorf(mhp.CodeNotSupported, "%s: this device serves no resources (capability resources is false)", name).
		With(mhp.DataCapability, "resources")
}
