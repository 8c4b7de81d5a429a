package opcua

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/gopcua/opcua/ua"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
)

// LADSNamespace is the namespace URI of LADS (OPC 30500-1).
const LADSNamespace = "http://opcfoundation.org/UA/LADS/"

// LADS state ids (numeric, in the LADS namespace) and their names.
var ladsStates = map[uint32]string{
	5085: "Stopped", 5099: "Running", 5100: "Stopping", 5159: "Aborting", 5160: "Aborted", 5143: "Clearing",
	// RunningStateMachine
	5120: "Idle", 5117: "Starting", 5168: "Execute", 5127: "Completing", 5128: "Complete", 5119: "Resetting",
	5123: "Holding", 5124: "Held", 5125: "Unholding", 5118: "Suspending", 5121: "Suspended", 5122: "Unsuspending",
}

// ladsUnit is a functional unit's resolved nodes.
type ladsUnit struct {
	unit       *ua.NodeID
	stateMach  *ua.NodeID // FunctionalUnitState: the object the methods are called on
	state      *ua.NodeID // FunctionalUnitState/CurrentState
	stateID    *ua.NodeID // FunctionalUnitState/CurrentState/Id (may be nil)
	runState   *ua.NodeID // .../RunningStateMachine/CurrentState (may be nil)
	runStateID *ua.NodeID
	methods    map[string]*ua.NodeID // Start, StartProgram, Stop, Abort, Clear
	runtime    *ua.NodeID            // ProgramManager/ActiveProgram/CurrentRuntime
	estimate   *ua.NodeID            // .../EstimatedRuntime
	runID      *ua.NodeID            // .../DeviceProgramRunId
	resultSet  *ua.NodeID            // ProgramManager/ResultSet
	startArgs  map[string][]*ua.Argument
}

// children browses a node and returns its children by browse name (the
// name only: the namespace of browse names differs between servers).
func children(ctx context.Context, cl Client, n *ua.NodeID) (map[string]*ua.NodeID, error) {
	refs, err := cl.Browse(ctx, n)
	if err != nil {
		return nil, err
	}
	out := map[string]*ua.NodeID{}
	for _, r := range refs {
		if r.BrowseName == nil || r.NodeID == nil || r.NodeID.NodeID == nil {
			continue
		}
		if _, dup := out[r.BrowseName.Name]; !dup {
			out[r.BrowseName.Name] = r.NodeID.NodeID
		}
	}
	return out, nil
}

// errUnsupportedKind: a lads action's node is of a kind the adapter cannot
// run (a LADS control function): the action is refused NotSupported,
// nothing sent, rather than as a server refusal.
type errUnsupportedKind struct{ kind string }

func (e errUnsupportedKind) Error() string {
	return "the node is " + e.kind + "; lads actions run functional units only (map a control function's TargetValue as a setting and its CurrentValue as a signal)"
}

// resolveLADS browses a functional unit for the nodes a job needs.
func resolveLADS(ctx context.Context, cl Client, unit *ua.NodeID) (*ladsUnit, error) {
	u := &ladsUnit{unit: unit, methods: map[string]*ua.NodeID{}, startArgs: map[string][]*ua.Argument{}}
	top, err := children(ctx, cl, unit)
	if err != nil {
		return nil, err
	}
	sm, ok := top["FunctionalUnitState"]
	if !ok {
		if _, fn := top["ControlFunctionState"]; fn {
			return nil, errUnsupportedKind{"a LADS control function (it has ControlFunctionState, not FunctionalUnitState)"}
		}
		return nil, errors.New("no FunctionalUnitState")
	}
	u.stateMach = sm
	smc, err := children(ctx, cl, sm)
	if err != nil {
		return nil, err
	}
	if u.state, ok = smc["CurrentState"]; !ok {
		return nil, errors.New("no FunctionalUnitState/CurrentState")
	}
	if cs, err := children(ctx, cl, u.state); err == nil {
		u.stateID = cs["Id"]
	}
	for _, m := range []string{"Start", "StartProgram", "Stop", "Abort", "Clear"} {
		if n, ok := smc[m]; ok {
			u.methods[m] = n
		}
	}
	if rsm, ok := smc["RunningStateMachine"]; ok {
		if rc, err := children(ctx, cl, rsm); err == nil {
			u.runState = rc["CurrentState"]
			if u.runState != nil {
				if cs, err := children(ctx, cl, u.runState); err == nil {
					u.runStateID = cs["Id"]
				}
			}
		}
	}
	if pm, ok := top["ProgramManager"]; ok {
		if pmc, err := children(ctx, cl, pm); err == nil {
			u.resultSet = pmc["ResultSet"]
			if ap, ok := pmc["ActiveProgram"]; ok {
				if apc, err := children(ctx, cl, ap); err == nil {
					u.runtime = apc["CurrentRuntime"]
					u.estimate = apc["EstimatedRuntime"]
					u.runID = apc["DeviceProgramRunId"]
				}
			}
		}
	}
	return u, nil
}

