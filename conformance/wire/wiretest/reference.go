// Package wiretest is an in-process HTTP server that answers in the shapes
// of the Python reference implementation (openmhp) while honouring the
// spec's MUSTs, so that checkers, clients and the CLI are tested against the shapes
// another implementation really sends:
//
//   - initialize names the device under "device" and puts watchdog_s (a
//     number or null) among the capabilities; sessions are keyed by the
//     X-MHP-Client header (never Mhp-Session);
//   - device/describe echoes no "detail", answers an unknown tier with the
//     full descriptor, nests identity under "device" in the full tier, and
//     drops unknown select names;
//   - errors carry ts in the error object, not in data;
//   - a dry-run write answers {"ok","dryRun","wouldWrite":{name:value}} with
//     its notes (needsApproval, leaseHeldBy, busyNow) at the top level; a
//     dry-run invoke answers a job whose state is "dryRun";
//   - safety/limits maps each setting and action to its bare limits and puts
//     approval levels in a separate "approval" map, without "estop";
//   - safety/estop answers {state, stopped, stop_error: null} without a list
//     of jobs; safety/reset answers "verified" as a string;
//   - ping answers {ok, state, fault_reason, lease, ts}.
//
// Deviations plant one spec violation each, for tests that a checker finds it.
package wiretest

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Version is the protocol version the fake answers with; it also speaks
// OlderVersion.
const (
	Version      = "2026-09-12"
	OlderVersion = "2026-09-09"
)

// Deviations plant spec violations.
type Deviations struct {
	// ServeBeforeInitialize answers every method before initialize
	// (violates §5.1 "Servers MUST respond to initialize before any other method.").
	ServeBeforeInitialize bool
	// IgnoreVersion answers Version whatever the client asked (violates §6).
	IgnoreVersion bool
	// AcceptForbidden lets forbid items through the approval gate (violates §7.1).
	AcceptForbidden bool
	// SharedLease lets a second client acquire a held lease (violates §5.7).
	SharedLease bool
	// LimitsInData drops the limits from LimitViolation data (violates §7.1).
	NoLimitsInData bool
	// WrongParseError answers malformed JSON with -32600 Invalid Request
	// instead of -32700 Parse error (violates §5, JSON-RPC 2.0).
	WrongParseError bool
}

// Options configure the fake.
type Options struct {
	Deviations
	// ResetVerified is safety/reset's "verified"; default the reference's
	// detail string "all signals readable".
	ResetVerified any
	// ResetState is safety/reset's "state"; default "idle".
	ResetState string
	// Verbose records every request's method (see Methods).
	Verbose bool
	// WatchdogS, when positive, declares a watchdog: as in the reference,
	// safety/reset then needs the lease (NotLeased lease_required when
	// nobody holds it), and the estop drops the lease. The fake never trips
	// the watchdog itself.
	WatchdogS float64
}

// Reference is the fake server. It is safe for concurrent use.
type Reference struct {
	opts Options

	mu      sync.Mutex
	state   string
	inited  map[string]bool // by client identity
	lease   string
	leaseTo time.Time
	values  map[string]any
	jobs    map[string]map[string]any
	order   []string // job ids, oldest first
	nextJob int
	methods []string
	written []string // settings actually written, "name=value"
	estops  int
	clients []string // X-MHP-Client of each initialize, oldest first
}

// maxClients and maxJobs bound what the fake keeps.
const (
	maxClients = 4096
	maxJobs    = 64
	maxMethods = 4096
)

// New returns a fake in state idle.
func New(opts Options) *Reference {
	if opts.ResetState == "" {
		opts.ResetState = "idle"
	}
	if opts.ResetVerified == nil {
		opts.ResetVerified = "all signals readable"
	}
	return &Reference{opts: opts, state: "idle", inited: map[string]bool{}, jobs: map[string]map[string]any{},
		values: map[string]any{"block_temperature": 22.0, "lid_closed": true, "target_temperature": 22.0,
			"lid_heater": false, "lid_override": false, "hold_mode": "off"}}
}

