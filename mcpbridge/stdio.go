package mcpbridge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MaxLine bounds one JSON-RPC line on stdio (4 MiB): a longer line is
// discarded and answered with an Invalid Request error.
const MaxLine = 4 << 20

// LineTransport is MCP over newline-delimited JSON (stdin/stdout) that
// survives bad input: a line that is not JSON is answered with a JSON-RPC
// parse error (-32700, id null), a line that is JSON but not a JSON-RPC
// message, a batch or a line over MaxLine with Invalid Request (-32600), and
// the connection goes on. The SDK's stdio transport ends the session on the
// first bad line. Only end of input or Close ends it.
type LineTransport struct {
	In  io.Reader
	Out io.Writer
}

// Connect implements mcp.Transport.
func (t *LineTransport) Connect(context.Context) (mcp.Connection, error) {
	c := &lineConn{out: t.Out, incoming: make(chan lineMsg), closed: make(chan struct{})}
	if cl, ok := t.In.(io.Closer); ok {
		c.inCloser = cl
	}
	go c.readLoop(t.In)
	return c, nil
}

type lineMsg struct {
	msg jsonrpc.Message
	err error
}

type lineConn struct {
	out      io.Writer
	inCloser io.Closer
	incoming chan lineMsg
	closed   chan struct{}
	once     sync.Once
	wmu      sync.Mutex
}

func (c *lineConn) readLoop(in io.Reader) {
	r := bufio.NewReaderSize(in, 64<<10)
	for {
		line, tooLong, err := readLine(r, MaxLine)
		if tooLong {
			c.refuse(nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("line longer than %d bytes discarded", MaxLine))
		} else if len(bytes.TrimSpace(line)) > 0 {
			if msg := c.decode(line); msg != nil {
				select {
				case c.incoming <- lineMsg{msg: msg}:
				case <-c.closed:
					return
				}
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.EOF
			}
			select {
			case c.incoming <- lineMsg{err: err}:
			case <-c.closed:
			}
			return
		}
	}
}

// readLine reads one line of at most max bytes; a longer one is read to its
// end and dropped (tooLong).
func readLine(r *bufio.Reader, max int) (line []byte, tooLong bool, err error) {
	for {
		chunk, isPrefix, rerr := r.ReadLine()
		if !tooLong {
			if len(line)+len(chunk) > max {
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if rerr != nil {
			return line, tooLong, rerr
		}
		if !isPrefix {
			return line, tooLong, nil
		}
	}
}

// decode returns the line's message, or answers why it is not one and
// returns nil.
func (c *lineConn) decode(line []byte) jsonrpc.Message {
	if !json.Valid(line) {
		c.refuse(nil, jsonrpc.CodeParseError, "Parse error: the line is not JSON")
		return nil
	}
	trimmed := bytes.TrimSpace(line)
	if trimmed[0] == '[' {
		c.refuse(nil, jsonrpc.CodeInvalidRequest, "Invalid Request: JSON-RPC batches are not supported (MCP 2025-06-18 removed them)")
		return nil
	}
	var probe struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      any             `json:"id"`
		Method  *string         `json:"method"`
		Result  json.RawMessage `json:"result"`
		Error   json.RawMessage `json:"error"`
	}
	err := json.Unmarshal(trimmed, &probe)
	switch {
	case err != nil:
		err = errors.New("not a JSON-RPC object")
	case probe.JSONRPC != "2.0":
		err = errors.New(`"jsonrpc" must be "2.0"`)
	case probe.Method == nil && probe.Result == nil && probe.Error == nil:
		err = errors.New("neither a request (method) nor a response (result or error)")
	}
	var msg jsonrpc.Message
	if err == nil {
		msg, err = jsonrpc.DecodeMessage(trimmed)
	}
	if err != nil {
		c.refuse(probe.ID, jsonrpc.CodeInvalidRequest, "Invalid Request: "+err.Error())
		return nil
	}
	return msg
}

// refuse writes a JSON-RPC error response with the id (null when unknown).
func (c *lineConn) refuse(id any, code int64, msg string) {
	switch id.(type) {
	case string, float64, nil:
	default:
		id = nil
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": msg}})
	c.writeLine(b)
}

func (c *lineConn) writeLine(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.out.Write(append(b, '\n'))
	return err
}

func (c *lineConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.closed:
		return nil, io.EOF
	case m := <-c.incoming:
		return m.msg, m.err
	}
}

func (c *lineConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return err
	}
	return c.writeLine(b)
}

func (c *lineConn) Close() error {
	c.once.Do(func() {
		close(c.closed)
		if c.inCloser != nil {
			_ = c.inCloser.Close()
		}
	})
	return nil
}

func (c *lineConn) SessionID() string { return "" }
