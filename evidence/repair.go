package evidence

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

// MethodRepair is the method of the receipt Open writes when it cuts a torn
// last line (a crash or a full disk during an append): its result names the
// file, the offset, how many bytes were cut, their SHA-256 and how they
// began; the entry's ts is when. Verify reports every repair.
const MethodRepair = "evidence/repair"

// OutcomeRepaired is the outcome of a [MethodRepair] receipt.
const OutcomeRepaired = "repaired"

// cutStartBytes is how much of a cut line a repair receipt quotes.
const cutStartBytes = 256

// File is a chain file open for appending, as the log writes it
// ([Config.WrapFile] wraps it).
type File interface {
	io.Writer
	Sync() error
	Close() error
}

func (l *Log) wrap(f *os.File) File {
	if l.cfg.WrapFile != nil {
		return l.cfg.WrapFile(f)
	}
	return f
}

// Repair is what a [MethodRepair] receipt says was cut.
type Repair struct {
	Seq       uint64  `json:"seq,omitempty"`
	TS        float64 `json:"ts,omitempty"`
	File      string  `json:"file"`
	Offset    int64   `json:"offset"`
	CutBytes  int64   `json:"cut_bytes"`
	CutSHA256 string  `json:"cut_sha256"`
	CutStart  string  `json:"cut_start,omitempty"`
}

// tornCut is a torn last line cut from a chain file.
type tornCut struct {
	bytes int64
	sum   string
	start string
}

// cutTornLine cuts what follows the last complete line (at good) of path and
// returns what was cut (nil when nothing was).
func cutTornLine(path string, good int64) (*tornCut, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("evidence: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() <= good {
		return nil, err
	}
	if _, err := f.Seek(good, io.SeekStart); err != nil {
		return nil, fmt.Errorf("evidence: %w", err)
	}
	start := make([]byte, cutStartBytes)
	n, _ := io.ReadFull(f, start)
	h := sha256.New()
	h.Write(start[:n])
	rest, err := io.Copy(h, f)
	if err != nil {
		return nil, fmt.Errorf("evidence: reading the torn last line of %s: %w", path, err)
	}
	if err := f.Truncate(good); err != nil {
		return nil, fmt.Errorf("evidence: cutting the torn last line of %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return nil, fmt.Errorf("evidence: cutting the torn last line of %s: %w", path, err)
	}
	return &tornCut{bytes: int64(n) + rest, sum: hex.EncodeToString(h.Sum(nil)), start: strings.ToValidUTF8(string(start[:n]), "\uFFFD")}, nil
}

func (c *tornCut) receipt(file string, offset int64) Receipt {
	b, _ := json.Marshal(Repair{File: file, Offset: offset, CutBytes: c.bytes, CutSHA256: c.sum, CutStart: c.start})
	return Receipt{Method: MethodRepair, Name: file, Outcome: OutcomeRepaired, Result: b}
}

// repairOf reads a repair receipt's account (ok false for other entries).
func repairOf(e Entry) (Repair, bool) {
	if e.Method != MethodRepair {
		return Repair{}, false
	}
	var r Repair
	json.Unmarshal(e.Result, &r)
	r.Seq, r.TS = e.Seq, e.TS
	return r, true
}

func (r Repair) String() string {
	return fmt.Sprintf("seq %d records a repair: when the log was reopened (ts %s) a torn last line of %d bytes (sha256 %s) was cut from %s at offset %d",
		r.Seq, FormatNumber(r.TS), r.CutBytes, r.CutSHA256, r.File, r.Offset)
}