// SetState sets the device state (idle, busy, fault, estop).
func (r *Reference) SetState(s string) {
	r.mu.Lock()
	r.state = s
	r.mu.Unlock()
}

// State returns the device state.
func (r *Reference) State() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state
}

// Written lists the settings really written, "name=value", oldest first.
func (r *Reference) Written() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.written...)
}

// Clients lists the client identity (X-MHP-Client, else the peer address)
// of each initialize, oldest first.
func (r *Reference) Clients() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.clients...)
}

// EStops counts safety/estop calls.
func (r *Reference) EStops() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.estops
}

// Methods lists the methods received (with Options.Verbose), oldest first.
func (r *Reference) Methods() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.methods...)
}

// Descriptor is the fake's descriptor in the reference's shape (identity
// under "device").
func Descriptor() map[string]any {
	num := func(name, unit string) map[string]any {
		return map[string]any{"name": name, "type": "number", "unit": unit}
	}
	return map[string]any{
		"device": map[string]any{"id": "thermocycler-ref", "class": "thermocycler", "make": "SimBio", "model": "TC-96",
			"location": "bay 3", "tags": []any{"pcr"}, "notes": "Reference-shaped fake."},
		"physical": map[string]any{"mass_kg": 12.5},
		"signals":  []any{num("block_temperature", "degC"), map[string]any{"name": "lid_closed", "type": "boolean"}},
		"settings": []any{
			map[string]any{"name": "target_temperature", "type": "number", "unit": "degC",
				"limits": map[string]any{"min": 4.0, "max": 105.0}, "approval": "auto"},
			map[string]any{"name": "lid_heater", "type": "boolean", "approval": "auto"},
			map[string]any{"name": "lid_override", "type": "boolean", "approval": "forbid"},
			map[string]any{"name": "hold_mode", "type": "string", "limits": map[string]any{"enum": []any{"off", "hold"}},
				"approval": "confirm"},
		},
		"actions": []any{
			map[string]any{"name": "run_protocol", "duration": "long", "approval": "auto", "interlocks": []any{"lid_closed"},
				"params":   map[string]any{"steps": map[string]any{"type": "array"}, "cycles": map[string]any{"type": "integer"}},
				"required": []any{"steps", "cycles"}, "limits": map[string]any{"cycles": map[string]any{"min": 1.0, "max": 99.0}}},
			map[string]any{"name": "open_lid", "duration": "short", "approval": "confirm"},
			map[string]any{"name": "home", "duration": "short", "approval": "auto",
				"params": map[string]any{"speed": map[string]any{"type": "number"}}},
		},
		"safety": map[string]any{"estop": true, "interlocks": []any{"lid_closed"}},
	}
}

// Handler serves POST /rpc, GET /events and GET /mhp.json.
func (r *Reference) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /rpc", r.serveRPC)
	mux.HandleFunc("GET /events", func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		// Like the reference: nothing until an event or a 15 s keep-alive.
		t := time.NewTicker(15 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-req.Context().Done():
				return
			case <-t.C:
				if _, err := io.WriteString(w, ": keepalive\n\n"); err != nil {
					return
				}
				if f, ok := w.(http.Flusher); ok {
					f.Flush()
				}
			}
		}
	})
	mux.HandleFunc("GET /mhp.json", func(w http.ResponseWriter, req *http.Request) {
		writeJSON(w, 200, r.full())
	})
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// rpcError is a refusal in the reference's shape: ts in the error object.
type rpcError struct {
	Code    int     `json:"code"`
	Message string  `json:"message"`
	TS      float64 `json:"ts"`
	Data    any     `json:"data,omitempty"`
}

func (e *rpcError) Error() string { return e.Message }

func refuse(code int, data any, format string, args ...any) *rpcError {
	return &rpcError{Code: code, Message: fmt.Sprintf(format, args...), TS: now(), Data: data}
}

func now() float64 { return float64(time.Now().UnixNano()) / 1e9 }

