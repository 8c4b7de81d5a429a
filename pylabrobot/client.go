package pylabrobot

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/openmhp/mhp-go"
)

// httpClient is the transport both clients share: a base URL, a deadline on
// every request and JSON bodies.
type httpClient struct {
	base    *url.URL
	timeout time.Duration
	hc      *http.Client
}

func newHTTPClient(raw string, timeout time.Duration, hc *http.Client) (*httpClient, error) {
	u, err := url.Parse(strings.TrimRight(raw, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("pylabrobot: url %q is not an http(s) URL", raw)
	}
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	if hc == nil {
		hc = &http.Client{}
	}
	return &httpClient{base: u, timeout: timeout, hc: hc}, nil
}

// HTTPError is a non-2xx reply.
type HTTPError struct {
	Method, Path string
	Status       int
	// Message is the reply's "error" field, or the start of the body.
	Message string
	// JSON says whether the body was a JSON object (the legacy server's
	// unknown-resource 500 is an HTML page).
	JSON bool
	// Body is the decoded JSON body, when there was one.
	Body map[string]any
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("pylabrobot: %s %s: HTTP %d: %s", e.Method, e.Path, e.Status, e.Message)
}

// do sends a request and decodes a 2xx JSON reply into out (when not nil).
func (c *httpClient) do(ctx context.Context, method, path string, in, out any) error {
	return c.doWithin(ctx, 0, method, path, in, out)
}

// doWithin is do with the request timeout stretched by extra (the time a
// long-poll may be held).
func (c *httpClient) doWithin(ctx context.Context, extra time.Duration, method, path string, in, out any) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout+extra)
	defer cancel()
	var rd io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	u := *c.base
	path, u.RawQuery, _ = strings.Cut(path, "?")
	u.Path = c.base.Path + path
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		he := &HTTPError{Method: method, Path: path, Status: resp.StatusCode}
		var body map[string]any
		if json.Unmarshal(data, &body) == nil {
			he.JSON, he.Body = true, body
			if m, ok := body["error"].(string); ok {
				he.Message = m
			}
		}
		if he.Message == "" {
			s := strings.TrimSpace(string(data))
			if len(s) > 200 {
				s = s[:200] + "..."
			}
			he.Message = s
		}
		return he
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("pylabrobot: %s %s: bad JSON reply: %w", method, path, err)
	}
	return nil
}

// ---- bridge

// Machine is the bridge's description, state and stop.
type Machine interface {
	Describe(ctx context.Context) (*Description, error)
	State(ctx context.Context) (*StateReply, error)
	Stop(ctx context.Context) (*StopReply, error)
}

// Tasks runs the bridge's tasks. Submit returns an *mhp.Error when the
// bridge refused before a task existed; any other error leaves it unknown
// whether the task started.
type Tasks interface {
	Submit(ctx context.Context, method string, params map[string]any, timeoutS float64) (*Task, error)
	// Task reads one task; with w.For > 0 (only against a bridge whose
	// /describe offers long-poll) the bridge may hold the answer until the
	// task's version differs from w.Seen or w.For has passed, and ctx
	// ending cuts the wait.
	Task(ctx context.Context, id string, w Wait) (*Task, error)
	Cancel(ctx context.Context, id string) (*Task, error)
}

// Description is GET /describe of the bridge.
type Description struct {
	Bridge struct {
		Name    string `json:"name"`
		Version string `json:"version"`
		// LongPollS is the longest a bridge holds GET /tasks/{id}?wait=
		// for a task's change (a long-poll); 0: it does not (bridges
		// before version 2), so the adapter polls.
		LongPollS float64 `json:"long_poll_s,omitempty"`
	} `json:"bridge"`
	Machine struct {
		Class   string `json:"class"`
		Module  string `json:"module"`
		Doc     string `json:"doc"`
		HasDeck bool   `json:"has_deck"`
		Stop    bool   `json:"stop"`
	} `json:"machine"`
	Methods []Method    `json:"methods"`
	State   []StateItem `json:"state"`
}

