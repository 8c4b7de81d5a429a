package transport

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/openmhp/mhp-go"
)

// ServeStdio speaks newline-delimited JSON-RPC on one stream pair (a driver
// process's stdin and stdout, or any pipe) until r ends, ctx is cancelled or
// the server closes. The stream is one session, issued by its initialize;
// the session ends (EndSession: lease released) when the stream does. It
// returns nil at the end of r or when the server is closed, ctx's error when
// ctx ends; a read blocked in r is left to end with r.
//
// Requests run concurrently, so a response may come before that of an earlier
// request (JSON-RPC matches them by id); safety/estop and ping are answered
// at once even while other requests of the stream are blocked in the device
// (at most MaxInFlight ordinary requests run at once; more are refused with
// -32000 reason "too_many_requests"). The stream's order still holds across
// a safety/estop: a request read after an estop is handled only once that
// estop is done, so a write sent after it is refused EStopActive however the
// goroutines are scheduled. Notifications are written as lines
// between responses; every line is written whole. A malformed line gets a
// -32700 response and a line longer than MaxFrame a -32600 response (id null);
// the stream goes on in both cases.
func (s *Server) ServeStdio(ctx context.Context, r io.Reader, w io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c := &streamConn{srv: s, w: w, slots: make(chan struct{}, s.opts.MaxInFlight)}
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait() // every request answered (or abandoned) before the session ends
		c.mu.Lock()
		ss := c.ss
		c.mu.Unlock()
		if ss != nil {
			s.closeSession(ss, "stream ended")
		}
	}()

	lines := make(chan []byte)
	readErr := make(chan error, 1)
	go func() { readErr <- readLines(ctx, r, s.opts.MaxFrame, lines, c.tooLong) }()

	done := s.doneChan()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-done:
			return nil
		case err := <-readErr:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case line := <-lines:
			c.serveLine(ctx, line, &wg)
		}
	}
}

// streamConn is the state of one stdio stream.
type streamConn struct {
	srv   *Server
	w     io.Writer
	wmu   sync.Mutex // serialises whole lines
	slots chan struct{}

	mu   sync.Mutex
	ss   *session
	pump bool
	// inited is closed when the latest initialize on the stream has been
	// answered; requests read after an initialize wait for it (pipelined
	// requests must not race the session into existence). Read and replaced
	// only by the reading goroutine.
	inited chan struct{}
	// stopped is closed when the latest safety/estop read on the stream has
	// been handled; every request read after it waits for it (the stream's
	// order is the order). Read and replaced only by the reading goroutine.
	stopped chan struct{}
}

func (c *streamConn) session() *session {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ss
}

// writeLine writes one frame followed by a newline, whole.
func (c *streamConn) writeLine(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	buf := make([]byte, 0, len(b)+1)
	buf = append(append(buf, b...), '\n')
	_, err := c.w.Write(buf)
	return err
}

func (c *streamConn) respond(resp *Response) {
	if resp == nil {
		return
	}
	b, err := json.Marshal(resp)
	if err != nil {
		b, _ = json.Marshal(&Response{JSONRPC: Version, ID: resp.ID,
			Error: c.srv.errorf(mhp.CodeInternal, "result not serialisable: %v", err)})
	}
	if err := c.writeLine(b); err != nil {
		c.srv.log.Warn("mhp stdio write failed", "err", err)
	}
}

// tooLong answers a frame that exceeded MaxFrame.
func (c *streamConn) tooLong(n int) {
	c.respond(&Response{JSONRPC: Version, ID: nullID, Error: c.srv.errorf(mhp.CodeInvalidRequest,
		"frame of more than %d bytes refused (limit %d)", n, c.srv.opts.MaxFrame).With(mhp.DataLimit, c.srv.opts.MaxFrame)})
}

