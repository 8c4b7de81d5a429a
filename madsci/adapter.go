package madsci

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/clock"
)

// Options are what a program, not the config file, gives New: the
// [adapters.Options] every adapter shares (clock, link clock, logger,
// Refine) and the node seam. Nil seams are filled from the [Config]: an
// HTTP [Client] of [Config.NodeURL] serves Node and Actions.
type Options struct {
	adapters.Options
	// Node reads the node's description, status and state and sends its
	// config writes and admin commands; nil = the HTTP client.
	Node Node
	// Actions submits actions and follows them; nil = the HTTP client.
	Actions Actions
	// RetryClock times the HTTP client's Retry-After waits; default real.
	RetryClock clock.Clock
	// HTTP is the http.Client of the HTTP client; default one of its own.
	HTTP *http.Client
}

// New builds an unstarted driver for the node cfg names: it validates cfg
// (zero options take their defaults), reads /info and /state (and
// /openapi.json when the layout is auto) to make the items, and attaches
// the adapter to the driver so the node's own word (errored, stopped) can
// latch the device in fault. With the node down it serves
// link.descriptor_cache (unless link.fail_fast) and reconnects. Start runs
// the status watch; Close stops it.
func New(ctx context.Context, cfg Config, opt Options) (*binding.Driver, error) {
	bc, a, err := build(ctx, cfg, opt)
	if err != nil {
		return nil, err
	}
	d, err := opt.Options.NewDriver(bc)
	if err != nil {
		return nil, err
	}
	a.attach(d)
	a.link.Attach(d.SetLink)
	return d, nil
}

// build makes the binding config of the node cfg names and the adapter
// behind its hooks.
func build(ctx context.Context, cfg Config, opt Options) (binding.Config, *adapter, error) {
	cfg = cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return binding.Config{}, nil, err
	}
	log := opt.Log()
	var client *Client
	if opt.Node == nil || opt.Actions == nil {
		c, err := NewClient(ClientOptions{URL: cfg.NodeURL, Layout: cfg.Layout, RequestTimeout: cfg.RequestTimeout,
			MaxRetryAfter: cfg.MaxRetryAfter, MaxRetries: cfg.MaxRetries, HTTP: opt.HTTP, Clock: opt.RetryClock})
		if err != nil {
			return binding.Config{}, nil, err
		}
		client = c
		if opt.Node == nil {
			opt.Node = c
		}
		if opt.Actions == nil {
			opt.Actions = c
		}
	}
	// The node may be down at start: serve the cached description, report
	// the link down and reconnect (see LinkConfig).
	desc, downErr := describe(ctx, cfg, opt.Node, client)
	if downErr != nil {
		var err error
		if desc, err = loadDescription(cfg, downErr); err != nil {
			return binding.Config{}, nil, err
		}
	} else if cfg.Link.DescriptorCache != "" {
		if err := adapters.SaveDescriptor(cfg.Link.DescriptorCache, Kind, cfg.NodeURL, desc); err != nil {
			log.Warn("madsci: descriptor cache not written", "err", err)
		}
	}
	if client != nil && desc.Layout != "" && desc.Layout != LayoutAuto {
		client.SetLayout(desc.Layout)
	}
	info := desc.Info
	var err error
	clk := opt.Clock
	if clk == nil {
		clk = clock.Real{}
	}
	a := &adapter{cfg: cfg, node: opt.Node, acts: opt.Actions, info: info, running: map[string]string{}, clk: clk,
		log: log, reachable: true, firstState: desc.State, poll: cfg.pollRetry(opt.PollClock)}
	if cfg.PollFailures > 0 {
		log.Warn("madsci: " + adapters.DeprecatedPollFailures(cfg.PollFailures))
	}
	a.status = &cached[*NodeStatus]{ttl: cfg.SignalCache, fetch: a.readStatus}
	a.state = &cached[map[string]any]{ttl: cfg.SignalCache, fetch: opt.Node.State}

	bc := binding.Config{Clock: opt.Clock, Logger: opt.Logger}
	cfg.Apply(&bc)
	if bc.Device.Make == "" {
		bc.Device.Make = "MADSci"
	}
	if bc.Device.Model == "" {
		bc.Device.Model = info.ModuleName
	}
	if bc.Device.Description == "" {
		bc.Device.Description = info.NodeDescription
	}
	if bc.Notes == "" {
		bc.Notes = fmt.Sprintf("MADSci node %q (%s %s) at %s; admin commands: %s.", info.NodeName, info.ModuleName,
			info.ModuleVersion, cfg.NodeURL, strings.Join(info.Capabilities.AdminCommands, ", "))
	}
	if bc.Signals, err = a.signals(ctx); err != nil {
		return binding.Config{}, nil, err
	}
	a.signalList = bc.Signals
	if *cfg.ConfigSettings {
		bc.Settings = a.settings()
	}
	if bc.Actions, err = a.actions(); err != nil {
		return binding.Config{}, nil, err
	}
	if err := a.checkOverrides(bc); err != nil {
		return binding.Config{}, nil, err
	}
	bc.EStop = a.estop
	bc.Verify = a.verify
	// A reset posts the node's reset, then waits for it to come back.
	bc.VerifyTimeout = a.cfg.ResetWait + 2*a.cfg.RequestTimeout
	a.link = adapters.NewLink(adapters.LinkOptions{Name: "madsci node " + cfg.NodeURL, Config: cfg.Link, Probe: a.probe,
		ProbeTimeout: 2 * cfg.RequestTimeout, Clock: opt.LinkClock, Logger: bc.Logger})
	if downErr != nil {
		a.link.Down(downErr)
	} else {
		a.link.Up()
	}
	bc.Setup = func(ctx context.Context) error {
		if a.link.Connected() {
			if _, err := a.readStatus(ctx); err != nil && (cfg.Link.FailFast || !linkDown(err)) {
				return fmt.Errorf("madsci: node %s unreachable: %w", cfg.NodeURL, err)
			}
		}
		a.link.Start()
		a.startWatch()
		return nil
	}
	bc.Close = a.close
	return bc, a, nil
}