// stateName decodes a state value: an Id (NodeId) in the LADS namespace,
// else the CurrentState text.
func (a *adapter) stateName(dv *ua.DataValue) string {
	if dv == nil || dv.Value == nil || isBad(dv.Status) {
		return ""
	}
	switch v := dv.Value.Value().(type) {
	case *ua.NodeID:
		a.mu.Lock()
		ns := a.ladsNS
		a.mu.Unlock()
		if v != nil && (ns < 0 || int(v.Namespace()) == ns) {
			if n, ok := ladsStates[v.IntID()]; ok {
				return n
			}
		}
		return ""
	case *ua.LocalizedText:
		if v != nil {
			return v.Text
		}
	case string:
		return v
	}
	return ""
}

// ladsKeyValue is LADS KeyValueType {Key String, Value String}.
type ladsKeyValue struct {
	Key   string
	Value string
}

// event is one value of a job's subscription.
type event struct {
	i  int
	dv *ua.DataValue
}

// watchList fixes the shared state nodes (resolved at the first
// connection) and returns them.
func (a *adapter) watchList() (list []*ua.NodeID, idx map[string]int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	idx = map[string]int{}
	add := func(n *ua.NodeID) {
		if n == nil {
			return
		}
		if _, ok := idx[n.String()]; ok {
			return
		}
		idx[n.String()] = len(list)
		list = append(list, n)
	}
	// Sorted: the same structure gives the same list, so a reconnect to an
	// unchanged server keeps the subscription.
	for _, k := range slices.Sorted(maps.Keys(a.units)) {
		u := a.units[k]
		add(u.stateID)
		add(u.state)
		add(u.runStateID)
		add(u.runState)
		add(u.runtime)
		add(u.estimate)
	}
	for _, k := range slices.Sorted(maps.Keys(a.progs)) {
		add(a.progs[k].state)
	}
	return list, idx
}

// listener is a job listening to the shared subscription.
type listener struct {
	slots map[int][]int // shared index -> the job's indexes
	ch    chan event
}

// onWatch records a shared state value and hands it to the listening jobs.
func (a *adapter) onWatch(i int, dv *ua.DataValue) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if i < 0 || i >= len(a.watchLatest) {
		return
	}
	a.watchLatest[i] = dv
	for _, l := range a.listeners {
		for _, k := range l.slots[i] {
			select {
			case l.ch <- event{k, dv}:
			default:
			}
		}
	}
}

// watchState returns the values of nodes (nil entries skipped, indexes
// kept), current values first: from the shared subscription when it
// carries them all, else from a subscription of the job's own.
func (a *adapter) watchState(ctx context.Context, cl Client, nodes []*ua.NodeID) (<-chan event, func(), error) {
	a.mu.Lock()
	l := &listener{slots: map[int][]int{}, ch: make(chan event, 1024)}
	shared := a.watchIdx != nil
	for k, n := range nodes {
		if n == nil {
			continue
		}
		i, ok := a.watchIdx[n.String()]
		if !ok {
			shared = false
			break
		}
		l.slots[i] = append(l.slots[i], k)
	}
	if !shared {
		a.mu.Unlock()
		return watch(ctx, cl, nodes)
	}
	id := a.nextListener
	a.nextListener++
	if a.listeners == nil {
		a.listeners = map[int]*listener{}
	}
	a.listeners[id] = l
	for i, ks := range l.slots {
		if dv := a.watchLatest[i]; dv != nil {
			for _, k := range ks {
				l.ch <- event{k, dv}
			}
		}
	}
	a.mu.Unlock()
	return l.ch, func() {
		a.mu.Lock()
		delete(a.listeners, id)
		a.mu.Unlock()
	}, nil
}

