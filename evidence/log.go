// Package evidence keeps a device's receipts as tamper-evident evidence: every
// actuation, refusal and safety event is one entry of a SHA-256 hash chain in
// a directory, each entry carrying the hash of the one before, computed over
// its RFC 8785 canonical JSON. A third party recomputes the chain with Verify
// (or `mhp evidence verify DIR`); with an ed25519 key the head of the chain is
// signed on a cadence (every [Config.HeadEvery] entries, within
// [Config.HeadInterval] of an unsigned entry, after every estop, fault, reset
// and repair receipt), at each rotation and at shutdown, so a truncated or
// rewritten chain is caught too, and verifying with the public key fails when
// entries after the last signed head exceed what the verifier accepts. A head
// obtained earlier (evidence/head, an export) checks a chain whose heads were
// all replaced. A contiguous range of the chain (one run) exports as a
// self-contained bundle verified the same way on another machine.
//
// Layout of the directory:
//
//	chain-000001.jsonl   entries 1..SegmentEntries, one canonical JSON object a line
//	chain-000002.jsonl   the next segment, and so on
//	heads.jsonl          signed heads, one a line (cadence, safety, rotation, shutdown)
//	writer.lock          held (flock) by the process writing the directory
//	continued.json       a device's own chain handed over to a shared log: where it ended
//
// Durability: with [SyncAlways] (the default) Append returns only after the
// entry is on stable storage (fsync), so an answer that went out has its
// receipt on disk; a failed write or fsync stops the log (every later Append
// fails, [Log.Err] says why), so the caller refuses the next actuation before
// it reaches the device. A last line torn by a crash or a full disk is cut
// when the log is opened again, and the cut is itself a receipt
// ([MethodRepair]: what was cut, where, when) that Verify reports.
// Concurrent appends share one write and one fsync (group commit, by one
// committer goroutine per log, with a bounded queue and a deadline on the
// wait). With [SyncNever] receipts are buffered in memory and written at
// most [Config.FlushInterval] (100 ms) after the first of them, or once
// [Config.FlushBytes] are buffered, and always before a head is signed, a
// segment rotates, the log closes, or Head, List, Verify and Export read
// the chain: a crash of the process loses at most that window, a power
// failure also what the kernel had not written; receipts are never
// reordered. One Log writes a directory in a process: a second Open of it
// is refused (it would fork the chain).
//
// A shared log ([Config.Shared]) is one chain of several devices: each
// entry names its device, devices append through [Log.For], their receipts
// share each write and fsync, its first entry ([MethodSharedLog]) is what
// lets Verify accept several devices, and its heads name the log (see
// shared.go). A directory holding a device's own chain stays one: Open
// refuses to continue it as a shared log, or for another device. A device's
// own chain handed over to a shared log ([Continue]) is closed and recorded
// there with its last seq and hash ([MethodContinued]); its files are never
// written again. Another process opening a directory already open for
// writing is refused (an flock on [LockFile]).
//
// Each receipt is canonicalised once, straight from its Go values, and that
// one encoding gives both its hash and its stored line; Verify recomputes
// hashes through a separate path (encoding/json, then [CanonicalJSON]).
package evidence

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/clock"
)

// Outcomes a receipt records, beyond the job end states.
const (
	OutcomeOK         = "ok"      // the request was answered with a result
	OutcomeRefused    = "refused" // a gate or the backend refused before anything took effect
	OutcomeUnknown    = mhp.OutcomeUnknown
	OutcomeNotStarted = mhp.OutcomeNotStarted
	OutcomeReplayed   = "replayed" // a command id seen before: the first answer was returned again
)

// Defaults of Config.
const (
	DefaultSegmentEntries = 10000
	// MaxResultBytes caps the answer kept in a receipt; a larger one is kept
	// as its digest (ResultDigest).
	MaxResultBytes = 4096
	// zeroHash is the prev of the first entry of a chain.
	zeroHash = "0000000000000000000000000000000000000000000000000000000000000000"
)