func (r *Reference) serveRPC(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	if err != nil {
		writeJSON(w, 400, map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": -32700, "message": "parse error"}})
		return
	}
	var msg struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Params  map[string]any  `json:"params"`
	}
	if err := json.Unmarshal(body, &msg); err != nil {
		code := -32700
		if r.opts.WrongParseError {
			code = -32600
		}
		writeJSON(w, 400, map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": code, "message": "parse error"}})
		return
	}
	client := req.Header.Get("X-MHP-Client")
	if client == "" {
		client, _, _ = net.SplitHostPort(req.RemoteAddr)
	}
	var id any = nil
	if len(msg.ID) > 0 {
		_ = json.Unmarshal(msg.ID, &id)
	}
	if msg.Params == nil {
		msg.Params = map[string]any{}
	}
	var res any
	var rerr *rpcError
	if msg.JSONRPC != "2.0" {
		rerr = refuse(-32600, nil, "invalid request: jsonrpc must be \"2.0\"")
	} else {
		res, rerr = r.dispatch(msg.Method, msg.Params, client)
	}
	if len(msg.ID) == 0 {
		writeJSON(w, 200, map[string]any{})
		return
	}
	if rerr != nil {
		writeJSON(w, 200, map[string]any{"jsonrpc": "2.0", "id": id, "error": rerr})
		return
	}
	writeJSON(w, 200, map[string]any{"jsonrpc": "2.0", "id": id, "result": res})
}

func (r *Reference) dispatch(method string, p map[string]any, client string) (any, *rpcError) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.opts.Verbose && len(r.methods) < maxMethods {
		r.methods = append(r.methods, method)
	}
	if method == "initialize" {
		return r.initialize(p, client)
	}
	if !r.inited[client] && !r.opts.ServeBeforeInitialize && method != "safety/estop" {
		return nil, refuse(-32000, map[string]any{"reason": "not_initialized"}, "%s: call initialize first", method)
	}
	switch method {
	case "ping":
		var fr any
		if r.state == "fault" {
			fr = "planted fault"
		}
		return map[string]any{"ok": true, "state": r.state, "fault_reason": fr, "lease": r.holder(), "ts": now()}, nil
	case "device/describe":
		return r.describe(p)
	case "signals/read":
		return r.read(p)
	case "settings/write":
		return r.write(p, client)
	case "actions/invoke":
		return r.invoke(p, client)
	case "jobs/status", "jobs/cancel":
		jid, _ := p["id"].(string)
		j, ok := r.jobs[jid]
		if !ok {
			return nil, refuse(-32041, nil, "no job %s", jid)
		}
		if j["state"] == "queued" || j["state"] == "running" {
			// The fake's work is instant: a job is done when first looked at.
			j["state"], j["progress"], j["finished"] = "done", 1.0, now()
			j["result"] = map[string]any{"cycles_completed": 1}
		}
		return map[string]any{"job": j}, nil
	case "jobs/list":
		list := []any{}
		for _, jid := range r.order {
			list = append(list, r.jobs[jid])
		}
		return map[string]any{"jobs": list}, nil
	case "safety/limits":
		return r.limits(), nil
	case "safety/estop":
		r.state = "estop"
		r.lease = ""
		r.estops++
		return map[string]any{"state": "estop", "stopped": true, "stop_error": nil}, nil
	case "safety/reset":
		if h := r.holder(); h != "" && h != client {
			return nil, refuse(-32030, map[string]any{"holder": h}, "device is leased to another client")
		}
		if r.opts.WatchdogS > 0 && r.holder() != client {
			return nil, refuse(-32030, map[string]any{"reason": "lease_required", "watchdog_s": r.opts.WatchdogS},
				"this device declares a watchdog: acquire a lease (session/acquire) and keep it renewed before operating it")
		}
		r.state = r.opts.ResetState
		return map[string]any{"state": r.state, "verified": r.opts.ResetVerified}, nil
	case "session/acquire", "session/renew":
		ttl := 60.0
		if v, ok := p["ttl"]; ok {
			f, isNum := v.(float64)
			if !isNum || f <= 0 || f > 3600 {
				return nil, refuse(-32014, nil, "ttl must be a number of seconds between 0 and 3600")
			}
			ttl = f
		}
		if h := r.holder(); h != "" && h != client && !r.opts.SharedLease {
			return nil, refuse(-32030, map[string]any{"holder": h}, "device is leased to another client")
		}
		if method == "session/renew" && r.holder() != client {
			return nil, refuse(-32030, map[string]any{"reason": "lease_lost"}, "lease lost")
		}
		r.lease, r.leaseTo = client, time.Now().Add(time.Duration(ttl*float64(time.Second)))
		return map[string]any{"holder": client, "ttl": ttl, "watchdog_s": r.watchdog()}, nil
	case "session/release":
		if r.lease == client {
			r.lease = ""
		}
		var h any
		if x := r.holder(); x != "" {
			h = x
		}
		return map[string]any{"holder": h}, nil
	}
	return nil, refuse(-32601, nil, "unknown method %s", method)
}

