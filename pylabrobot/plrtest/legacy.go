package plrtest

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"

	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/pylabrobot"
)

// Legacy routes, which are also the fake's Instrument item names (script
// them with In.Script("aspirate", conformance.Block), ...).
const (
	RouteSetup      = "setup"
	RouteStop       = "stop"
	RoutePickUpTips = "pick-up-tips"
	RouteDropTips   = "drop-tips"
	RouteAspirate   = "aspirate"
	RouteDispense   = "dispense"
)

// LegacyServer is a fake of PyLabRobot's liquid-handling server (lh-server)
// with its quirks: integer task ids from 0 that restart with the server,
// statuses queued|running|succeeded|error, a POST reply that may already be
// terminal, 400 JSON for a missing tip or offset, an HTML 500 page for an
// unknown resource, tasks that run concurrently, no cancel, no e-stop.
type LegacyServer struct {
	// In is the simulated liquid handler.
	In *conformance.Instrument
	// URL is the server's base URL.
	URL string
	// Resources are the deck's resource names; others get the HTML 500.
	Resources map[string]bool

	srv *httptest.Server

	mu        sync.Mutex
	tasks     []*legacyTask
	setupDone bool
	vanished  bool
	deck      map[string]any
	bodies    map[string][]map[string]any
	// FailNextPolls: the next pollFailN task polls answer failStatus
	// (0: dropped); failStatus < 0 fails every poll.
	pollFailN, failStatus int
}

type legacyTask struct {
	id     int
	route  string
	work   *conformance.Work
	status string
	err    string
}

// NewLegacyServer starts a fake server on 127.0.0.1 with a deck holding
// tip_rack_01_tipspot_A1..A2 and plate_01_well_A1..A2.
func NewLegacyServer() *LegacyServer { return NewLegacyServerAt("") }

// NewLegacyServerAt is NewLegacyServer listening on addr ("" picks a free
// port); it panics when addr cannot be bound.
func NewLegacyServerAt(addr string) *LegacyServer {
	l := &LegacyServer{In: conformance.NewInstrument(), bodies: map[string][]map[string]any{},
		Resources: map[string]bool{"tip_rack_01_tipspot_A1": true, "tip_rack_01_tipspot_A2": true, "plate_01_well_A1": true, "plate_01_well_A2": true}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("PLR Liquid Handling API")) })
	mux.HandleFunc("GET /status", l.status)
	mux.HandleFunc("GET /tasks", l.list)
	mux.HandleFunc("GET /tasks/{id}", l.task)
	mux.HandleFunc("POST /labware", l.labware)
	for _, route := range []string{RouteSetup, RouteStop, RoutePickUpTips, RouteDropTips, RouteAspirate, RouteDispense} {
		route := route
		mux.HandleFunc("POST /"+route, func(w http.ResponseWriter, r *http.Request) { l.command(w, r, route) })
	}
	l.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		gone := l.vanished
		l.mu.Unlock()
		if gone {
			dropConn(w)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	if addr != "" {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			panic("plrtest: listen " + addr + ": " + err.Error())
		}
		l.srv.Listener.Close()
		l.srv.Listener = ln
	}
	// The URL is known before the first request can arrive (handlers read it).
	l.URL = "http://" + l.srv.Listener.Addr().String()
	l.srv.Start()
	return l
}

// Close stops the server and releases every blocked work.
func (l *LegacyServer) Close() {
	l.In.ReleaseAll()
	l.srv.CloseClientConnections()
	l.srv.Close()
}

// Restart forgets every task: ids start again at 0.
func (l *LegacyServer) Restart() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tasks = nil
}

// Vanish drops every connection.
func (l *LegacyServer) Vanish() {
	l.mu.Lock()
	l.vanished = true
	l.mu.Unlock()
	l.srv.CloseClientConnections()
}

// Bodies returns the bodies the server accepted on a route.
func (l *LegacyServer) Bodies(route string) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]map[string]any(nil), l.bodies[route]...)
}

// Deck returns the deck last posted to /labware.
func (l *LegacyServer) Deck() map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deck
}

func (t *legacyTask) refresh() {
	if t.work == nil || t.status == pylabrobot.LegacySucceeded || t.status == pylabrobot.LegacyError {
		return
	}
	state, _, err := t.work.State()
	switch state {
	case conformance.WorkRunning:
		t.status = pylabrobot.LegacyRunning
	case conformance.WorkSucceeded:
		t.status = pylabrobot.LegacySucceeded
	default:
		t.status, t.err = pylabrobot.LegacyError, errText(err)
	}
}

func (t *legacyTask) json() map[string]any {
	out := map[string]any{"id": t.id, "status": t.status}
	if t.status == pylabrobot.LegacyError {
		out["error"] = t.err
	}
	return out
}