// SyncPolicy says when appended entries reach stable storage.
type SyncPolicy int

const (
	// SyncAlways: Append returns after fsync (group commit across concurrent appends).
	SyncAlways SyncPolicy = iota
	// SyncNever: leave it to the operating system (tests, benchmarks, tmpfs).
	SyncNever
)

// Receipt is one thing that happened at the device: an actuation and its
// answer, a refusal, a job's end, an estop, a reset, a lease change.
type Receipt struct {
	CommandID string `json:"command_id,omitempty"`
	// Session is the caller's public label, never its secret.
	Session string `json:"session,omitempty"`
	Method  string `json:"method"`
	Name    string `json:"name,omitempty"`
	Job     string `json:"job,omitempty"`
	// ParamsDigest is the SHA-256 (hex) of the canonical JSON of the request's params.
	ParamsDigest string `json:"params_digest,omitempty"`
	Outcome      string `json:"outcome"`
	// Result is the answer, kept when at most [MaxResultBytes] of canonical JSON.
	Result json.RawMessage `json:"result,omitempty"`
	// ResultDigest is the SHA-256 of a result too large to keep.
	ResultDigest string     `json:"result_digest,omitempty"`
	Error        *mhp.Error `json:"error,omitempty"`
	// Value, when set, is the answer as a Go value: Append canonicalises
	// it in one pass (the bytes encoding/json and [CanonicalJSON] would
	// give) and keeps it as Result. It is never stored itself.
	Value any `json:"-"`
}

// Entry is a receipt in the chain.
type Entry struct {
	Seq    uint64  `json:"seq"`
	TS     float64 `json:"ts"`
	Device string  `json:"device"`
	// Prev is the Hash of the entry before (64 zeros for the first).
	Prev string `json:"prev"`
	Receipt
	// Hash is the SHA-256 (hex) of the canonical JSON of the entry without Hash.
	Hash string `json:"hash"`

	resultCanonical bool // Result is known to be canonical already (set by Append)
}

