//go:build linux

// Package serialtest runs fake serial instruments on pseudo-terminals
// (creack/pty): each fake speaks a documented protocol on the pty's master
// while the adapter opens the slave through a symlink, as it would open
// /dev/serial/by-id/.... Knobs make the instrument fall silent, answer
// late (stale replies), split its replies, hang up mid-command, vanish
// (the master closed: a USB adapter unplugged) and come back under a new
// node (the symlink moved to a new pty).
package serialtest

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/term"
)

// Protocol answers one command (its terminator stripped). ok false is
// silence: the instrument never answers it.
type Protocol interface {
	Handle(cmd string) (reply []byte, ok bool)
}

// Options configure a fake's line.
type Options struct {
	// Terminator ends a command: "\r\n" (NAMUR, MT-SICS) or "\r" (NE-1000).
	Terminator string
	// Concurrent handles each command in its own goroutine (a handler that
	// blocks must not stop the line, e.g. the conformance fake's held
	// writes); replies are still written whole, one at a time.
	Concurrent bool
}

// Fake is one instrument on a pty.
type Fake struct {
	t     testing.TB
	proto Protocol
	opt   Options
	path  string // the symlink the adapter opens

	mu       sync.Mutex
	master   *os.File
	slave    *os.File
	gen      int
	commands []string
	mute     map[string]bool
	delay    map[string]time.Duration
	hangUp   map[string]bool
	silent   bool
	replies  int
	split    bool
	wmu      sync.Mutex
	wg       sync.WaitGroup
	changed  chan struct{}
}

// New starts a fake speaking proto on a fresh pty; Path is where the
// adapter opens it. Cleanup closes it.
func New(t testing.TB, proto Protocol, opt Options) *Fake {
	t.Helper()
	if opt.Terminator == "" {
		opt.Terminator = "\r\n"
	}
	f := &Fake{t: t, proto: proto, opt: opt, path: filepath.Join(t.TempDir(), "ttyFAKE0"),
		mute: map[string]bool{}, delay: map[string]time.Duration{}, hangUp: map[string]bool{}, changed: make(chan struct{})}
	if err := f.plug(); err != nil {
		t.Fatalf("serialtest: %v", err)
	}
	t.Cleanup(f.Close)
	return f
}

// Path is the device node the adapter opens (a symlink to the current pty).
func (f *Fake) Path() string { return f.path }

func (f *Fake) plug() error {
	m, s, err := pty.Open()
	if err != nil {
		return err
	}
	// Raw: no echo, no CR->NL, so the bytes are the protocol's own.
	if _, err := term.MakeRaw(int(s.Fd())); err != nil {
		m.Close()
		s.Close()
		return err
	}
	// Non-blocking once, so that Close ends the read loop's Read (Fd is
	// never called on m again: it would make the file blocking).
	if err := syscall.SetNonblock(int(m.Fd()), true); err != nil {
		m.Close()
		s.Close()
		return err
	}
	tmp := f.path + ".new"
	_ = os.Remove(tmp)
	if err := os.Symlink(s.Name(), tmp); err != nil {
		m.Close()
		s.Close()
		return err
	}
	if err := os.Rename(tmp, f.path); err != nil {
		m.Close()
		s.Close()
		return err
	}
	f.mu.Lock()
	f.master, f.slave = m, s
	f.gen++
	gen := f.gen
	f.mu.Unlock()
	f.wg.Add(1)
	go f.loop(m, gen)
	return nil
}

// Unplug closes the master: the adapter's reads fail as when a USB
// adapter is pulled, and the node disappears.
func (f *Fake) Unplug() {
	f.mu.Lock()
	m, s := f.master, f.slave
	f.master, f.slave = nil, nil
	f.mu.Unlock()
	if m != nil {
		m.Close()
		s.Close()
	}
	_ = os.Remove(f.path)
}

// Replug brings the instrument back on a new pty behind the same path
// (re-enumeration); pending is written at once, as leftover bytes the
// adapter must discard.
func (f *Fake) Replug(pending string) {
	f.t.Helper()
	if err := f.plug(); err != nil {
		f.t.Fatalf("serialtest: replug: %v", err)
	}
	if pending != "" {
		f.writeRaw([]byte(pending))
	}
}

// Close unplugs the fake and waits for its loop.
func (f *Fake) Close() {
	f.Unplug()
	f.wg.Wait()
}

