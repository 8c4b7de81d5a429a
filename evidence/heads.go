package evidence

import (
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/openmhp/mhp-go"
)

// Defaults of the head cadence (Config.HeadEvery, Config.HeadInterval): like
// a transparency log's maximum merge delay, no entry stays unsigned for
// longer than this many entries or this long.
const (
	DefaultHeadEvery    = 100
	DefaultHeadInterval = 10 * time.Second
)

// Reasons a head is signed (Head.Reason).
const (
	HeadCadence  = "cadence"  // HeadEvery entries were unsigned
	HeadInterval = "interval" // an entry was unsigned for HeadInterval
	HeadSafety   = "safety"   // after an estop, fault, reset or repair receipt
	HeadRotation = "rotation"
	HeadShutdown = "shutdown"
	HeadExport   = "export"
)

// Head is the newest entry's seq and hash, signed when the log has a key.
type Head struct {
	// Device is the device of a device's own chain ("" for a shared log).
	Device string `json:"device"`
	// Log names a shared log ("" for a device's chain): its heads cover the
	// receipts of every device writing to it.
	Log  string  `json:"log,omitempty"`
	Seq  uint64  `json:"seq"`
	Hash string  `json:"hash"`
	TS   float64 `json:"ts"`
	// Reason is why the head was signed: cadence, interval, safety,
	// rotation, shutdown, export.
	Reason string `json:"reason,omitempty"`
	// First is the first seq the head covers (bundles: the range's start).
	First uint64 `json:"first,omitempty"`
	// PublicKey (hex) and Signature (hex, ed25519 over the canonical JSON of
	// the head without Signature).
	PublicKey string `json:"public_key,omitempty"`
	Signature string `json:"signature,omitempty"`
}

func (h Head) signedBytes() ([]byte, error) {
	h.Signature = ""
	return Canonical(h)
}

// Sign signs h with key.
func (h *Head) Sign(key ed25519.PrivateKey) error {
	h.PublicKey = hex.EncodeToString(key.Public().(ed25519.PublicKey))
	b, err := h.signedBytes()
	if err != nil {
		return err
	}
	h.Signature = hex.EncodeToString(ed25519.Sign(key, b))
	return nil
}

// VerifySignature checks h's signature against pub.
func (h Head) VerifySignature(pub ed25519.PublicKey) error {
	if h.Signature == "" {
		return errors.New("head is not signed")
	}
	sig, err := hex.DecodeString(h.Signature)
	if err != nil {
		return fmt.Errorf("head signature: %v", err)
	}
	b, err := h.signedBytes()
	if err != nil {
		return err
	}
	if !ed25519.Verify(pub, b, sig) {
		return errors.New("head signature does not verify with the given public key")
	}
	return nil
}

// maxHeadFile bounds what LoadHead reads (an export bundle holds its head).
const maxHeadFile = 1 << 30

// LoadHead reads a head obtained earlier: the answer of evidence/head (the
// head itself or the JSON-RPC response holding it) or an export bundle (its
// head).
func LoadHead(path string) (Head, error) {
	f, err := openRegular(path)
	if err != nil {
		return Head{}, err
	}
	defer f.Close()
	var v struct {
		Head
		Format string `json:"format"`
		Inner  *Head  `json:"head"`
		Result *Head  `json:"result"`
	}
	if err := json.NewDecoder(io.LimitReader(f, maxHeadFile)).Decode(&v); err != nil {
		return Head{}, fmt.Errorf("evidence: %s: not a head: %v", path, err)
	}
	h := v.Head
	switch {
	case v.Inner != nil:
		h = *v.Inner
	case v.Result != nil:
		h = *v.Result
	}
	if h.Seq == 0 || len(h.Hash) != 64 {
		return Head{}, fmt.Errorf("evidence: %s holds no head (want seq and hash, as evidence/head answers)", path)
	}
	return h, nil
}

// safetyReceipt reports whether r is an estop, fault, reset or repair: a
// head is signed right after it.
func safetyReceipt(r Receipt) bool {
	switch r.Method {
	case mhp.MethodSafetyEStop, mhp.MethodSafetyReset, mhp.NotifySafetyEStop, mhp.NotifySafetyFault, mhp.NotifySafetyReset, MethodRepair:
		return true
	}
	return r.Outcome == OutcomeUnknown || strings.HasSuffix(r.Outcome, "/"+OutcomeUnknown)
}

// headAfter signs a head after e when the cadence or e's kind asks for one.
// The decision is taken under the log's mutex; making the chain durable,
// signing and writing heads.jsonl happen outside it (signHead).
func (l *Log) headAfter(e Entry) error {
	if l.cfg.Key == nil {
		return nil
	}
	reason := ""
	if safetyReceipt(e.Receipt) {
		reason = HeadSafety
	}
	l.mu.Lock()
	if l.closed || l.lastErr != nil || l.headSeq >= e.Seq {
		l.mu.Unlock()
		return nil // closed (Close signed), stopped, or a later head covers e
	}
	if reason == "" {
		if l.seq-max(l.headSeq, l.headPlanned) < uint64(l.cfg.HeadEvery) {
			l.mu.Unlock()
			return nil // fewer than HeadEvery unsigned, counting a head being signed
		}
		reason = HeadCadence
	}
	l.mu.Unlock()
	return l.signHead(reason, e.Seq)
}