// computeHash returns the SHA-256 (hex) of the entry's canonical JSON
// without its hash member.
func (e *Entry) computeHash() (string, error) {
	head, tail, err := e.canonicalParts()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	h.Write(head)
	if len(head) > 1 && len(tail) > 1 {
		h.Write([]byte{','})
	}
	h.Write(tail)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// canonical writes the entry as RFC 8785 JSON directly (members in sorted
// order, empty ones omitted as their struct tags say), which is what a third
// party gets by canonicalising the stored line.
func (e *Entry) canonical(withHash bool) ([]byte, error) {
	head, tail, err := e.canonicalParts()
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.Grow(len(head) + len(tail) + 80)
	b.Write(head)
	sep := func() {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
	}
	if withHash && e.Hash != "" {
		sep()
		b.WriteString(`"hash":`)
		writeString(&b, e.Hash)
	}
	if len(tail) > 1 {
		sep()
		b.Write(tail)
	}
	return b.Bytes(), nil
}

// canonicalParts returns the members that sort before "hash" (with the
// opening brace) and those after it (with the closing brace), so the hash
// and the stored line share one encoding.
func (e *Entry) canonicalParts() (head, tail []byte, err error) {
	var b bytes.Buffer
	b.Grow(512 + len(e.Result))
	first := true
	member := func(k string) {
		if !first {
			b.WriteByte(',')
		}
		first = false
		b.WriteByte('"')
		b.WriteString(k) // member names are ASCII without escapes
		b.WriteString(`":`)
	}
	str := func(k, v string) {
		if v != "" {
			member(k)
			writeString(&b, v)
		}
	}
	b.WriteByte('{')
	str("command_id", e.CommandID)
	member("device")
	writeString(&b, e.Device)
	if e.Error != nil {
		c, err := Canonical(e.Error)
		if err != nil {
			return nil, nil, err
		}
		member("error")
		b.Write(c)
	}
	head = append([]byte(nil), b.Bytes()...)
	b.Reset()
	first = true
	str("job", e.Job)
	member("method")
	writeString(&b, e.Method)
	str("name", e.Name)
	member("outcome")
	writeString(&b, e.Outcome)
	str("params_digest", e.ParamsDigest)
	member("prev")
	writeString(&b, e.Prev)
	if len(e.Result) > 0 {
		c := []byte(e.Result)
		if !e.resultCanonical {
			if c, err = CanonicalJSON(e.Result); err != nil { // a bundle's pretty-printing re-indents it
				return nil, nil, err
			}
		}
		member("result")
		b.Write(c)
	}
	str("result_digest", e.ResultDigest)
	member("seq")
	b.WriteString(FormatNumber(float64(e.Seq)))
	str("session", e.Session)
	member("ts")
	b.WriteString(FormatNumber(e.TS))
	b.WriteByte('}')
	return head, b.Bytes(), nil
}

// Config configures a Log.
type Config struct {
	// Dir holds the chain; it is created if missing.
	Dir string
	// Device is the device id every entry names (a device's own chain;
	// leave it empty for a shared log).
	Device string
	// Shared makes the directory one log of several devices: each entry
	// names its device, devices append through [Log.For], one committer
	// batches every device's receipts into one write and one fsync, and the
	// heads name the log (see shared.go).
	Shared bool
	// Name names a new shared log (its first entry and its heads; default
	// the directory's name). A shared log keeps the name it was created with.
	Name string
	// Key, when set, signs the head on the cadence below, after every estop,
	// fault, reset and repair receipt, at each rotation, at Close and on export.
	Key ed25519.PrivateKey
	// HeadEvery signs a head once this many entries are unsigned
	// ([DefaultHeadEvery]; only with Key).
	HeadEvery int
	// HeadInterval signs a head at most this long after an entry was
	// appended unsigned ([DefaultHeadInterval]; only with Key).
	HeadInterval time.Duration
	// WrapFile, when set, wraps each chain file and heads.jsonl as they are
	// opened for appending (tests inject a full disk: failing or short
	// writes; a slow fsync).
	WrapFile func(File) File
	// Sync is the durability policy ([SyncAlways] by default).
	Sync SyncPolicy
	// SegmentEntries is the number of entries per chain file ([DefaultSegmentEntries]).
	SegmentEntries int
	// Clock stamps entries and runs the flush, head and commit-deadline
	// timers (the real clock by default).
	Clock clock.Clock
	// FlushInterval bounds how long a receipt stays in memory under
	// [SyncNever] before it is written to the file ([DefaultFlushInterval]).
	FlushInterval time.Duration
	// FlushBytes writes the buffered receipts under [SyncNever] once they
	// reach this size ([DefaultFlushBytes]).
	FlushBytes int
	// MaxPending bounds the bytes of receipts waiting for the disk under
	// [SyncAlways]; an Append beyond it waits for room, at most
	// CommitTimeout ([DefaultMaxPending]).
	MaxPending int
	// CommitTimeout bounds how long an Append under [SyncAlways] waits for
	// its receipt to reach stable storage ([DefaultCommitTimeout]).
	CommitTimeout time.Duration
}

// Defaults of the write path (Config.FlushInterval, FlushBytes, MaxPending,
// CommitTimeout).
const (
	DefaultFlushInterval = 100 * time.Millisecond
	DefaultFlushBytes    = 64 << 10
	DefaultMaxPending    = 4 << 20
	DefaultCommitTimeout = 10 * time.Second
)

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.Dir == "" {
		return errors.New("evidence: Dir is required")
	}
	if c.Shared && c.Device != "" {
		return fmt.Errorf("evidence: a shared log names no device (Device %q): append through For(device)", c.Device)
	}
	if !c.Shared && c.Name != "" {
		return fmt.Errorf("evidence: Name names a shared log; set Shared")
	}
	if c.SegmentEntries < 0 {
		return fmt.Errorf("evidence: SegmentEntries %d is negative", c.SegmentEntries)
	}
	if c.FlushInterval < 0 || c.FlushBytes < 0 || c.MaxPending < 0 || c.CommitTimeout < 0 {
		return fmt.Errorf("evidence: FlushInterval %v, FlushBytes %d, MaxPending %d and CommitTimeout %v must not be negative",
			c.FlushInterval, c.FlushBytes, c.MaxPending, c.CommitTimeout)
	}
	if c.HeadEvery < 0 || c.HeadInterval < 0 {
		return fmt.Errorf("evidence: HeadEvery %d and HeadInterval %v must not be negative", c.HeadEvery, c.HeadInterval)
	}
	if c.Key != nil && len(c.Key) != ed25519.PrivateKeySize {
		return fmt.Errorf("evidence: Key is %d bytes, want an ed25519 private key (%d)", len(c.Key), ed25519.PrivateKeySize)
	}
	return nil
}

