package pylabrobot

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/binding"
)

// Options are what a program, not a config file, gives [New]: the options
// every adapter shares ([adapters.Options]: clock, link clock, logger,
// Refine) and the backend seam. A nil seam is the real HTTP client of
// [Config.URL]; a test passes fakes (or points [Config.URL] at a fake
// server from package plrtest).
type Options struct {
	adapters.Options
	// Machine and Tasks are the bridge (mode bridge); nil: a
	// [BridgeClient] of [Config.URL].
	Machine Machine
	Tasks   Tasks
	// Legacy is the liquid-handling server (mode legacy); nil: a
	// [LegacyClient] of [Config.URL].
	Legacy Legacy
	// HTTP is the HTTP client the real backend clients use (transport,
	// TLS); nil: a plain http.Client. Either way [Config.RequestTimeout]
	// bounds every request.
	HTTP *http.Client
}

// New checks cfg (defaults, then [Config.Validate]) and builds an unstarted
// driver; the caller Starts and Closes it. In bridge mode it reads the
// bridge's /describe or, with the bridge down, link.descriptor_cache
// ([adapters.LinkConfig]); the legacy server's API is fixed and needs no
// contact. The backend link reports to the driver from the start.
func New(ctx context.Context, cfg Config, opt Options) (*binding.Driver, error) {
	bc, l, err := build(ctx, cfg, opt)
	if err != nil {
		return nil, err
	}
	d, err := opt.NewDriver(bc)
	if err != nil {
		return nil, err
	}
	l.Attach(d.SetLink)
	return d, nil
}

// build makes the binding config and the backend link that follows it.
func build(ctx context.Context, cfg Config, opt Options) (binding.Config, *adapters.Link, error) {
	cfg = cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return binding.Config{}, nil, err
	}
	if cfg.PollFailures > 0 {
		opt.Log().Warn("pylabrobot: " + adapters.DeprecatedPollFailures(cfg.PollFailures))
	}
	var bc binding.Config
	cfg.Apply(&bc)
	if bc.Device.Make == "" {
		bc.Device.Make = "PyLabRobot"
	}
	if cfg.Mode == ModeLegacy {
		if opt.Legacy == nil {
			c, err := NewLegacyClient(cfg.URL, cfg.RequestTimeout, opt.HTTP)
			if err != nil {
				return binding.Config{}, nil, err
			}
			opt.Legacy = c
		}
		l := &legacyAdapter{cfg: cfg, lh: opt.Legacy, poll: cfg.pollRetry(opt)}
		// The legacy server's API is fixed: the device needs nothing from
		// it to start; the link starts down until Setup or a probe reaches it.
		l.link = newLink(cfg, opt, func(ctx context.Context) error { _, err := l.lh.SetupFinished(ctx); return err },
			errors.New("not contacted yet"))
		bc, err := l.binding(bc)
		if err != nil {
			return binding.Config{}, nil, err
		}
		return bc, l.link, nil
	}
	if opt.Machine == nil || opt.Tasks == nil {
		c, err := NewBridgeClient(cfg.URL, cfg.RequestTimeout, opt.HTTP)
		if err != nil {
			return binding.Config{}, nil, err
		}
		if opt.Machine == nil {
			opt.Machine = c
		}
		if opt.Tasks == nil {
			opt.Tasks = c
		}
	}
	desc, downErr := opt.Machine.Describe(ctx)
	if downErr != nil {
		downErr = fmt.Errorf("pylabrobot: reading the bridge's /describe at %s: %w", cfg.URL, downErr)
		if !linkDown(downErr) {
			return binding.Config{}, nil, downErr
		}
		var err error
		if desc, err = cachedDescription(cfg, downErr); err != nil {
			return binding.Config{}, nil, err
		}
	} else if cfg.Link.DescriptorCache != "" {
		if err := adapters.SaveDescriptor(cfg.Link.DescriptorCache, Kind, cfg.URL, desc); err != nil {
			opt.Log().Warn("pylabrobot: descriptor cache not written", "err", err)
		}
	}
	b := &bridgeAdapter{cfg: cfg, m: opt.Machine, t: opt.Tasks, desc: desc, poll: cfg.pollRetry(opt)}
	if *cfg.LongPoll && desc.Bridge.LongPollS > 0 {
		b.longPoll = min(cfg.LongPollWait, time.Duration(desc.Bridge.LongPollS*float64(time.Second)))
	}
	b.state = &stateCache{ttl: cfg.SignalCache, fetch: opt.Machine.State}
	b.link = newLink(cfg, opt, b.probe, downErr)
	bc, err := b.binding(bc)
	if err != nil {
		return binding.Config{}, nil, err
	}
	return bc, b.link, nil
}