// checkOverrides refuses overrides that name nothing the node has, so a
// typo never silently drops a limit or an approval.
func (a *adapter) checkOverrides(bc binding.Config) error {
	have := map[string]bool{}
	for _, s := range bc.Signals {
		have["signal:"+s.Spec.Name] = true
	}
	for k := range a.info.Config {
		have["setting:"+k] = true
	}
	for k := range a.info.Actions {
		have["action:"+k] = true
	}
	for _, k := range sortedNames(a.cfg.Signals) {
		if !have["signal:"+k] && !a.cfg.Signals[k].Hide {
			return fmt.Errorf("madsci: config overrides signal %q, which the node does not serve", k)
		}
	}
	for _, k := range sortedNames(a.cfg.Settings) {
		if infrastructureKey(k) && !a.cfg.Settings[k].Hide {
			return fmt.Errorf("madsci: config names setting %q, which is the node's own wiring (url, id, rate limiting, server options), never a run-time setting", k)
		}
		if !have["setting:"+k] {
			return fmt.Errorf("madsci: config overrides setting %q, which is not in the node's config", k)
		}
	}
	for _, k := range sortedNames(a.cfg.Actions) {
		if !have["action:"+k] {
			return fmt.Errorf("madsci: config overrides action %q, which the node does not declare", k)
		}
	}
	return nil
}

