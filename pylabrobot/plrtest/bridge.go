// Package plrtest holds fakes of the two PyLabRobot HTTP APIs the
// pylabrobot adapter speaks, for its tests and yours: Bridge (the plrbridge
// API) and LegacyServer (PyLabRobot's liquid-handling server); point
// pylabrobot.Config.URL at one. Both keep their state
// in a *conformance.Instrument, so the conformance suite drives them like
// every other fake backend, and both bind 127.0.0.1 only.
package plrtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/pylabrobot"
)

// Bridge is a fake plrbridge serving the conformance fixture as a machine:
// methods run, quick, monitor (concurrent), profile, confirm_action,
// forbidden_action, aspirate (resource params), one setter per fixture
// setting (set_setpoint, set_mode, ... taking "value", concurrent), state
// temperature, door_closed and setup_finished, and setup. As PyLabRobot
// does, the machine's stop() (POST /stop) leaves it not set up: every method
// but setup then fails ("The setup has not finished") until setup runs.
//
// Like plrbridge 2 it long-polls: /describe says bridge.long_poll_s (30) and
// GET /tasks/{id}?wait=S&seen=V holds its answer until the task's version
// differs from V, the task ends, or S passes; [Bridge.LongPoll](false) makes
// it an older bridge that answers at once and advertises nothing. Close it
// with Close.
type Bridge struct {
	// In is the simulated instrument behind the machine.
	In *conformance.Instrument
	// URL is the bridge's base URL.
	URL string

	srv *httptest.Server

	mu         sync.Mutex
	desc       pylabrobot.Description
	tasks      map[string]*bridgeTask
	forced     map[string]string
	vanished   bool
	pollStatus int // FailPolls: GET /tasks/{id} answers this HTTP status
	// FailNextPolls: the next pollFailN polls answer failStatus (0: the
	// connection is dropped).
	pollFailN, failStatus int
	// changed is closed (and replaced) on every task change a waiting
	// long-poll must see; closed is closed by Close.
	changed, closed chan struct{}
	timed           map[string]time.Duration
	waiting         int // long-polls held now
	requests        map[string]int
	submitted       []string
	// notSetUp is PyLabRobot's setup_finished == false: after stop() every
	// method but setup fails until setup runs again.
	notSetUp bool
}

type bridgeTask struct {
	pylabrobot.Task
	exclusive bool
	work      *conformance.Work
	cancel    context.CancelFunc // setter and timed tasks; called with Bridge.mu held
	final     bool               // Task.Status is final (not read from work)
}

// LongPollMaxS is the longest wait the fake bridge holds a long-poll for,
// as plrbridge's default.
const LongPollMaxS = 30.0

// Setters maps fixture setting names to their setter methods on the fake bridge.
func Setters() map[string]string {
	out := map[string]string{}
	for _, s := range conformance.FixtureDescriptor().Settings {
		out[s.Name] = "set_" + s.Name
	}
	return out
}

// NewBridge starts a fake bridge on 127.0.0.1.
func NewBridge() *Bridge { return NewBridgeAt("") }

