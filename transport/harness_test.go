package transport_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/client"
	"github.com/openmhp/mhp-go/clock"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/transport"
)

// testTimeout bounds every wait of these tests.
const testTimeout = 10 * time.Second

// memory is a fixture device: the conformance MemoryDriver on a manual clock.
type memory struct {
	drv *binding.Driver
	in  *conformance.Instrument
	clk *clock.Manual
}

func newMemory(t testing.TB, opt conformance.Options) *memory {
	t.Helper()
	in := conformance.NewInstrument()
	clk := clock.NewManual(time.Unix(1_800_000_000, 0))
	d, err := conformance.MemoryDriver(in, opt, clk)
	if err != nil {
		t.Fatalf("MemoryDriver: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := d.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		in.ReleaseAll()
		_ = d.Close()
	})
	return &memory{drv: d, in: in, clk: clk}
}

// newServer serves dev with quiet logs and closes the server at cleanup.
func newServer(t testing.TB, dev mhp.Device, opts transport.Options) *transport.Server {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	srv := transport.NewServer(dev, opts)
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

// serveHTTP serves srv on 127.0.0.1:0.
func serveHTTP(t testing.TB, srv *transport.Server) *httptest.Server {
	t.Helper()
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
	})
	return hs
}

// pipeConn is one in-process stream connection to srv.ServeStdio.
type pipeConn struct {
	r    *io.PipeReader // client reads server output
	w    *io.PipeWriter // client writes server input
	done chan error
}

func servePipe(t testing.TB, srv *transport.Server) *pipeConn {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	pc := &pipeConn{r: outR, w: inW, done: make(chan error, 1)}
	go func() {
		err := srv.ServeStdio(context.Background(), inR, outW)
		outW.Close()
		pc.done <- err
	}()
	t.Cleanup(func() {
		inW.Close()
		outR.Close()
		select {
		case <-pc.done:
		case <-time.After(testTimeout):
			t.Errorf("ServeStdio did not return after its input closed")
		}
	})
	return pc
}

// dialPipe connects a client over a new pipe pair.
func dialPipe(t testing.TB, srv *transport.Server, opts client.Options) *client.Device {
	t.Helper()
	pc := servePipe(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	d, err := client.DialStream(ctx, pc.r, pc.w, opts)
	if err != nil {
		t.Fatalf("DialStream: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func dialHTTP(t testing.TB, url string, opts client.Options) *client.Device {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	d, err := client.Dial(ctx, url, opts)
	if err != nil {
		t.Fatalf("Dial %s: %v", url, err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// ---- raw HTTP ----

type rawResp struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *mhp.Error      `json:"error"`
}

// post sends one raw JSON-RPC body to /rpc with the given headers and
// decodes the answer.
func post(t testing.TB, url, body string, headers map[string]string) (*http.Response, rawResp) {
	t.Helper()
	resp, b := postRaw(t, url, body, headers)
	var r rawResp
	if len(bytes.TrimSpace(b)) > 0 {
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("answer %q: %v", b, err)
		}
	}
	return resp, r
}

// initHTTP runs initialize and returns the session id.
func initHTTP(t testing.TB, url string, headers map[string]string) string {
	t.Helper()
	resp, r := post(t, url, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2026-09-12"}}`, headers)
	if r.Error != nil {
		t.Fatalf("initialize: %v", r.Error)
	}
	var res mhp.InitializeResult
	if err := json.Unmarshal(r.Result, &res); err != nil {
		t.Fatal(err)
	}
	if res.Session == "" || resp.Header.Get(mhp.HeaderSession) != res.Session {
		t.Fatalf("initialize session %q, header %q", res.Session, resp.Header.Get(mhp.HeaderSession))
	}
	return res.Session
}

// ---- raw stream ----

// rawStream writes lines to a ServeStdio and reads its lines.
type rawStream struct {
	t     testing.TB
	pc    *pipeConn
	lines chan []byte
	early map[string][]byte // answers read while awaiting another id

	mu   sync.Mutex
	seen []byte // every line the server wrote, in order
}

// transcript returns every line the server wrote so far.
func (rs *rawStream) transcript() []byte {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return append([]byte(nil), rs.seen...)
}

func newRawStream(t testing.TB, srv *transport.Server) *rawStream {
	pc := servePipe(t, srv)
	rs := &rawStream{t: t, pc: pc, lines: make(chan []byte, 1024), early: map[string][]byte{}}
	go func() {
		br := bufio.NewReaderSize(pc.r, 1<<20)
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 {
				rs.mu.Lock()
				rs.seen = append(rs.seen, line...)
				rs.mu.Unlock()
				rs.lines <- line
			}
			if err != nil {
				close(rs.lines)
				return
			}
		}
	}()
	return rs
}

func (rs *rawStream) send(line string) {
	rs.t.Helper()
	if _, err := io.WriteString(rs.pc.w, line+"\n"); err != nil {
		rs.t.Fatalf("write: %v", err)
	}
}

// await returns the response whose id is id, skipping notifications.
func (rs *rawStream) await(id string) rawResp {
	rs.t.Helper()
	var r rawResp
	if err := json.Unmarshal(rs.awaitRaw(id), &r); err != nil {
		rs.t.Fatal(err)
	}
	return r
}

// code returns the error code of r, 0 for a result.
func code(r rawResp) mhp.Code {
	if r.Error == nil {
		return 0
	}
	return r.Error.Code
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
