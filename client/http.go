package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/auth"
)

// httpConn speaks JSON-RPC over POST /rpc and receives notifications on a
// GET /events stream that it keeps open (reconnecting with Last-Event-ID).
type httpConn struct {
	base   string // http://host:port, no trailing slash
	hc     *http.Client
	token  string
	opTok  string // Options.OperatorToken
	name   string
	ls     *listeners
	nextID atomic.Uint64
	// reinit re-runs initialize when the server forgot the session.
	reinit func(ctx context.Context) error

	mu      sync.Mutex
	session string
	lastEv  uint64

	ctx    context.Context // ends the events stream
	cancel context.CancelFunc
	evDone chan struct{}
	once   sync.Once
}

func newHTTPConn(base string, opts Options, ls *listeners) *httpConn {
	hc := opts.HTTPClient
	if hc == nil {
		hc = &http.Client{Transport: newTransport(nil)}
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &httpConn{base: strings.TrimRight(base, "/"), hc: hc, token: opts.Token, opTok: opts.OperatorToken, name: opts.ClientID, ls: ls,
		ctx: ctx, cancel: cancel, evDone: make(chan struct{})}
}

func (c *httpConn) sessionID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.session
}

func (c *httpConn) setSession(id string) {
	c.mu.Lock()
	if id != c.session {
		c.session = id
		c.lastEv = 0
	}
	c.mu.Unlock()
}

func (c *httpConn) headers(h http.Header) {
	if c.token != "" {
		h.Set("Authorization", "Bearer "+c.token)
	}
	if c.opTok != "" {
		h.Set(mhp.HeaderOperator, c.opTok)
	}
	if c.name != "" {
		h.Set(mhp.HeaderClient, c.name)
	}
	if s := c.sessionID(); s != "" {
		h.Set(mhp.HeaderSession, s)
	}
}

func (c *httpConn) call(ctx context.Context, method string, params, out any) error {
	err := c.post(ctx, method, params, out)
	if method != mhp.MethodInitialize && c.reinit != nil && isSessionUnknown(err) {
		// The server forgot the session (idle expiry, restart): nothing was
		// done for this request, so initialize again and send it once more.
		if rerr := c.reinit(ctx); rerr != nil {
			return rerr
		}
		return c.post(ctx, method, params, out)
	}
	return err
}

func isSessionUnknown(err error) bool {
	e, ok := mhp.AsError(err)
	return ok && e.Code == mhp.CodeServerError && e.Data != nil && e.Data[mhp.DataReason] == mhp.ReasonSessionUnknown
}

func (c *httpConn) post(ctx context.Context, method string, params, out any) error {
	b, err := json.Marshal(rpcRequest{JSONRPC: "2.0", ID: c.nextID.Add(1), Method: method, Params: params})
	if err != nil {
		return encodeError(method, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/rpc", bytes.NewReader(b))
	if err != nil {
		return transportError(method, false, "%v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	c.headers(req.Header)
	resp, err := c.hc.Do(req)
	if err != nil {
		var he *auth.HandshakeError
		if errors.As(auth.ExplainTLS(err), &he) { // refused in the handshake: nothing was sent
			return transportError(method, false, "%s: %v", c.base, he)
		}
		if dialFailed(err) { // refused, no route, no such host: nothing was sent
			return transportError(method, false, "%v", err)
		}
		return transportError(method, true, "%v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxIncoming))
	if err != nil {
		return transportError(method, true, "reading the answer: %v", err)
	}
	var in rpcIncoming
	if err := json.Unmarshal(body, &in); err != nil || (in.Error == nil && len(in.Result) == 0) {
		return transportError(method, true, "HTTP %d with no JSON-RPC answer: %.200s", resp.StatusCode, body)
	}
	if method == mhp.MethodInitialize && in.Error == nil {
		if sid := resp.Header.Get(mhp.HeaderSession); sid != "" {
			c.setSession(sid)
		}
	}
	return decodeAnswer(method, in, out)
}

// startEvents opens the events stream once; it reconnects until close.
func (c *httpConn) startEvents() {
	c.once.Do(func() { go c.events() })
}

func (c *httpConn) events() {
	defer close(c.evDone)
	backoff := 50 * time.Millisecond
	for c.ctx.Err() == nil {
		if c.stream() {
			backoff = 50 * time.Millisecond
		}
		if c.ctx.Err() != nil {
			return
		}
		t := time.NewTimer(backoff)
		select {
		case <-c.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if backoff < 2*time.Second {
			backoff *= 2
		}
	}
}

// stream reads one events connection until it drops; it reports whether it
// connected at all.
func (c *httpConn) stream() bool {
	req, err := http.NewRequestWithContext(c.ctx, http.MethodGet, c.base+"/events", nil)
	if err != nil {
		return false
	}
	c.headers(req.Header)
	req.Header.Set("Accept", "text/event-stream")
	c.mu.Lock()
	if c.lastEv > 0 {
		req.Header.Set(mhp.HeaderLastEventID, strconv.FormatUint(c.lastEv, 10))
	}
	session := c.session
	c.mu.Unlock()
	resp, err := c.hc.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false
	}
	br := bufio.NewReader(resp.Body)
	var id uint64
	var data []byte
	for {
		line, err := readLine(br)
		if err != nil {
			return true
		}
		line = bytes.TrimRight(line, "\r\n")
		switch {
		case len(line) == 0: // end of event
			if len(data) > 0 {
				c.deliver(session, id, data)
			}
			id, data = 0, nil
		case line[0] == ':': // comment, keep-alive
		case bytes.HasPrefix(line, []byte("id:")):
			id, _ = strconv.ParseUint(strings.TrimSpace(string(line[3:])), 10, 64)
		case bytes.HasPrefix(line, []byte("data:")):
			d := bytes.TrimPrefix(line[5:], []byte(" "))
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, d...)
		}
	}
}

func (c *httpConn) deliver(session string, id uint64, data []byte) {
	var in rpcIncoming
	if json.Unmarshal(data, &in) != nil || in.Method == "" {
		return
	}
	c.mu.Lock()
	if c.session != session {
		c.mu.Unlock()
		return // a stream of a session we no longer have
	}
	if id > 0 {
		if id <= c.lastEv {
			c.mu.Unlock()
			return // already delivered
		}
		c.lastEv = id
	}
	c.mu.Unlock()
	c.ls.publish(mhp.Notification{Method: in.Method, Params: in.Params})
}

// endSession asks the server to end the session now (DELETE /session).
func (c *httpConn) endSession(ctx context.Context) error {
	if c.sessionID() == "" {
		return nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, c.base+"/session", nil)
	if err != nil {
		return err
	}
	c.headers(req.Header)
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("end session: HTTP %d", resp.StatusCode)
	}
	return nil
}

func (c *httpConn) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := c.endSession(ctx)
	c.cancel()
	c.once.Do(func() { close(c.evDone) }) // never started: nothing to wait for
	select {
	case <-c.evDone:
	case <-time.After(2 * time.Second):
	}
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

// dialFailed reports an error of making the connection (refused, no
// route, the name unresolved): the request never left this process.
func dialFailed(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}