func (l *LegacyServer) status(w http.ResponseWriter, r *http.Request) {
	l.mu.Lock()
	for _, t := range l.tasks {
		t.refresh()
		if t.route == RouteSetup && t.status == pylabrobot.LegacySucceeded {
			l.setupDone = true
		}
		if t.route == RouteStop && t.status == pylabrobot.LegacySucceeded {
			l.setupDone = false
		}
	}
	st := "stopped"
	if l.setupDone {
		st = "running"
	}
	l.mu.Unlock()
	reply(w, 200, map[string]any{"status": st})
}

func (l *LegacyServer) list(w http.ResponseWriter, r *http.Request) {
	l.mu.Lock()
	out := []any{}
	for _, t := range l.tasks {
		t.refresh()
		out = append(out, map[string]any{"id": t.id, "status": t.status})
	}
	l.mu.Unlock()
	reply(w, 200, out)
}

// FailNextPolls makes the next n task polls (GET /tasks/{id}) fail: answer
// the HTTP status code with Flask's HTML error page (a handler that
// raised), or, with code 0, drop the connection unanswered. n < 0 fails
// every poll from now on.
func (l *LegacyServer) FailNextPolls(code, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failStatus, l.pollFailN = code, n
}

// PollsFailing is how many of the polls set by FailNextPolls are still to fail.
func (l *LegacyServer) PollsFailing() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pollFailN
}

func (l *LegacyServer) task(w http.ResponseWriter, r *http.Request) {
	l.mu.Lock()
	code, fail := l.failStatus, l.pollFailN != 0
	if l.pollFailN > 0 {
		l.pollFailN--
	}
	l.mu.Unlock()
	if fail && code == 0 {
		dropConn(w)
		return
	}
	if fail {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(code)
		_, _ = w.Write([]byte("<!doctype html><title>500 Internal Server Error</title><h1>Internal Server Error</h1>"))
		return
	}
	id, err := strconv.Atoi(r.PathValue("id"))
	l.mu.Lock()
	if err != nil || id < 0 || id >= len(l.tasks) {
		l.mu.Unlock()
		reply(w, 404, map[string]any{"error": "task not found"})
		return
	}
	t := l.tasks[id]
	t.refresh()
	out := t.json()
	l.mu.Unlock()
	reply(w, 200, out)
}

func (l *LegacyServer) labware(w http.ResponseWriter, r *http.Request) {
	var body any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		reply(w, 400, map[string]any{"error": "json data must be a dict"})
		return
	}
	m, ok := body.(map[string]any)
	if !ok {
		reply(w, 400, map[string]any{"error": "json data must be a dict"})
		return
	}
	deck, ok := m["deck"].(map[string]any)
	if !ok {
		reply(w, 400, map[string]any{"error": "missing key in json data: 'deck'"})
		return
	}
	l.mu.Lock()
	l.deck = deck
	l.mu.Unlock()
	reply(w, 200, map[string]any{"status": "ok"})
}

func (l *LegacyServer) command(w http.ResponseWriter, r *http.Request, route string) {
	var body map[string]any
	if route != RouteSetup && route != RouteStop {
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			reply(w, 400, map[string]any{"error": "json data must be a dict"})
			return
		}
		chans, _ := body["channels"].([]any)
		for _, c := range chans {
			ch, _ := c.(map[string]any)
			if _, ok := ch["tip"]; !ok {
				reply(w, 400, map[string]any{"error": "missing key in json data: 'tip'"})
				return
			}
			if _, ok := ch["offset"]; !ok {
				reply(w, 400, map[string]any{"error": "missing key in json data: 'offset'"})
				return
			}
			if route == RouteAspirate || route == RouteDispense {
				for _, k := range []string{"volume", "flow_rate", "liquid_height", "blow_out_air_volume"} {
					if _, ok := ch[k]; !ok {
						reply(w, 400, map[string]any{"error": "missing key in json data: '" + k + "'"})
						return
					}
				}
			}
			name, _ := ch["resource_name"].(string)
			if !l.Resources[name] {
				// The deck raises ResourceNotFoundError, which the server
				// does not catch: Flask's HTML error page.
				w.Header().Set("Content-Type", "text/html")
				w.WriteHeader(500)
				_, _ = w.Write([]byte("<!doctype html><title>500 Internal Server Error</title><h1>Internal Server Error</h1>"))
				return
			}
		}
	}
	work, err := l.In.Start(route, body)
	if err != nil {
		reply(w, 400, map[string]any{"error": err.Error()})
		return
	}
	l.mu.Lock()
	t := &legacyTask{id: len(l.tasks), route: route, work: work, status: pylabrobot.LegacyQueued}
	l.tasks = append(l.tasks, t)
	l.bodies[route] = append(l.bodies[route], body)
	t.refresh()
	if state, _, _ := work.State(); state == conformance.WorkDropped {
		l.mu.Unlock()
		dropConn(w)
		return
	}
	out := t.json()
	l.mu.Unlock()
	reply(w, 200, out)
}