// watch subscribes to nodes (nil entries are skipped, keeping indexes) and
// returns a channel of their values.
func watch(ctx context.Context, cl Client, nodes []*ua.NodeID) (<-chan event, func(), error) {
	var ids []*ua.NodeID
	var idx []int
	for i, n := range nodes {
		if n != nil {
			ids = append(ids, n)
			idx = append(idx, i)
		}
	}
	ch := make(chan event, 1024)
	stop, err := cl.Subscribe(ctx, ids, func(k int, dv *ua.DataValue) {
		if k < 0 || k >= len(idx) {
			return
		}
		select {
		case ch <- event{idx[k], dv}:
		default: // a job that stopped listening
		}
	})
	if err != nil {
		return nil, nil, err
	}
	return ch, stop, nil
}

// Indexes of a LADS job's watched nodes.
const (
	wState = iota
	wRunState
	wRuntime
	wEstimate
)

func (a *adapter) runLADS(item ActionItem) func(context.Context, *binding.Job) (any, error) {
	spec := item.LADS
	return func(ctx context.Context, job *binding.Job) (any, error) {
		a.mu.Lock()
		u := a.units[spec.FunctionalUnit]
		cl := a.cl
		a.mu.Unlock()
		what := "action " + item.Name
		if cl == nil {
			return nil, transportError(what, ErrNotConnected)
		}
		if u == nil {
			var err error
			if u, err = resolveLADS(ctx, cl, a.node(spec.FunctionalUnit)); err != nil {
				var kind errUnsupportedKind
				if errors.As(err, &kind) {
					return nil, mhp.Errorf(mhp.CodeNotSupported, "%s: lads.functional_unit %s: %v; nothing was sent", what, spec.FunctionalUnit, err).
						With("reason", "unsupported_kind")
				}
				return nil, refusalError(fmt.Sprintf("%s: functional unit %s: %v", what, spec.FunctionalUnit, err), ua.StatusBadNodeIDUnknown)
			}
			a.mu.Lock()
			a.units[spec.FunctionalUnit] = u
			a.mu.Unlock()
		}
		start, ok := u.methods[spec.Start]
		if !ok {
			return nil, refusalError(fmt.Sprintf("%s: functional unit %s has no %s method", what, spec.FunctionalUnit, spec.Start), ua.StatusBadMethodInvalid)
		}
		stateNode := u.stateID
		if stateNode == nil {
			stateNode = u.state
		}
		runNode := u.runStateID
		if runNode == nil {
			runNode = u.runState
		}
		// Watch before starting, so that no transition is missed.
		wctx, wcancel := a.callCtx(ctx)
		events, stop, err := a.watchState(wctx, cl, []*ua.NodeID{stateNode, runNode, u.runtime, u.estimate})
		wcancel()
		if err != nil {
			return nil, transportError(what+": watch the functional unit state", err)
		}
		defer stop()
		t := &ladsJob{a: a, job: job, what: what, u: u, events: events, spec: spec}
		if err := t.awaitInitial(ctx); err != nil {
			return nil, err
		}
		in, err := a.ladsInputs(item, job, u, spec)
		if err != nil {
			return nil, err
		}
		cctx, cancel := a.callCtx(ctx)
		res, err := a.call(cctx, fmt.Sprintf("%s: call %s on %s", what, spec.Start, spec.FunctionalUnit), u.stateMach, start, in)
		cancel()
		if err != nil {
			return nil, err
		}
		if spec.Start == "StartProgram" && len(res.OutputArguments) > 0 {
			if s, ok := res.OutputArguments[0].Value().(string); ok {
				t.runID = s
			}
		}
		return t.follow(ctx)
	}
}