// watchdog is watchdog_s as the reference answers it (a number or null).
func (r *Reference) watchdog() any {
	if r.opts.WatchdogS > 0 {
		return r.opts.WatchdogS
	}
	return nil
}

func (r *Reference) holder() string {
	if r.lease != "" && time.Now().Before(r.leaseTo) {
		return r.lease
	}
	return ""
}

func (r *Reference) initialize(p map[string]any, client string) (any, *rpcError) {
	ask, _ := p["protocolVersion"].(string)
	v := Version
	if !r.opts.IgnoreVersion && ask != "" {
		switch {
		case ask >= Version:
		case ask >= OlderVersion:
			v = OlderVersion
		default:
			return nil, refuse(-32602, map[string]any{"supported": []any{Version, OlderVersion}}, "protocolVersion %q is too old", ask)
		}
	}
	if len(r.inited) >= maxClients {
		clear(r.inited)
	}
	r.inited[client] = true
	if len(r.clients) < maxClients {
		r.clients = append(r.clients, client)
	}
	d := Descriptor()["device"].(map[string]any)
	return map[string]any{
		"protocolVersion": v,
		"device":          map[string]any{"id": d["id"], "class": d["class"], "make": d["make"], "model": d["model"]},
		"capabilities": map[string]any{"signals": true, "settings": true, "actions": true, "methods": false,
			"subscribe": true, "lease": true, "estop": true, "watchdog_s": r.watchdog(), "resources": false},
		"session": client,
	}, nil
}

func (r *Reference) full() map[string]any {
	d := Descriptor()
	d["mhp"] = Version
	d["state"] = r.State()
	return d
}

func (r *Reference) card() map[string]any {
	d := Descriptor()
	dev := d["device"].(map[string]any)
	out := map[string]any{"state": r.state, "description": "Reference-shaped fake."}
	for _, k := range []string{"id", "class", "make", "model", "location", "tags"} {
		out[k] = dev[k]
	}
	for _, sec := range []string{"signals", "settings", "actions"} {
		var names []any
		for _, it := range d[sec].([]any) {
			names = append(names, it.(map[string]any)["name"])
		}
		out[sec] = names
	}
	return out
}

func (r *Reference) describe(p map[string]any) (any, *rpcError) {
	d := Descriptor()
	if sel, ok := p["select"].(map[string]any); ok && len(sel) > 0 {
		out := r.card()
		for sec, names := range sel {
			items, _ := d[sec].([]any)
			picked := []any{}
			for _, n := range asList(names) {
				for _, it := range items {
					if it.(map[string]any)["name"] == n {
						picked = append(picked, it)
					}
				}
			}
			out[sec] = picked // unknown names dropped, as the reference does
		}
		return out, nil
	}
	switch p["detail"] {
	case "card":
		return r.card(), nil
	case "summary":
		out := r.card()
		out["instructions"], out["physical"], out["safety"] = "", d["physical"], d["safety"]
		for _, sec := range []string{"signals", "settings", "actions"} {
			var slim []any
			for _, it := range d[sec].([]any) {
				m := it.(map[string]any)
				s := map[string]any{}
				for _, k := range []string{"name", "type", "unit", "limits", "approval", "duration", "interlocks", "required"} {
					if v, ok := m[k]; ok {
						s[k] = v
					}
				}
				slim = append(slim, s)
			}
			out[sec] = slim
		}
		return out, nil
	}
	d["mhp"], d["state"] = Version, r.state // full, also for an unknown tier
	return d, nil
}