// Log is an append-only hash chain of receipts in a directory. It is safe for
// concurrent use.
type Log struct {
	cfg    Config
	key    string // the directory, absolute, in the registry of open logs
	name   string // a shared log's name
	unlock func() // releases the directory's lock against other processes

	mu           sync.Mutex
	file         File   // the current segment
	segment      int    // its number
	inSeg        int    // entries in it
	seq          uint64 // last seq appended
	last         string // last hash
	closed       bool
	recent       []Entry // ring of the newest entries, for cheap listing (at most recentCap)
	rnext        int     // where the next entry goes once the ring is full
	lastErr      error   // a write error: the log refuses appends after one
	pending      []byte  // encoded lines not yet written to the file
	pendingLines int     // how many
	appended     uint64  // bytes of lines ever appended (pending included)
	written      uint64  // bytes of lines ever written to the files
	flushT       clock.Timer

	headSeq     uint64      // the seq the last signed head covers
	headPlanned uint64      // the seq a head being signed covers
	headTimer   clock.Timer // armed while entries are unsigned (HeadInterval)

	headMu      sync.Mutex // heads.jsonl: taken after mu, never before
	heads       File       // heads.jsonl, open for appending once a head is written
	headWritten uint64     // the seq of the newest head in heads.jsonl

	commit committer // SyncAlways: one fsync for every line written before it
}

const recentCap = 256

// Open opens (or creates) the chain in cfg.Dir and continues it. A final line
// cut short by a crash or a full disk (no answer went out for it: the append
// had not returned) is cut, and the cut is recorded as a [MethodRepair]
// receipt naming what was cut; any other damage is an error: run Verify.
func Open(cfg Config) (*Log, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.SegmentEntries == 0 {
		cfg.SegmentEntries = DefaultSegmentEntries
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.HeadEvery == 0 {
		cfg.HeadEvery = DefaultHeadEvery
	}
	if cfg.HeadInterval == 0 {
		cfg.HeadInterval = DefaultHeadInterval
	}
	if cfg.FlushInterval == 0 {
		cfg.FlushInterval = DefaultFlushInterval
	}
	if cfg.FlushBytes == 0 {
		cfg.FlushBytes = DefaultFlushBytes
	}
	if cfg.MaxPending == 0 {
		cfg.MaxPending = DefaultMaxPending
	}
	if cfg.CommitTimeout == 0 {
		cfg.CommitTimeout = DefaultCommitTimeout
	}
	if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("evidence: %w", err)
	}
	key, err := claimDir(cfg.Dir)
	if err != nil {
		return nil, err
	}
	unlock, err := lockDir(key)
	if err != nil {
		releaseDir(key, nil)
		return nil, err
	}
	l, err := continueChain(cfg, key)
	if err != nil {
		unlock()
		releaseDir(key, nil)
		return nil, err
	}
	l.unlock = unlock
	registerDir(key, l)
	return l, nil
}

