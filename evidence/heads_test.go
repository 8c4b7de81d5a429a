package evidence

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/clock"
)

// TestHeadsSignedOnCadence: a head every HeadEvery entries, within
// HeadInterval of an unsigned entry, and right after a safety receipt; with
// the public key the unsigned tail fails verification unless allowed.
func TestHeadsSignedOnCadence(t *testing.T) {
	dir := t.TempDir()
	pub, priv := testKey(t)
	clk := clock.NewManual(time.Unix(1_800_000_000, 0))
	l, err := Open(Config{Dir: dir, Device: "tc-01", Key: priv, HeadEvery: 3, HeadInterval: 5 * time.Second, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	appendN(t, l, 7, "a") // heads at 3 and 6; 7 unsigned (a kill -9 now would leave it so)
	r, err := Verify(dir, pub)
	if err != nil {
		t.Fatal(err)
	}
	if r.OK || r.Unsigned != 1 || !strings.Contains(r.Bad.Reason, "1 entries (seq 7..7) are not covered") {
		t.Fatalf("verify with an unsigned tail = %+v, want a failure naming 1 unsigned entry", r)
	}
	if r, _ := VerifyWith(dir, VerifyOptions{Pub: pub, AllowUnsignedTail: 1}); !r.OK || r.Heads != 2 {
		t.Fatalf("verify allowing 1 unsigned = %+v, want ok over 2 heads", r)
	}
	clk.Advance(5 * time.Second) // the interval signs the tail
	if r, _ := Verify(dir, pub); !r.OK || r.Unsigned != 0 || r.Heads != 3 {
		t.Fatalf("after the interval: %+v, want every entry covered", r)
	}
	if _, err := l.Append(Receipt{Method: mhp.MethodSafetyEStop, Outcome: OutcomeOK}); err != nil {
		t.Fatal(err)
	}
	if r, _ := Verify(dir, pub); !r.OK || r.Last != 8 || r.Unsigned != 0 {
		t.Fatalf("after an estop receipt: %+v, want it signed at once", r)
	}
	if n := clk.Pending(); n != 0 {
		t.Fatalf("%d head timers armed with nothing unsigned", n)
	}
}

// TestEmptiedHeadsFileIsMissing: `: > heads.jsonl` after a rehashed rewrite
// fails with the public key, as deleting the file does.
func TestEmptiedHeadsFileIsMissing(t *testing.T) {
	dir := t.TempDir()
	pub, priv := testKey(t)
	l := openLog(t, dir, priv, 0)
	appendN(t, l, 4, "a")
	l.Close()
	rehash(t, dir, func(e *Entry) { e.Outcome = OutcomeRefused })
	if err := os.WriteFile(filepath.Join(dir, "heads.jsonl"), nil, 0o640); err != nil {
		t.Fatal(err)
	}
	r, err := Verify(dir, pub)
	if err != nil {
		t.Fatal(err)
	}
	if r.OK || !strings.Contains(r.Bad.Reason, "no signed heads") || r.Unsigned != 4 {
		t.Fatalf("verify with an emptied heads file = %+v, want it refused as unsigned", r)
	}
}

// TestEarlierHeadCatchesReplacedHeads: an insider rewrites the chain and
// re-signs every head; a head obtained earlier still catches it.
func TestEarlierHeadCatchesReplacedHeads(t *testing.T) {
	dir := t.TempDir()
	pub, priv := testKey(t)
	l := openLog(t, dir, priv, 0)
	appendN(t, l, 3, "a")
	earlier := l.Head() // as evidence/head answered a client
	appendN(t, l, 3, "a")
	l.Close()
	hb, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "result": earlier})
	headFile := filepath.Join(t.TempDir(), "head.json")
	os.WriteFile(headFile, hb, 0o640)
	got, err := LoadHead(headFile)
	if err != nil || got != earlier {
		t.Fatalf("LoadHead = %+v, %v; want %+v", got, err, earlier)
	}
	if r, _ := VerifyWith(dir, VerifyOptions{Pub: pub, Head: &got}); !r.OK {
		t.Fatalf("the untouched chain fails against the earlier head: %+v", r)
	}
	rehash(t, dir, func(e *Entry) {
		if e.Seq == 2 {
			e.Outcome = OutcomeRefused
		}
	})
	// Replace every head with one signed over the rewritten chain.
	rep, _ := Verify(dir, nil)
	h := Head{Device: "tc-01", Seq: rep.Last, Hash: rep.Hash, Reason: HeadShutdown}
	h.Sign(priv)
	b, _ := Canonical(h)
	os.WriteFile(filepath.Join(dir, "heads.jsonl"), append(b, '\n'), 0o640)
	if r, _ := Verify(dir, pub); !r.OK {
		t.Fatalf("setup: the re-signed rewrite should pass without the earlier head: %+v", r)
	}
	r, _ := VerifyWith(dir, VerifyOptions{Pub: pub, Head: &got})
	if r.OK || r.Bad.Seq != 3 || !strings.Contains(r.Bad.Reason, "earlier head") {
		t.Fatalf("verify against the earlier head = %+v, want the rewrite caught at seq 3", r)
	}
}

