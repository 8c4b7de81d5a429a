package evidence

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/clock"
)

// The write path. Append encodes a receipt into the log's pending buffer
// under the log's mutex; the bytes reach the file by one write(2) per batch:
//
//   - SyncNever: when the buffer reaches FlushBytes, within FlushInterval
//     of the first buffered receipt (a timer on the injectable clock), and
//     always before a head is signed, a segment rotates, the log closes, or
//     Head, List, Verify, VerifyWith or Export read the directory. A crash of
//     the process loses at most the receipts of the last FlushInterval (or
//     FlushBytes); a power failure also what the kernel had not written, as
//     before. A write error stops the log: the Append that wrote answers it,
//     a timer's write leaves it in Err and every later Append fails with it.
//   - SyncAlways: one committer goroutine per log takes every line appended
//     so far, writes them at once and fsyncs once (group commit: every
//     device and writer appending to this log shares that fsync), then
//     releases each Append whose line it covered; an Append returns only
//     once its receipt is on stable storage, or an error. The queue is
//     bounded (MaxPending bytes; an Append beyond it waits for room) and so
//     is the wait (CommitTimeout), each with an error that says so.

// committer is the SyncAlways group commit of one log.
type committer struct {
	on    bool
	kick  chan struct{} // a line is pending (buffered 1)
	quit  chan struct{}
	done  chan struct{}
	mu    sync.Mutex
	dur   uint64        // bytes of lines on stable storage
	err   error         // the failure that stopped the log
	gen   chan struct{} // closed (and replaced) whenever dur or err changes
	close sync.Once

	batches, lines, fsyncNS atomic.Int64 // CommitStats
}

// CommitStats says how the group commit of a [SyncAlways] log went: how
// many batches it wrote and fsynced, how many receipts they held, and the
// time spent in fsync.
type CommitStats struct {
	Batches int64         `json:"batches"`
	Lines   int64         `json:"lines"`
	Fsync   time.Duration `json:"fsync"`
}

// CommitStats returns the group commit's counts so far (zero under [SyncNever]).
func (l *Log) CommitStats() CommitStats {
	c := &l.commit
	return CommitStats{Batches: c.batches.Load(), Lines: c.lines.Load(), Fsync: time.Duration(c.fsyncNS.Load())}
}

func (c *committer) start(l *Log) {
	if l.cfg.Sync != SyncAlways {
		return
	}
	c.on = true
	c.kick = make(chan struct{}, 1)
	c.quit = make(chan struct{})
	c.done = make(chan struct{})
	c.gen = make(chan struct{})
	c.dur = l.appended
	go c.run(l)
}

// stop ends the committer goroutine and waits for it (not under l.mu).
func (c *committer) stop() {
	if !c.on {
		return
	}
	c.close.Do(func() { close(c.quit) })
	<-c.done
}

func (c *committer) wake() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *committer) run(l *Log) {
	defer close(c.done)
	for {
		select {
		case <-c.kick:
		case <-c.quit:
			return
		}
		l.mu.Lock()
		lines := l.pendingLines
		err := l.writeLocked()
		f, end := l.file, l.written
		l.mu.Unlock()
		if err == nil && lines > 0 {
			c.batches.Add(1)
			c.lines.Add(int64(lines))
		}
		if err == nil {
			t0 := l.cfg.Clock.Now()
			err = syncData(f)
			c.fsyncNS.Add(int64(l.cfg.Clock.Now().Sub(t0)))
			if errors.Is(err, os.ErrClosed) {
				err = nil // rotation or Close synced and closed that segment
			}
			if err != nil {
				// The kernel may have dropped the dirty pages: the receipts
				// are not durable and a later fsync could succeed over the
				// loss. Stop.
				err = l.stopWith(fmt.Errorf("evidence: fsync failed, log stopped: %w", err))
			}
		}
		c.publish(end, err)
	}
}

// publish records that the lines up to end are durable (or the error that
// stopped the log) and wakes every waiter.
func (c *committer) publish(end uint64, err error) {
	if !c.on {
		return
	}
	c.mu.Lock()
	if err == nil && end > c.dur {
		c.dur = end
	}
	if err != nil && c.err == nil {
		c.err = err
	}
	close(c.gen)
	c.gen = make(chan struct{})
	c.mu.Unlock()
}

// wait returns once the lines up to target are durable, the log stopped,
// or the deadline passed.
func (c *committer) wait(clk clock.Clock, target uint64, timeout time.Duration, why func() error) error {
	var expired chan struct{}
	var t clock.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	c.mu.Lock()
	for {
		if c.dur >= target {
			c.mu.Unlock()
			return nil
		}
		if c.err != nil {
			err := c.err
			c.mu.Unlock()
			return err
		}
		gen := c.gen
		c.mu.Unlock()
		if t == nil {
			expired = make(chan struct{})
			t = clk.AfterFunc(timeout, func() { close(expired) })
		}
		select {
		case <-gen:
		case <-expired:
			return why()
		}
		c.mu.Lock()
	}
}