// NewBridgeAt starts a fake bridge listening on addr ("127.0.0.1:port"), so
// a test can bring a bridge back where an adapter expects it; "" picks a
// free port. It panics when addr cannot be bound.
func NewBridgeAt(addr string) *Bridge {
	b := &Bridge{In: conformance.NewInstrument(), tasks: map[string]*bridgeTask{}, forced: map[string]string{}, requests: map[string]int{},
		changed: make(chan struct{}), closed: make(chan struct{}), timed: map[string]time.Duration{}}
	num := func(name string, required bool) pylabrobot.TypeDesc {
		return pylabrobot.TypeDesc{Name: name, Type: "number", PythonType: "float", Required: required, Kind: "positional_or_keyword"}
	}
	m := func(name, doc string, params ...pylabrobot.TypeDesc) pylabrobot.Method {
		return pylabrobot.Method{Name: name, Doc: doc, Params: params, Cancellable: true, Returns: pylabrobot.TypeDesc{Type: "any"}}
	}
	d := &b.desc
	d.Bridge.Name, d.Bridge.Version, d.Bridge.LongPollS = "plrbridge", "2", LongPollMaxS
	d.Machine.Class, d.Machine.Module, d.Machine.Stop, d.Machine.HasDeck = "FixtureMachine", "plrtest", true, true
	mon := m(conformance.ActionMonitor, "monitor until cancelled")
	mon.Concurrent = true
	d.Methods = []pylabrobot.Method{
		m(conformance.ActionRun, "run for duration_s", num("duration_s", true)),
		m(conformance.ActionQuick, "quick"),
		mon,
		m(conformance.ActionProfile, "run a profile",
			pylabrobot.TypeDesc{Name: "steps", Type: "array", PythonType: "list[dict]", Required: true, Items: &pylabrobot.TypeDesc{Type: "object"}},
			pylabrobot.TypeDesc{Name: "cycles", Type: "integer", PythonType: "int", Default: 1.0}),
		m(conformance.ActionConfirm, "needs confirmation"),
		m(conformance.ActionForbidden, "forbidden"),
		{Name: "setup", Doc: "set the machine up", Returns: pylabrobot.TypeDesc{Type: "null"}},
		// What plrbridge says of LiquidHandler.drop_tips and move_plate.
		m("drop_tips", "drop tips",
			pylabrobot.TypeDesc{Name: "tip_spots", Type: "array", Required: true, PythonType: "Sequence[Union[TipSpot, Trash]]",
				Items: &pylabrobot.TypeDesc{Type: "string", Resource: true, ResourceTypes: []string{"TipSpot", "Trash"}, PythonType: "Union[TipSpot, Trash]"}}),
		m("move_plate", "move a plate",
			pylabrobot.TypeDesc{Name: "plate", Type: "string", Resource: true, Required: true, PythonType: "Plate"},
			pylabrobot.TypeDesc{Name: "to", Type: "any", Required: true, ResourceTypes: []string{"ResourceStack", "ResourceHolder"},
				PythonType: "Union[ResourceStack, ResourceHolder, Coordinate]", OneOf: []pylabrobot.TypeDesc{
					{Type: "string", Resource: true, ResourceTypes: []string{"ResourceStack"}, PythonType: "ResourceStack"},
					{Type: "string", Resource: true, ResourceTypes: []string{"ResourceHolder"}, PythonType: "ResourceHolder"},
					{Type: "any", PythonType: "Coordinate"}}}),
		m("aspirate", "aspirate from wells",
			pylabrobot.TypeDesc{Name: "resources", Type: "array", Required: true, Items: &pylabrobot.TypeDesc{Type: "string", Resource: true, PythonType: "Well"}},
			pylabrobot.TypeDesc{Name: "vols", Type: "array", Required: true, Items: &pylabrobot.TypeDesc{Type: "number"}},
			pylabrobot.TypeDesc{Name: "mode", Type: "string", Enum: []any{"FAST", "SLOW"}, Default: "FAST"}),
	}
	for _, s := range conformance.FixtureDescriptor().Settings {
		typ := s.Type
		setter := m("set_"+s.Name, "set "+s.Name, pylabrobot.TypeDesc{Name: "value", Type: typ, Required: true})
		setter.Concurrent = true
		d.Methods = append(d.Methods, setter)
	}
	d.State = []pylabrobot.StateItem{
		{Name: conformance.SignalTemperature, Type: "number", Source: "get_temperature"},
		{Name: conformance.SignalDoorClosed, Type: "boolean", Source: "attribute"},
		{Name: "setup_finished", Type: "boolean", Source: "attribute"},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /describe", b.describe)
	mux.HandleFunc("GET /state", b.state)
	mux.HandleFunc("POST /tasks", b.submit)
	mux.HandleFunc("GET /tasks/{id}", b.task)
	mux.HandleFunc("POST /tasks/{id}/cancel", b.cancelTask)
	mux.HandleFunc("POST /stop", b.stop)
	b.srv = httptest.NewUnstartedServer(b.middleware(mux))
	if addr != "" {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			panic("plrtest: listen " + addr + ": " + err.Error())
		}
		b.srv.Listener.Close()
		b.srv.Listener = ln
	}
	// The URL is known before the first request can arrive (handlers read it).
	b.URL = "http://" + b.srv.Listener.Addr().String()
	b.srv.Start()
	return b
}

// FailPolls makes every task poll (GET /tasks/{id}) answer the HTTP status
// code (a bridge whose handler raises answers 500); 0 answers normally again.
// A long-poll waiting when it is set answers the code too.
func (b *Bridge) FailPolls(code int) {
	b.mu.Lock()
	b.pollStatus = code
	b.bumpLocked()
	b.mu.Unlock()
}