// Method is one public coroutine of the machine.
type Method struct {
	Name        string     `json:"name"`
	Doc         string     `json:"doc"`
	Params      []TypeDesc `json:"params"`
	Returns     TypeDesc   `json:"returns"`
	Cancellable bool       `json:"cancellable"`
	Concurrent  bool       `json:"concurrent"`
}

// TypeDesc is the bridge's description of a parameter or value type.
type TypeDesc struct {
	Name       string    `json:"name,omitempty"`
	Type       string    `json:"type"`
	PythonType string    `json:"python_type,omitempty"`
	Items      *TypeDesc `json:"items,omitempty"`
	Enum       []any     `json:"enum,omitempty"`
	Nullable   bool      `json:"nullable,omitempty"`
	Resource   bool      `json:"resource,omitempty"`
	// ResourceTypes are the resource classes a Union admits
	// (Union[TipSpot, Trash] -> [TipSpot, Trash]).
	ResourceTypes []string `json:"resource_types,omitempty"`
	// OneOf are the members of a Union that is not all resources
	// (Union[Resource, Coordinate]).
	OneOf       []TypeDesc `json:"one_of,omitempty"`
	Required    bool       `json:"required,omitempty"`
	Default     any        `json:"default,omitempty"`
	DefaultRepr string     `json:"default_repr,omitempty"`
	Kind        string     `json:"kind,omitempty"`
}

// StateItem is one readable state value.
type StateItem struct {
	Name   string `json:"name"`
	Type   string `json:"type"`
	Source string `json:"source,omitempty"`
}

// StateReply is GET /state.
type StateReply struct {
	Values map[string]any    `json:"values"`
	Errors map[string]string `json:"errors"`
	TS     float64           `json:"ts"`
}

// StopReply is POST /stop.
type StopReply struct {
	Stopped   bool     `json:"stopped"`
	Error     string   `json:"error,omitempty"`
	Cancelled []string `json:"cancelled,omitempty"`
}

// Task statuses of the bridge.
const (
	TaskQueued    = "queued"
	TaskRunning   = "running"
	TaskDone      = "done"
	TaskFailed    = "failed"
	TaskCancelled = "cancelled"
	TaskUnknown   = "unknown"
)

// Task is one bridge task.
type Task struct {
	ID              string         `json:"id"`
	Method          string         `json:"method"`
	Params          map[string]any `json:"params,omitempty"`
	Status          string         `json:"status"`
	Progress        *float64       `json:"progress"`
	Message         string         `json:"message,omitempty"`
	Result          any            `json:"result,omitempty"`
	Error           string         `json:"error,omitempty"`
	ErrorType       string         `json:"error_type,omitempty"`
	CancelRequested bool           `json:"cancel_requested,omitempty"`
	// Version counts the task's changes (status, progress, message) at
	// a long-polling bridge; 0 from older bridges.
	Version int64 `json:"version,omitempty"`
	// Held is set by [BridgeClient.Task], not sent: the bridge held this
	// answer as a long-poll (false: it answered at once, because it was
	// asked no wait, the task had changed, or it holds no more waits).
	Held bool `json:"-"`
}

// Wait is a long-poll of GET /tasks/{id}: For is how long the bridge may
// hold the answer (0: answer at once; the bridge clamps it to its
// long_poll_s), Seen the task version the caller already has (the answer
// comes as soon as the task's version differs).
type Wait struct {
	For  time.Duration
	Seen int64
}

// BridgeClient speaks the plrbridge API. It implements Machine and Tasks.
type BridgeClient struct{ c *httpClient }

// NewBridgeClient returns a client of the bridge at url; timeout bounds each request.
func NewBridgeClient(url string, timeout time.Duration, hc *http.Client) (*BridgeClient, error) {
	c, err := newHTTPClient(url, timeout, hc)
	if err != nil {
		return nil, err
	}
	return &BridgeClient{c: c}, nil
}

