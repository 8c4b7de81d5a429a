package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/examples/sim"
	"github.com/openmhp/mhp-go/transport"
)

// quiet is the logger of every server the rows start.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// childEnv names the environment variable that makes a process a bench
// child; its value is the child's mode.
const childEnv = "MHP_BENCH_CHILD"

// MaybeChild runs the child named by the environment, when this process
// is one, and exits; otherwise it returns at once. Call it first in main
// (or TestMain) of a binary that runs [Run].
func MaybeChild() {
	mode := os.Getenv(childEnv)
	if mode == "" {
		return
	}
	if err := runChild(mode); err != nil {
		fmt.Fprintln(os.Stderr, "bench child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func runChild(mode string) error {
	kind, arg, _ := strings.Cut(mode, ":")
	switch kind {
	case "serve":
		return childServe(arg)
	case "load":
		return childLoad(arg)
	case "devices":
		return childDevices(arg)
	}
	return fmt.Errorf("unknown mode %q", mode)
}

// child is a running child process: its first line of output was read.
type child struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	out   *bufio.Reader
	first string
}

// startChild starts this binary as a child in mode and reads its first line.
func startChild(mode string) (*child, error) { return startChildNice(mode, 0) }

// startChildNice is startChild with the child at nice level nice (through
// the nice command; 0: as this process).
func startChildNice(mode string, nice int) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	if nice != 0 {
		cmd = exec.Command("nice", "-n", strconv.Itoa(nice), exe)
	}
	cmd.Env = append(os.Environ(), childEnv+"="+mode)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	outp, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, in: in, out: bufio.NewReader(outp)}
	line, err := c.out.ReadString('\n')
	if err != nil {
		c.stop()
		return nil, fmt.Errorf("child %s: %v (did main call bench.MaybeChild?)", mode, err)
	}
	c.first = strings.TrimSpace(line)
	return c, nil
}

// stop closes the child's stdin (its signal to exit) and waits for it.
func (c *child) stop() {
	c.in.Close()
	done := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
}

// waitStdin blocks until the parent closes stdin.
func waitStdin() { _, _ = io.Copy(io.Discard, os.Stdin) }

// cpuNow is this process's user+system CPU time.
func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuHandler answers GET /bench/cpu with this process's CPU time in ns.
func cpuHandler(w http.ResponseWriter, _ *http.Request) {
	fmt.Fprint(w, cpuNow().Nanoseconds())
}

// nullRPC is the null JSON-RPC server: it reads the body, decodes the
// envelope and answers an empty result with the request's id.
func nullRPC(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	resp, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  struct{}        `json:"result"`
	}{"2.0", req.ID, struct{}{}})
	_, _ = w.Write(resp)
}

// simServer is the simulated thermocycler behind a transport server.
func simServer() (*transport.Server, func(), error) {
	drv, err := newSimDriver("thermocycler-01")
	if err != nil {
		return nil, nil, err
	}
	srv := transport.NewServer(drv, transport.Options{MaxSessions: 4096, MaxConns: 8192, Logger: quiet})
	return srv, func() { srv.Close(); drv.Close() }, nil
}

// childServe serves "null" or "sim" on a loopback port with /bench/cpu
// beside it, prints "addr <host:port>" and serves until stdin closes.
// "sim-echo" is "sim" with a TCP echo beside it (the estop row's floor):
// "addr <host:port> echo <host:port>".
func childServe(kind string) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/bench/cpu", cpuHandler)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	extra := ""
	switch kind {
	case "null":
		mux.HandleFunc("/rpc", nullRPC)
		hs := &http.Server{Handler: mux}
		go func() { _ = hs.Serve(ln) }()
		defer hs.Close()
	case "sim", "sim-echo":
		srv, closeFn, err := simServer()
		if err != nil {
			return err
		}
		defer closeFn()
		mux.Handle("/", srv.Handler())
		go func() { _ = transport.ServeHandler(ctx, ln, srv, mux) }()
		if kind == "sim-echo" { // the estop row's floor (echo.go)
			eln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return err
			}
			go serveEcho(ctx, eln)
			extra = " echo " + eln.Addr().String()
		}
	default:
		return fmt.Errorf("serve: unknown kind %q", kind)
	}
	stopProfile, err := childProfile(kind)
	if err != nil {
		return err
	}
	defer stopProfile()
	fmt.Printf("addr %s%s\n", ln.Addr(), extra)
	waitStdin()
	return nil
}