// stopWith stops the log with err unless it stopped already; it returns the
// error that stopped it.
func (l *Log) stopWith(err error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lastErr == nil {
		l.lastErr = err
	}
	return l.lastErr
}

// writeLocked writes the pending lines to the current segment in one call.
// A failed or short write stops the log: the file may now end in a partial
// line, which the next Open cuts and records.
func (l *Log) writeLocked() error {
	if l.lastErr != nil {
		return l.lastErr
	}
	if len(l.pending) == 0 {
		return nil
	}
	n, err := l.file.Write(l.pending)
	l.written += uint64(n)
	if err == nil && n < len(l.pending) {
		err = fmt.Errorf("short write (%d of %d bytes)", n, len(l.pending))
	}
	l.pending, l.pendingLines = l.pending[:0], 0
	if cap(l.pending) > 4*l.cfg.FlushBytes {
		l.pending = nil // a burst grew it; let it go
	}
	if err != nil {
		l.lastErr = fmt.Errorf("evidence: write failed, log stopped: %w", err)
		return l.lastErr
	}
	l.written = l.appended
	return nil
}

// afterAppendLocked moves a just-appended line on its way: under SyncNever
// written at FlushBytes or armed for the flush timer; under SyncAlways
// handed to the committer.
func (l *Log) afterAppendLocked() error {
	if l.commit.on {
		l.commit.wake()
		return nil
	}
	if len(l.pending) >= l.cfg.FlushBytes {
		return l.writeLocked()
	}
	if l.flushT == nil {
		l.flushT = l.cfg.Clock.AfterFunc(l.cfg.FlushInterval, l.onFlushTimer)
	}
	return nil
}

func (l *Log) onFlushTimer() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.flushT = nil
	if !l.closed {
		l.writeLocked() // a failure stops the log; Err and the next Append say why
	}
}

// waitRoomLocked waits, under SyncAlways, until the pending lines are under
// MaxPending (l.mu is released while waiting and held again on return).
func (l *Log) waitRoomLocked() error {
	for l.commit.on && len(l.pending) >= l.cfg.MaxPending {
		target, size := l.appended, len(l.pending)
		l.mu.Unlock()
		l.commit.wake()
		err := l.commit.wait(l.cfg.Clock, target, l.cfg.CommitTimeout, func() error {
			return mhp.Errorf(mhp.CodeDeviceBusy, "evidence: %d bytes of receipts have waited %v for the disk (at most %d may wait): receipt refused",
				size, l.cfg.CommitTimeout, l.cfg.MaxPending)
		})
		l.mu.Lock()
		if err != nil {
			return err
		}
		if l.closed {
			return errors.New("evidence: log is closed")
		}
	}
	return nil
}

// durable makes the chain durable up to target, the byte count of lines
// appended, from file (the segment they went to); the lines are written.
func (l *Log) durable(f File, target uint64) error {
	if l.commit.on {
		l.commit.wake()
		return l.commit.wait(l.cfg.Clock, target, l.cfg.CommitTimeout, func() error {
			return mhp.Errorf(mhp.CodeDeviceFault, "evidence: the chain was not on stable storage within %v (fsync has not returned): outcome of the receipt unknown",
				l.cfg.CommitTimeout)
		})
	}
	if err := syncData(f); err != nil && !errors.Is(err, os.ErrClosed) {
		return l.stopWith(fmt.Errorf("evidence: fsync failed, log stopped: %w", err))
	}
	return nil
}

// Flush writes the receipts buffered under [SyncNever] to the file (the
// operating system's cache): a reader of the directory sees them.
func (l *Log) Flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	return l.writeLocked()
}

// ---- one writer per directory in this process ----

var (
	openMu   sync.Mutex
	openLogs = map[string]*Log{} // absolute directory -> its open log (nil while opening)
)

// claimDir reserves dir for one Log: a second Log appending to the same
// chain would fork it (both would write the same next seq).
func claimDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("evidence: %w", err)
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		abs = r
	}
	openMu.Lock()
	defer openMu.Unlock()
	if _, ok := openLogs[abs]; ok {
		return "", mhp.Errorf(mhp.CodeDeviceBusy, "evidence: %s is already open in this process: a second writer would fork its chain; share the open Log", abs)
	}
	openLogs[abs] = nil
	return abs, nil
}

func registerDir(key string, l *Log) {
	openMu.Lock()
	openLogs[key] = l
	openMu.Unlock()
}

// releaseDir frees the claim of l (nil: a failed Open).
func releaseDir(key string, l *Log) {
	openMu.Lock()
	if cur, ok := openLogs[key]; ok && cur == l {
		delete(openLogs, key)
	}
	openMu.Unlock()
}

// flushOpen writes the buffered receipts of the log open on dir in this
// process, if any, so reading the directory sees them.
func flushOpen(dir string) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		abs = r
	}
	openMu.Lock()
	l := openLogs[abs]
	openMu.Unlock()
	if l != nil {
		l.Flush()
	}
}
