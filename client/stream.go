package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"

	"github.com/openmhp/mhp-go"
)

// maxIncoming caps one frame read from a stream server.
const maxIncoming = 64 << 20

// streamConn speaks newline-delimited JSON-RPC over a reader and a writer
// (a driver process's stdout and stdin, or pipes). Calls are matched to
// answers by id, so any number may be in flight; notifications go to ls.
type streamConn struct {
	w      io.Writer
	closer func() error
	ls     *listeners

	wmu sync.Mutex

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]chan rpcIncoming
	dead    error // set once the reader stopped
	done    chan struct{}
}

func newStreamConn(r io.Reader, w io.Writer, closer func() error, ls *listeners) *streamConn {
	c := &streamConn{w: w, closer: closer, ls: ls, pending: map[uint64]chan rpcIncoming{}, done: make(chan struct{})}
	go c.read(r)
	return c
}

func (c *streamConn) read(r io.Reader) {
	br := bufio.NewReaderSize(r, 64<<10)
	var err error
	for {
		var line []byte
		line, err = readLine(br)
		if len(bytes.TrimSpace(line)) > 0 {
			c.dispatch(line)
		}
		if err != nil {
			break
		}
	}
	if errors.Is(err, io.EOF) {
		err = errors.New("the server closed the stream")
	}
	c.mu.Lock()
	c.dead = err
	pending := c.pending
	c.pending = map[uint64]chan rpcIncoming{}
	c.mu.Unlock()
	for _, ch := range pending {
		close(ch)
	}
	close(c.done)
}

// readLine reads one line of at most maxIncoming bytes.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxIncoming {
			return nil, fmt.Errorf("a frame from the server exceeds %d bytes", maxIncoming)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return line, err
	}
}

func (c *streamConn) dispatch(line []byte) {
	var in rpcIncoming
	if err := json.Unmarshal(line, &in); err != nil {
		return // not ours to answer: a server never sends junk on purpose
	}
	if in.Method != "" && len(in.ID) == 0 {
		c.ls.publish(mhp.Notification{Method: in.Method, Params: in.Params})
		return
	}
	id, err := strconv.ParseUint(string(in.ID), 10, 64)
	if err != nil {
		return // an answer to no request of ours (id null: a frame we sent was refused whole)
	}
	c.mu.Lock()
	ch, ok := c.pending[id]
	delete(c.pending, id)
	c.mu.Unlock()
	if ok {
		ch <- in
	}
}

func (c *streamConn) call(ctx context.Context, method string, params, out any) error {
	c.mu.Lock()
	if c.dead != nil {
		err := c.dead
		c.mu.Unlock()
		return transportError(method, false, "connection closed: %v", err)
	}
	c.nextID++
	id := c.nextID
	ch := make(chan rpcIncoming, 1)
	c.pending[id] = ch
	c.mu.Unlock()
	forget := func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}

	b, err := json.Marshal(rpcRequest{JSONRPC: "2.0", ID: id, Method: method, Params: params})
	if err != nil {
		forget()
		return encodeError(method, err)
	}
	c.wmu.Lock()
	_, err = c.w.Write(append(b, '\n'))
	c.wmu.Unlock()
	if err != nil {
		forget()
		return transportError(method, false, "write: %v", err)
	}
	select {
	case in, ok := <-ch:
		if !ok {
			return transportError(method, true, "connection lost before the answer")
		}
		return decodeAnswer(method, in, out)
	case <-ctx.Done():
		forget()
		return transportError(method, true, "no answer: %v", ctx.Err())
	}
}

// decodeAnswer turns a response into out or its *mhp.Error.
func decodeAnswer(method string, in rpcIncoming, out any) error {
	if in.Error != nil && in.Error.err != nil {
		return in.Error.err
	}
	if out == nil || len(in.Result) == 0 {
		return nil
	}
	return decodeResult(method, in.Result, out)
}

// endSession: a stream's session ends with the stream.
func (c *streamConn) endSession(context.Context) error { return nil }

func (c *streamConn) close() error {
	if c.closer != nil {
		return c.closer()
	}
	return nil
}