func (r *Reference) read(p map[string]any) (any, *rpcError) {
	names := []string{"block_temperature", "lid_closed"}
	if l, ok := p["names"].([]any); ok && len(l) > 0 {
		names = nil
		for _, n := range l {
			s, _ := n.(string)
			names = append(names, s)
		}
	}
	out := map[string]any{}
	for _, n := range names {
		if n != "block_temperature" && n != "lid_closed" {
			return nil, refuse(-32040, nil, "unknown signal '%s'", n)
		}
		out[n] = r.values[n]
	}
	return map[string]any{"values": out, "ts": now()}, nil
}

func find(sec, name string) map[string]any {
	for _, it := range Descriptor()[sec].([]any) {
		if m := it.(map[string]any); m["name"] == name {
			return m
		}
	}
	return nil
}

// gate runs state, approval, interlocks, value and lease, the reference's order.
func (r *Reference) gate(spec map[string]any, client string, approved, dry bool, check func() *rpcError) (map[string]any, *rpcError) {
	notes := map[string]any{}
	switch r.state {
	case "estop":
		return nil, refuse(-32022, nil, "emergency stop is active; call safety/reset")
	case "fault":
		return nil, refuse(-32020, map[string]any{"reason": "planted fault"}, "device is in fault state")
	}
	switch spec["approval"] {
	case "forbid":
		if !r.opts.AcceptForbidden {
			return nil, refuse(-32013, nil, "'%s' may not be operated by an agent", spec["name"])
		}
	case "confirm":
		if !approved {
			if !dry {
				return nil, refuse(-32012, map[string]any{"approval": "confirm"}, "'%s' requires a person's confirmation", spec["name"])
			}
			notes["needsApproval"] = true
		}
	}
	for _, il := range asList(spec["interlocks"]) {
		if name, _ := il.(string); r.values[name] != true {
			return nil, refuse(-32011, map[string]any{"interlock": il}, "interlock '%s' is open", il)
		}
	}
	if err := check(); err != nil {
		return nil, err
	}
	if h := r.holder(); h != "" && h != client {
		if !dry {
			return nil, refuse(-32030, map[string]any{"holder": h}, "device is leased to another client")
		}
		notes["leaseHeldBy"] = h
	}
	return notes, nil
}

func (r *Reference) write(p map[string]any, client string) (any, *rpcError) {
	name, _ := p["name"].(string)
	spec := find("settings", name)
	if spec == nil {
		return nil, refuse(-32040, nil, "unknown setting '%s'", name)
	}
	value, has := p["value"]
	if !has {
		return nil, refuse(-32014, nil, "%s: a value is required", name)
	}
	approved, _ := p["approved"].(bool)
	dry, _ := p["dryRun"].(bool)
	notes, rerr := r.gate(spec, client, approved, dry, func() *rpcError { return r.checkValue(spec, value) })
	if rerr != nil {
		return nil, rerr
	}
	if dry {
		out := map[string]any{"ok": true, "dryRun": true, "wouldWrite": map[string]any{name: value}}
		for k, v := range notes {
			out[k] = v
		}
		return out, nil
	}
	r.values[name] = value
	if len(r.written) < maxMethods {
		r.written = append(r.written, fmt.Sprintf("%s=%v", name, value))
	}
	return map[string]any{"ok": true, "name": name, "value": value}, nil
}