// continueChain opens the chain of an Open.
func continueChain(cfg Config, key string) (*Log, error) {
	l := &Log{cfg: cfg, key: key, last: zeroHash}
	segs, err := segments(cfg.Dir)
	if err != nil {
		return nil, err
	}
	if err := l.checkKind(); err != nil {
		return nil, err
	}
	if len(segs) == 0 {
		if err := l.openSegment(1); err != nil {
			return nil, err
		}
		l.commit.start(l)
		if err := l.startIfShared(); err != nil {
			return nil, err
		}
		return l, nil
	}
	// Continue from the newest segment: verify it and read its tail.
	n := segs[len(segs)-1]
	path := segmentPath(cfg.Dir, n)
	good, entries, err := scanSegment(path, func(e Entry) {})
	if err != nil {
		return nil, err
	}
	cut, err := cutTornLine(path, good)
	if err != nil {
		return nil, err
	}
	if len(entries) > 0 {
		lastE := entries[len(entries)-1]
		l.seq, l.last = lastE.Seq, lastE.Hash
		for _, e := range entries[max(0, len(entries)-recentCap):] {
			l.remember(e)
		}
	} else if len(segs) > 1 {
		// An empty newest segment: the chain ends in the one before.
		_, prev, err := scanSegment(segmentPath(cfg.Dir, segs[len(segs)-2]), func(Entry) {})
		if err != nil {
			return nil, err
		}
		if len(prev) > 0 {
			l.seq, l.last = prev[len(prev)-1].Seq, prev[len(prev)-1].Hash
		}
	}
	if err := l.reopenSegment(n, len(entries)); err != nil {
		return nil, err
	}
	l.headSeq = lastSignedSeq(cfg.Dir)
	l.headWritten = l.headSeq
	l.commit.start(l)
	if err := l.startIfShared(); err != nil { // a shared log whose first entry never reached the disk
		return nil, err
	}
	if cut != nil {
		if _, err := l.appendAs(l.logDevice(), cut.receipt(filepath.Base(path), good)); err != nil {
			l.commit.stop()
			l.file.Close()
			l.closeHeads()
			return nil, fmt.Errorf("evidence: recording the repair of %s: %w", path, err)
		}
	}
	return l, nil
}

func segmentPath(dir string, n int) string {
	return filepath.Join(dir, fmt.Sprintf("chain-%06d.jsonl", n))
}

// segments lists the chain file numbers in dir, ascending.
func segments(dir string) ([]int, error) {
	names, err := filepath.Glob(filepath.Join(dir, "chain-*.jsonl"))
	if err != nil {
		return nil, err
	}
	var out []int
	for _, p := range names {
		var n int
		if _, err := fmt.Sscanf(filepath.Base(p), "chain-%06d.jsonl", &n); err == nil && n > 0 {
			out = append(out, n)
		}
	}
	sort.Ints(out)
	return out, nil
}

// scanSegment reads a chain file, checking each entry's own hash (not the
// links); it returns the byte length of the complete lines and the entries.
// A last line without its newline is left out (a crash during an append).
func scanSegment(path string, each func(Entry)) (int64, []Entry, error) {
	f, err := openRegular(path)
	if err != nil {
		return 0, nil, err
	}
	defer f.Close()
	var entries []Entry
	var good int64
	r := bufio.NewReaderSize(f, 64<<10)
	for line := 1; ; line++ {
		b, err := r.ReadBytes('\n')
		if err == io.EOF {
			return good, entries, nil // a partial last line (no newline) is dropped
		}
		if err != nil {
			return 0, nil, fmt.Errorf("evidence: %s: %w", path, err)
		}
		var e Entry
		if err := json.Unmarshal(b, &e); err != nil {
			return 0, nil, fmt.Errorf("evidence: %s line %d: %v", path, line, err)
		}
		h, err := e.computeHash()
		if err != nil || h != e.Hash {
			return 0, nil, fmt.Errorf("evidence: %s line %d (seq %d): hash does not match its content", path, line, e.Seq)
		}
		good += int64(len(b))
		entries = append(entries, e)
		each(e)
	}
}

