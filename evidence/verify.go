package evidence

import (
	"bufio"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Report is the result of verifying a chain or a bundle.
type Report struct {
	OK bool `json:"ok"`
	// Entries is how many entries were checked; First and Last their seqs.
	Entries int    `json:"entries"`
	First   uint64 `json:"first,omitempty"`
	Last    uint64 `json:"last,omitempty"`
	Hash    string `json:"hash,omitempty"`
	// Heads is how many signed heads were checked against the public key.
	Heads int `json:"heads"`
	// Unsigned is how many entries at the end of the chain no signed head
	// covers (checked with a public key: over VerifyOptions.AllowUnsignedTail fails).
	Unsigned int `json:"unsigned"`
	// Repairs lists the torn last lines the log cut when it reopened.
	Repairs []Repair `json:"repairs,omitempty"`
	// Log is the name of a shared log ("" for a device's chain).
	Log string `json:"log,omitempty"`
	// Devices counts the entries of each device (at most
	// [MaxReportDevices] names; OtherDevices counts the entries beyond).
	Devices      map[string]int `json:"devices,omitempty"`
	OtherDevices int            `json:"other_devices,omitempty"`
	// Bad names the first entry or head that failed, and why.
	Bad *Bad `json:"bad,omitempty"`
	// Warnings are facts that do not fail the check (no public key given, ...).
	Warnings []string `json:"warnings,omitempty"`
}

// Bad is the first problem Verify found.
type Bad struct {
	File   string `json:"file,omitempty"`
	Line   int    `json:"line,omitempty"`
	Seq    uint64 `json:"seq,omitempty"`
	Reason string `json:"reason"`
}

// MaxReportDevices bounds the device names a Report counts.
const MaxReportDevices = 1024

// chainChecker checks entries one after another.
type chainChecker struct {
	r      *Report
	prev   string
	seq    uint64
	hashes map[uint64]string // seq -> hash, for checking heads (bounded by the caller)
	device string
	// shared: the chain is a shared log (its first entry says so, or a
	// bundle's head names the log): entries may name several devices.
	shared bool
}

// count adds e to the report's per-device counts.
func (c *chainChecker) count(e Entry) {
	if e.Device == "" {
		return
	}
	if c.r.Devices == nil {
		c.r.Devices = map[string]int{}
	}
	if _, ok := c.r.Devices[e.Device]; !ok && len(c.r.Devices) >= MaxReportDevices {
		c.r.OtherDevices++
		return
	}
	c.r.Devices[e.Device]++
}

// identity says why head h does not belong to this chain ("" when it does):
// a shared log's heads name the log, a device chain's the device.
func (c *chainChecker) identity(h Head) string {
	switch {
	case c.shared && h.Log != c.r.Log:
		if h.Log == "" {
			return fmt.Sprintf("the head is of device %q, the chain is the shared log %q", h.Device, c.r.Log)
		}
		return fmt.Sprintf("the head names the shared log %q, the chain is the shared log %q", h.Log, c.r.Log)
	case !c.shared && h.Log != "":
		return fmt.Sprintf("the head names the shared log %q, the chain is of device %q", h.Log, c.device)
	case !c.shared && h.Device != "" && h.Device != c.device:
		return fmt.Sprintf("the head is of device %q, the chain of %q", h.Device, c.device)
	}
	return ""
}

func (c *chainChecker) check(e Entry, file string, line int) bool {
	fail := func(reason string) bool {
		c.r.Bad = &Bad{File: file, Line: line, Seq: e.Seq, Reason: reason}
		return false
	}
	h, err := e.computeHash()
	if err != nil {
		return fail(err.Error())
	}
	if h != e.Hash {
		return fail("hash does not match the entry's content (the entry was altered)")
	}
	if c.r.Entries == 0 {
		c.r.First = e.Seq
		c.device = e.Device
		if isSharedMarker(e) {
			c.shared, c.r.Log = true, e.Name
		}
	} else {
		if e.Seq != c.seq+1 {
			return fail(fmt.Sprintf("seq %d follows %d (an entry is missing or reordered)", e.Seq, c.seq))
		}
		if e.Prev != c.prev {
			return fail("prev does not match the hash of the entry before (the chain was cut or rewritten)")
		}
		switch {
		case e.Method == MethodSharedLog:
			return fail("a shared log's first entry in the middle of a chain (only seq 1 may start a shared log)")
		case !c.shared && e.Device != c.device:
			return fail(fmt.Sprintf("device %q in a chain of %q (the chain does not begin as a shared log)", e.Device, c.device))
		case c.shared && e.Device == "" && e.Method != MethodRepair:
			return fail("an entry of a shared log names no device")
		}
	}
	c.count(e)
	c.prev, c.seq = e.Hash, e.Seq
	if rep, ok := repairOf(e); ok {
		c.r.Repairs = append(c.r.Repairs, rep)
		c.r.Warnings = append(c.r.Warnings, rep.String())
	}
	c.r.Entries++
	c.r.Last, c.r.Hash = e.Seq, e.Hash
	if c.hashes != nil {
		c.hashes[e.Seq] = e.Hash
	}
	return true
}

// VerifyOptions says what Verify checks beyond the chain's own links.
type VerifyOptions struct {
	// Pub checks every signed head's signature; with it the chain's last
	// entry must be covered by a signed head (see AllowUnsignedTail).
	Pub ed25519.PublicKey
	// AllowUnsignedTail accepts at most this many entries after the last
	// signed head (a device still running, or killed since its last head).
	AllowUnsignedTail int
	// Head is a head obtained earlier (evidence/head, an export): the chain
	// must still hold its seq with its hash, and with Pub its signature must
	// verify, so a rewrite that replaced every head in heads.jsonl is caught.
	Head *Head
}

// Verify recomputes the chain in dir from its first entry to its last, and
// checks every signed head in heads.jsonl against pub (when pub is nil the
// heads are checked for consistency only, and the report says so); with pub
// the last entry must be covered by a signed head. It returns an error only
// when dir cannot be read; a broken chain is a Report with OK false naming
// the first bad entry. [VerifyWith] takes more options.
func Verify(dir string, pub ed25519.PublicKey) (Report, error) {
	return VerifyWith(dir, VerifyOptions{Pub: pub})
}

// VerifyWith is Verify with options. Receipts a Log of this process holds
// buffered for dir are written first.
func VerifyWith(dir string, opt VerifyOptions) (Report, error) {
	flushOpen(dir)
	pub := opt.Pub
	r := Report{}
	segs, err := segments(dir)
	if err != nil {
		return r, err
	}
	if len(segs) == 0 {
		return r, fmt.Errorf("evidence: no chain files in %s", dir)
	}
	c := &chainChecker{r: &r, prev: zeroHash, hashes: map[uint64]string{}}
	for i, n := range segs {
		if n != i+1 {
			r.Bad = &Bad{File: filepath.Base(segmentPath(dir, i+1)), Reason: "chain file missing"}
			return r, nil
		}
		path := segmentPath(dir, n)
		f, err := openRegular(path)
		if err != nil {
			return r, err
		}
		ok := scanLines(f, func(b []byte, line int) bool {
			var e Entry
			if err := json.Unmarshal(b, &e); err != nil {
				r.Bad = &Bad{File: filepath.Base(path), Line: line, Reason: "not a JSON entry: " + err.Error()}
				return false
			}
			if r.Entries == 0 && e.Prev != zeroHash {
				r.Bad = &Bad{File: filepath.Base(path), Line: line, Seq: e.Seq, Reason: "the first entry does not start a chain (its prev is not zero): earlier entries are missing"}
				return false
			}
			return c.check(e, filepath.Base(path), line)
		}, func(line int) {
			r.Bad = &Bad{File: filepath.Base(path), Line: line, Reason: "the last line is incomplete (no newline)"}
		})
		f.Close()
		if !ok {
			return r, nil
		}
	}
	if err := verifyHeads(dir, opt, c); err != nil {
		return r, err
	}
	if r.Bad == nil && opt.Head != nil {
		checkEarlierHead(*opt.Head, pub, c)
	}
	r.OK = r.Bad == nil
	return r, nil
}

// checkEarlierHead checks the chain against a head obtained before.
func checkEarlierHead(h Head, pub ed25519.PublicKey, c *chainChecker) {
	r, hashes := c.r, c.hashes
	if why := c.identity(h); why != "" {
		r.Bad = &Bad{File: "--head", Seq: h.Seq, Reason: "the earlier head: " + why}
		return
	}
	if h.Seq < r.First || h.Seq > r.Last {
		r.Bad = &Bad{File: "--head", Seq: h.Seq, Reason: fmt.Sprintf("the earlier head names seq %d, which the chain (seq %d..%d) does not have (entries were removed)", h.Seq, r.First, r.Last)}
		return
	}
	if hashes[h.Seq] != h.Hash {
		r.Bad = &Bad{File: "--head", Seq: h.Seq, Reason: "the chain's entry differs from the earlier head's hash (the chain was rewritten, its heads with it)"}
		return
	}
	if pub != nil {
		if err := h.VerifySignature(pub); err != nil {
			r.Bad = &Bad{File: "--head", Seq: h.Seq, Reason: "the earlier head: " + err.Error()}
		}
	}
}

func verifyHeads(dir string, opt VerifyOptions, c *chainChecker) error {
	r, hashes := c.r, c.hashes
	pub := opt.Pub
	path := filepath.Join(dir, "heads.jsonl")
	noHeads := func() {
		r.Unsigned = r.Entries
		if pub != nil {
			r.Bad = &Bad{File: "heads.jsonl", Reason: fmt.Sprintf("a public key was given but the chain has no signed heads: all %d entries are unsigned", r.Entries)}
		} else {
			r.Warnings = append(r.Warnings, "no signed heads: the chain is intact but a cut at its end would not show")
		}
	}
	f, err := openRegular(path)
	if errors.Is(err, os.ErrNotExist) || (err != nil && isNotExist(path)) {
		noHeads()
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	var lastSigned uint64
	lines := 0
	scanLines(f, func(b []byte, line int) bool {
		lines++
		var h Head
		if err := json.Unmarshal(b, &h); err != nil {
			r.Bad = &Bad{File: "heads.jsonl", Line: line, Reason: "not a JSON head: " + err.Error()}
			return false
		}
		if why := c.identity(h); why != "" {
			r.Bad = &Bad{File: "heads.jsonl", Line: line, Seq: h.Seq, Reason: why}
			return false
		}
		if !checkHead(h, pub, r, hashes, "heads.jsonl", line) {
			return false
		}
		lastSigned = max(lastSigned, h.Seq)
		return true
	}, func(line int) {
		r.Bad = &Bad{File: "heads.jsonl", Line: line, Reason: "the last line is incomplete"}
	})
	if r.Bad != nil {
		return nil
	}
	if lines == 0 { // an emptied heads file is no heads at all
		noHeads()
		return nil
	}
	if pub == nil {
		r.Warnings = append(r.Warnings, "no public key given: head signatures were not checked")
	}
	if lastSigned < r.Last {
		r.Unsigned = int(r.Last - lastSigned)
		switch {
		case pub != nil && r.Unsigned > opt.AllowUnsignedTail:
			r.Bad = &Bad{File: "heads.jsonl", Seq: lastSigned + 1, Reason: fmt.Sprintf("%d entries (seq %d..%d) are not covered by a signed head: they could have been rewritten or cut (accept at most %d with --allow-unsigned-tail)",
				r.Unsigned, lastSigned+1, r.Last, opt.AllowUnsignedTail)}
		default:
			r.Warnings = append(r.Warnings, fmt.Sprintf("%d entries (seq %d..%d) come after the last signed head (the device is running, or stopped without a clean shutdown)", r.Unsigned, lastSigned+1, r.Last))
		}
	}
	return nil
}

func isNotExist(path string) bool { _, err := os.Lstat(path); return os.IsNotExist(err) }

func checkHead(h Head, pub ed25519.PublicKey, r *Report, hashes map[uint64]string, file string, line int) bool {
	want, ok := hashes[h.Seq]
	if !ok {
		r.Bad = &Bad{File: file, Line: line, Seq: h.Seq, Reason: fmt.Sprintf("a signed head names seq %d, which the chain does not have (entries were removed)", h.Seq)}
		return false
	}
	if want != h.Hash {
		r.Bad = &Bad{File: file, Line: line, Seq: h.Seq, Reason: "a signed head's hash differs from the chain's entry (the chain was rewritten)"}
		return false
	}
	if pub != nil {
		if err := h.VerifySignature(pub); err != nil {
			r.Bad = &Bad{File: file, Line: line, Seq: h.Seq, Reason: err.Error()}
			return false
		}
		r.Heads++
	}
	return true
}

// scanLines calls each for every complete line (1-based numbers) until it
// returns false; partial is called for a final line without its newline.
func scanLines(rd io.Reader, each func(b []byte, line int) bool, partial func(line int)) bool {
	br := bufio.NewReaderSize(rd, 64<<10)
	for line := 1; ; line++ {
		b, err := br.ReadBytes('\n')
		if len(b) > 0 && err == io.EOF {
			partial(line)
			return false
		}
		if err != nil {
			return true
		}
		if !each(b, line) {
			return false
		}
	}
}

// Bundle is a contiguous range of a chain with a head over its last entry,
// signed when exported with a key: one run's evidence, verifiable elsewhere.
type Bundle struct {
	Format  string  `json:"format"`
	Head    Head    `json:"head"`
	Entries []Entry `json:"entries"`
}

// BundleFormat names the bundle layout.
const BundleFormat = "mhp-evidence-bundle/1"

// MaxBundleEntries bounds an export.
const MaxBundleEntries = 100000

// Export writes the range of the chain in dir that spans every entry of the
// session label (from its first entry to its last, other sessions' entries
// in between included so the links can be checked), with a head signed by
// key when key is set. An empty session exports the whole chain.
func Export(dir, session string, key ed25519.PrivateKey, w io.Writer) error {
	return ExportWith(dir, ExportOptions{Session: session, Key: key}, w)
}

// ExportOptions selects what [ExportWith] exports.
type ExportOptions struct {
	// Session and Device select the entries the range must span (both:
	// entries of that session on that device); none: the whole chain.
	Session, Device string
	// Key signs the bundle's head.
	Key ed25519.PrivateKey
}

// ExportWith writes the contiguous range of the chain in dir from the first
// to the last entry the options select. Entries in between that they do not
// select (other sessions, and in a shared log other devices) are included
// in full: each entry's hash covers its content and the link to the one
// before, so the range verifies on its own only whole. A shared log's
// bundle head names the log.
func ExportWith(dir string, opt ExportOptions, w io.Writer) error {
	session, key := opt.Session, opt.Key
	rep, err := Verify(dir, nil)
	if err != nil {
		return err
	}
	if !rep.OK {
		return fmt.Errorf("evidence: the chain does not verify (%s): refusing to export", rep.Bad.Reason)
	}
	segs, _ := segments(dir)
	var all []Entry
	first, last := uint64(0), uint64(0)
	for _, n := range segs {
		if _, _, err := scanSegment(segmentPath(dir, n), func(e Entry) {
			if (session == "" || e.Session == session) && (opt.Device == "" || e.Device == opt.Device) {
				if first == 0 {
					first = e.Seq
				}
				last = e.Seq
			}
			if first != 0 {
				all = append(all, e)
			}
		}); err != nil {
			return err
		}
		if len(all) > MaxBundleEntries {
			return fmt.Errorf("evidence: the range is over %d entries; export a shorter run", MaxBundleEntries)
		}
	}
	if first == 0 {
		return fmt.Errorf("evidence: no entries for session %q and device %q", session, opt.Device)
	}
	var out []Entry
	for _, e := range all {
		if e.Seq >= first && e.Seq <= last {
			out = append(out, e)
		}
	}
	lastE := out[len(out)-1]
	b := Bundle{Format: BundleFormat, Entries: out,
		Head: Head{Device: lastE.Device, Seq: lastE.Seq, Hash: lastE.Hash, TS: lastE.TS, Reason: "export", First: first}}
	if rep.Log != "" {
		b.Head.Device, b.Head.Log = "", rep.Log
	}
	if key != nil {
		if err := b.Head.Sign(key); err != nil {
			return err
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return enc.Encode(b)
}

// VerifyBundle checks a bundle read from r: every entry's hash, the links
// between them, and the head (its signature against pub when pub is set).
func VerifyBundle(rd io.Reader, pub ed25519.PublicKey) (Report, error) {
	return VerifyBundleWith(rd, VerifyOptions{Pub: pub})
}

// VerifyBundleWith is VerifyBundle with options (Head: an earlier head
// within the bundle's range must match it).
func VerifyBundleWith(rd io.Reader, opt VerifyOptions) (Report, error) {
	pub := opt.Pub
	var b Bundle
	dec := json.NewDecoder(io.LimitReader(rd, 1<<30))
	if err := dec.Decode(&b); err != nil {
		return Report{}, fmt.Errorf("evidence: bundle: %w", err)
	}
	if b.Format != BundleFormat {
		return Report{}, fmt.Errorf("evidence: bundle format %q, want %q", b.Format, BundleFormat)
	}
	r := Report{}
	c := &chainChecker{r: &r, hashes: map[uint64]string{}}
	if b.Head.Log != "" { // a range of a shared log: its head names the log
		c.shared, r.Log = true, b.Head.Log
	}
	for i, e := range b.Entries {
		if !c.check(e, "bundle", i+1) {
			return r, nil
		}
	}
	if r.Entries == 0 {
		r.Bad = &Bad{Reason: "the bundle has no entries"}
		return r, nil
	}
	if b.Head.First != r.First || b.Head.Seq != r.Last {
		r.Bad = &Bad{Reason: fmt.Sprintf("the head covers %d..%d but the bundle holds %d..%d", b.Head.First, b.Head.Seq, r.First, r.Last)}
		return r, nil
	}
	if why := c.identity(b.Head); why != "" {
		r.Bad = &Bad{File: "bundle head", Seq: b.Head.Seq, Reason: why}
		return r, nil
	}
	if !checkHead(b.Head, pub, &r, c.hashes, "bundle head", 0) {
		return r, nil
	}
	if opt.Head != nil {
		if checkEarlierHead(*opt.Head, pub, c); r.Bad != nil {
			return r, nil
		}
	}
	if pub == nil {
		r.Warnings = append(r.Warnings, "no public key given: the head signature was not checked")
	}
	r.OK = true
	return r, nil
}