// armHeadTimerLocked makes sure an unsigned entry is signed within HeadInterval.
func (l *Log) armHeadTimerLocked() {
	if l.cfg.Key == nil || l.headTimer != nil || l.seq <= l.headSeq {
		return
	}
	l.headTimer = l.cfg.Clock.AfterFunc(l.cfg.HeadInterval, l.onHeadTimer)
}

func (l *Log) onHeadTimer() {
	l.mu.Lock()
	l.headTimer = nil
	if l.closed || l.lastErr != nil || l.seq <= l.headSeq {
		l.mu.Unlock()
		return
	}
	seq := l.seq
	l.mu.Unlock()
	l.signHead(HeadInterval, seq) // a failure stops the log; Err and the next Append say why
}

// signHead signs a head over the chain's tail once the tail is durable,
// unless a head covering minSeq is already signed. It returns once that
// head is on stable storage. The log's mutex is held only to read the tail
// and to record the head: appends go on while the chain is fsynced, the
// head signed and heads.jsonl written and fsynced.
func (l *Log) signHead(reason string, minSeq uint64) error {
	l.mu.Lock()
	if l.closed || l.lastErr != nil || l.headSeq >= minSeq {
		l.mu.Unlock()
		return nil
	}
	if err := l.writeLocked(); err != nil {
		l.mu.Unlock()
		return err
	}
	seq, hash, f, end := l.seq, l.last, l.file, l.appended
	l.headPlanned = max(l.headPlanned, seq)
	l.mu.Unlock()
	if err := l.durable(f, end); err != nil {
		return l.stopWith(fmt.Errorf("evidence: fsync before signing the head failed, log stopped: %w", err))
	}
	h := l.headOf(Head{Seq: seq, Hash: hash, TS: mhp.UnixSeconds(l.cfg.Clock.Now()), Reason: reason})
	if err := l.writeHead(h); err != nil {
		return l.stopWith(fmt.Errorf("evidence: signing the head failed, log stopped: %w", err))
	}
	l.mu.Lock()
	l.recordHeadLocked(seq)
	l.mu.Unlock()
	return nil
}

// recordHeadLocked notes a head over seq is on stable storage.
func (l *Log) recordHeadLocked(seq uint64) {
	l.headSeq = max(l.headSeq, seq)
	if l.headTimer != nil && l.headSeq >= l.seq {
		l.headTimer.Stop()
		l.headTimer = nil
	}
}

// writeHeadLocked signs and writes a head over the chain's last entry
// (rotation, shutdown: the caller holds l.mu and has made the chain
// durable). Only with a key.
func (l *Log) writeHeadLocked(reason string) error {
	if l.cfg.Key == nil || l.seq == 0 {
		return nil
	}
	h := l.headOf(Head{Seq: l.seq, Hash: l.last, TS: mhp.UnixSeconds(l.cfg.Clock.Now()), Reason: reason})
	if err := l.writeHead(h); err != nil {
		return err
	}
	l.recordHeadLocked(h.Seq)
	return nil
}

// writeHead signs h and appends it to heads.jsonl, kept open, and fsyncs it;
// a head no newer than one written already is skipped (it is covered).
// headMu is taken after l.mu, never before.
func (l *Log) writeHead(h Head) error {
	l.headMu.Lock()
	defer l.headMu.Unlock()
	if h.Seq <= l.headWritten {
		return nil
	}
	if err := h.Sign(l.cfg.Key); err != nil {
		return err
	}
	b, err := Canonical(h)
	if err != nil {
		return err
	}
	if l.heads == nil {
		f, err := os.OpenFile(filepath.Join(l.cfg.Dir, "heads.jsonl"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
		if err != nil {
			return fmt.Errorf("evidence: %w", err)
		}
		l.heads = l.wrap(f)
	}
	if _, err := l.heads.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("evidence: %w", err)
	}
	if err := l.heads.Sync(); err != nil {
		return fmt.Errorf("evidence: %w", err)
	}
	l.headWritten = h.Seq
	return nil
}

// closeHeads closes heads.jsonl.
func (l *Log) closeHeads() error {
	l.headMu.Lock()
	defer l.headMu.Unlock()
	if l.heads == nil {
		return nil
	}
	err := l.heads.Close()
	l.heads = nil
	return err
}

// lastSignedSeq returns the largest seq a head in dir's heads.jsonl names
// (0 without heads): where the unsigned tail starts when a log reopens.
func lastSignedSeq(dir string) uint64 {
	f, err := openRegular(filepath.Join(dir, "heads.jsonl"))
	if err != nil {
		return 0
	}
	defer f.Close()
	var last uint64
	scanLines(f, func(b []byte, _ int) bool {
		var h Head
		if json.Unmarshal(b, &h) == nil {
			last = max(last, h.Seq)
		}
		return true
	}, func(int) {})
	return last
}