// ladsInputs builds Start(Properties) or StartProgram(ProgramTemplateId,
// Properties, SupervisoryJobId, SupervisoryTaskId, Samples) from the job.
func (a *adapter) ladsInputs(item ActionItem, job *binding.Job, u *ladsUnit, spec *LADSSpec) ([]*ua.Variant, error) {
	params := job.Params()
	template := spec.ProgramTemplate
	var keys []string
	for _, p := range item.Params {
		keys = append(keys, p.Name)
	}
	if spec.Start == "Start" {
		kvs := make([]*ua.ExtensionObject, 0, len(keys))
		for _, k := range keys {
			v, ok := params[k]
			if !ok {
				continue
			}
			vv, err := toVariant("action "+item.Name+" param "+k, v, 0)
			if err != nil {
				return nil, err
			}
			kvs = append(kvs, ua.NewExtensionObject(&ua.KeyValuePair{Key: &ua.QualifiedName{Name: k}, Value: vv}))
		}
		v, err := ua.NewVariant(kvs)
		if err != nil {
			return nil, err
		}
		return []*ua.Variant{v}, nil
	}
	a.mu.Lock()
	ns := a.ladsNS
	a.mu.Unlock()
	if ns < 0 {
		return nil, refusalError("action "+item.Name+": StartProgram needs the LADS namespace on the server", ua.StatusBadNodeIDUnknown)
	}
	kvType := ua.NewNumericExpandedNodeID(uint16(ns), 5045)
	kvs := make([]*ua.ExtensionObject, 0, len(keys))
	for _, k := range keys {
		v, ok := params[k]
		if !ok {
			continue
		}
		if k == "program_template" {
			if s, ok := v.(string); ok {
				template = s
			}
			continue
		}
		var s string
		switch x := v.(type) {
		case string:
			s = x
		default:
			b, err := json.Marshal(x)
			if err != nil {
				return nil, err
			}
			s = string(b)
		}
		kvs = append(kvs, &ua.ExtensionObject{EncodingMask: ua.ExtensionObjectBinary, TypeID: kvType, Value: &ladsKeyValue{Key: k, Value: s}})
	}
	mk := func(x any) *ua.Variant { v, _ := ua.NewVariant(x); return v }
	return []*ua.Variant{mk(template), mk(kvs), mk(job.ID()), mk(item.Name), mk([]*ua.ExtensionObject{})}, nil
}

// ladsJob follows one LADS run to its end.
type ladsJob struct {
	a      *adapter
	job    *binding.Job
	what   string
	u      *ladsUnit
	spec   *LADSSpec
	events <-chan event
	runID  string

	state       string
	sawRunning  bool
	sawComplete bool
	cancelSent  string // "Stop" or "Abort" once sent
	runtime     float64
	estimate    float64
	lastP       float64
	disconnects int
}

// apply records one event.
func (t *ladsJob) apply(e event) {
	switch e.i {
	case wState:
		if e.dv != nil && codeOnly(e.dv.Status) == ua.StatusBadServerNotConnected {
			t.disconnects++
			t.state = ""
			return
		}
		if s := t.a.stateName(e.dv); s != "" {
			t.state = s
			if s == "Running" || s == "Stopping" || s == "Aborting" {
				t.sawRunning = true
			}
		}
	case wRunState:
		switch t.a.stateName(e.dv) {
		case "Complete", "Completing":
			// Only the main state says the run started: the two state
			// machines' notifications are not ordered.
			t.sawComplete = true
		}
	case wRuntime, wEstimate:
		if e.dv == nil || isBad(e.dv.Status) || e.dv.Value == nil {
			if e.i == wEstimate {
				t.estimate = 0
			}
			break
		}
		f, ok := mhp.Number(fromVariant(e.dv.Value))
		if !ok {
			break
		}
		if e.i == wRuntime {
			t.runtime = f
		} else {
			t.estimate = f
		}
	}
	t.report()
}

// report publishes progress (CurrentRuntime / EstimatedRuntime) once the
// run is seen running: the values arrive in any order.
func (t *ladsJob) report() {
	if t.estimate <= 0 || !t.sawRunning {
		return
	}
	p := t.runtime / t.estimate
	if p > 0.99 {
		p = 0.99 // done comes from the state, not the clock
	}
	if p < 0 {
		p = 0
	}
	if p == t.lastP {
		return
	}
	t.lastP = p
	t.job.Progress(p, map[string]any{"eta_s": (t.estimate - t.runtime) / 1000})
}

