// Package madscitest is a fake MADSci node for tests: an httptest server
// speaking the node REST API (the v0.5+ create/upload/start layout, or the
// v0.1-v0.4 single-call layout) with the shapes and quirks of the real
// RestNode, backed by a *conformance.Instrument so the conformance suite
// drives it like every other fake backend.
//
// Reproduced quirks: GET /action/{id}/status says "unknown" between create and
// start; an unknown id at start answers HTTP 200 with status failed and
// error_type NotFound; GET /action/{unknown}/result answers status unknown
// with a new random action_id (ActionHistoryNotFound); GET
// /action/{name}/{id}/result answers HTTP 500 for a failed or cancelled
// action that declares a json return type (FastAPI response validation of a
// None json_result), while /action/{id}/result answers; the config carries
// the node's wiring (node_url, node_id, rate limiting, uvicorn) besides the
// run-time keys, which its schema marks "x-mhp-setting"; starting on a node
// that is not ready (busy with a blocking action, locked, errored, paused,
// stopped) gives status not_ready (NodeNotReady); a failed action leaves the
// node errored (every later start not_ready until reset) when ErrorOnFailure
// is set; admin commands outside admin_commands answer success:false
// AdminCommandNotImplemented; cancel, pause and safety_stop are node-wide;
// pause ends the running action with status paused (PauseEndsAction, the
// upstream example) or holds it; the description omits "stopped".
//
// Test controls: RateLimit (429 with Retry-After), Vanish (every connection
// is dropped), EndNext (force the next start of an action to a status),
// SetFlags and SetErrored (status booleans, the node's errors),
// ResetKeepsFault (a reset that does not recover the node),
// SetAdminCommands, FailRoute (a route answering 5xx), FailNext (its next requests failing), Refuse, Options.Addr (come
// back on a known address), and the Instrument's Script/Release.
package madscitest

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/madsci"
)

// Options shape a fake node.
type Options struct {
	// Layout is madsci.LayoutV5 (default) or madsci.LayoutLegacy.
	Layout string
	// AdminCommands lists the admin commands the node implements; nil means
	// all of safety_stop, reset, pause, resume, cancel, shutdown, lock, unlock.
	AdminCommands []string
	// PauseHolds makes pause hold the running action (status paused, still
	// running, resumed by resume) instead of ending it (the upstream example).
	PauseHolds bool
	// ErrorOnFailure makes a failed action leave the node errored, as the
	// real node does; off by default so the conformance suite can go on.
	ErrorOnFailure bool
	// Addr is the address to listen on ("127.0.0.1:port"), so a test can
	// bring a node back where an adapter expects it; default a free port.
	Addr string
	// ResultSchema is the json_schema the run action declares for its
	// json result (MADSci wraps the value as {"data": ...}); nil declares
	// none.
	ResultSchema map[string]any
}

// UploadedFile is one file the node received for an action.
type UploadedFile struct {
	Arg, Name string
	Data      []byte
}

// ActionRecord is what the node knows of one action.
type ActionRecord struct {
	ID, Name string
	Args     map[string]any
	Files    []UploadedFile
	Blocking bool

	started bool
	status  string // forced or terminal status; "" while the work decides
	running bool   // counted in running_actions
	held    bool   // paused but still running (PauseHolds)
	work    *conformance.Work
	errors  []madsci.NodeError
	result  any
	at      time.Time
}

// Node is a fake MADSci node.
type Node struct {
	// In is the simulated instrument behind the node.
	In *conformance.Instrument
	// URL is the node's base URL.
	URL string

	srv  *httptest.Server
	opts Options

	mu            sync.Mutex
	info          madsci.NodeInfo
	admin         map[string]bool
	paused        bool
	locked        bool
	stopped       bool
	errored       bool
	errs          []madsci.NodeError
	actions       map[string]*ActionRecord
	endNext       map[string]string
	stateKeys     []string
	extraState    map[string]any
	limitLeft     int
	retryAfter    string
	limited       int
	vanished      bool
	requests      map[string]int
	startRequests int
	resetKeeps    bool
	failRoutes    map[string]int
	failNext      map[string]failures
}

