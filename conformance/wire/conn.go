package wire

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/client"
)

// maxAnswer caps one answer frame read by a Conn.
const maxAnswer = 64 << 20

// DialOptions configure a Conn.
type DialOptions struct {
	// Token is the bearer token of an HTTP server.
	Token string
	// ClientID is sent as X-MHP-Client; default a unique id per Conn
	// (client.NewClientID("mhp-wire")), so two Conns are two clients to a
	// server that keys sessions by that header.
	ClientID string
	// Stderr receives a stdio driver process's stderr; nil discards it.
	Stderr io.Writer
	// HTTPClient replaces the default HTTP client.
	HTTPClient *http.Client
	// NoSession never sends Mhp-Session (the Python reference client's way:
	// it names itself by X-MHP-Client only).
	NoSession bool
}

// Conn is a bare JSON-RPC connection that sends frames exactly as given, so
// that checks (and `mhp TARGET rpc`) reach malformed frames and methods the
// client SDK never sends. Over HTTP it keeps the Mhp-Session the server
// issued at initialize, if any. It is safe for concurrent use over HTTP; over
// stdio one call at a time.
type Conn struct {
	target   string
	clientID string
	nextID   atomic.Int64

	// HTTP
	base, token string
	hc          *http.Client
	noSession   bool
	mu          sync.Mutex
	session     string
	last        int

	// stdio
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan []byte
	done  chan struct{} // the process's output ended
	quit  chan struct{} // Close: the reader stops delivering
	once  sync.Once
	smu   sync.Mutex
}

// Dial opens a Conn to "http://host:port" (or https) or "stdio:<command>"
// (the command is started; Close ends it). Nothing is sent yet.
func Dial(target string, opts DialOptions) (*Conn, error) {
	id := opts.ClientID
	if id == "" {
		id = client.NewClientID("mhp-wire")
	}
	switch {
	case strings.HasPrefix(target, "http://"), strings.HasPrefix(target, "https://"):
		hc := opts.HTTPClient
		if hc == nil {
			hc = &http.Client{}
		}
		return &Conn{target: target, clientID: id, base: strings.TrimRight(target, "/"), token: opts.Token, hc: hc,
			noSession: opts.NoSession}, nil
	case strings.HasPrefix(target, "stdio:"):
		c := &Conn{target: target, clientID: id}
		if err := c.start(strings.TrimPrefix(target, "stdio:"), opts.Stderr); err != nil {
			return nil, err
		}
		return c, nil
	}
	return nil, fmt.Errorf("wire: target %q is not http://HOST:PORT or stdio:COMMAND", target)
}

// HTTP reports whether the Conn speaks HTTP.
func (c *Conn) HTTP() bool { return c.hc != nil }

// ClientID is the X-MHP-Client the Conn sends.
func (c *Conn) ClientID() string { return c.clientID }

// Session is the Mhp-Session the server issued (HTTP), or "".
func (c *Conn) Session() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.session
}

// Status is the HTTP status of the last answer (0 on stdio).
func (c *Conn) Status() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

