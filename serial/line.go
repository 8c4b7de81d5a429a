package serial

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"go.bug.st/serial"

	"github.com/openmhp/mhp-go"
)

// Port is what the adapter needs of an open serial port; a go.bug.st
// serial.Port is one.
type Port interface {
	Read(p []byte) (int, error)
	Write(p []byte) (int, error)
	Close() error
	ResetInputBuffer() error
	ResetOutputBuffer() error
	Drain() error
	SetReadTimeout(t time.Duration) error
}

// OpenPort opens path with go.bug.st/serial (the default Options.Open).
func OpenPort(_ context.Context, path string, mode *serial.Mode) (Port, error) {
	p, err := serial.Open(path, mode)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// readSlice is the longest a Read blocks, so a holder of the line sees an
// estop's interrupt within it.
const readSlice = 100 * time.Millisecond

var (
	// errNoReply: the command went out and no matching reply came in time.
	errNoReply = errors.New("no reply")
	// errInterrupted: an estop took the line while the command was in flight.
	errInterrupted = errors.New("interrupted by estop")
	// errStuckWrite: a write did not finish within write_s.
	errStuckWrite = errors.New("write stuck")
)

// line is the one serial line: a lock that at most one exchange holds (a
// channel, so the estop can wait for it with a bound), the open port, and
// the interrupt flag an estop raises.
type line struct {
	cfg   Config
	mode  *serial.Mode
	open  func(context.Context, string, *serial.Mode) (Port, error)
	lock  chan struct{}
	intr  atomic.Int32 // >0 while an estop wants the line
	onErr func(error)  // the port failed: close it and reconnect

	mu      sync.Mutex
	port    Port
	gen     uint64 // bumped at every open
	node    bool   // the port path was a file at the last open (presence checks apply)
	lastEnd time.Time
}

func newLine(cfg Config, mode *serial.Mode, open func(context.Context, string, *serial.Mode) (Port, error)) *line {
	return &line{cfg: cfg, mode: mode, open: open, lock: make(chan struct{}, 1)}
}

// acquire takes the line, waiting at most until ctx ends.
func (l *line) acquire(ctx context.Context) error {
	select {
	case l.lock <- struct{}{}:
		return nil
	default:
	}
	select {
	case l.lock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// acquireWithin takes the line within d.
func (l *line) acquireWithin(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case l.lock <- struct{}{}:
		return true
	case <-t.C:
		return false
	}
}

func (l *line) release() { <-l.lock }

// waitNoEStop returns once no estop wants the line, or an EStopActive
// error when one still does after max (or when ctx ends first). It checks
// every few milliseconds: an estop holds the line for a bounded time.
func (l *line) waitNoEStop(ctx context.Context, max time.Duration) error {
	if l.intr.Load() == 0 {
		return nil
	}
	deadline := time.NewTimer(max)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for l.intr.Load() > 0 {
		select {
		case <-tick.C:
		case <-deadline.C:
			return mhp.Errorf(mhp.CodeEStopActive, "not sent: an estop has held the serial line for %v", max)
		case <-ctx.Done():
			return mhp.Errorf(mhp.CodeEStopActive, "not sent: an estop holds the serial line (%v)", context.Cause(ctx))
		}
	}
	return nil
}

func (l *line) current() (Port, uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.port, l.gen
}

// connect opens the port (the line is held), flushes what was queued and
// makes reads return within readSlice.
func (l *line) connect(ctx context.Context) (Port, error) {
	p, err := l.open(ctx, l.cfg.Port, l.mode)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", l.cfg.Port, err)
	}
	if err := p.SetReadTimeout(readSlice); err != nil {
		p.Close()
		return nil, fmt.Errorf("%s: set read timeout: %w", l.cfg.Port, err)
	}
	// Leftovers from before (a reply to a command of the old connection,
	// an alarm sent at power-up) are never read as an answer.
	_ = p.ResetInputBuffer()
	_ = p.ResetOutputBuffer()
	_, statErr := os.Stat(l.cfg.Port)
	l.mu.Lock()
	l.port = p
	l.gen++
	l.node = statErr == nil
	l.mu.Unlock()
	return p, nil
}

// drop closes the port of generation gen (if still current) and reports
// err; the reconnect brings a new one.
func (l *line) drop(gen uint64, err error) {
	l.mu.Lock()
	p := l.port
	if p == nil || l.gen != gen {
		l.mu.Unlock()
		return
	}
	l.port = nil
	l.mu.Unlock()
	_ = p.Close()
	if l.onErr != nil {
		l.onErr(err)
	}
}

// present drops the port when its node has gone (checked only for a path
// that existed at open: not every platform names ports by files).
func (l *line) present() {
	l.mu.Lock()
	p, gen, node := l.port, l.gen, l.node
	l.mu.Unlock()
	if p == nil || !node {
		return
	}
	if _, err := os.Stat(l.cfg.Port); errors.Is(err, os.ErrNotExist) {
		l.drop(gen, fmt.Errorf("%s disappeared (unplugged?)", l.cfg.Port))
	}
}

// closePort closes whatever port is open (estop takeover, Close).
func (l *line) closePort() {
	l.mu.Lock()
	p := l.port
	l.port = nil
	l.mu.Unlock()
	if p != nil {
		_ = p.Close()
	}
}

// matcher decides whether a line read is the reply awaited. Lines it
// refuses are stale, echoed or garbage and are discarded.
type matcher func(string) bool

// anyOf matches a line matching any of the non-nil patterns.
func anyOf(res ...*regexp.Regexp) matcher {
	return func(s string) bool {
		for _, re := range res {
			if re != nil && re.MatchString(s) {
				return true
			}
		}
		return false
	}
}

// exchange sends cmd (the line is held by the caller) and, when match is
// not nil, reads until a line it accepts arrives, within timeout. The
// error says how far it got: an *mhp.Error when nothing was sent,
// errNoReply / errInterrupted / a port error after sending.
func (l *line) exchange(ctx context.Context, cmd string, match matcher, timeout time.Duration) (string, error) {
	if l.intr.Load() > 0 {
		return "", mhp.Errorf(mhp.CodeEStopActive, "%q not sent: an estop holds the serial line", cmd)
	}
	p, gen := l.current()
	if p == nil {
		return "", mhp.Errorf(mhp.CodeServerError, "%q not sent: serial port %s is not open", cmd, l.cfg.Port).
			With("reason", "port_closed")
	}
	if wait := seconds(l.cfg.InterCommandDelayS) - time.Since(l.lastEnd); wait > 0 && !l.lastEnd.IsZero() {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return "", mhp.Errorf(mhp.CodeServerError, "%q not sent: %v", cmd, context.Cause(ctx))
		}
	}
	defer func() { l.lastEnd = time.Now() }()
	if err := p.ResetInputBuffer(); err != nil {
		l.drop(gen, err)
		return "", mhp.Errorf(mhp.CodeServerError, "%q not sent: serial port %s failed: %v", cmd, l.cfg.Port, err).
			With("reason", "port_closed")
	}
	if err := l.write(p, gen, []byte(cmd+l.cfg.LineEnding)); err != nil {
		return "", err
	}
	if match == nil {
		return "", nil
	}
	return l.readReply(ctx, p, gen, match, timeout, true)
}