// AllAdminCommands returns every admin command of the node API, in a fresh
// slice the caller may change.
func AllAdminCommands() []string {
	return []string{"safety_stop", "reset", "pause", "resume", "cancel", "shutdown", "lock", "unlock"}
}

// New starts a fake node on 127.0.0.1 with the conformance fixture's
// items: state temperature and door_closed, config setpoint, mode,
// confirm_level, forbidden_level and fan, the fixture's actions (monitor
// non-blocking) and "transfer", which takes a file arg "protocol", a list
// file arg "extras" and a float arg "volume". Close it with Close.
func New(opts Options) *Node {
	if opts.Layout == "" {
		opts.Layout = madsci.LayoutV5
	}
	n := &Node{In: conformance.NewInstrument(), opts: opts, actions: map[string]*ActionRecord{}, endNext: map[string]string{},
		extraState: map[string]any{}, requests: map[string]int{},
		stateKeys: []string{conformance.SignalTemperature, conformance.SignalDoorClosed}}
	f := false
	arg := func(name, typ string, required bool, def any) madsci.ArgDef {
		return madsci.ArgDef{Name: name, ArgumentType: typ, Required: required, Default: def, Description: name + " argument"}
	}
	n.info = madsci.NodeInfo{
		NodeName: "fake_node", NodeID: newID(), NodeDescription: "fake MADSci node for tests", NodeType: "device",
		ModuleName: "fake_module", ModuleVersion: "0.7.1",
		Actions: map[string]madsci.ActionDef{
			conformance.ActionRun: {Name: conformance.ActionRun, Description: "run for duration_s",
				Args:    map[string]madsci.ArgDef{"duration_s": arg("duration_s", "float", true, nil)},
				Results: map[string]madsci.ResultDef{"json_result": {ResultLabel: "json_result", ResultType: "json", JSONSchema: opts.ResultSchema}}},
			conformance.ActionQuick:   {Name: conformance.ActionQuick, Description: "quick action"},
			conformance.ActionMonitor: {Name: conformance.ActionMonitor, Description: "non-blocking monitor", Blocking: &f},
			conformance.ActionProfile: {Name: conformance.ActionProfile, Args: map[string]madsci.ArgDef{
				"steps": arg("steps", "list[dict]", true, nil), "cycles": arg("cycles", "int", false, 1)}},
			conformance.ActionConfirm:   {Name: conformance.ActionConfirm},
			conformance.ActionForbidden: {Name: conformance.ActionForbidden},
			"transfer": {Name: "transfer", Description: "transfer using a protocol file",
				Args:    map[string]madsci.ArgDef{"volume": arg("volume", "float", true, nil), "note": arg("note", "Optional[str]", false, nil)},
				Files:   map[string]madsci.ArgDef{"protocol": arg("protocol", "Path", true, nil), "extras": arg("extras", "list[Path]", false, nil)},
				Results: map[string]madsci.ResultDef{"report": {ResultLabel: "report", ResultType: "file"}}},
		},
		ActionOrder: []string{conformance.ActionRun, conformance.ActionQuick, conformance.ActionMonitor, conformance.ActionProfile,
			conformance.ActionConfirm, conformance.ActionForbidden, "transfer"},
		ConfigOrder: []string{conformance.SettingSetpoint, conformance.SettingMode, conformance.SettingConfirmed,
			conformance.SettingForbidden, conformance.SettingFan, "node_url", "node_id", "enable_rate_limiting", "uvicorn_kwargs",
			"read_timeout_s"},
		// As on a real node, the config also carries the node's own wiring
		// (node_url, node_id, rate limiting, uvicorn options); only the
		// fixture's keys are marked as run-time settings.
		ConfigSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"setpoint":{"type":"number","title":"Setpoint","x-mhp-setting":true},"mode":{"type":"string","x-mhp-setting":true},` +
			`"confirm_level":{"type":"number","x-mhp-setting":true},` +
			`"forbidden_level":{"type":"number","x-mhp-setting":true},"fan":{"type":"boolean","x-mhp-setting":true},` +
			`"node_url":{"type":"string"},"node_id":{"type":"string"},"enable_rate_limiting":{"type":"boolean"},` +
			`"uvicorn_kwargs":{"type":"object"},"read_timeout_s":{"type":"number"}}}`),
	}
	n.SetAdminCommands(opts.AdminCommands)
	mux := http.NewServeMux()
	n.routes(mux)
	n.srv = httptest.NewUnstartedServer(n.middleware(mux))
	if opts.Addr != "" {
		ln, err := net.Listen("tcp", opts.Addr)
		if err != nil {
			panic(fmt.Sprintf("madscitest: listen %s: %v", opts.Addr, err))
		}
		n.srv.Listener.Close()
		n.srv.Listener = ln
	}
	// The URL is known before the first request can arrive (handlers read it).
	n.URL = "http://" + n.srv.Listener.Addr().String()
	n.srv.Start()
	return n
}

// Close stops the server and releases every blocked work.
func (n *Node) Close() {
	n.In.ReleaseAll()
	n.srv.CloseClientConnections()
	n.srv.Close()
}

// SetAdminCommands sets the implemented admin commands (nil = all).
func (n *Node) SetAdminCommands(cmds []string) {
	if cmds == nil {
		cmds = AllAdminCommands()
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.admin = map[string]bool{}
	for _, c := range cmds {
		n.admin[c] = true
	}
	n.info.Capabilities.AdminCommands = append([]string(nil), cmds...)
}

// RateLimit makes the next count requests answer 429 with the Retry-After header.
func (n *Node) RateLimit(count int, retryAfter string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.limitLeft, n.retryAfter = count, retryAfter
}

// Limited counts the 429 replies sent.
func (n *Node) Limited() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.limited
}

// Vanish makes the node drop every connection (and refuse new ones to
// answer) until Return.
func (n *Node) Vanish() {
	n.mu.Lock()
	n.vanished = true
	n.mu.Unlock()
	n.srv.CloseClientConnections()
}

// Return undoes Vanish.
func (n *Node) Return() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.vanished = false
}

// EndNext makes the next start of action end at once with status (not_ready,
// failed, cancelled, paused, unknown, ...) without running the instrument's
// work; "unknown" stays unknown.
func (n *Node) EndNext(action, status string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.endNext[action] = status
}

// SetFlags sets status booleans.
func (n *Node) SetFlags(locked, errored, stopped, paused bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.locked, n.errored, n.stopped, n.paused = locked, errored, stopped, paused
}

// SetErrored makes the node errored with message as its newest error (as
// an exception inside an action does), or clears errored when message is
// empty. Errors are kept, as the real node keeps them across resets.
func (n *Node) SetErrored(message string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.errored = message != ""
	if message != "" {
		n.errs = append(n.errs, madsci.NodeError{Message: message, ErrorType: "RuntimeError", LoggedAt: now()})
	}
}

// ResetKeepsFault makes the reset admin command answer success while the
// node stays errored and stopped (its startup fails again), until turned off.
func (n *Node) ResetKeepsFault(on bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.resetKeeps = on
}

// SetState adds a free-form /state key.
func (n *Node) SetState(key string, value any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.extraState[key] = value
}

// Action returns the record of an action id.
func (n *Node) Action(id string) (ActionRecord, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	a, ok := n.actions[id]
	if !ok {
		return ActionRecord{}, false
	}
	return *a, true
}

// Last returns the latest action record of the named action.
func (n *Node) Last(name string) (ActionRecord, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	var best *ActionRecord
	for _, a := range n.actions {
		if a.Name == name && (best == nil || a.at.After(best.at)) {
			best = a
		}
	}
	if best == nil {
		return ActionRecord{}, false
	}
	return *best, true
}

// FailRoute makes the route pattern ("GET /action/{id}/result",
// "GET /action/{name}/{id}/result", "GET /action/{name}/{id}/status")
// answer HTTP status with a plain body, as a node whose handler raised does;
// status 0 undoes it.
func (n *Node) FailRoute(pattern string, status int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.failRoutes == nil {
		n.failRoutes = map[string]int{}
	}
	n.failRoutes[pattern] = status
}

// FailNext makes the next count requests of the route pattern (as
// FailRoute's) fail: answer HTTP status with a plain body, or, with status
// 0, drop the connection unanswered (a node restarting, a proxy
// resetting). Then the route answers normally again.
func (n *Node) FailNext(pattern string, status, count int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.failNext == nil {
		n.failNext = map[string]failures{}
	}
	n.failNext[pattern] = failures{status: status, left: count}
}

// FailingNext is how many of FailNext's failures of pattern are left.
func (n *Node) FailingNext(pattern string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.failNext[pattern].left
}

// Refuse closes the node's listener and connections, keeping its actions:
// every new connection is refused (the node process gone) until Close.
func (n *Node) Refuse() {
	_ = n.srv.Listener.Close()
	n.srv.CloseClientConnections()
}

type failures struct{ status, left int }

// failed answers a route set by FailRoute or FailNext; it reports whether
// it did.
func (n *Node) failed(w http.ResponseWriter, r *http.Request) bool {
	n.mu.Lock()
	code := n.failRoutes[r.Pattern]
	fail := code != 0
	if f := n.failNext[r.Pattern]; f.left > 0 {
		f.left--
		n.failNext[r.Pattern] = f
		code, fail = f.status, true
	}
	n.mu.Unlock()
	if !fail {
		return false
	}
	if code == 0 {
		drop(w)
		return true
	}
	http.Error(w, http.StatusText(code), code)
	return true
}

// Requests counts the requests of a "METHOD /path" pattern as routed
// (e.g. "POST /admin/{cmd}" counted as "POST /admin/cancel").
func (n *Node) Requests(key string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.requests[key]
}

func (n *Node) middleware(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.mu.Lock()
		if n.vanished {
			n.mu.Unlock()
			drop(w)
			return
		}
		n.requests[r.Method+" "+r.URL.Path]++
		if n.limitLeft > 0 {
			n.limitLeft--
			n.limited++
			ra := n.retryAfter
			n.mu.Unlock()
			w.Header().Set("Retry-After", ra)
			w.Header().Set("X-RateLimit-Limit", "50")
			w.Header().Set("X-RateLimit-Remaining", "0")
			writeJSON(w, http.StatusTooManyRequests, map[string]any{"detail": "Rate limit exceeded"})
			return
		}
		n.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

// drop closes the connection without a reply.
func drop(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if c, _, err := hj.Hijack(); err == nil {
			c.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func (n *Node) routes(mux *http.ServeMux) {
	mux.HandleFunc("GET /openapi.json", n.openapi)
	mux.HandleFunc("GET /info", n.getInfo)
	mux.HandleFunc("GET /status", n.getStatus)
	mux.HandleFunc("GET /state", n.getState)
	mux.HandleFunc("POST /config", n.postConfig)
	mux.HandleFunc("POST /admin/{cmd}", n.postAdmin)
	mux.HandleFunc("GET /action", n.getHistory)
	if n.opts.Layout == madsci.LayoutLegacy {
		mux.HandleFunc("POST /action", n.legacySend)
		mux.HandleFunc("GET /action/{id}", n.legacyResult)
		return
	}
	mux.HandleFunc("GET /action/{id}/status", n.statusByID)
	mux.HandleFunc("GET /action/{id}/result", n.resultByID)
	mux.HandleFunc("POST /action/{name}", n.create)
	mux.HandleFunc("POST /action/{name}/{id}/upload/{arg}", n.upload)
	mux.HandleFunc("POST /action/{name}/{id}/start", n.start)
	mux.HandleFunc("GET /action/{name}/{id}/status", n.statusByID)
	mux.HandleFunc("GET /action/{name}/{id}/result", n.resultByID)
	mux.HandleFunc("GET /action/{id}/download", n.download)
	mux.HandleFunc("GET /action/{name}/{id}/download", n.download)
}

func (n *Node) openapi(w http.ResponseWriter, r *http.Request) {
	paths := map[string]any{
		"/info": map[string]any{"get": map[string]any{}}, "/status": map[string]any{"get": map[string]any{}},
		"/state": map[string]any{"get": map[string]any{}}, "/admin/{admin_command}": map[string]any{"post": map[string]any{}},
	}
	if n.opts.Layout == madsci.LayoutLegacy {
		paths["/action"] = map[string]any{"post": map[string]any{}, "get": map[string]any{}}
		paths["/action/{action_id}"] = map[string]any{"get": map[string]any{}}
	} else {
		paths["/action"] = map[string]any{"get": map[string]any{}}
		for name := range n.info.Actions {
			paths["/action/"+name] = map[string]any{"post": map[string]any{}}
			paths["/action/"+name+"/{action_id}/start"] = map[string]any{"post": map[string]any{}}
		}
		paths["/action/{action_id}/status"] = map[string]any{"get": map[string]any{}}
	}
	writeJSON(w, 200, map[string]any{"openapi": "3.1.0", "paths": paths})
}

func (n *Node) getInfo(w http.ResponseWriter, r *http.Request) {
	n.mu.Lock()
	info := n.info
	info.NodeURL = n.URL
	n.mu.Unlock()
	info.Config = map[string]any{}
	for _, k := range []string{conformance.SettingSetpoint, conformance.SettingMode, conformance.SettingConfirmed,
		conformance.SettingForbidden, conformance.SettingFan} {
		v, _ := n.In.Written(k)
		info.Config[k] = v
	}
	info.Config["node_url"] = n.URL
	info.Config["node_id"] = info.NodeID
	info.Config["enable_rate_limiting"] = true
	info.Config["uvicorn_kwargs"] = map[string]any{"limit_concurrency": 10}
	info.Config["read_timeout_s"] = 30.0
	writeJSON(w, 200, info)
}

// refresh settles the status of started actions from their work. Call with mu held.
func (n *Node) refresh() {
	for _, a := range n.actions {
		if !a.started || a.status != "" || a.work == nil {
			continue
		}
		state, result, err := a.work.State()
		switch state {
		case conformance.WorkSucceeded:
			a.status, a.result, a.running = madsci.StatusSucceeded, result, false
		case conformance.WorkCancelled:
			a.status, a.running = madsci.StatusCancelled, false
		case conformance.WorkFailed:
			a.status, a.running = madsci.StatusFailed, false
			a.errors = append(a.errors, madsci.NodeError{Message: errString(err), ErrorType: "RuntimeError", LoggedAt: now()})
			if n.opts.ErrorOnFailure {
				n.errored = true
				n.errs = append(n.errs, a.errors...)
			}
		}
	}
}

func errString(err error) string {
	if err == nil {
		return "failed"
	}
	return err.Error()
}

func now() string { return time.Now().UTC().Format(time.RFC3339Nano) }

func (n *Node) statusLocked() madsci.NodeStatus {
	n.refresh()
	st := madsci.NodeStatus{Paused: n.paused, Locked: n.locked, Stopped: n.stopped, Errored: n.errored,
		RunningActions: []string{}, Errors: n.errs, ConfigValues: map[string]any{}}
	for _, a := range n.sortedActions() {
		if a.running {
			st.RunningActions = append(st.RunningActions, a.ID)
			if a.Blocking {
				st.Busy = true
			}
		}
	}
	ready := st.IsReady()
	st.Ready = &ready
	// Upstream quirk: "stopped" is missing from the description.
	var why []string
	for _, b := range []struct {
		on   bool
		name string
	}{{st.Busy, "busy"}, {st.Paused, "paused"}, {st.Locked, "locked"}, {st.Errored, "errored"}} {
		if b.on {
			why = append(why, "Node is "+b.name)
		}
	}
	if len(why) == 0 {
		st.Description = "Node is ready"
	} else {
		st.Description = strings.Join(why, "; ")
	}
	return st
}

func (n *Node) sortedActions() []*ActionRecord {
	out := make([]*ActionRecord, 0, len(n.actions))
	for _, a := range n.actions {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].at.Before(out[j].at) })
	return out
}

func (n *Node) getStatus(w http.ResponseWriter, r *http.Request) {
	n.mu.Lock()
	st := n.statusLocked()
	n.mu.Unlock()
	writeJSON(w, 200, st)
}

func (n *Node) getState(w http.ResponseWriter, r *http.Request) {
	out := map[string]any{}
	n.mu.Lock()
	keys := append([]string(nil), n.stateKeys...)
	for k, v := range n.extraState {
		out[k] = v
	}
	n.mu.Unlock()
	for _, k := range keys {
		if v, err := n.In.ReadSignal(k); err == nil {
			out[k] = v
		}
	}
	writeJSON(w, 200, out)
}

func (n *Node) postConfig(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		writeJSON(w, 422, map[string]any{"detail": err.Error()})
		return
	}
	for k, v := range body {
		if _, ok := n.In.Written(k); !ok {
			http.Error(w, "Internal Server Error", 500)
			return
		}
		switch err := n.In.WriteSetting(r.Context(), k, v); {
		case err == nil:
		case err == conformance.ErrDropped:
			drop(w)
			return
		case err == conformance.ErrRefused || err == conformance.ErrReported:
			writeJSON(w, 200, madsci.AdminReply{Errors: []madsci.NodeError{{Message: err.Error(), ErrorType: "ValueError"}}})
			return
		default:
			drop(w) // the request ended (context) before the write settled
			return
		}
	}
	writeJSON(w, 200, map[string]any{"success": true})
}

func (n *Node) postAdmin(w http.ResponseWriter, r *http.Request) {
	cmd := r.PathValue("cmd")
	known := false
	for _, c := range append(AllAdminCommands(), "get_location") {
		known = known || c == cmd
	}
	if !known {
		writeJSON(w, 422, map[string]any{"detail": []any{map[string]any{"type": "enum", "loc": []any{"path", "admin_command"}, "msg": "Input should be a valid admin command"}}})
		return
	}
	n.mu.Lock()
	if !n.admin[cmd] {
		n.mu.Unlock()
		writeJSON(w, 200, madsci.AdminReply{Errors: []madsci.NodeError{{Message: "Admin command " + cmd + " not implemented", ErrorType: "AdminCommandNotImplemented"}}})
		return
	}
	n.refresh()
	var running []*ActionRecord
	for _, a := range n.actions {
		if a.running {
			running = append(running, a)
		}
	}
	reply := madsci.AdminReply{Success: true}
	switch cmd {
	case "cancel":
		for _, a := range running {
			if a.work != nil {
				a.work.Cancel()
			} else {
				a.status, a.running = madsci.StatusCancelled, false
			}
		}
	case "pause":
		n.paused = true
		for _, a := range running {
			if n.opts.PauseHolds {
				a.held = true
				continue
			}
			a.status, a.running = madsci.StatusPaused, false
			if a.work != nil {
				a.work.Cancel()
			}
		}
	case "resume":
		n.paused = false
		for _, a := range running {
			a.held = false
		}
	case "safety_stop":
		n.mu.Unlock()
		err := n.In.Stop()
		n.mu.Lock()
		if err != nil {
			reply = madsci.AdminReply{Errors: []madsci.NodeError{{Message: err.Error(), ErrorType: "RuntimeError"}}}
		} else {
			n.stopped = true
		}
	case "reset":
		n.locked, n.paused = false, false
		if !n.resetKeeps {
			n.errored, n.stopped = false, false
		}
	case "lock":
		n.locked = true
	case "unlock":
		n.locked = false
	case "shutdown":
	}
	n.mu.Unlock()
	writeJSON(w, 200, reply)
}

func (n *Node) getHistory(w http.ResponseWriter, r *http.Request) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.refresh()
	out := map[string]any{}
	for _, a := range n.actions {
		if a.started {
			out[a.ID] = []any{n.resultLocked(a)}
		}
	}
	writeJSON(w, 200, out)
}

// newID is a 26-character ULID-like id.
func newID() string {
	const alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
	var b [26]byte
	_, _ = rand.Read(b[:])
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b[:])
}
