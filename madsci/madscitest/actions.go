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
// SetAdminCommands, FailRoute (a route answering 5xx), Options.Addr (come
// back on a known address), and the Instrument's Script/Release.
package madscitest

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/madsci"
)

// statusOf is an action's status. Call with mu held.
func (a *ActionRecord) statusOf() string {
	switch {
	case !a.started:
		return madsci.StatusUnknown // pending actions are not in the history
	case a.status != "":
		return a.status
	case a.held:
		return madsci.StatusPaused
	}
	return madsci.StatusRunning
}

func (n *Node) resultLocked(a *ActionRecord) madsci.ActionResult {
	res := madsci.ActionResult{ActionID: a.ID, Status: a.statusOf(), Errors: a.errors, HistoryCreatedAt: now()}
	if a.statusOf() == madsci.StatusSucceeded {
		res.JSONResult = a.result
		if a.Name == "transfer" {
			res.Files = []string{"report"}
			res.Datapoints = map[string]string{"report": newID()}
		}
	}
	if res.Errors == nil {
		res.Errors = []madsci.NodeError{}
	}
	return res
}

func (n *Node) statusByID(w http.ResponseWriter, r *http.Request) {
	if n.failed(w, r) {
		return
	}
	n.mu.Lock()
	n.refresh()
	a, ok := n.actions[r.PathValue("id")]
	st := madsci.StatusUnknown
	if ok {
		st = a.statusOf()
	}
	n.mu.Unlock()
	writeJSON(w, 200, st)
}

func (n *Node) resultByID(w http.ResponseWriter, r *http.Request) {
	if n.failed(w, r) {
		return
	}
	n.mu.Lock()
	n.refresh()
	a, ok := n.actions[r.PathValue("id")]
	var res madsci.ActionResult
	if ok && a.started && r.PathValue("name") != "" && n.declaresJSON(a.Name) &&
		(a.statusOf() == madsci.StatusFailed || a.statusOf() == madsci.StatusCancelled) {
		// Quirk: FastAPI validates the named route's reply against the
		// action's declared return type; json_result None fails it.
		n.mu.Unlock()
		http.Error(w, "Internal Server Error", http.StatusInternalServerError)
		return
	}
	if ok && a.started {
		res = n.resultLocked(a)
	} else {
		// Quirk: a new random id and ActionHistoryNotFound.
		res = madsci.ActionResult{ActionID: newID(), Status: madsci.StatusUnknown,
			Errors: []madsci.NodeError{{Message: "Action history not found", ErrorType: "ActionHistoryNotFound"}}}
	}
	n.mu.Unlock()
	writeJSON(w, 200, res)
}