func (c *Conn) start(cmdline string, stderr io.Writer) error {
	argv, err := client.SplitCommand(cmdline)
	if err != nil {
		return err
	}
	if len(argv) == 0 {
		return fmt.Errorf("wire: stdio target has no command")
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	if stderr != nil {
		cmd.Stderr = stderr
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("wire: start %s: %w", argv[0], err)
	}
	c.cmd, c.in, c.lines, c.done, c.quit = cmd, in, make(chan []byte, 64), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(c.done)
		r := bufio.NewReaderSize(out, 1<<20)
		for {
			line, err := r.ReadBytes('\n')
			if len(bytes.TrimSpace(line)) > 0 {
				select {
				case c.lines <- line:
				case <-c.quit:
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	return nil
}

func (c *Conn) header(h http.Header) {
	h.Set(mhp.HeaderClient, c.clientID)
	if c.token != "" {
		h.Set("Authorization", "Bearer "+c.token)
	}
	if s := c.Session(); s != "" {
		h.Set(mhp.HeaderSession, s)
	}
}

// Do sends one frame and returns the answer frame: nil when an HTTP server
// answered a notification with no body (204, or an empty object).
func (c *Conn) Do(ctx context.Context, frame []byte) ([]byte, error) {
	if c.hc == nil {
		return c.doStdio(ctx, frame)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/rpc", bytes.NewReader(frame))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	c.header(req.Header)
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.last = resp.StatusCode
	if s := resp.Header.Get(mhp.HeaderSession); s != "" && !c.noSession {
		c.session = s
	}
	c.mu.Unlock()
	if resp.StatusCode == http.StatusNoContent || len(bytes.TrimSpace(body)) == 0 || string(bytes.TrimSpace(body)) == "{}" {
		return nil, nil
	}
	return body, nil
}

func (c *Conn) doStdio(ctx context.Context, frame []byte) ([]byte, error) {
	c.smu.Lock()
	defer c.smu.Unlock()
	var sent struct {
		ID json.RawMessage `json:"id"`
	}
	_ = json.Unmarshal(frame, &sent) // a malformed frame has no id to match
	if _, err := c.in.Write(append(bytes.TrimRight(frame, "\n"), '\n')); err != nil {
		return nil, fmt.Errorf("stdio: write: %w", err)
	}
	for {
		select {
		case line := <-c.lines:
			var head struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if json.Unmarshal(line, &head) == nil {
				if head.Method != "" && head.ID == nil {
					continue // a notification
				}
				if len(sent.ID) > 0 && len(head.ID) > 0 && string(head.ID) != "null" &&
					!bytes.Equal(bytes.TrimSpace(head.ID), bytes.TrimSpace(sent.ID)) {
					continue // a late answer to an earlier request
				}
			}
			return line, nil
		case <-c.done:
			select {
			case line := <-c.lines:
				return line, nil
			default:
			}
			return nil, fmt.Errorf("stdio: the driver process closed its output")
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Get fetches a path over HTTP with the Conn's headers.
func (c *Conn) Get(ctx context.Context, path string) (*http.Response, error) {
	if c.hc == nil {
		return nil, fmt.Errorf("wire: GET %s: not an HTTP target", path)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return nil, err
	}
	c.header(req.Header)
	return c.hc.Do(req)
}

// Close ends the Conn: over HTTP it ends a server-issued session (DELETE
// /session, best effort); over stdio it closes the process's stdin and kills
// it if it has not exited within two seconds.
func (c *Conn) Close() error {
	if c.hc == nil {
		c.once.Do(func() { close(c.quit) })
		c.in.Close()
		exited := make(chan struct{})
		go func() { _ = c.cmd.Wait(); close(exited) }()
		select {
		case <-exited:
		case <-time.After(2 * time.Second):
			_ = c.cmd.Process.Kill()
			<-exited
		}
		return nil
	}
	if c.Session() == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, c.base+"/session", nil)
	if err != nil {
		return err
	}
	c.header(req.Header)
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// Response is an answer frame. Error keeps the error object as sent.
type Response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *Error          `json:"error"`
}

// Error is a JSON-RPC error object read leniently: data may be any JSON
// value, and ts may sit in the error object itself or in data.
type Error struct {
	Code    mhp.Code
	Message string
	// Data is the error's data: an object as map[string]any, else as decoded.
	Data any
	// TS is the device clock at the refusal, 0 when absent; TSAt says where
	// it was found ("error.ts" or "error.data.ts").
	TS   float64
	TSAt string
}

// UnmarshalJSON reads an error object of any shape the spec leaves open.
func (e *Error) UnmarshalJSON(b []byte) error {
	var w struct {
		Code    json.Number `json:"code"`
		Message string      `json:"message"`
		Data    any         `json:"data"`
		TS      any         `json:"ts"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	code, err := w.Code.Int64()
	if err != nil {
		f, ferr := w.Code.Float64()
		if ferr != nil {
			return fmt.Errorf("error code %q is not a number", w.Code)
		}
		code = int64(f)
	}
	e.Code, e.Message, e.Data = mhp.Code(code), w.Message, w.Data
	if ts, ok := w.TS.(float64); ok {
		e.TS, e.TSAt = ts, "error.ts"
	} else if m, ok := w.Data.(map[string]any); ok {
		if ts, ok := m["ts"].(float64); ok {
			e.TS, e.TSAt = ts, "error.data.ts"
		}
	}
	return nil
}

// DataMap is Data as an object, or nil.
func (e *Error) DataMap() map[string]any {
	m, _ := e.Data.(map[string]any)
	return m
}

// Err converts the error to an [*mhp.Error] (ts lifted from wherever it
// was), returned as an error: nil for a nil e.
func (e *Error) Err() error {
	if e == nil {
		return nil
	}
	out := &mhp.Error{Code: e.Code, Message: e.Message, TS: e.TS}
	if m := e.DataMap(); m != nil {
		out.Data = make(map[string]any, len(m))
		for k, v := range m {
			if k != "ts" {
				out.Data[k] = v
			}
		}
		if len(out.Data) == 0 {
			out.Data = nil
		}
	} else if e.Data != nil {
		out.Data = map[string]any{"data": e.Data}
	}
	return out
}

// String renders "Name (code): message".
func (e *Error) String() string {
	if e == nil {
		return "no error"
	}
	return fmt.Sprintf("%s: %s", codeName(e.Code), e.Message)
}

// Call sends a request with the next id and decodes the answer.
func (c *Conn) Call(ctx context.Context, method string, params any) (*Response, error) {
	req := map[string]any{"jsonrpc": "2.0", "id": c.nextID.Add(1), "method": method}
	if params != nil {
		req["params"] = params
	}
	frame, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	return c.Send(ctx, frame)
}

// Send sends a frame and decodes its answer.
func (c *Conn) Send(ctx context.Context, frame []byte) (*Response, error) {
	b, err := c.Do(ctx, frame)
	if err != nil {
		return nil, err
	}
	if b == nil {
		return nil, fmt.Errorf("no answer (HTTP %d)", c.Status())
	}
	var r Response
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("answer is not JSON-RPC: %v: %.200s", err, b)
	}
	return &r, nil
}

// InitParams are the initialize params of a client named name.
func InitParams(version, name string) map[string]any {
	return map[string]any{"protocolVersion": version, "clientInfo": map[string]any{"name": name, "version": "mhp-go"}}
}

func codeName(c mhp.Code) string { return fmt.Sprintf("%s (%d)", c, int(c)) }