// openRegular opens path for reading only if it is a regular file (a FIFO or
// device would block or never end).
func openRegular(path string) (*os.File, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, fmt.Errorf("evidence: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("evidence: %s is not a regular file", path)
	}
	return os.Open(path)
}

// reopenSegment continues segment n, which holds entries lines.
func (l *Log) reopenSegment(n, entries int) error {
	f, err := os.OpenFile(segmentPath(l.cfg.Dir, n), os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return fmt.Errorf("evidence: %w", err)
	}
	l.file, l.segment, l.inSeg = l.wrap(f), n, entries
	return nil
}

func (l *Log) openSegment(n int) error {
	f, err := os.OpenFile(segmentPath(l.cfg.Dir, n), os.O_WRONLY|os.O_CREATE|os.O_APPEND|os.O_EXCL, 0o640)
	if err != nil {
		return fmt.Errorf("evidence: %w", err)
	}
	if l.cfg.Sync == SyncAlways {
		if d, err := os.Open(l.cfg.Dir); err == nil { // the new name must survive a crash too
			d.Sync()
			d.Close()
		}
	}
	l.file, l.segment, l.inSeg = l.wrap(f), n, 0
	return nil
}

// Append adds r to the chain and returns the entry; with [SyncAlways] it
// returns once the entry is on stable storage, with [SyncNever] once it is
// buffered (see the write path in commit.go). A shared log takes receipts
// only through a device's handle ([Log.For]).
func (l *Log) Append(r Receipt) (Entry, error) {
	if l.cfg.Shared {
		return Entry{}, mhp.Errorf(mhp.CodeInvalidParams, "evidence: %s is a shared log: append through For(device), so the receipt names its device", l.cfg.Dir)
	}
	return l.appendAs(l.cfg.Device, r)
}

// appendAs appends r as an entry of device.
func (l *Log) appendAs(device string, r Receipt) (Entry, error) {
	scratch := getBuf()
	defer putBuf(scratch)
	c, err := r.canonicalResult(scratch)
	if err != nil {
		return Entry{}, err
	}
	r.Value = nil
	if len(c) > MaxResultBytes {
		sum := sha256.Sum256(c)
		r.Result, r.ResultDigest = nil, hex.EncodeToString(sum[:])
	} else if c != nil {
		r.Result = bytes.Clone(c)
	} else {
		r.Result = nil
	}
	scratch.Reset()
	l.mu.Lock()
	if err := l.usableLocked(); err != nil {
		l.mu.Unlock()
		return Entry{}, err
	}
	if err := l.waitRoomLocked(); err != nil {
		l.mu.Unlock()
		return Entry{}, err
	}
	if l.inSeg >= l.cfg.SegmentEntries {
		if err := l.rotateLocked(); err != nil {
			if l.lastErr == nil {
				l.lastErr = err
			}
			l.mu.Unlock()
			return Entry{}, err
		}
	}
	e := Entry{Seq: l.seq + 1, TS: mhp.UnixSeconds(l.cfg.Clock.Now()), Device: device, Prev: l.last, Receipt: r, resultCanonical: true}
	before := len(l.pending)
	l.pending, e.Hash, err = e.appendLine(l.pending, scratch)
	if err != nil {
		l.pending = l.pending[:before]
		l.mu.Unlock()
		return Entry{}, fmt.Errorf("evidence: %w", err)
	}
	l.appended += uint64(len(l.pending) - before)
	l.pendingLines++
	l.seq, l.last = e.Seq, e.Hash
	l.inSeg++
	l.remember(e)
	target, f := l.appended, l.file
	if err := l.afterAppendLocked(); err != nil {
		l.mu.Unlock()
		return Entry{}, err
	}
	l.armHeadTimerLocked()
	l.mu.Unlock()
	if l.commit.on {
		if err := l.durable(f, target); err != nil {
			return e, err
		}
	}
	if err := l.headAfter(e); err != nil {
		return e, err
	}
	return e, nil
}