// LongPoll makes the bridge long-poll (true, the default: plrbridge 2) or
// answer every task poll at once and advertise no long-poll (false: an
// older bridge). Set it before the adapter reads /describe.
func (b *Bridge) LongPoll(on bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.desc.Bridge.LongPollS, b.desc.Bridge.Version = 0, "1"
	if on {
		b.desc.Bridge.LongPollS, b.desc.Bridge.Version = LongPollMaxS, "2"
	}
}

// FailNextPolls makes the next n task polls (GET /tasks/{id}) fail: answer
// the HTTP status code, or, with code 0, drop the connection unanswered (a
// bridge restarting, a proxy resetting). Then they answer normally again.
// A long-poll waiting when it is set fails too (counted among the n).
func (b *Bridge) FailNextPolls(code, n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failStatus, b.pollFailN = code, n
	b.bumpLocked()
}

// Refuse closes the bridge's listener and connections, keeping its tasks:
// every new connection is refused (the bridge process gone) until Close.
func (b *Bridge) Refuse() {
	_ = b.srv.Listener.Close()
	b.srv.CloseClientConnections()
}

// PollsFailing is how many of the polls set by FailNextPolls are still to fail.
func (b *Bridge) PollsFailing() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.pollFailN
}

// AddTimedMethod adds a method without params whose task runs d at the
// bridge (a pick and drop, say) and then ends done with {"ok": true}; it is
// never finished inside the submit answer. Add it before the adapter reads
// /describe.
func (b *Bridge) AddTimedMethod(name string, d time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.timed[name] = d
	b.desc.Methods = append(b.desc.Methods, pylabrobot.Method{Name: name, Doc: "a timed move (" + d.String() + ")",
		Cancellable: true, Returns: pylabrobot.TypeDesc{Type: "any"}})
}

// SetTaskProgress sets a running task's progress and message (what the
// machine's report_progress does), waking its long-polls.
func (b *Bridge) SetTaskProgress(id string, fraction float64, message string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.tasks[id]
	if !ok {
		return
	}
	if t.work != nil {
		t.work.SetProgress(fraction)
	} else {
		t.Progress = &fraction
	}
	t.Message = message
	t.Version++
	b.bumpLocked()
}

// bumpLocked wakes every waiting long-poll. Call with mu held.
func (b *Bridge) bumpLocked() {
	close(b.changed)
	b.changed = make(chan struct{})
}

// Close stops the server and releases every blocked work.
func (b *Bridge) Close() {
	b.In.ReleaseAll()
	b.mu.Lock()
	select {
	case <-b.closed:
	default:
		close(b.closed)
	}
	for _, t := range b.tasks {
		if t.cancel != nil {
			t.cancel()
		}
	}
	b.mu.Unlock()
	b.srv.CloseClientConnections()
	b.srv.Close()
}

// Vanish drops every connection until Return.
func (b *Bridge) Vanish() {
	b.mu.Lock()
	b.vanished = true
	b.mu.Unlock()
	b.srv.CloseClientConnections()
}

// Return undoes Vanish.
func (b *Bridge) Return() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.vanished = false
}

// Restart forgets every task, as a restarted bridge would.
func (b *Bridge) Restart() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tasks = map[string]*bridgeTask{}
	b.bumpLocked() // waiting long-polls answer 404
}

// ForceNext makes the next task of method end at once with status
// (done, failed, cancelled, unknown) without running the instrument.
func (b *Bridge) ForceNext(method, status string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.forced[method] = status
}

// Requests counts requests by "METHOD /path" ("GET /tasks/{id}" for every
// task poll, "GET /tasks/{id}?wait" for the long-polls among them).
func (b *Bridge) Requests(key string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.requests[key]
}

// Submitted lists the params of every accepted task of method, oldest first.
func (b *Bridge) Submitted(method string) []map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, id := range b.submitted {
		if t, ok := b.tasks[id]; ok && t.Method == method {
			out = append(out, t.Params)
		}
	}
	return out
}