// childProfile starts a CPU profile of a serve child when
// MHP_BENCH_CPUPROFILE names a path: the profile of the child serving kind
// is written to "<path>.<kind>.<pid>" when it stops (go tool pprof). With
// MHP_BENCH_TRACE instead, an execution trace (go tool trace).
func childProfile(kind string) (stop func(), err error) {
	start, end, path := pprof.StartCPUProfile, pprof.StopCPUProfile, os.Getenv("MHP_BENCH_CPUPROFILE")
	if p := os.Getenv("MHP_BENCH_TRACE"); p != "" {
		start, end, path = trace.Start, trace.Stop, p
	}
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(fmt.Sprintf("%s.%s.%d", path, kind, os.Getpid()))
	if err != nil {
		return nil, err
	}
	if err := start(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { end(); f.Close() }, nil
}

// childLoad runs clients reading as fast as they can against url; it
// prints "ready" once every client has a session, and on stdin's close
// ends the sessions and exits. arg is "<clients>:<url>".
func childLoad(arg string) error {
	nStr, url, _ := strings.Cut(arg, ":")
	n, err := strconv.Atoi(nStr)
	if err != nil {
		return err
	}
	hc := newHTTPClient(n + 4)
	sessions := make([]string, n)
	for i := range sessions {
		if sessions[i], err = initialize(hc, url, fmt.Sprintf("load-%d", i)); err != nil {
			return err
		}
	}
	stop := make(chan struct{})
	var reads atomic.Int64
	var wg sync.WaitGroup
	for _, sid := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := post(hc, url, sid, readBody); err == nil {
					reads.Add(1)
				}
			}
		}()
	}
	fmt.Println("ready")
	waitStdin()
	close(stop)
	wg.Wait()
	// The clients leave as clients do (DELETE /session): the next load's
	// server holds its own 32 sessions, not every earlier load's too.
	for _, sid := range sessions {
		endSession(hc, url, sid)
	}
	return nil
}

// endSession ends the session sid on the MHP server at url (best effort).
func endSession(hc *http.Client, url, sid string) {
	req, _ := http.NewRequest(http.MethodDelete, url+"/session", nil)
	req.Header.Set(mhp.HeaderSession, sid)
	if resp, err := hc.Do(req); err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// The request bodies of the HTTP rows.
const (
	readBody     = `{"jsonrpc":"2.0","id":1,"method":"signals/read","params":{"names":["block_temperature"]}}`
	dryWriteBody = `{"jsonrpc":"2.0","id":2,"method":"settings/write","params":{"name":"target_temperature","value":50,"dryRun":true}}`
	summaryBody  = `{"jsonrpc":"2.0","id":3,"method":"device/describe","params":{"detail":"summary"}}`
	estopBody    = `{"jsonrpc":"2.0","id":4,"method":"safety/estop","params":{"reason":"bench"}}`
	resetBody    = `{"jsonrpc":"2.0","id":5,"method":"safety/reset","params":{}}`
)

func newHTTPClient(conns int) *http.Client {
	return &http.Client{Timeout: 30 * time.Second,
		Transport: &http.Transport{MaxIdleConns: conns, MaxIdleConnsPerHost: conns, IdleConnTimeout: time.Minute}}
}

// initialize opens a session on the MHP server at url and returns its secret.
func initialize(hc *http.Client, url, name string) (string, error) {
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":%q,"clientInfo":{"name":%q}}}`,
		mhp.ProtocolVersion, name)
	req, _ := http.NewRequest(http.MethodPost, url+"/rpc", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	sid := resp.Header.Get(mhp.HeaderSession)
	if sid == "" {
		return "", fmt.Errorf("initialize: no session: %s", b)
	}
	return sid, nil
}

// post sends one JSON-RPC body and returns the answer; an error answer is
// an error.
func post(hc *http.Client, url, sid, body string) ([]byte, error) {
	req, _ := http.NewRequest(http.MethodPost, url+"/rpc", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if sid != "" {
		req.Header.Set(mhp.HeaderSession, sid)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if !bytes.Contains(b, []byte(`"result"`)) {
		return b, fmt.Errorf("answer: %s", b)
	}
	return b, nil
}

// childCPU asks a serve child for its CPU time.
func childCPU(hc *http.Client, url string) (time.Duration, error) {
	resp, err := hc.Get(url + "/bench/cpu")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	ns, err := strconv.ParseInt(string(b), 10, 64)
	return time.Duration(ns), err
}

// newSimDriver is the simulated thermocycler the HTTP rows serve.
func newSimDriver(id string) (*bindingDriver, error) {
	return newBindingDriver(sim.Thermocycler(sim.Options{ID: id}))
}