// awaitInitial waits for the unit's current state: it must be Stopped.
func (t *ladsJob) awaitInitial(ctx context.Context) error {
	deadline := time.NewTimer(seconds(t.a.cfg.Timeouts.RequestS))
	defer deadline.Stop()
	for t.state == "" {
		select {
		case e := <-t.events:
			t.apply(e)
		case <-deadline.C:
			return transportError(t.what+": functional unit state", ua.StatusBadServerNotConnected)
		case <-ctx.Done():
			return transportError(t.what, ua.StatusBadServerNotConnected)
		}
	}
	// Drain what is already queued (the initial values of the other nodes).
	for {
		select {
		case e := <-t.events:
			t.apply(e)
			continue
		default:
		}
		break
	}
	if t.state != "Stopped" {
		// The shared subscription lags the server (a reset may just have
		// cleared the unit): ask the server before refusing.
		if st := t.liveState(ctx); st == "Stopped" {
			return nil
		} else if st != "" {
			t.state = st
		}
	}
	if t.state != "Stopped" {
		why := fmt.Sprintf("%s: functional unit %s is %s, not Stopped", t.what, t.spec.FunctionalUnit, t.state)
		if t.state == "Aborted" {
			// A cancel by Abort (or an estop) leaves a LADS unit Aborted
			// until Clear: safety/reset clears it.
			why += " (an Abort leaves it there until Clear: run safety/reset, which clears an Aborted unit, then invoke again)"
		}
		return refusalError(why, ua.StatusBadInvalidState).With("lads_state", t.state)
	}
	// Whatever ran before is not ours: its completion and runtime.
	t.sawRunning, t.sawComplete, t.runtime, t.lastP = false, false, 0, 0
	return nil
}

// follow waits for the run's terminal state and maps it onto the job.
func (t *ladsJob) follow(ctx context.Context) (any, error) {
	startBy := time.NewTimer(seconds(t.a.cfg.Timeouts.StartS))
	defer startBy.Stop()
	ctxDone := ctx.Done()
	var giveUp <-chan time.Time
	for {
		if t.sawRunning {
			switch t.state {
			case "Stopped":
				return t.stopped(ctx)
			case "Aborted":
				// We asked it to stop (Stop, Abort, or the estop that
				// cancelled this job, which LADS devices answer by aborting).
				if t.cancelSent != "" || ctx.Err() != nil {
					return nil, binding.ErrCancelled
				}
				return nil, binding.Failed(fmt.Errorf("%s: the functional unit aborted", t.what),
					map[string]any{"lads_state": "Aborted", "device_program_run_id": t.runID})
			}
		}
		select {
		case e := <-t.events:
			t.apply(e)
		case <-startBy.C:
			if !t.sawRunning {
				// Accepted but never seen running: resolve by the result.
				if t.state == "Stopped" {
					return t.stopped(ctx)
				}
				return nil, fmt.Errorf("%s: %s was accepted but the functional unit did not reach Running within %gs (state %q): outcome unknown",
					t.what, t.spec.Start, t.a.cfg.Timeouts.StartS, t.state)
			}
		case <-ctxDone:
			ctxDone = nil
			if err := t.sendCancel(ctx); err != nil {
				return nil, err
			}
			tm := time.NewTimer(seconds(t.a.cfg.Timeouts.CancelS))
			defer tm.Stop()
			giveUp = tm.C
		case <-giveUp:
			return nil, fmt.Errorf("%s: no final state within %gs of %s (state %q): outcome unknown", t.what, t.a.cfg.Timeouts.CancelS, t.cancelSent, t.state)
		}
	}
}