type adapter struct {
	cfg   Config
	node  Node
	acts  Actions
	info  *NodeInfo
	state *cached[map[string]any]
	// status caches /status for signals only; decisions read it live.
	status *cached[*NodeStatus]

	// signalList is read whole by verify.
	signalList []binding.Signal

	// clk times the status watch (the driver's clock).
	clk clock.Clock
	// poll times the action polls and retries their failures.
	poll adapters.PollRetry
	log  *slog.Logger

	mu      sync.Mutex
	running map[string]string // MHP job id -> node action id
	// drv is the driver the node's word latches in fault (set by attach).
	drv *binding.Driver
	// resetting counts verifies in progress; gen changes when one starts
	// or ends, so a status read that began before (or during) a reset
	// never faults the device after the reset recovered it.
	resetting int
	gen       uint64
	closed    bool
	// reachable is what the last status read said (for logging changes).
	reachable bool
	// firstState is the /state reply the state signals were built from.
	firstState map[string]any
	// link follows the connection to the node (see adapters.Link).
	link  *adapters.Link
	watch watcher
}

// cached serves one endpoint's reply for ttl.
type cached[T any] struct {
	ttl   time.Duration
	fetch func(context.Context) (T, error)
	mu    sync.Mutex
	at    time.Time
	val   T
	ok    bool
}

func (c *cached[T]) invalidate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ok = false
}

func (c *cached[T]) get(ctx context.Context) (T, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ok && c.ttl > 0 && time.Since(c.at) < c.ttl {
		return c.val, nil
	}
	v, err := c.fetch(ctx)
	if err != nil {
		c.ok = false
		var zero T
		return zero, err
	}
	c.val, c.at, c.ok = v, time.Now(), true
	return v, nil
}

// Status signal names.
const (
	SignalBusy           = "node.busy"
	SignalPaused         = "node.paused"
	SignalLocked         = "node.locked"
	SignalStopped        = "node.stopped"
	SignalErrored        = "node.errored"
	SignalDisconnected   = "node.disconnected"
	SignalInitializing   = "node.initializing"
	SignalReady          = "node.ready"
	SignalRunningActions = "node.running_actions"
)