func (r *Reference) checkValue(spec map[string]any, v any) *rpcError {
	name, typ := spec["name"], spec["type"]
	bad := func() *rpcError {
		return refuse(-32014, map[string]any{"type": typ}, "%s: expected %s, got %T %v", name, typ, v, v)
	}
	switch typ {
	case "number":
		f, ok := v.(float64)
		if !ok {
			return bad()
		}
		lim := spec["limits"].(map[string]any)
		data := map[string]any{"min": lim["min"], "max": lim["max"]}
		if r.opts.NoLimitsInData {
			data = nil
		}
		if f < lim["min"].(float64) {
			return refuse(-32010, data, "%s=%v below min %v", name, f, lim["min"])
		}
		if f > lim["max"].(float64) {
			return refuse(-32010, data, "%s=%v above max %v", name, f, lim["max"])
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return bad()
		}
	case "string":
		s, ok := v.(string)
		if !ok || strings.ContainsFunc(s, func(c rune) bool { return c < 0x20 || c == 0x7f }) {
			return bad()
		}
		if lim, ok := spec["limits"].(map[string]any); ok {
			for _, e := range lim["enum"].([]any) {
				if e == s {
					return nil
				}
			}
			return refuse(-32010, lim, "%s=%q not in %v", name, s, lim["enum"])
		}
	}
	return nil
}

func (r *Reference) invoke(p map[string]any, client string) (any, *rpcError) {
	name, _ := p["name"].(string)
	spec := find("actions", name)
	if spec == nil {
		return nil, refuse(-32040, nil, "unknown action '%s'", name)
	}
	params, _ := p["params"].(map[string]any)
	if params == nil {
		params = map[string]any{}
	}
	approved, _ := p["approved"].(bool)
	dry, _ := p["dryRun"].(bool)
	notes, rerr := r.gate(spec, client, approved, dry, func() *rpcError {
		declared, _ := spec["params"].(map[string]any)
		for k := range params {
			if _, ok := declared[k]; !ok {
				return refuse(-32014, nil, "%s: unknown parameter(s) ['%s']", name, k)
			}
		}
		for _, req := range asList(spec["required"]) {
			if _, ok := params[req.(string)]; !ok {
				return refuse(-32014, nil, "%s: missing required parameter '%s'", name, req)
			}
		}
		return nil
	})
	if rerr != nil {
		return nil, rerr
	}
	r.nextJob++
	job := map[string]any{"id": fmt.Sprintf("job_%08x", r.nextJob), "action": name, "state": "queued", "paused": false,
		"progress": 0.0, "result": nil, "error": nil, "outcome": nil, "waiting": nil, "owner": client,
		"method": nil, "project": nil, "started": now(), "finished": nil}
	if dry {
		job["state"] = "dryRun"
		out := map[string]any{"job": job}
		for k, v := range notes {
			out[k] = v
		}
		return out, nil
	}
	if len(r.order) >= maxJobs {
		delete(r.jobs, r.order[0])
		r.order = r.order[1:]
	}
	r.jobs[job["id"].(string)] = job
	r.order = append(r.order, job["id"].(string))
	snap := map[string]any{}
	for k, v := range job {
		snap[k] = v
	}
	return map[string]any{"job": snap}, nil
}

func asList(v any) []any { l, _ := v.([]any); return l }

func (r *Reference) limits() map[string]any {
	d := Descriptor()
	settings, actions, approval := map[string]any{}, map[string]any{}, map[string]any{}
	for _, it := range d["settings"].([]any) {
		m := it.(map[string]any)
		lim, ok := m["limits"]
		if !ok {
			lim = map[string]any{}
		}
		settings[m["name"].(string)] = lim
		approval[m["name"].(string)] = m["approval"]
	}
	for _, it := range d["actions"].([]any) {
		m := it.(map[string]any)
		lim, ok := m["limits"]
		if !ok {
			lim = map[string]any{}
		}
		actions[m["name"].(string)] = lim
		approval[m["name"].(string)] = m["approval"]
	}
	return map[string]any{"settings": settings, "actions": actions, "interlocks": []any{"lid_closed"},
		"approval": approval, "watchdog_s": nil}
}