// Describe implements Machine.
func (b *BridgeClient) Describe(ctx context.Context) (*Description, error) {
	var d Description
	if err := b.c.do(ctx, http.MethodGet, "/describe", nil, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// State implements Machine.
func (b *BridgeClient) State(ctx context.Context) (*StateReply, error) {
	var s StateReply
	if err := b.c.do(ctx, http.MethodGet, "/state", nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Stop implements Machine.
func (b *BridgeClient) Stop(ctx context.Context) (*StopReply, error) {
	var s StopReply
	if err := b.c.do(ctx, http.MethodPost, "/stop", nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Submit implements Tasks.
func (b *BridgeClient) Submit(ctx context.Context, method string, params map[string]any, timeoutS float64) (*Task, error) {
	body := map[string]any{"method": method, "params": params}
	if timeoutS > 0 {
		body["timeout_s"] = timeoutS
	}
	var out struct {
		Task Task `json:"task"`
	}
	// The submit is not cut by ctx: once sent, only the reply tells whether
	// the task exists.
	if err := b.c.do(context.WithoutCancel(ctx), http.MethodPost, "/tasks", body, &out); err != nil {
		if r := bridgeRefusal(err, method); r != nil {
			return nil, r
		}
		return nil, fmt.Errorf("pylabrobot: submit %s: %w", method, err)
	}
	if out.Task.ID == "" {
		return nil, fmt.Errorf("pylabrobot: submit %s: the reply has no task id", method)
	}
	return &out.Task, nil
}

// bridgeRefusal maps the bridge's 4xx replies (raised before a task exists)
// onto refusals.
func bridgeRefusal(err error, method string) *mhp.Error {
	var he *HTTPError
	if !errors.As(err, &he) || he.Status < 400 || he.Status > 499 {
		return nil
	}
	code := mhp.CodeServerError
	switch he.Status {
	case http.StatusBadRequest:
		code = mhp.CodeInvalidValue
	case http.StatusNotFound:
		code = mhp.CodeUnknownName
	case http.StatusConflict:
		code = mhp.CodeDeviceBusy
	}
	return mhp.Errorf(code, "the PyLabRobot bridge refused %s (HTTP %d): %s", method, he.Status, he.Message).
		With("outcome", mhp.OutcomeNotStarted).With("http_status", he.Status)
}

// Task implements Tasks. A long-poll's request deadline is the client's
// request timeout plus the wait.
func (b *BridgeClient) Task(ctx context.Context, id string, w Wait) (*Task, error) {
	var out struct {
		Task  Task    `json:"task"`
		WaitS float64 `json:"wait_s"`
	}
	path := "/tasks/" + url.PathEscape(id)
	var extra time.Duration
	if w.For > 0 {
		path += "?wait=" + strconv.FormatFloat(w.For.Seconds(), 'f', -1, 64) + "&seen=" + strconv.FormatInt(w.Seen, 10)
		extra = w.For
	}
	if err := b.c.doWithin(ctx, extra, http.MethodGet, path, nil, &out); err != nil {
		return nil, err
	}
	out.Task.Held = w.For > 0 && out.WaitS > 0
	return &out.Task, nil
}

// Cancel implements Tasks.
func (b *BridgeClient) Cancel(ctx context.Context, id string) (*Task, error) {
	var out struct {
		Task Task `json:"task"`
	}
	if err := b.c.do(ctx, http.MethodPost, "/tasks/"+url.PathEscape(id)+"/cancel", nil, &out); err != nil {
		return nil, err
	}
	return &out.Task, nil
}

// ---- legacy liquid-handling server

// Legacy is the legacy liquid-handling server (lh-server).
type Legacy interface {
	// SetupFinished reads GET /status ("running" once setup finished).
	SetupFinished(ctx context.Context) (bool, error)
	// Post sends a task-creating command (setup, stop, pick-up-tips, ...).
	// An *mhp.Error means the server refused before a task existed.
	Post(ctx context.Context, command string, body any) (*LegacyTask, error)
	// Task reads GET /tasks/{id}.
	Task(ctx context.Context, id int) (*LegacyTask, error)
	// Labware replaces the deck (POST /labware, synchronous).
	Labware(ctx context.Context, deck map[string]any) error
}

// Legacy task statuses.
const (
	LegacyQueued    = "queued"
	LegacyRunning   = "running"
	LegacySucceeded = "succeeded"
	LegacyError     = "error"
)

// LegacyTask is a task of the legacy server.
type LegacyTask struct {
	ID     int    `json:"id"`
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
}

// LegacyClient speaks the legacy server API. It implements Legacy.
type LegacyClient struct{ c *httpClient }

// NewLegacyClient returns a client of the legacy server at url.
func NewLegacyClient(url string, timeout time.Duration, hc *http.Client) (*LegacyClient, error) {
	c, err := newHTTPClient(url, timeout, hc)
	if err != nil {
		return nil, err
	}
	return &LegacyClient{c: c}, nil
}

// SetupFinished implements Legacy.
func (l *LegacyClient) SetupFinished(ctx context.Context) (bool, error) {
	var s struct {
		Status string `json:"status"`
	}
	if err := l.c.do(ctx, http.MethodGet, "/status", nil, &s); err != nil {
		return false, err
	}
	switch s.Status {
	case "running":
		return true, nil
	case "stopped":
		return false, nil
	}
	return false, fmt.Errorf("pylabrobot: GET /status answered %q", s.Status)
}

// Post implements Legacy.
func (l *LegacyClient) Post(ctx context.Context, command string, body any) (*LegacyTask, error) {
	var t LegacyTask
	if err := l.c.do(context.WithoutCancel(ctx), http.MethodPost, "/"+command, body, &t); err != nil {
		if r := legacyRefusal(err, command); r != nil {
			return nil, r
		}
		return nil, fmt.Errorf("pylabrobot: POST /%s: %w", command, err)
	}
	if t.Status == "" {
		return nil, fmt.Errorf("pylabrobot: POST /%s: the reply has no task status", command)
	}
	return &t, nil
}

// legacyRefusal: a 400 JSON reply, or the 500 HTML page the server answers
// for an unknown resource, is raised while parsing the body, before a task
// exists.
func legacyRefusal(err error, command string) *mhp.Error {
	var he *HTTPError
	if !errors.As(err, &he) {
		return nil
	}
	switch {
	case he.Status >= 400 && he.Status < 500:
		code := mhp.CodeInvalidValue
		if he.Status == http.StatusNotFound {
			code = mhp.CodeUnknownName
		}
		return mhp.Errorf(code, "the liquid-handling server refused %s (HTTP %d): %s", command, he.Status, he.Message).
			With("outcome", mhp.OutcomeNotStarted)
	case he.Status == http.StatusInternalServerError && !he.JSON:
		return mhp.Errorf(mhp.CodeInvalidValue, "the liquid-handling server refused %s while parsing it (HTTP 500 page; usually an unknown resource name)", command).
			With("outcome", mhp.OutcomeNotStarted)
	}
	return nil
}

// Task implements Legacy.
func (l *LegacyClient) Task(ctx context.Context, id int) (*LegacyTask, error) {
	var t LegacyTask
	if err := l.c.do(ctx, http.MethodGet, "/tasks/"+strconv.Itoa(id), nil, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// Labware implements Legacy.
func (l *LegacyClient) Labware(ctx context.Context, deck map[string]any) error {
	var out map[string]any
	if err := l.c.do(ctx, http.MethodPost, "/labware", map[string]any{"deck": deck}, &out); err != nil {
		if r := legacyRefusal(err, "labware"); r != nil {
			return r
		}
		return err
	}
	if out["status"] != "ok" {
		return fmt.Errorf("pylabrobot: POST /labware answered %v", out)
	}
	return nil
}

var (
	_ Machine = (*BridgeClient)(nil)
	_ Tasks   = (*BridgeClient)(nil)
	_ Legacy  = (*LegacyClient)(nil)
)