// ---- bridge mode

type bridgeAdapter struct {
	cfg   Config
	m     Machine
	t     Tasks
	desc  *Description
	state *stateCache
	link  *adapters.Link
	poll  adapters.PollRetry
	// longPoll is how long a task poll asks the bridge to hold its answer;
	// 0: the bridge does not long-poll (or long_poll is off), so polls
	// wait poll_interval between them.
	longPoll time.Duration
}

type stateCache struct {
	ttl   time.Duration
	fetch func(context.Context) (*StateReply, error)
	mu    sync.Mutex
	at    time.Time
	val   *StateReply
}

func (s *stateCache) get(ctx context.Context) (*StateReply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.val != nil && s.ttl > 0 && time.Since(s.at) < s.ttl {
		return s.val, nil
	}
	v, err := s.fetch(ctx)
	if err != nil {
		s.val = nil
		return nil, err
	}
	s.val, s.at = v, time.Now()
	return v, nil
}

func (b *bridgeAdapter) binding(bc binding.Config) (binding.Config, error) {
	if bc.Device.Model == "" {
		bc.Device.Model = b.desc.Machine.Class
	}
	if bc.Notes == "" {
		bc.Notes = fmt.Sprintf("PyLabRobot %s (%s) through plrbridge at %s.", b.desc.Machine.Class, b.desc.Machine.Module, b.cfg.URL)
	}
	methods := map[string]Method{}
	for _, m := range b.desc.Methods {
		methods[m.Name] = m
	}
	// Signals: the bridge's readable state.
	served := map[string]bool{}
	for _, st := range b.desc.State {
		spec := mhp.Signal{Name: st.Name, Type: jsonType(st.Type), Notes: "PyLabRobot state (" + st.Source + ")"}
		if o, ok := b.cfg.Signals[st.Name]; ok {
			if o.Hide {
				continue
			}
			if o.Type != "" {
				spec.Type = o.Type
			}
			if o.Unit != "" {
				spec.Unit = o.Unit
			}
			if o.Notes != "" {
				spec.Notes = o.Notes
			}
			spec.RequiredForRecovery = o.RequiredForRecovery
		}
		served[st.Name] = true
		name := st.Name
		bc.Signals = append(bc.Signals, binding.Signal{Spec: spec, Read: func(ctx context.Context) (binding.Sample, error) {
			s, err := b.state.get(ctx)
			if err != nil {
				if ctx.Err() == nil {
					b.lost(err)
				}
				return binding.Sample{}, binding.Unavailable("bridge /state: %v", err)
			}
			if msg, bad := s.Errors[name]; bad {
				return binding.Sample{}, binding.Unavailable("%s: %s", name, msg)
			}
			v, ok := s.Values[name]
			if !ok || v == nil {
				return binding.Sample{}, binding.Unavailable("bridge /state has no value for %s", name)
			}
			return binding.Sample{Value: v}, nil
		}})
	}
	for name, o := range b.cfg.Signals {
		if !served[name] && !o.Hide {
			return binding.Config{}, fmt.Errorf("pylabrobot: config overrides signal %q, which the bridge does not serve", name)
		}
	}
	// Settings: setter methods.
	setters := map[string]bool{}
	for _, name := range settingOrder(b.cfg) {
		sm := b.cfg.Settings[name]
		m, ok := methods[sm.Method]
		if !ok {
			return binding.Config{}, fmt.Errorf("pylabrobot: setting %q: the bridge has no method %q", name, sm.Method)
		}
		param := sm.Param
		if param == "" {
			var req []string
			for _, p := range m.Params {
				if p.Required {
					req = append(req, p.Name)
				}
			}
			if len(req) != 1 {
				return binding.Config{}, fmt.Errorf("pylabrobot: setting %q: method %s has %d required params %v; name one with param", name, sm.Method, len(req), req)
			}
			param = req[0]
		}
		setters[sm.Method] = true
		spec := mhp.Setting{Name: name, Type: sm.Type, Unit: sm.Unit, Limits: sm.Limits, Approval: sm.Approval,
			Interlocks: sm.Interlocks, DuringJob: sm.DuringJob, Notes: sm.Notes}
		if spec.Notes == "" {
			spec.Notes = fmt.Sprintf("written by %s(%s=value)", sm.Method, param)
		}
		method := sm.Method
		bc.Settings = append(bc.Settings, binding.Setting{Spec: spec, Write: func(ctx context.Context, v any) (binding.WriteStatus, error) {
			return b.write(ctx, method, param, v)
		}})
	}
	// Actions: every other method.
	for _, m := range b.desc.Methods {
		o, has := b.cfg.Actions[m.Name]
		if o.Hide || (setters[m.Name] && !has) {
			continue
		}
		act, err := b.action(m, o)
		if err != nil {
			return binding.Config{}, err
		}
		bc.Actions = append(bc.Actions, act)
	}
	for name := range b.cfg.Actions {
		if _, ok := methods[name]; !ok {
			return binding.Config{}, fmt.Errorf("pylabrobot: config overrides action %q, which the bridge does not serve", name)
		}
	}
	bc.EStop = b.estop
	bc.Verify = b.verify
	// A reset may run the machine's setup again (homing, instrument init).
	bc.VerifyTimeout = b.cfg.SetupTimeout
	if o, ok := b.cfg.Actions[SetupMethod]; ok && o.Timeout > 0 {
		bc.VerifyTimeout = o.Timeout
	}
	bc.Setup = func(ctx context.Context) error {
		if b.link.Connected() {
			if _, err := b.m.State(ctx); err != nil {
				if b.cfg.Link.FailFast || !linkDown(err) {
					return fmt.Errorf("pylabrobot: bridge %s unreachable: %w", b.cfg.URL, err)
				}
				b.lost(err)
			}
		}
		b.link.Start()
		return nil
	}
	bc.Close = func() error { b.link.Close(); return nil }
	return bc, nil
}