// usableLocked is the error that refuses an append: the log closed or stopped.
func (l *Log) usableLocked() error {
	if l.closed {
		return errors.New("evidence: log is closed")
	}
	return l.lastErr
}

// rotateLocked ends the current segment (its lines written and synced, a
// head signed over them) and starts the next.
func (l *Log) rotateLocked() error {
	if err := l.writeLocked(); err != nil {
		return err
	}
	if err := l.file.Sync(); err != nil {
		return fmt.Errorf("evidence: fsync at rotation: %w", err)
	}
	if err := l.file.Close(); err != nil {
		return fmt.Errorf("evidence: %w", err)
	}
	l.commit.publish(l.written, nil)
	if err := l.writeHeadLocked(HeadRotation); err != nil {
		return err
	}
	return l.openSegment(l.segment + 1)
}

// remember keeps e in the ring of recent entries.
func (l *Log) remember(e Entry) {
	if len(l.recent) < recentCap {
		l.recent = append(l.recent, e)
		return
	}
	l.recent[l.rnext] = e
	l.rnext = (l.rnext + 1) % recentCap
}

// recentLocked returns the ring's entries oldest first.
func (l *Log) recentLocked() []Entry {
	if len(l.recent) < recentCap {
		return l.recent
	}
	out := make([]Entry, 0, recentCap)
	out = append(out, l.recent[l.rnext:]...)
	return append(out, l.recent[:l.rnext]...)
}

// Err returns the write error that stopped the log, or nil while it works.
func (l *Log) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return errors.New("evidence: log is closed")
	}
	return l.lastErr
}

// Head returns the newest entry's seq and hash (signed when the log has a
// key); receipts buffered under [SyncNever] are written first, so the
// files hold what the head names.
func (l *Log) Head() Head {
	l.mu.Lock()
	if !l.closed {
		l.writeLocked()
	}
	h := l.headOf(Head{Seq: l.seq, Hash: l.last, TS: mhp.UnixSeconds(l.cfg.Clock.Now())})
	l.mu.Unlock()
	if l.cfg.Key != nil {
		h.Sign(l.cfg.Key)
	}
	return h
}

// Close writes and syncs the chain, signs its head (with a key) and closes
// the files.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	for _, t := range []*clock.Timer{&l.headTimer, &l.flushT} {
		if *t != nil {
			(*t).Stop()
			*t = nil
		}
	}
	err := l.writeLocked()
	if err == nil {
		err = l.file.Sync()
	}
	if err == nil {
		l.commit.publish(l.written, nil)
		err = l.writeHeadLocked(HeadShutdown)
	} else {
		l.commit.publish(0, fmt.Errorf("evidence: log closed: %w", err))
	}
	if cerr := l.file.Close(); err == nil {
		err = cerr
	}
	l.mu.Unlock()
	l.commit.publish(0, errors.New("evidence: log is closed"))
	l.commit.stop()
	if herr := l.closeHeads(); err == nil {
		err = herr
	}
	if l.unlock != nil {
		l.unlock()
	}
	releaseDir(l.key, l)
	return err
}

// Digest is the SHA-256 (hex) of v's canonical JSON; "" for nil.
func Digest(v any) string {
	if v == nil {
		return ""
	}
	b := getBuf()
	defer putBuf(b)
	if err := appendCanonical(b, v); err != nil {
		return "unencodable:" + strings.ReplaceAll(err.Error(), " ", "_")
	}
	sum := sha256.Sum256(b.Bytes())
	var h [2 * sha256.Size]byte
	hex.Encode(h[:], sum[:])
	return string(h[:])
}