func (c *streamConn) serveLine(ctx context.Context, line []byte, wg *sync.WaitGroup) {
	if len(trimJSONSpace(line)) == 0 {
		return // blank lines are ignored
	}
	req, derr := decodeFrame(line)
	if derr != nil {
		id := nullID
		if req != nil && req.ID != nil {
			id = req.ID
		}
		c.respond(&Response{JSONRPC: Version, ID: id, Error: derr.At(c.srv.clk.Now())})
		return
	}
	isInit := req.Method == mhp.MethodInitialize
	priority := isPriority(req.Method) || isInit
	if !priority {
		select {
		case c.slots <- struct{}{}:
		default:
			if !req.IsNotification() {
				c.respond(&Response{JSONRPC: Version, ID: req.ID, Error: c.srv.errorf(mhp.CodeServerError,
					"too many requests in flight on this stream (%d): wait for answers", cap(c.slots)).
					With(mhp.DataReason, "too_many_requests")})
			}
			return
		}
	}
	// Order with initialize: a request read after an initialize waits until
	// that initialize is done (estop and ping do not wait: they are served
	// at once, with the session if it exists, else anonymously).
	wait := c.inited
	var done chan struct{}
	if isInit {
		done = make(chan struct{})
		c.inited = done
	}
	// Order with estop: whatever is read after an estop runs after it.
	afterStop := c.stopped
	isStop := req.Method == mhp.MethodSafetyEStop
	var stopDone chan struct{}
	if isStop {
		stopDone = make(chan struct{})
		c.stopped = stopDone
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if done != nil {
			defer close(done)
		}
		if stopDone != nil {
			defer close(stopDone)
		}
		if wait != nil && !isPriority(req.Method) {
			select {
			case <-wait:
			case <-ctx.Done():
			}
		}
		if afterStop != nil && !isStop {
			select {
			case <-afterStop:
			case <-ctx.Done():
			}
		}
		ss := c.session()
		if ss != nil {
			ss.touch(c.srv.clk.Now())
		}
		resp := c.srv.handle(ctx, ss, req, c.initSession, new(Response))
		if !priority {
			<-c.slots // free before answering: the client may send its next request at once
		}
		c.respond(resp)
	}()
}

// initSession opens the stream's session on its first initialize and reuses
// it on later ones; the first also starts the notification pump.
func (c *streamConn) initSession(name string) (*session, *mhp.Error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ss != nil {
		return c.ss, nil
	}
	ss, err := c.srv.openSession(kindStream, name, "")
	if err != nil {
		return nil, err
	}
	c.ss = ss
	if !c.pump {
		c.pump = true
		go c.pumpNotifications(ss)
	}
	return ss, nil
}

// pumpNotifications writes the session's notifications as lines until the
// session closes. Notifications queued before the initialize response is
// written may precede it on the stream.
func (c *streamConn) pumpNotifications(ss *session) {
	var cursor uint64
	for {
		evs, lost, wake, ok := ss.since(cursor)
		if !ok {
			return
		}
		if lost > 0 {
			c.srv.log.Warn("mhp stdio reader too slow: notifications dropped", "session", ss.label, "lost", lost)
		}
		for _, e := range evs {
			if err := c.writeLine(e.data); err != nil {
				c.srv.log.Warn("mhp stdio notification write failed", "session", ss.label, "err", err)
			}
			cursor = e.id
		}
		if len(evs) > 0 {
			ss.markDelivered(cursor)
		}
		<-wake
	}
}

// readLines splits r into lines of at most max bytes and sends them on out.
// A longer line is skipped up to its newline and reported with tooLong; the
// stream goes on. It returns r's error (io.EOF at the end).
func readLines(ctx context.Context, r io.Reader, max int, out chan<- []byte, tooLong func(int)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	skipping := false
	for {
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 {
			complete := chunk[len(chunk)-1] == '\n'
			if !skipping {
				if len(line)+len(chunk) > max+1 || (!complete && len(line)+len(chunk) > max) {
					skipping = true
					line = nil
				} else {
					line = append(line, chunk...)
				}
			}
			if complete {
				if skipping {
					tooLong(max)
					skipping = false
				} else {
					frame := line
					line = nil
					select {
					case out <- frame:
					case <-ctx.Done():
						return ctx.Err()
					}
				}
			}
		}
		switch {
		case err == nil, errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			if len(line) > 0 && !skipping {
				select {
				case out <- line:
				case <-ctx.Done():
					return ctx.Err()
				}
			} else if skipping {
				tooLong(max)
			}
			return io.EOF
		default:
			return fmt.Errorf("transport: reading stream: %w", err)
		}
	}
}