func settingOrder(cfg Config) []string {
	seen := map[string]bool{}
	var out []string
	for _, n := range cfg.SettingOrder {
		if _, ok := cfg.Settings[n]; ok && !seen[n] {
			out = append(out, n)
			seen[n] = true
		}
	}
	var rest []string
	for n := range cfg.Settings {
		if !seen[n] {
			rest = append(rest, n)
		}
	}
	sort.Strings(rest)
	return append(out, rest...)
}

// jsonType maps the bridge's types onto MHP types.
func jsonType(t string) string {
	if mhp.IsType(t) {
		return t
	}
	return mhp.TypeAny
}

// shapeOf maps a bridge type description onto a shape. A resource (or a
// Union of resource classes) is a string naming a deck resource; the bridge
// resolves it on the deck, inside Optional, Union and Sequence too.
func shapeOf(t TypeDesc) *mhp.Shape {
	s := &mhp.Shape{Type: jsonType(t.Type)}
	if t.Items != nil {
		s.Items = shapeOf(*t.Items)
	}
	if len(t.Enum) > 0 {
		s.Limits = &mhp.Limits{Enum: t.Enum}
	}
	var notes []string
	named := false // the notes name the python type already
	if t.Resource {
		kinds := t.ResourceTypes
		if len(kinds) == 0 && t.PythonType != "" {
			kinds, named = []string{t.PythonType}, true
		}
		notes = append(notes, "name of a deck resource"+resourceKinds(kinds))
		named = named || len(t.ResourceTypes) > 0
	}
	if t.Items != nil && t.Items.Resource {
		notes = append(notes, "names of deck resources"+resourceKinds(t.Items.ResourceTypes))
	}
	if len(t.OneOf) > 0 {
		// The resource members are one alternative: "a deck resource name
		// (ResourceStack or ResourceHolder)", not one per class.
		var alts, kinds []string
		resAt := -1
		for _, m := range t.OneOf {
			switch {
			case m.Resource:
				kinds = append(kinds, m.ResourceTypes...)
				if len(m.ResourceTypes) == 0 && m.PythonType != "" {
					kinds = append(kinds, m.PythonType)
				}
				if resAt < 0 {
					resAt = len(alts)
					alts = append(alts, "")
				}
			case m.PythonType != "":
				alts = append(alts, fmt.Sprintf("%s (%s)", jsonType(m.Type), m.PythonType))
			default:
				alts = append(alts, jsonType(m.Type))
			}
		}
		if resAt >= 0 {
			alts[resAt] = "a deck resource name" + resourceKinds(slices.Compact(kinds))
		}
		notes = append(notes, "one of: "+strings.Join(alts, ", or "))
		named = true // each alternative names its own type
	}
	if t.PythonType != "" && !named {
		notes = append(notes, "python type "+t.PythonType)
	}
	s.Notes = strings.Join(notes, "; ")
	return s
}

// resourceKinds is " (TipSpot or Trash)" for a Union's resource classes.
func resourceKinds(types []string) string {
	if len(types) == 0 {
		return ""
	}
	return " (" + strings.Join(types, " or ") + ")"
}