// write sends b under the write_s timer; a write that does not finish is
// a fault (the port is closed; the writing goroutine ends when the kernel
// lets it go).
func (l *line) write(p Port, gen uint64, b []byte) error {
	done := make(chan error, 1)
	go func() {
		for len(b) > 0 {
			n, err := p.Write(b)
			if err != nil {
				done <- err
				return
			}
			b = b[n:]
		}
		done <- nil
	}()
	t := time.NewTimer(seconds(l.cfg.Timeouts.WriteS))
	defer t.Stop()
	select {
	case err := <-done:
		if err != nil {
			l.drop(gen, err)
			return fmt.Errorf("write to %s: %w", l.cfg.Port, err)
		}
		return nil
	case <-t.C:
		err := fmt.Errorf("%w: %s did not take the command within %gs", errStuckWrite, l.cfg.Port, l.cfg.Timeouts.WriteS)
		l.drop(gen, err)
		return err
	}
}

// readReply reads lines until match accepts one, the timeout passes, ctx
// ends or an estop interrupts. Input is flushed after a timeout so a late
// reply never answers the next command.
func (l *line) readReply(ctx context.Context, p Port, gen uint64, match matcher, timeout time.Duration, interruptible bool) (string, error) {
	deadline := time.Now().Add(timeout)
	end := []byte(l.cfg.ReplyEnding)
	var buf []byte
	chunk := make([]byte, 128)
	for {
		for {
			i := bytes.Index(buf, end)
			if i < 0 {
				break
			}
			text := string(bytes.TrimSpace(buf[:i]))
			buf = buf[i+len(end):]
			if text != "" && match(text) {
				return text, nil
			}
		}
		if len(buf) > l.cfg.MaxReply {
			buf = buf[:0] // garbage without a terminator: dropped
		}
		if interruptible && l.intr.Load() > 0 {
			return "", errInterrupted
		}
		if ctx.Err() != nil {
			_ = p.ResetInputBuffer()
			return "", fmt.Errorf("reply: %w", context.Cause(ctx))
		}
		if time.Now().After(deadline) {
			_ = p.ResetInputBuffer()
			return "", errNoReply
		}
		n, err := p.Read(chunk)
		if err != nil {
			if interruptible && l.intr.Load() > 0 {
				return "", errInterrupted
			}
			l.drop(gen, err)
			return "", fmt.Errorf("read from %s: %w", l.cfg.Port, err)
		}
		buf = append(buf, chunk[:n]...)
	}
}