// rehash rewrites every entry of segment 1 with f and recomputes the chain.
func rehash(t *testing.T, dir string, f func(*Entry)) {
	t.Helper()
	prev := zeroHash
	rewrite(t, dir, 1, func(lines []string) []string {
		for i, line := range lines {
			var e Entry
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				t.Fatal(err)
			}
			f(&e)
			e.Prev = prev
			e.Hash, _ = e.computeHash()
			prev = e.Hash
			b, _ := e.canonical(true)
			lines[i] = string(b)
		}
		return lines
	})
}

// fullDisk is a chain file on a disk with budget bytes left: a write over
// it is cut short with ENOSPC, as on a full tmpfs.
type fullDisk struct {
	File
	budget  atomic.Int64
	syncErr atomic.Bool
}

func (d *fullDisk) Write(b []byte) (int, error) {
	left := d.budget.Load()
	if int64(len(b)) <= left {
		d.budget.Add(-int64(len(b)))
		return d.File.Write(b)
	}
	n, _ := d.File.Write(b[:max(left, 0)])
	d.budget.Store(0)
	return n, &os.PathError{Op: "write", Path: "chain", Err: syscall.ENOSPC}
}

func (d *fullDisk) Sync() error {
	if d.syncErr.Load() {
		return &os.PathError{Op: "fsync", Path: "chain", Err: syscall.EIO}
	}
	return d.File.Sync()
}

// TestFullDiskStopsTheLogAndRepairIsRecorded: a short write stops the log
// (every later append fails, Err says so); reopening cuts the torn line and
// records the cut, which Verify reports.
func TestFullDiskStopsTheLogAndRepairIsRecorded(t *testing.T) {
	dir := t.TempDir()
	var disk *fullDisk
	l, err := Open(Config{Dir: dir, Device: "tc-01", WrapFile: func(f File) File {
		disk = &fullDisk{File: f}
		disk.budget.Store(1 << 20)
		return disk
	}})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 2, "a")
	disk.budget.Store(40)
	if _, err := l.Append(Receipt{Method: mhp.MethodSettingsWrite, Name: "x", Outcome: OutcomeOK}); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("append on a full disk = %v, want ENOSPC", err)
	}
	if l.Err() == nil {
		t.Fatal("the log still reports no error after a torn write")
	}
	disk.budget.Store(1 << 20)
	if _, err := l.Append(Receipt{Method: mhp.MethodSettingsWrite, Outcome: OutcomeOK}); err == nil {
		t.Fatal("an append after a torn write succeeded: the chain would fork")
	}
	l.Close()
	if r, _ := Verify(dir, nil); r.OK {
		t.Fatalf("a torn last line verified: %+v", r)
	}
	l = openLog(t, dir, nil, 0)
	l.Close()
	r, err := Verify(dir, nil)
	if err != nil || !r.OK || r.Entries != 3 || len(r.Repairs) != 1 || r.Repairs[0].CutBytes != 40 {
		t.Fatalf("after reopening: %+v %v, want 2 entries and a repair of 40 bytes", r, err)
	}
	if !strings.Contains(strings.Join(r.Warnings, "\n"), "torn last line of 40 bytes") {
		t.Fatalf("the repair is not reported: %v", r.Warnings)
	}
}

// TestFailedFsyncStopsTheLog: after an fsync error the receipt is not
// durable; the append fails and so does every later one.
func TestFailedFsyncStopsTheLog(t *testing.T) {
	var disk *fullDisk
	l, err := Open(Config{Dir: t.TempDir(), Device: "tc-01", WrapFile: func(f File) File {
		disk = &fullDisk{File: f}
		disk.budget.Store(1 << 20)
		return disk
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	disk.syncErr.Store(true)
	if _, err := l.Append(Receipt{Method: mhp.MethodSettingsWrite, Outcome: OutcomeOK}); !errors.Is(err, syscall.EIO) {
		t.Fatalf("append with a failing fsync = %v, want EIO", err)
	}
	disk.syncErr.Store(false)
	if _, err := l.Append(Receipt{Method: mhp.MethodSettingsWrite, Outcome: OutcomeOK}); err == nil || l.Err() == nil {
		t.Fatal("the log went on after a failed fsync")
	}
}