func (b *bridgeAdapter) action(m Method, o ActionOverride) (binding.Action, error) {
	spec := mhp.Action{Name: m.Name, Duration: mhp.DurationLong, Notes: m.Doc, Cancellable: m.Cancellable, Concurrent: m.Concurrent}
	if o.Pausable != nil && *o.Pausable {
		return binding.Action{}, fmt.Errorf("pylabrobot: action %q: the bridge cannot pause a task", m.Name)
	}
	for _, p := range m.Params {
		sh := shapeOf(p)
		if !p.Required {
			sh.Optional = true
			if p.Default != nil {
				sh.Default = p.Default
			}
		}
		spec.Params = append(spec.Params, mhp.Param{Name: p.Name, Shape: sh})
	}
	if m.Returns.Type != "" && m.Returns.Type != "null" {
		spec.Returns = shapeOf(m.Returns)
	}
	if err := o.ApplyTo(&spec); err != nil {
		return binding.Action{}, fmt.Errorf("pylabrobot: %w", err)
	}
	timeout := o.Timeout
	if timeout == 0 {
		timeout = b.cfg.ActionTimeout
	}
	name := m.Name
	return binding.Action{Spec: spec, Timeout: timeout, FaultOnFailure: o.FaultOnFailure, Run: func(ctx context.Context, job *binding.Job) (any, error) {
		return b.run(ctx, job, name, timeout)
	}}, nil
}

func (b *bridgeAdapter) run(ctx context.Context, job *binding.Job, method string, timeout time.Duration) (any, error) {
	params := map[string]any{}
	for k, v := range job.Params() {
		params[k] = v
	}
	t, err := b.t.Submit(ctx, method, params, timeout.Seconds())
	if err != nil {
		b.lost(err)
		if adapters.Unreachable(err) {
			return nil, notSent(method, err)
		}
		return nil, err
	}
	return b.follow(ctx, job, t)
}

// follow polls the task to its end (long-polling when the bridge offers
// it); after a cancel (or estop) it sends the bridge's cancel once and
// keeps polling under its own deadline. Failed polls follow the poll
// policy (poll_retry).
func (b *bridgeAdapter) follow(ctx context.Context, job *binding.Job, t *Task) (any, error) {
	id := t.ID
	pollCtx := ctx
	var stops []context.CancelFunc
	defer func() {
		for _, f := range stops {
			f()
		}
	}()
	p := b.newTaskPoll(t)
	cancelling := false
	var lastProgress float64 = -1
	lastMsg := ""
	for {
		if t.Status != TaskQueued && t.Status != TaskRunning && lastProgress >= 0 {
			// The job's extra says how the task ended, not "running".
			job.Progress(lastProgress, map[string]any{"task_id": id, "status": t.Status})
		}
		switch t.Status {
		case TaskDone:
			return t.Result, nil
		case TaskFailed:
			return nil, binding.Failed(fmt.Errorf("%s: %s", t.Method, t.Error), map[string]any{"error_type": t.ErrorType, "task_id": id})
		case TaskCancelled:
			return nil, binding.ErrCancelled
		case TaskUnknown:
			return nil, fmt.Errorf("bridge task %s (%s) ended with outcome unknown: %s", id, t.Method, t.Error)
		case TaskQueued, TaskRunning:
			frac := 0.0
			if t.Progress != nil {
				frac = *t.Progress
			}
			if frac != lastProgress || t.Message != lastMsg {
				lastProgress, lastMsg = frac, t.Message
				extra := map[string]any{"task_id": id, "status": t.Status}
				if t.Message != "" {
					extra["message"] = t.Message
				}
				job.Progress(frac, extra)
			}
		default:
			return nil, fmt.Errorf("bridge task %s: status %q is not a task status", id, t.Status)
		}
		if ctx.Err() != nil && !cancelling {
			if !job.CancelRequested() {
				return nil, fmt.Errorf("bridge task %s (%s): no terminal status before the deadline", id, t.Method)
			}
			cancelling = true
			base := context.WithoutCancel(ctx)
			cctx, cancel := context.WithTimeout(base, b.cfg.RequestTimeout)
			_, cerr := b.t.Cancel(cctx, id)
			cancel()
			deadline := time.Now().Add(b.cfg.CancelWait)
			if cerr != nil {
				// Not sent (not cancellable, or no answer): wait out the job's own deadline.
				if d, ok := ctx.Deadline(); ok {
					deadline = d
				}
			}
			var stop context.CancelFunc
			pollCtx, stop = context.WithDeadline(base, deadline)
			stops = append(stops, stop)
			p.wait = 0
		}
		next, err := p.next(pollCtx, t)
		switch {
		case next != nil:
			t = next
		case pollCtx.Err() != nil:
			if cancelling {
				return nil, fmt.Errorf("bridge task %s (%s): no end state within %v of the cancel", id, t.Method, b.cfg.CancelWait)
			}
			// The job's context ended: the cancel or the deadline is
			// handled at the top.
		case err != nil:
			return nil, err
		}
	}
}