// download serves a succeeded action's result files as a zip (404 when it
// has none, 400 when it did not succeed), as the real node does.
func (n *Node) download(w http.ResponseWriter, r *http.Request) {
	if n.failed(w, r) {
		return
	}
	n.mu.Lock()
	n.refresh()
	a, ok := n.actions[r.PathValue("id")]
	var st, name, id string
	if ok {
		st, name, id = a.statusOf(), a.Name, a.ID
	}
	n.mu.Unlock()
	switch {
	case !ok || name != "transfer":
		writeJSON(w, 404, map[string]any{"detail": "No files found for action"})
		return
	case st != madsci.StatusSucceeded:
		writeJSON(w, 400, map[string]any{"detail": "Action has not succeeded"})
		return
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	f, _ := zw.Create("report.csv")
	fmt.Fprintf(f, "action,%s\nwell,A1\n", id)
	_ = zw.Close()
	w.Header().Set("Content-Type", "application/zip")
	_, _ = w.Write(buf.Bytes())
}

// declaresJSON reports whether the action declares a json return type.
func (n *Node) declaresJSON(name string) bool {
	for _, r := range n.info.Actions[name].Results {
		if r.ResultType == "json" {
			return true
		}
	}
	return false
}

// checkArgs validates args against the action's typed signature (422 shape).
func (n *Node) checkArgs(def madsci.ActionDef, args map[string]any) []any {
	var detail []any
	for name, arg := range def.Args {
		v, ok := args[name]
		if !ok || v == nil {
			if arg.Required {
				detail = append(detail, map[string]any{"type": "missing", "loc": []any{"body", "args", name}, "msg": "Field required", "input": args})
			}
			continue
		}
		bad := false
		switch arg.ArgumentType {
		case "float":
			_, isNum := v.(float64)
			bad = !isNum
		case "int":
			f, isNum := v.(float64)
			bad = !isNum || f != float64(int64(f))
		case "str", "Optional[str]":
			_, isStr := v.(string)
			bad = !isStr
		case "list[dict]":
			_, isList := v.([]any)
			bad = !isList
		}
		if bad {
			detail = append(detail, map[string]any{"type": "type_error", "loc": []any{"body", "args", name}, "msg": "Input should be a valid " + arg.ArgumentType, "input": v})
		}
	}
	return detail
}

func (n *Node) create(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	n.mu.Lock()
	def, ok := n.info.Actions[name]
	n.mu.Unlock()
	if !ok {
		writeJSON(w, 404, map[string]any{"detail": "Not Found"})
		return
	}
	var body struct {
		Args map[string]any `json:"args"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		writeJSON(w, 422, map[string]any{"detail": []any{map[string]any{"type": "json_invalid", "msg": err.Error()}}})
		return
	}
	if d := n.checkArgs(def, body.Args); len(d) > 0 {
		writeJSON(w, 422, map[string]any{"detail": d})
		return
	}
	a := &ActionRecord{ID: newID(), Name: name, Args: body.Args, Blocking: def.IsBlocking(), at: time.Now()}
	n.mu.Lock()
	n.actions[a.ID] = a
	n.mu.Unlock()
	writeJSON(w, 200, map[string]any{"action_id": a.ID})
}

func (n *Node) upload(w http.ResponseWriter, r *http.Request) {
	id, arg := r.PathValue("id"), r.PathValue("arg")
	n.mu.Lock()
	a, ok := n.actions[id]
	var def madsci.ActionDef
	if ok {
		def = n.info.Actions[a.Name]
	}
	n.mu.Unlock()
	if !ok {
		writeJSON(w, 404, map[string]any{"detail": "Action not found"})
		return
	}
	if _, ok := def.Files[arg]; !ok {
		writeJSON(w, 422, map[string]any{"detail": "unknown file argument " + arg})
		return
	}
	files, err := readParts(r, "file", "files")
	if err != nil || len(files) == 0 {
		writeJSON(w, 422, map[string]any{"detail": fmt.Sprintf("no file in upload: %v", err)})
		return
	}
	for i := range files {
		files[i].Arg = arg
	}
	n.mu.Lock()
	a.Files = append(a.Files, files...)
	n.mu.Unlock()
	reply := map[string]any{"status": "uploaded", "file_arg": arg}
	if len(files) > 1 {
		reply["file_count"] = len(files)
	}
	writeJSON(w, 200, reply)
}

func readParts(r *http.Request, fields ...string) ([]UploadedFile, error) {
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, err
	}
	var out []UploadedFile
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if !containsStr(fields, p.FormName()) {
			continue
		}
		data, err := io.ReadAll(io.LimitReader(p, 32<<20))
		if err != nil {
			return nil, err
		}
		out = append(out, UploadedFile{Name: p.FileName(), Data: data})
	}
}

func containsStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (n *Node) start(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	n.mu.Lock()
	n.startRequests++
	a, ok := n.actions[id]
	if !ok || a.started {
		n.mu.Unlock()
		msg := "Action " + id + " not found"
		writeJSON(w, 200, madsci.ActionResult{ActionID: id, Status: madsci.StatusFailed,
			Errors: []madsci.NodeError{{Message: msg, ErrorType: "NotFound", LoggedAt: now()}}})
		return
	}
	n.mu.Unlock()
	res, dropped := n.begin(a)
	if dropped {
		drop(w)
		return
	}
	writeJSON(w, 200, res)
}

// begin starts a created action and answers its result.
func (n *Node) begin(a *ActionRecord) (madsci.ActionResult, bool) {
	n.mu.Lock()
	st := n.statusLocked()
	a.started, a.at = true, time.Now()
	if forced, ok := n.endNext[a.Name]; ok {
		delete(n.endNext, a.Name)
		a.status = forced
		if forced == madsci.StatusFailed {
			a.errors = []madsci.NodeError{{Message: "forced failure", ErrorType: "RuntimeError", LoggedAt: now()}}
		}
		if forced == madsci.StatusNotReady {
			a.errors = []madsci.NodeError{{Message: "Node is not ready: forced", ErrorType: "NodeNotReady", LoggedAt: now()}}
		}
		res := n.resultLocked(a)
		n.mu.Unlock()
		return res, false
	}
	notReady := st.Paused || st.Locked || st.Errored || st.Stopped || (a.Blocking && st.Busy)
	if notReady {
		a.status = madsci.StatusNotReady
		a.errors = []madsci.NodeError{{Message: "Node is not ready: " + st.Description, ErrorType: "NodeNotReady", LoggedAt: now()}}
		res := n.resultLocked(a)
		n.mu.Unlock()
		return res, false
	}
	n.mu.Unlock()
	work, err := n.In.Start(a.Name, a.Args)
	n.mu.Lock()
	defer n.mu.Unlock()
	if err != nil {
		a.status = madsci.StatusNotReady
		a.errors = []madsci.NodeError{{Message: "Node is not ready: " + err.Error(), ErrorType: "NodeNotReady", LoggedAt: now()}}
		return n.resultLocked(a), false
	}
	a.work, a.running = work, true
	if state, _, _ := work.State(); state == conformance.WorkDropped {
		// The instrument lost the link after the command: nobody will ever
		// know the outcome; the reply never comes.
		a.status, a.running = madsci.StatusUnknown, false
		return madsci.ActionResult{}, true
	}
	n.refresh()
	return n.resultLocked(a), false
}

func (n *Node) legacySend(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	name := q.Get("action_name")
	n.mu.Lock()
	def, ok := n.info.Actions[name]
	n.mu.Unlock()
	if !ok {
		writeJSON(w, 200, madsci.ActionResult{ActionID: newID(), Status: madsci.StatusFailed,
			Errors: []madsci.NodeError{{Message: "Action " + name + " not implemented", ErrorType: "NotImplemented"}}})
		return
	}
	var args map[string]any
	if s := q.Get("args"); s != "" {
		if err := json.Unmarshal([]byte(s), &args); err != nil {
			writeJSON(w, 422, map[string]any{"detail": "args is not JSON"})
			return
		}
	}
	if d := n.checkArgs(def, args); len(d) > 0 {
		writeJSON(w, 422, map[string]any{"detail": d})
		return
	}
	id := q.Get("action_id")
	if id == "" {
		id = newID()
	}
	a := &ActionRecord{ID: id, Name: name, Args: args, Blocking: def.IsBlocking(), at: time.Now()}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/") {
		files, err := readParts(r, "files")
		if err != nil {
			writeJSON(w, 422, map[string]any{"detail": err.Error()})
			return
		}
		for i := range files {
			files[i].Arg = files[i].Name // v0.1-v0.4: the file name is the arg name
		}
		a.Files = files
	}
	n.mu.Lock()
	n.actions[a.ID] = a
	n.mu.Unlock()
	res, dropped := n.begin(a)
	if dropped {
		drop(w)
		return
	}
	writeJSON(w, 200, res)
}

func (n *Node) legacyResult(w http.ResponseWriter, r *http.Request) {
	n.resultByID(w, r)
}