func (a *adapter) signals(ctx context.Context) ([]binding.Signal, error) {
	var out []binding.Signal
	add := func(spec mhp.Signal, read func(context.Context) (binding.Sample, error)) {
		o, ok := a.cfg.Signals[spec.Name]
		if ok {
			if o.Hide {
				return
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
		out = append(out, binding.Signal{Spec: spec, Read: read})
	}
	taken := map[string]bool{}
	if *a.cfg.StatusSignals {
		flags := []struct {
			name, notes string
			get         func(*NodeStatus) bool
		}{
			{SignalBusy, "", func(s *NodeStatus) bool { return s.Busy }},
			{SignalPaused, "; a node left paused by its pause admin command (MADSci's pause ends the running action) refuses every " +
				"action until safety/reset sends the node's reset", func(s *NodeStatus) bool { return s.Paused }},
			{SignalLocked, "", func(s *NodeStatus) bool { return s.Locked }},
			{SignalStopped, "", func(s *NodeStatus) bool { return s.Stopped }},
			{SignalErrored, "", func(s *NodeStatus) bool { return s.Errored }},
			{SignalDisconnected, "", func(s *NodeStatus) bool { return s.Disconnected }},
			{SignalInitializing, "", func(s *NodeStatus) bool { return s.Initializing }},
			{SignalReady, "; false while the node is busy, paused, locked, stopped, errored, disconnected, initializing or " +
				"waiting for config: it then refuses every blocking action (the ready interlock refuses it here first)",
				func(s *NodeStatus) bool { return s.IsReady() }},
		}
		for _, f := range flags {
			get := f.get
			add(mhp.Signal{Name: f.name, Type: mhp.TypeBoolean, Notes: "from the node's GET /status" + f.notes},
				func(ctx context.Context) (binding.Sample, error) {
					st, err := a.status.get(ctx)
					if err != nil {
						return binding.Sample{}, binding.Unavailable("node /status: %v", err)
					}
					return binding.Sample{Value: get(st)}, nil
				})
			taken[f.name] = true
		}
		add(mhp.Signal{Name: SignalRunningActions, Type: mhp.TypeInteger, Notes: "number of actions the node runs"},
			func(ctx context.Context) (binding.Sample, error) {
				st, err := a.status.get(ctx)
				if err != nil {
					return binding.Sample{}, binding.Unavailable("node /status: %v", err)
				}
				return binding.Sample{Value: int64(len(st.RunningActions))}, nil
			})
		taken[SignalRunningActions] = true
	}
	flat := flatten(a.firstState)
	names := a.cfg.StateSignals
	if len(names) == 0 {
		names = sortedNames(flat)
	}
	for _, key := range names {
		if taken[key] {
			continue
		}
		taken[key] = true
		typ := inferType(flat[key])
		if _, ok := flat[key]; !ok {
			typ = mhp.TypeAny
		}
		key := key
		add(mhp.Signal{Name: key, Type: typ, Notes: "from the node's GET /state"},
			func(ctx context.Context) (binding.Sample, error) {
				st, err := a.state.get(ctx)
				if err != nil {
					return binding.Sample{}, binding.Unavailable("node /state: %v", err)
				}
				v, ok := flatten(st)[key]
				if !ok || v == nil {
					return binding.Sample{}, binding.Unavailable("node /state has no value for %s", key)
				}
				return binding.Sample{Value: v}, nil
			})
	}
	return out, nil
}

func (a *adapter) settings() []binding.Setting {
	shapes := configShapes(a.info.ConfigSchema)
	marked := runtimeKeys(a.info.ConfigSchema)
	var out []binding.Setting
	for _, key := range a.info.ConfigNames() {
		o, named := a.cfg.Settings[key]
		if o.Hide || (!named && !marked[key]) || infrastructureKey(key) {
			continue
		}
		spec := mhp.Setting{Name: key, Approval: o.Approval, Interlocks: o.Interlocks, DuringJob: o.DuringJob, Notes: o.Notes,
			Unit: o.Unit, Limits: o.Limits}
		if sh, ok := shapes[key]; ok {
			spec.Type = sh.Type
			if spec.Limits == nil {
				spec.Limits = sh.Limits
			}
			if spec.Notes == "" {
				spec.Notes = sh.Notes
			}
		}
		if spec.Type == "" {
			spec.Type = inferType(a.info.Config[key])
		}
		if o.Type != "" {
			spec.Type = o.Type
		}
		key := key
		out = append(out, binding.Setting{Spec: spec, Write: func(ctx context.Context, v any) (binding.WriteStatus, error) {
			err := a.node.SetConfig(ctx, key, v)
			if err == nil {
				return binding.Applied, nil
			}
			if _, ok := mhp.AsError(err); ok {
				return binding.Applied, err
			}
			return binding.Sent, fmt.Errorf("madsci: config %s=%v: %w", key, v, err)
		}})
	}
	return out
}

// actionPlan is what Run needs of one action besides the params.
type actionPlan struct {
	name      string
	files     map[string]bool // file arg names
	listFiles map[string]bool
	timeout   time.Duration
}

func (a *adapter) actions() ([]binding.Action, error) {
	caps := a.info.Capabilities
	var out []binding.Action
	for _, name := range a.info.ActionNames() {
		def := a.info.Actions[name]
		if def.Name == "" {
			def.Name = name
		}
		o := a.cfg.Actions[name]
		if o.Hide {
			continue
		}
		plan := &actionPlan{name: def.Name, files: map[string]bool{}, listFiles: map[string]bool{}, timeout: o.Timeout}
		if plan.timeout == 0 {
			plan.timeout = a.cfg.ActionTimeout
		}
		// Not pausable by default: MADSci's pause (the upstream example
		// module's) ends the running action with status paused and resume
		// only clears the node's flag. actions.<name>.pausable: true opts in
		// for a node whose pause really resumes.
		spec := mhp.Action{Name: def.Name, Duration: mhp.DurationLong, Notes: def.Description, Concurrent: !def.IsBlocking(),
			Cancellable: caps.Has(AdminCancel)}
		addParam := func(arg ArgDef, sh *mhp.Shape, optional bool) {
			if arg.Description != "" && sh.Notes == "" {
				sh.Notes = arg.Description
			}
			if !arg.Required {
				sh.Optional = true
				if arg.Default != nil {
					sh.Default = arg.Default
				}
			} else if optional && arg.Default != nil {
				sh.Default = arg.Default
			}
			spec.Params = append(spec.Params, mhp.Param{Name: arg.Name, Shape: sh})
		}
		for _, an := range sortedNames(def.Args) {
			arg := def.Args[an]
			if arg.Name == "" {
				arg.Name = an
			}
			sh, opt := shapeOfPython(arg.ArgumentType)
			addParam(arg, sh, opt)
		}
		for _, ln := range sortedNames(def.Locations) {
			arg := def.Locations[ln]
			if arg.Name == "" {
				arg.Name = ln
			}
			addParam(arg, locationShape(), false)
		}
		for _, fn := range sortedNames(def.Files) {
			arg := def.Files[fn]
			if arg.Name == "" {
				arg.Name = fn
			}
			plan.files[arg.Name] = true
			note := "path of a local file under the adapter's files_dir; uploaded to the node"
			sh := &mhp.Shape{Type: mhp.TypeString, Notes: note}
			if isListFile(arg.ArgumentType) {
				plan.listFiles[arg.Name] = true
				sh = &mhp.Shape{Type: mhp.TypeArray, Items: &mhp.Shape{Type: mhp.TypeString}, Notes: "paths of local files under the adapter's files_dir; uploaded to the node"}
			}
			arg.Default = nil
			addParam(arg, sh, false)
		}
		spec.Returns = resultShape(def)
		if a.cfg.Result == ResultJSON {
			// The job's result is json_result alone: so is the shape.
			jr := *spec.Returns.Properties["json_result"]
			if jr.Notes == "" {
				jr.Notes = spec.Returns.Notes
			}
			spec.Returns = &jr
		}
		if err := o.ApplyTo(&spec); err != nil {
			return nil, fmt.Errorf("madsci: %w", err)
		}
		if spec.Pausable && !(caps.Has(AdminPause) && caps.Has(AdminResume)) {
			return nil, fmt.Errorf("madsci: action %q: pausable needs the node to list pause and resume in admin_commands", def.Name)
		}
		if *a.cfg.ReadyInterlock && def.IsBlocking() && !contains(spec.Interlocks, SignalReady) {
			spec.Interlocks = append(spec.Interlocks, SignalReady)
		}
		act := binding.Action{Spec: spec, Timeout: plan.timeout, FaultOnFailure: o.FaultOnFailure,
			Run: func(ctx context.Context, job *binding.Job) (any, error) { return a.run(ctx, job, plan) }}
		if len(plan.files) > 0 {
			act.Validate = func(params map[string]any) error { _, err := a.localFiles(plan, params); return err }
		}
		if spec.Pausable {
			act.Pause = func(ctx context.Context, job *binding.Job) error { return a.nodeWide(ctx, job, AdminPause) }
			act.Resume = func(ctx context.Context, job *binding.Job) error { return a.nodeWide(ctx, job, AdminResume) }
		}
		out = append(out, act)
	}
	return out, nil
}

func resultShape(def ActionDef) *mhp.Shape {
	s := &mhp.Shape{Type: mhp.TypeObject, Properties: map[string]*mhp.Shape{
		"action_id":   {Type: mhp.TypeString},
		"json_result": {Type: mhp.TypeAny},
		"files":       {Type: mhp.TypeArray, Notes: "result file keys; fetch them from the node's /action/{action_id}/download"},
		"local_files": {Type: mhp.TypeArray, Notes: "with results_dir set: the result files downloaded, [{name, path, bytes}]"},
		"files_error": {Type: mhp.TypeString, Notes: "why the result files could not be downloaded"},
		"datapoints":  {Type: mhp.TypeObject, Notes: "label -> datapoint id"},
	}}
	var labels []string
	var jsonTypes []*mhp.Shape
	for _, l := range sortedNames(def.Results) {
		r := def.Results[l]
		labels = append(labels, fmt.Sprintf("%s (%s)", l, r.ResultType))
		if r.ResultType == "json" {
			jsonTypes = append(jsonTypes, schemaShape(r.JSONSchema))
		}
	}
	// One json result with a declared type: json_result has that type
	// (an int return is integer, a dict object), not any.
	if len(jsonTypes) == 1 && jsonTypes[0] != nil {
		s.Properties["json_result"] = jsonTypes[0]
	}
	if len(labels) > 0 {
		s.Notes = "node results: " + strings.Join(labels, ", ")
	}
	return s
}

// schemaShape is the shape of a json result's declared type: the schema's
// "data" property (MADSci wraps the value as {"data": ...}), else the schema
// itself; nil when it names no JSON type.
func schemaShape(schema map[string]any) *mhp.Shape {
	if schema == nil {
		return nil
	}
	if props, ok := schema["properties"].(map[string]any); ok {
		if data, ok := props["data"].(map[string]any); ok {
			schema = data
		}
	}
	t, _ := schema["type"].(string)
	if t == "" || t == "null" || !mhp.IsType(t) || t == mhp.TypeAny {
		return nil
	}
	sh := &mhp.Shape{Type: t}
	if t == mhp.TypeArray {
		if items, ok := schema["items"].(map[string]any); ok {
			sh.Items = schemaShape(items)
		}
	}
	return sh
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// localFiles resolves the file params to paths inside FilesDir; it refuses
// paths outside it and missing files (nothing is sent).
func (a *adapter) localFiles(plan *actionPlan, params map[string]any) (map[string][]string, error) {
	out := map[string][]string{}
	for arg := range plan.files {
		v, ok := params[arg]
		if !ok || v == nil {
			continue
		}
		var list []string
		switch x := v.(type) {
		case string:
			list = []string{x}
		case []any:
			for _, e := range x {
				s, ok := e.(string)
				if !ok {
					return nil, mhp.Errorf(mhp.CodeInvalidValue, "%s: file paths must be strings", arg).With("field", arg)
				}
				list = append(list, s)
			}
		default:
			return nil, mhp.Errorf(mhp.CodeInvalidValue, "%s: a file param names a local path", arg).With("field", arg)
		}
		if a.cfg.FilesDir == "" {
			return nil, mhp.Errorf(mhp.CodeForbidden, "%s: file uploads are disabled (the adapter config has no files_dir)", arg).With("field", arg)
		}
		root, err := filepath.Abs(a.cfg.FilesDir)
		if err != nil {
			return nil, mhp.Errorf(mhp.CodeInvalidValue, "files_dir: %v", err)
		}
		for _, p := range list {
			full := p
			if !filepath.IsAbs(full) {
				full = filepath.Join(root, full)
			}
			full = filepath.Clean(full)
			if resolved, err := filepath.EvalSymlinks(full); err == nil {
				full = resolved
			}
			if rr, err := filepath.EvalSymlinks(root); err == nil {
				root = rr
			}
			rel, err := filepath.Rel(root, full)
			if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
				return nil, mhp.Errorf(mhp.CodeForbidden, "%s: %q is outside the adapter's files_dir", arg, p).With("field", arg)
			}
			fi, err := os.Stat(full)
			if err != nil || !fi.Mode().IsRegular() {
				return nil, mhp.Errorf(mhp.CodeInvalidValue, "%s: %q is not a readable file under files_dir", arg, p).With("field", arg)
			}
			out[arg] = append(out[arg], full)
		}
	}
	return out, nil
}

// estop posts safety_stop when the node implements it. Otherwise it sends
// the node's cancel and lock (so nothing new starts) and reports that no
// e-stop exists.
func (a *adapter) estop(ctx context.Context) error {
	caps := a.info.Capabilities
	if caps.Has(AdminSafetyStop) {
		r, err := a.node.Admin(ctx, AdminSafetyStop)
		if err != nil {
			return fmt.Errorf("madsci: safety_stop: %w", err)
		}
		if !r.Success {
			return fmt.Errorf("madsci: the node refused safety_stop: %s", messages(r.Errors))
		}
		return nil
	}
	var sent []string
	for _, cmd := range []string{AdminCancel, AdminLock} {
		if cmd == AdminCancel && !caps.Has(cmd) {
			continue
		}
		if r, err := a.node.Admin(ctx, cmd); err == nil && r.Success {
			sent = append(sent, cmd)
		}
	}
	return fmt.Errorf("madsci: the node does not implement safety_stop (admin_commands: [%s]); sent instead: [%s]; motion is not known to have stopped",
		strings.Join(caps.AdminCommands, ", "), strings.Join(sent, ", "))
}

// verify resets the node (when configured) and waits until it is not
// stopped, errored or initializing.
func (a *adapter) verify(ctx context.Context) error {
	a.beginReset()
	defer a.endReset()
	st, err := a.readStatus(ctx)
	if err != nil {
		return fmt.Errorf("madsci: node /status: %w", err)
	}
	// The node's reset runs shutdown and startup again: send it only when
	// the node needs it (stopped, errored, locked or paused) and lists it.
	// Without it, the wait below still refuses the reset until the node
	// is no longer errored or stopped (recovered some other way). A stop
	// that lands after the first read (the fault hook's safety_stop runs
	// on its own goroutine) gets the node's reset from the wait below.
	sent := false
	resetNode := func(ctx context.Context, st *NodeStatus) error {
		if sent || !*a.cfg.ResetNode || !a.info.Capabilities.Has(AdminReset) || !(st.Stopped || st.Errored || st.Locked || st.Paused) {
			return nil
		}
		sent = true
		r, err := a.node.Admin(ctx, AdminReset)
		if err != nil {
			return fmt.Errorf("madsci: reset: %w", err)
		}
		if !r.Success {
			return fmt.Errorf("madsci: the node refused reset: %s", messages(r.Errors))
		}
		return nil
	}
	if err := resetNode(ctx, st); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, a.cfg.ResetWait)
	defer cancel()
	delay := a.cfg.PollInterval
	// last is the newest status the node answered (at first, the one read
	// before the reset): a read cut by the deadline must not hide it.
	last := st
	for {
		st, err := a.readStatus(wctx)
		if err == nil {
			last = st
			if err := resetNode(wctx, st); err != nil {
				return err
			}
		}
		if err == nil && !st.Stopped && !st.Errored && !st.Initializing && !st.Disconnected {
			// The node is ready; the binding reads the signals next.
			a.status.invalidate()
			a.state.invalidate()
			return nil
		}
		if err := sleepReal(wctx, delay); err != nil {
			if last != nil {
				why := strings.Join(last.NotReadyReasons(), ", ")
				if last.Errored {
					why += "; node errors: " + lastErrors(last.Errors, 3)
				}
				return fmt.Errorf("madsci: the node did not recover within %v: still %s", a.cfg.ResetWait, why)
			}
			return fmt.Errorf("madsci: the node did not answer /status within %v", a.cfg.ResetWait)
		}
		if delay = delay * 3 / 2; delay > a.cfg.PollMax {
			delay = a.cfg.PollMax
		}
	}
}

// resultOf is the job result of a succeeded action.
func resultOf(r *ActionResult) map[string]any {
	out := map[string]any{"action_id": r.ActionID, "json_result": r.JSONResult}
	if r.Files != nil {
		out["files"] = r.Files
	}
	if len(r.Datapoints) > 0 {
		dp := map[string]any{}
		for k, v := range r.Datapoints {
			dp[k] = v
		}
		out["datapoints"] = dp
	}
	return out
}