// taskPoll follows one task's polls: the wait before the next one, the
// long-poll when the bridge offers it, and the failed polls under the
// poll policy.
type taskPoll struct {
	b      *bridgeAdapter
	id     string
	method string
	fails  *adapters.PollFailures
	wait   time.Duration // before the next poll
}

func (b *bridgeAdapter) newTaskPoll(t *Task) *taskPoll {
	// The submit answer was just read: the first poll goes at once to a
	// long-polling bridge, after poll_interval otherwise.
	p := &taskPoll{b: b, id: t.ID, method: t.Method, wait: b.cfg.PollInterval,
		fails: b.poll.Follow(fmt.Sprintf("bridge task %s (%s)", t.ID, t.Method), "the bridge")}
	if b.longPoll > 0 {
		p.wait = 0
	}
	return p
}

// next waits its turn and polls once. It returns the task; or nil and nil
// after a failed poll that the policy retries (p.wait is the back-off);
// or the error that ends the job: the bridge forgot the task (404: it
// restarted, the outcome is unknown), or the policy's window is spent. When
// ctx ends it returns nil and ctx's error.
func (p *taskPoll) next(ctx context.Context, cur *Task) (*Task, error) {
	if err := p.b.poll.Sleep(ctx, p.wait); err != nil {
		return nil, err
	}
	var w Wait
	if p.b.longPoll > 0 {
		w = Wait{For: p.b.longPoll, Seen: cur.Version}
	}
	t, err := p.b.t.Task(ctx, p.id, w)
	if err == nil {
		p.fails.OK()
		p.wait = p.b.cfg.PollInterval
		if w.For > 0 && (t.Held || t.Version != cur.Version) {
			p.wait = 0 // the bridge waited for the change: ask again at once
		}
		return t, nil
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	status := 0
	var he *HTTPError
	if errors.As(err, &he) {
		if he.Status == http.StatusNotFound {
			return nil, fmt.Errorf("bridge task %s (%s) is gone (the bridge restarted?): outcome unknown", p.id, p.method)
		}
		status = he.Status
	}
	wait, gerr := p.fails.Failed(status, err)
	if gerr != nil {
		if status == 0 {
			p.b.lost(err)
		}
		return nil, gerr
	}
	p.wait = wait
	return nil, nil
}

// write runs a setter method and waits for its end.
func (b *bridgeAdapter) write(ctx context.Context, method, param string, v any) (binding.WriteStatus, error) {
	t, err := b.t.Submit(ctx, method, map[string]any{param: v}, 0)
	if err != nil {
		if _, ok := mhp.AsError(err); ok {
			return binding.Applied, err
		}
		b.lost(err)
		if adapters.Unreachable(err) {
			return binding.Applied, notSent(method, err)
		}
		return binding.Sent, err
	}
	p := b.newTaskPoll(t)
	for {
		switch t.Status {
		case TaskDone:
			return binding.Applied, nil
		case TaskFailed:
			// The machine raised: it reported the failure (known outcome).
			return binding.Applied, mhp.Errorf(mhp.CodeServerError, "%s(%s=%v) failed at the machine: %s", method, param, v, t.Error).
				With("error_type", t.ErrorType)
		case TaskQueued, TaskRunning:
		default:
			return binding.Sent, fmt.Errorf("%s(%s=%v): task %s ended %s: %s", method, param, v, t.ID, t.Status, t.Error)
		}
		next, err := p.next(ctx, t)
		switch {
		case next != nil:
			t = next
		case ctx.Err() != nil:
			return binding.Sent, fmt.Errorf("%s(%s=%v): no end state before the deadline", method, param, v)
		case err != nil:
			return binding.Sent, fmt.Errorf("%s(%s=%v): %w", method, param, v, err)
		}
	}
}

func (b *bridgeAdapter) estop(ctx context.Context) error {
	if !b.desc.Machine.Stop {
		return errors.New("the machine has no stop(): running tasks were not stopped at the machine")
	}
	r, err := b.m.Stop(ctx)
	if err != nil {
		return fmt.Errorf("bridge /stop: %w", err)
	}
	if !r.Stopped {
		return fmt.Errorf("machine.stop() failed: %s", r.Error)
	}
	return nil
}