// sendCancel records the intent, then calls Stop (or Abort). A refusal
// (already stopping, BadInvalidState) is fine: the state says the rest.
func (t *ladsJob) sendCancel(ctx context.Context) error {
	m := t.spec.CancelWith
	n, ok := t.u.methods[m]
	if !ok {
		if n, ok = t.u.methods["Abort"]; ok {
			m = "Abort"
		} else {
			return fmt.Errorf("%s: cannot cancel: the functional unit has no Stop or Abort: outcome unknown", t.what)
		}
	}
	t.cancelSent = m
	cctx, cancel := t.a.callCtx(ctx)
	defer cancel()
	_, err := t.a.call(cctx, fmt.Sprintf("%s: call %s", t.what, m), t.u.stateMach, n, nil)
	if err == nil {
		return nil
	}
	if _, refused := mhp.AsError(err); refused {
		return nil
	}
	var fe *binding.FailedError
	if errors.As(err, &fe) {
		return nil
	}
	return fmt.Errorf("%s: %w", t.what, err)
}

// stopped maps a Stopped end: complete -> done, our Stop -> cancelled,
// otherwise the result set decides.
func (t *ladsJob) stopped(ctx context.Context) (any, error) {
	out := map[string]any{"lads_state": "Stopped"}
	if t.runID != "" {
		out["device_program_run_id"] = t.runID
	}
	if t.sawComplete {
		t.addResult(ctx, out)
		return out, nil
	}
	if t.cancelSent == "Stop" {
		return nil, binding.ErrCancelled
	}
	if t.runID != "" {
		found, vars := t.findResult(ctx)
		if found {
			for k, v := range vars {
				out[k] = v
			}
			return out, nil
		}
	}
	return nil, fmt.Errorf("%s: the functional unit stopped without completing, without our Stop, and no result confirms the run: outcome unknown", t.what)
}

func (t *ladsJob) addResult(ctx context.Context, out map[string]any) {
	if t.runID == "" {
		return
	}
	if found, vars := t.findResult(ctx); found {
		for k, v := range vars {
			out[k] = v
		}
	}
}

// findResult looks in ResultSet for the result of our DeviceProgramRunId
// and returns its VariableSet values.
func (t *ladsJob) findResult(ctx context.Context) (bool, map[string]any) {
	cl := t.a.client()
	if cl == nil || t.u.resultSet == nil {
		return false, nil
	}
	rctx, cancel := t.a.callCtx(ctx)
	defer cancel()
	results, err := children(rctx, cl, t.u.resultSet)
	if err != nil {
		return false, nil
	}
	for _, r := range results {
		rc, err := children(rctx, cl, r)
		if err != nil {
			continue
		}
		idn, ok := rc["DeviceProgramRunId"]
		if !ok {
			continue
		}
		res, err := cl.Read(rctx, []*ua.ReadValueID{{NodeID: idn, AttributeID: ua.AttributeIDValue}})
		if err != nil || isBad(res[0].Status) || res[0].Value == nil {
			continue
		}
		if s, _ := res[0].Value.Value().(string); s != t.runID {
			continue
		}
		vars := map[string]any{}
		if vs, ok := rc["VariableSet"]; ok {
			if vc, err := children(rctx, cl, vs); err == nil {
				var names []string
				var req []*ua.ReadValueID
				for name, n := range vc {
					names = append(names, name)
					req = append(req, &ua.ReadValueID{NodeID: n, AttributeID: ua.AttributeIDValue})
				}
				if len(req) > 0 {
					if vals, err := cl.Read(rctx, req); err == nil {
						for i, dv := range vals {
							if !isBad(dv.Status) {
								vars[strings.TrimSpace(names[i])] = fromVariant(dv.Value)
							}
						}
					}
				}
			}
		}
		return true, vars
	}
	return false, nil
}

// liveState reads the unit's state at the server ("" when unreadable).
func (t *ladsJob) liveState(ctx context.Context) string {
	cl := t.a.client()
	if cl == nil {
		return ""
	}
	node := t.u.state
	if t.u.stateID != nil {
		node = t.u.stateID
	}
	rctx, cancel := context.WithTimeout(ctx, seconds(t.a.cfg.Timeouts.RequestS))
	defer cancel()
	res, err := cl.Read(rctx, []*ua.ReadValueID{{NodeID: node, AttributeID: ua.AttributeIDValue}})
	if err != nil {
		return ""
	}
	return t.a.stateName(res[0])
}

