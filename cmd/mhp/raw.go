package main

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
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/client"
	"github.com/openmhp/mhp-go/transport"
)

// rawConn is a bare JSON-RPC connection that sends frames exactly as given:
// `mhp TARGET rpc` and the conformance checks use it to reach methods and
// malformed frames the client SDK never sends.
type rawConn interface {
	// do sends one frame and returns the answer frame (nil when an HTTP
	// server answered 204 to a notification).
	do(ctx context.Context, frame []byte) ([]byte, error)
	// status is the HTTP status of the last answer (0 on stdio).
	status() int
	close() error
}

// dialRaw opens a raw connection to http://… or stdio:….
func dialRaw(target, token string, stderr io.Writer) (rawConn, error) {
	switch {
	case strings.HasPrefix(target, "http://"), strings.HasPrefix(target, "https://"):
		return &httpRaw{base: strings.TrimRight(target, "/"), token: token, hc: &http.Client{}}, nil
	case strings.HasPrefix(target, "stdio:"):
		return startStdioRaw(strings.TrimPrefix(target, "stdio:"), stderr)
	}
	return nil, fmt.Errorf("target %q is not http://HOST:PORT or stdio:COMMAND", target)
}

type httpRaw struct {
	base, token string
	hc          *http.Client

	mu      sync.Mutex
	session string
	last    int
}

func (h *httpRaw) header(req *http.Request) {
	req.Header.Set(transport.HeaderClient, "mhp-cli")
	if h.token != "" {
		req.Header.Set("Authorization", "Bearer "+h.token)
	}
	h.mu.Lock()
	if h.session != "" {
		req.Header.Set(transport.HeaderSession, h.session)
	}
	h.mu.Unlock()
}

func (h *httpRaw) do(ctx context.Context, frame []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.base+"/rpc", bytes.NewReader(frame))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	h.header(req)
	resp, err := h.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.last = resp.StatusCode
	if s := resp.Header.Get(transport.HeaderSession); s != "" {
		h.session = s
	}
	h.mu.Unlock()
	if resp.StatusCode == http.StatusNoContent {
		return nil, nil
	}
	return body, nil
}

func (h *httpRaw) status() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last
}

// get fetches a path with the connection's headers.
func (h *httpRaw) get(ctx context.Context, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.base+path, nil)
	if err != nil {
		return nil, err
	}
	h.header(req)
	return h.hc.Do(req)
}

func (h *httpRaw) close() error {
	h.mu.Lock()
	s := h.session
	h.mu.Unlock()
	if s == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, h.base+"/session", nil)
	if err != nil {
		return err
	}
	h.header(req)
	resp, err := h.hc.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

type stdioRaw struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan []byte
	done  chan struct{}
}

func startStdioRaw(cmdline string, stderr io.Writer) (*stdioRaw, error) {
	argv, err := client.SplitCommand(cmdline)
	if err != nil {
		return nil, err
	}
	if len(argv) == 0 {
		return nil, fmt.Errorf("stdio: no command")
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("stdio: start %s: %w", argv[0], err)
	}
	s := &stdioRaw{cmd: cmd, in: in, lines: make(chan []byte, 64), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		r := bufio.NewReaderSize(out, 1<<20)
		for {
			line, err := r.ReadBytes('\n')
			if len(bytes.TrimSpace(line)) > 0 {
				s.lines <- line
			}
			if err != nil {
				return
			}
		}
	}()
	return s, nil
}

func (s *stdioRaw) do(ctx context.Context, frame []byte) ([]byte, error) {
	if _, err := s.in.Write(append(bytes.TrimRight(frame, "\n"), '\n')); err != nil {
		return nil, fmt.Errorf("stdio: write: %w", err)
	}
	for {
		select {
		case line := <-s.lines:
			var head struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if json.Unmarshal(line, &head) == nil && head.Method != "" && head.ID == nil {
				continue // a notification
			}
			return line, nil
		case <-s.done:
			select {
			case line := <-s.lines:
				return line, nil
			default:
			}
			return nil, fmt.Errorf("stdio: the driver process closed its output")
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (s *stdioRaw) status() int { return 0 }

func (s *stdioRaw) close() error {
	s.in.Close()
	exited := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(exited) }()
	select {
	case <-exited:
	case <-time.After(2 * time.Second):
		_ = s.cmd.Process.Kill()
		<-exited
	}
	return nil
}

// rawResponse is an answer frame.
type rawResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *mhp.Error      `json:"error"`
}

// rawCall sends a request and decodes its answer.
func rawCall(ctx context.Context, c rawConn, id int, method string, params any) (*rawResponse, error) {
	req := map[string]any{"jsonrpc": "2.0", "id": id, "method": method}
	if params != nil {
		req["params"] = params
	}
	frame, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	return rawSend(ctx, c, frame)
}

func rawSend(ctx context.Context, c rawConn, frame []byte) (*rawResponse, error) {
	b, err := c.do(ctx, frame)
	if err != nil {
		return nil, err
	}
	if b == nil {
		return nil, fmt.Errorf("no answer (HTTP %d)", c.status())
	}
	var r rawResponse
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("answer is not JSON-RPC: %v: %.200s", err, b)
	}
	return &r, nil
}

// initParams are the initialize params the CLI sends.
func initParams(version string) map[string]any {
	return map[string]any{"protocolVersion": version, "clientInfo": map[string]any{"name": "mhp-cli", "version": "mhp-go"}}
}

// rpcCmd runs `mhp TARGET rpc METHOD [JSON]`: initialize (unless METHOD is
// initialize), then the request exactly as given.
func (a *app) rpcCmd(ctx context.Context, target, token string, timeout time.Duration, p parsed, args []string) int {
	if len(args) < 1 || len(args) > 2 {
		return a.usageError("rpc: usage: mhp TARGET rpc METHOD [JSON]")
	}
	method := args[0]
	var params any
	if len(args) == 2 {
		if err := json.Unmarshal([]byte(args[1]), &params); err != nil {
			return a.usageError("rpc: params are not JSON: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := dialRaw(target, token, a.stderr)
	if err != nil {
		fmt.Fprintf(a.stderr, "mhp: %v\n", err)
		return exitNoPeer
	}
	defer c.close()
	if method != "initialize" {
		r, err := rawCall(ctx, c, 0, "initialize", initParams(mhp.ProtocolVersion))
		if err != nil {
			fmt.Fprintf(a.stderr, "mhp: initialize: %v\n", err)
			return exitNoPeer
		}
		if r.Error != nil {
			return a.fail(r.Error, p.has("json"))
		}
	}
	r, err := rawCall(ctx, c, 1, method, params)
	if err != nil {
		fmt.Fprintf(a.stderr, "mhp: %s: %v\n", method, err)
		return exitNoPeer
	}
	if r.Error != nil {
		return a.fail(r.Error, p.has("json"))
	}
	var v any
	if err := json.Unmarshal(r.Result, &v); err != nil {
		fmt.Fprintf(a.stdout, "%s\n", r.Result)
		return exitOK
	}
	a.printJSON(v)
	return exitOK
}