func (b *Bridge) middleware(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		gone := b.vanished
		path := r.URL.Path
		if strings.HasPrefix(path, "/tasks/") {
			if strings.HasSuffix(path, "/cancel") {
				path = "/tasks/{id}/cancel"
			} else {
				path = "/tasks/{id}"
			}
		}
		b.requests[r.Method+" "+path]++
		if r.URL.Query().Has("wait") {
			b.requests[r.Method+" "+path+"?wait"]++
		}
		isPoll := r.Method == http.MethodGet && path == "/tasks/{id}"
		code, failing := 0, false
		if isPoll {
			code, failing = b.failingPollLocked()
		}
		b.mu.Unlock()
		if gone {
			dropConn(w)
			return
		}
		if failing {
			failPoll(w, code)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// failingPollLocked says whether this task poll fails, and how (an HTTP
// status, or 0: the connection is dropped), consuming one of
// FailNextPolls'. Call with mu held.
func (b *Bridge) failingPollLocked() (int, bool) {
	if b.pollFailN > 0 {
		b.pollFailN--
		return b.failStatus, true
	}
	return b.pollStatus, b.pollStatus != 0
}

func failPoll(w http.ResponseWriter, code int) {
	if code == 0 {
		dropConn(w)
		return
	}
	reply(w, code, map[string]any{"detail": "Internal Server Error"})
}

func dropConn(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if c, _, err := hj.Hijack(); err == nil {
			c.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

func reply(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func (b *Bridge) describe(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	d := b.desc
	b.mu.Unlock()
	reply(w, 200, d)
}

func (b *Bridge) state(w http.ResponseWriter, r *http.Request) {
	out := pylabrobot.StateReply{Values: map[string]any{}, Errors: map[string]string{}, TS: float64(time.Now().UnixNano()) / 1e9}
	for _, s := range []string{conformance.SignalTemperature, conformance.SignalDoorClosed} {
		v, err := b.In.ReadSignal(s)
		if err != nil {
			out.Errors[s] = err.Error()
			continue
		}
		out.Values[s] = v
	}
	b.mu.Lock()
	out.Values["setup_finished"] = !b.notSetUp
	b.mu.Unlock()
	reply(w, 200, out)
}

func (b *Bridge) method(name string) (pylabrobot.Method, bool) {
	for _, m := range b.desc.Methods {
		if m.Name == name {
			return m, true
		}
	}
	return pylabrobot.Method{}, false
}

func newTaskID() string {
	var x [8]byte
	_, _ = rand.Read(x[:])
	return hex.EncodeToString(x[:])
}

// refresh settles a task's status from its work, counting a change in its
// version. Call with mu held.
func (t *bridgeTask) refresh() {
	if t.final || t.work == nil {
		return
	}
	before, progress := t.Status, -1.0
	if t.Progress != nil {
		progress = *t.Progress
	}
	t.settle()
	if t.Status != before || t.Progress == nil || *t.Progress != progress {
		t.Version++
	}
}

func (t *bridgeTask) settle() {
	state, result, err := t.work.State()
	p := t.work.Progress()
	t.Progress = &p
	switch state {
	case conformance.WorkRunning:
		t.Status = pylabrobot.TaskRunning
		return
	case conformance.WorkSucceeded:
		t.Status, t.Result = pylabrobot.TaskDone, result
	case conformance.WorkFailed:
		t.Status, t.Error, t.ErrorType = pylabrobot.TaskFailed, "RuntimeError: "+errText(err), "RuntimeError"
	case conformance.WorkCancelled:
		t.Status, t.Error, t.ErrorType = pylabrobot.TaskCancelled, "cancelled: the coroutine ended by CancelledError", "CancelledError"
	case conformance.WorkDropped:
		t.Status, t.Error = pylabrobot.TaskUnknown, "the machine link dropped mid-command: "+errText(err)
	}
	t.final = true
}

func errText(err error) string {
	if err == nil {
		return "failed"
	}
	return err.Error()
}

func (b *Bridge) submit(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Method   string         `json:"method"`
		Params   map[string]any `json:"params"`
		TimeoutS float64        `json:"timeout_s"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Method == "" {
		reply(w, 400, map[string]any{"error": "method (string) is required"})
		return
	}
	m, ok := b.method(body.Method)
	if !ok {
		reply(w, 404, map[string]any{"error": "no method '" + body.Method + "'"})
		return
	}
	for k := range body.Params {
		known := false
		for _, p := range m.Params {
			known = known || p.Name == k
		}
		if !known {
			reply(w, 400, map[string]any{"error": "bad params: got an unexpected keyword argument '" + k + "'"})
			return
		}
	}
	for _, p := range m.Params {
		if _, ok := body.Params[p.Name]; p.Required && !ok {
			reply(w, 400, map[string]any{"error": "bad params: missing a required argument: '" + p.Name + "'"})
			return
		}
	}
	b.mu.Lock()
	if !m.Concurrent {
		for _, t := range b.tasks {
			t.refresh()
			if t.exclusive && (t.Status == pylabrobot.TaskRunning || t.Status == pylabrobot.TaskQueued) {
				b.mu.Unlock()
				reply(w, 409, map[string]any{"error": "busy: task " + t.ID + " (" + t.Method + ") is running", "running": t.ID})
				return
			}
		}
	}
	t := &bridgeTask{Task: pylabrobot.Task{ID: newTaskID(), Method: m.Name, Params: body.Params, Status: pylabrobot.TaskRunning}, exclusive: !m.Concurrent}
	if m.Name == "setup" || b.notSetUp {
		t.final = true
		if m.Name == "setup" {
			b.notSetUp = false
			t.Status = pylabrobot.TaskDone
		} else {
			t.Status, t.ErrorType = pylabrobot.TaskFailed, "RuntimeError"
			t.Error = "RuntimeError: The setup has not finished. See `LiquidHandler.setup`."
		}
		b.tasks[t.ID] = t
		b.submitted = append(b.submitted, t.ID)
		b.mu.Unlock()
		reply(w, 202, map[string]any{"task": t.Task})
		return
	}
	if st, ok := b.forced[m.Name]; ok {
		delete(b.forced, m.Name)
		t.Status, t.final = st, true
		switch st {
		case pylabrobot.TaskFailed:
			t.Error, t.ErrorType = "RuntimeError: forced", "RuntimeError"
		case pylabrobot.TaskUnknown:
			t.Error = "no end within the timeout: the coroutine was cancelled"
		case pylabrobot.TaskDone:
			t.Result = map[string]any{"ok": true}
		}
		b.tasks[t.ID] = t
		b.submitted = append(b.submitted, t.ID)
		b.mu.Unlock()
		reply(w, 202, map[string]any{"task": t.Task})
		return
	}
	b.mu.Unlock()

	if setting, ok := strings.CutPrefix(m.Name, "set_"); ok {
		ctx, cancel := context.WithCancel(context.Background())
		t.cancel = cancel
		done := make(chan struct{})
		go func() {
			defer close(done)
			err := b.In.WriteSetting(ctx, setting, body.Params["value"])
			b.mu.Lock()
			defer b.mu.Unlock()
			defer b.bumpLocked()
			t.final = true
			t.Version++
			switch {
			case err == nil:
				t.Status = pylabrobot.TaskDone
			case err == conformance.ErrRefused || err == conformance.ErrReported:
				t.Status, t.Error, t.ErrorType = pylabrobot.TaskFailed, "ValueError: "+err.Error(), "ValueError"
			case err == conformance.ErrDropped:
				t.Status, t.Error = pylabrobot.TaskUnknown, "the machine link dropped mid-command"
			default:
				t.Status, t.Error, t.ErrorType = pylabrobot.TaskCancelled, "cancelled", "CancelledError"
			}
		}()
		b.mu.Lock()
		b.tasks[t.ID] = t
		b.submitted = append(b.submitted, t.ID)
		b.mu.Unlock()
		// A write usually settles at once; answer its state like the real
		// bridge answers right after scheduling.
		select {
		case <-done:
		case <-time.After(5 * time.Millisecond):
		}
		b.mu.Lock()
		snap := t.Task
		b.mu.Unlock()
		reply(w, 202, map[string]any{"task": snap})
		return
	}

	b.mu.Lock()
	d, timed := b.timed[m.Name]
	if timed {
		t.Version = 1
		zero := 0.0
		t.Progress = &zero
		timer := time.AfterFunc(d, func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			if !t.final {
				one := 1.0
				t.Status, t.Result, t.Progress, t.final = pylabrobot.TaskDone, map[string]any{"ok": true}, &one, true
				t.Version++
				b.bumpLocked()
			}
		})
		t.cancel = func() {
			if timer.Stop() && !t.final {
				t.Status, t.Error, t.ErrorType, t.final = pylabrobot.TaskCancelled, "cancelled", "CancelledError", true
				t.Version++
				b.bumpLocked()
			}
		}
		b.tasks[t.ID] = t
		b.submitted = append(b.submitted, t.ID)
		snap := t.Task
		b.mu.Unlock()
		reply(w, 202, map[string]any{"task": snap})
		return
	}
	b.mu.Unlock()
	work, err := b.In.Start(m.Name, body.Params)
	if err != nil {
		reply(w, 409, map[string]any{"error": "the machine refused " + m.Name + ": " + err.Error()})
		return
	}
	b.mu.Lock()
	t.work = work
	t.refresh()
	b.tasks[t.ID] = t
	b.submitted = append(b.submitted, t.ID)
	snap := t.Task
	b.mu.Unlock()
	// The work's end wakes the task's long-polls.
	go func() {
		select {
		case <-work.Done():
		case <-b.closed:
			return
		}
		b.mu.Lock()
		t.refresh()
		b.bumpLocked()
		b.mu.Unlock()
	}()
	reply(w, 202, map[string]any{"task": snap})
}

// task answers GET /tasks/{id}; with ?wait=S (a long-polling bridge) it
// holds the answer until the task's version differs from ?seen= (default:
// its version on arrival), the task ends, or S (clamped to LongPollMaxS)
// passes.
func (b *Bridge) task(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	b.mu.Lock()
	long := b.desc.Bridge.LongPollS > 0
	b.mu.Unlock()
	var wait float64
	seen, hasSeen := int64(0), false
	if q := r.URL.Query(); long && q.Has("wait") {
		v, err := strconv.ParseFloat(q.Get("wait"), 64)
		if err != nil || math.IsNaN(v) {
			reply(w, 400, map[string]any{"error": "wait must be a number of seconds"})
			return
		}
		wait = max(0, min(v, LongPollMaxS))
		if q.Has("seen") {
			if seen, err = strconv.ParseInt(q.Get("seen"), 10, 64); err != nil {
				reply(w, 400, map[string]any{"error": "seen must be an integer task version"})
				return
			}
			hasSeen = true
		}
	}
	var expired <-chan time.Time
	elapsed, waited := false, false
	if wait > 0 {
		tm := time.NewTimer(time.Duration(wait * float64(time.Second)))
		defer tm.Stop()
		expired = tm.C
	}
	for {
		b.mu.Lock()
		t, ok := b.tasks[id]
		if !ok {
			b.mu.Unlock()
			reply(w, 404, map[string]any{"error": "task not found"})
			return
		}
		t.refresh()
		snap, changed := t.Task, b.changed
		code, failing := 0, false
		if waited {
			// FailPolls or FailNextPolls landed while this long-poll waited.
			code, failing = b.failingPollLocked()
		}
		b.mu.Unlock()
		if failing {
			failPoll(w, code)
			return
		}
		if !hasSeen {
			seen, hasSeen = snap.Version, true
		}
		terminal := snap.Status != pylabrobot.TaskQueued && snap.Status != pylabrobot.TaskRunning
		if wait == 0 || elapsed || terminal || snap.Version != seen {
			out := map[string]any{"task": snap}
			if long {
				out["wait_s"] = wait
			}
			reply(w, 200, out)
			return
		}
		b.mu.Lock()
		b.waiting++
		b.mu.Unlock()
		var gone bool
		select {
		case <-changed:
		case <-expired:
			elapsed = true // answer with what the task is now
		case <-r.Context().Done():
			gone = true
		case <-b.closed:
			gone = true
		}
		b.mu.Lock()
		b.waiting--
		b.mu.Unlock()
		waited = true
		if gone {
			return
		}
	}
}

// Waiting is how many long-polls the bridge holds right now.
func (b *Bridge) Waiting() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.waiting
}

func (b *Bridge) cancelTask(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	t, ok := b.tasks[r.PathValue("id")]
	if !ok {
		b.mu.Unlock()
		reply(w, 404, map[string]any{"error": "task not found"})
		return
	}
	t.refresh()
	if !t.final {
		t.CancelRequested = true
		if t.work != nil {
			t.work.Cancel()
		}
		if t.cancel != nil {
			t.cancel()
		}
	}
	snap := t.Task
	b.mu.Unlock()
	reply(w, 202, map[string]any{"task": snap})
}

func (b *Bridge) stop(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	var cancelled []string
	for _, t := range b.tasks {
		t.refresh()
		if !t.final {
			t.CancelRequested = true
			cancelled = append(cancelled, t.ID)
			if t.cancel != nil {
				t.cancel()
			}
		}
	}
	b.notSetUp = true // PyLabRobot's stop() tears the backend down
	b.mu.Unlock()
	if err := b.In.Stop(); err != nil {
		reply(w, 200, pylabrobot.StopReply{Stopped: false, Error: "RuntimeError: " + err.Error(), Cancelled: cancelled})
		return
	}
	reply(w, 200, pylabrobot.StopReply{Stopped: true, Cancelled: cancelled})
}