// haltedLADS reports a LADS unit state in which nothing runs: Stopped, or
// Aborted (and the transient Stopping/Aborting on the way there).
func haltedLADS(st string) bool {
	switch st {
	case "Stopped", "Aborted", "Stopping", "Aborting":
		return true
	}
	return false
}

// unitStateOf reads the current state of the resolved functional unit whose
// FunctionalUnitState is obj (the object an estop method is called on);
// isUnit is false when obj is no such unit's.
func (a *adapter) unitStateOf(ctx context.Context, obj *ua.NodeID) (state string, isUnit bool) {
	a.mu.Lock()
	var u *ladsUnit
	for _, x := range a.units {
		if x.stateMach.String() == obj.String() || x.unit.String() == obj.String() {
			u = x
		}
	}
	a.mu.Unlock()
	cl := a.client()
	if u == nil || cl == nil {
		return "", false
	}
	node := u.state
	if u.stateID != nil {
		node = u.stateID
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), seconds(a.cfg.Timeouts.RequestS))
	defer cancel()
	res, err := cl.Read(rctx, []*ua.ReadValueID{{NodeID: node, AttributeID: ua.AttributeIDValue}})
	if err != nil {
		return "", true
	}
	return a.stateName(res[0]), true
}

// verifyUnits is the LADS part of a reset's verification: every functional
// unit of a LADS action must be able to Start, that is, be Stopped. A unit
// left Aborted (an estop during a program aborts it on LADS devices) is
// cleared with Clear, and one in a transient state (Stopping, Aborting,
// Clearing) is waited for, within ctx and timeouts.cancel_s. Anything
// else is an error saying what the unit needs.
func (a *adapter) verifyUnits(ctx context.Context, cl Client) error {
	a.mu.Lock()
	keys := slices.Sorted(maps.Keys(a.units))
	units := make([]*ladsUnit, len(keys))
	for i, k := range keys {
		units[i] = a.units[k]
	}
	a.mu.Unlock()
	for i, u := range units {
		if err := a.verifyUnit(ctx, cl, keys[i], u); err != nil {
			return err
		}
	}
	return nil
}

func (a *adapter) verifyUnit(ctx context.Context, cl Client, name string, u *ladsUnit) error {
	deadline := time.Now().Add(seconds(a.cfg.Timeouts.CancelS))
	node := u.state
	if u.stateID != nil {
		node = u.stateID
	}
	cleared := false
	last := ""
	for {
		res, err := cl.Read(ctx, []*ua.ReadValueID{{NodeID: node, AttributeID: ua.AttributeIDValue}})
		if err != nil {
			return fmt.Errorf("opcua: verify: functional unit %s: read its state: %w", name, err)
		}
		st := a.stateName(res[0])
		switch st {
		case "Stopped":
			return nil
		case "Aborted":
			if cleared {
				break // Clear accepted; the unit is on its way
			}
			m := u.methods["Clear"]
			if m == nil {
				return fmt.Errorf("opcua: verify: functional unit %s is Aborted and has no Clear method: clear it at the device; until then it cannot Start", name)
			}
			cctx, cancel := a.callCtx(ctx)
			_, err := a.call(cctx, fmt.Sprintf("verify: functional unit %s: Clear", name), u.stateMach, m, nil)
			cancel()
			if err != nil {
				return fmt.Errorf("opcua: verify: functional unit %s is Aborted and Clear failed: %w", name, err)
			}
			a.log.Info("opcua: reset cleared an Aborted functional unit", "unit", name)
			cleared = true
		case "Stopping", "Aborting", "Clearing":
			// transient: wait for it to settle
		case "":
			return fmt.Errorf("opcua: verify: functional unit %s: state unreadable (%s)", name, StatusName(res[0].Status))
		default:
			return fmt.Errorf("opcua: verify: functional unit %s is %s, not Stopped: it cannot Start; stop it at the device", name, st)
		}
		last = st
		if time.Now().After(deadline) {
			return fmt.Errorf("opcua: verify: functional unit %s still %s after %gs; it cannot Start", name, last, a.cfg.Timeouts.CancelS)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("opcua: verify: functional unit %s still %s: %w", name, last, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