// Commands returns the commands received so far.
func (f *Fake) Commands() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.commands...)
}

// Count counts the received commands starting with prefix.
func (f *Fake) Count(prefix string) int {
	n := 0
	for _, c := range f.Commands() {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}

// Received returns a channel closed at the next command received.
func (f *Fake) Received() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}

// Silent makes the instrument answer nothing (a dead controller).
func (f *Fake) Silent(on bool) { f.mu.Lock(); f.silent = on; f.mu.Unlock() }

// Mute makes commands starting with prefix go unanswered.
func (f *Fake) Mute(prefix string, on bool) { f.mu.Lock(); f.mute[prefix] = on; f.mu.Unlock() }

// Delay answers commands starting with prefix after d (a late reply that
// arrives after the adapter gave up is a stale reply).
func (f *Fake) Delay(prefix string, d time.Duration) { f.mu.Lock(); f.delay[prefix] = d; f.mu.Unlock() }

// Split writes every reply in two parts, 20 ms apart.
func (f *Fake) Split(on bool) { f.mu.Lock(); f.split = on; f.mu.Unlock() }

// HangUpOn unplugs the instrument when a command starting with prefix
// arrives, before it answers (the port vanishing mid-command).
func (f *Fake) HangUpOn(prefix string) { f.mu.Lock(); f.hangUp[prefix] = true; f.mu.Unlock() }

func match(m map[string]bool, cmd string) bool {
	for p, on := range m {
		if on && strings.HasPrefix(cmd, p) {
			return true
		}
	}
	return false
}

func (f *Fake) loop(m *os.File, gen int) {
	defer f.wg.Done()
	var buf []byte
	chunk := make([]byte, 256)
	term := []byte(f.opt.Terminator)
	for {
		n, err := m.Read(chunk)
		if err != nil {
			if errors.Is(err, os.ErrClosed) || errors.Is(err, syscall.EIO) {
				return
			}
			return
		}
		buf = append(buf, chunk[:n]...)
		for {
			i := bytes.Index(buf, term)
			if i < 0 {
				break
			}
			cmd := string(buf[:i])
			buf = buf[i+len(term):]
			if f.opt.Concurrent {
				f.wg.Add(1)
				go func() { defer f.wg.Done(); f.serve(cmd, gen) }()
			} else {
				f.serve(cmd, gen)
			}
		}
		if len(buf) > 4096 {
			buf = buf[:0]
		}
	}
}

func (f *Fake) serve(cmd string, gen int) {
	f.mu.Lock()
	f.commands = append(f.commands, cmd)
	close(f.changed)
	f.changed = make(chan struct{})
	hang := match(f.hangUp, cmd)
	silent := f.silent || match(f.mute, cmd)
	var delay time.Duration
	for p, d := range f.delay {
		if strings.HasPrefix(cmd, p) && d > delay {
			delay = d
		}
	}
	f.mu.Unlock()
	if hang {
		f.Unplug()
		return
	}
	reply, ok := f.proto.Handle(cmd)
	if !ok || silent {
		return
	}
	if delay > 0 {
		// The late reply is written on its own while the line goes on.
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			time.Sleep(delay) // the lateness this knob is for
			f.reply(reply, gen)
		}()
		return
	}
	f.reply(reply, gen)
}

func (f *Fake) reply(reply []byte, gen int) {
	f.mu.Lock()
	same := f.gen == gen && f.master != nil
	split := f.split
	f.mu.Unlock()
	if !same {
		return
	}
	defer func() { f.mu.Lock(); f.replies++; f.mu.Unlock() }()
	if split && len(reply) > 1 {
		f.writeRaw(reply[:len(reply)/2])
		time.Sleep(20 * time.Millisecond) // the gap between the halves is the point
		f.writeRaw(reply[len(reply)/2:])
		return
	}
	f.writeRaw(reply)
}

// Replies counts the replies written so far (late ones included).
func (f *Fake) Replies() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.replies
}

// Send writes bytes the instrument sends unasked (or late).
func (f *Fake) Send(b string) { f.writeRaw([]byte(b)) }

func (f *Fake) writeRaw(b []byte) {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	f.mu.Lock()
	m := f.master
	f.mu.Unlock()
	if m != nil {
		_, _ = m.Write(b)
	}
}
