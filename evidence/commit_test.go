package evidence

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/clock"
)

// gatedDisk counts a file's writes and fsyncs; while gated, an fsync waits
// for the gate to open (a slow disk).
type gatedDisk struct {
	File
	name    string
	writes  atomic.Int64
	syncs   atomic.Int64
	mu      sync.Mutex
	gate    chan struct{} // nil: fsync at once
	entered chan struct{} // a gated fsync has started (buffered)
}

func (d *gatedDisk) Write(b []byte) (int, error) {
	d.writes.Add(1)
	return d.File.Write(b)
}

func (d *gatedDisk) Sync() error {
	d.syncs.Add(1)
	d.mu.Lock()
	g := d.gate
	d.mu.Unlock()
	if g != nil {
		select {
		case d.entered <- struct{}{}:
		default:
		}
		<-g
	}
	return d.File.Sync()
}

// close the gate: later fsyncs wait until open is called.
func (d *gatedDisk) hold() {
	d.mu.Lock()
	d.gate, d.entered = make(chan struct{}), make(chan struct{}, 64)
	d.mu.Unlock()
}

func (d *gatedDisk) open() {
	d.mu.Lock()
	if d.gate != nil {
		close(d.gate)
		d.gate = nil
	}
	d.mu.Unlock()
}

// disks records the gated files a log opens, by base name.
type disks struct {
	mu sync.Mutex
	by map[string]*gatedDisk
}

func (ds *disks) wrap(f File) File {
	name := "?"
	if of, ok := f.(*os.File); ok {
		name = filepath.Base(of.Name())
	}
	d := &gatedDisk{File: f, name: name}
	ds.mu.Lock()
	if ds.by == nil {
		ds.by = map[string]*gatedDisk{}
	}
	ds.by[name] = d
	ds.mu.Unlock()
	return d
}

func (ds *disks) get(name string) *gatedDisk {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	return ds.by[name]
}

// eventually polls cond until it holds or 10 s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10s: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func lineCount(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

func receipt(i int) Receipt {
	return Receipt{Method: mhp.MethodSettingsWrite, Name: "sp", Outcome: OutcomeOK, Session: fmt.Sprintf("s%d", i),
		Result: []byte(fmt.Sprintf(`{"ok":true,"value":%d}`, i))}
}

// TestSyncNeverBuffersUntilTheInterval: under SyncNever receipts are
// written in one write(2) when the flush interval passes, and always before
// Verify, Head, List and Close read or end the chain.
func TestSyncNeverBuffersUntilTheInterval(t *testing.T) {
	dir := t.TempDir()
	clk := clock.NewManual(time.Unix(1_800_000_000, 0))
	var ds disks
	l, err := Open(Config{Dir: dir, Device: "tc-01", Sync: SyncNever, Clock: clk, FlushInterval: 100 * time.Millisecond, WrapFile: ds.wrap})
	if err != nil {
		t.Fatal(err)
	}
	seg := segmentPath(dir, 1)
	disk := ds.get(filepath.Base(seg))
	for i := 0; i < 3; i++ {
		if _, err := l.Append(receipt(i)); err != nil {
			t.Fatal(err)
		}
	}
	if n := lineCount(t, seg); n != 0 || disk.writes.Load() != 0 {
		t.Fatalf("%d lines in the file, %d writes before the interval, want none", n, disk.writes.Load())
	}
	clk.Advance(100 * time.Millisecond)
	if n := lineCount(t, seg); n != 3 || disk.writes.Load() != 1 {
		t.Fatalf("after the interval: %d lines in %d writes, want 3 in 1", n, disk.writes.Load())
	}
	steps := []struct {
		name string
		read func() int // the entries the step sees
	}{
		{"verify", func() int { r, _ := Verify(dir, nil); return r.Entries }},
		{"head", func() int { l.Head(); return lineCount(t, seg) }},
		{"list", func() int { p, _ := l.List(Query{CommandID: "none"}); _ = p; return lineCount(t, seg) }},
		{"close", func() int { l.Close(); return lineCount(t, seg) }},
	}
	for i, st := range steps {
		if _, err := l.Append(receipt(10 + i)); err != nil {
			t.Fatal(err)
		}
		if got, want := st.read(), 4+i; got != want {
			t.Fatalf("%s saw %d entries, want %d: the buffered receipt was not written first", st.name, got, want)
		}
	}
	if n := clk.Pending(); n != 0 {
		t.Fatalf("%d timers left after Close", n)
	}
}

// TestSyncNeverWritesAtFlushBytes: a full buffer is written by the Append
// that fills it, without waiting for the interval.
func TestSyncNeverWritesAtFlushBytes(t *testing.T) {
	dir := t.TempDir()
	clk := clock.NewManual(time.Unix(1_800_000_000, 0))
	var ds disks
	l, err := Open(Config{Dir: dir, Device: "tc-01", Sync: SyncNever, Clock: clk, FlushBytes: 1000, WrapFile: ds.wrap})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	disk := ds.get("chain-000001.jsonl")
	for i := 0; disk.writes.Load() == 0; i++ {
		if i > 10 {
			t.Fatalf("%d receipts of ~300 bytes buffered past FlushBytes 1000", i)
		}
		if _, err := l.Append(receipt(i)); err != nil {
			t.Fatal(err)
		}
	}
	if n := lineCount(t, segmentPath(dir, 1)); n < 3 || n > 4 {
		t.Fatalf("%d lines written at the first flush, want the 3-4 that reach 1000 bytes", n)
	}
}

// TestSyncNeverWriteErrorStopsTheLog: a full disk found by a timer's write
// stops the log (Err says so, the next Append fails with it); found by the
// Append that fills the buffer, that Append fails; reopening cuts the torn
// line and records it.
func TestSyncNeverWriteErrorStopsTheLog(t *testing.T) {
	for _, viaTimer := range []bool{true, false} {
		t.Run(fmt.Sprintf("timer=%v", viaTimer), func(t *testing.T) {
			dir := t.TempDir()
			clk := clock.NewManual(time.Unix(1_800_000_000, 0))
			var disk *fullDisk
			l, err := Open(Config{Dir: dir, Device: "tc-01", Sync: SyncNever, Clock: clk, WrapFile: func(f File) File {
				disk = &fullDisk{File: f}
				disk.budget.Store(50)
				return disk
			}})
			if err != nil {
				t.Fatal(err)
			}
			_, err = l.Append(receipt(1))
			if err != nil {
				t.Fatal(err)
			}
			if !viaTimer {
				l.mu.Lock()
				l.cfg.FlushBytes = len(l.pending) + 1 // the next receipt fills the buffer
				l.mu.Unlock()
			}
			_, err = l.Append(receipt(2))
			if viaTimer {
				if err != nil {
					t.Fatal(err)
				}
				clk.Advance(DefaultFlushInterval)
			} else if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("the Append that filled the buffer = %v, want ENOSPC", err)
			}
			if !errors.Is(l.Err(), syscall.ENOSPC) {
				t.Fatalf("Err = %v, want ENOSPC", l.Err())
			}
			if _, err := l.Append(receipt(3)); !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("an Append after the failed write = %v, want ENOSPC", err)
			}
			l.Close()
			l = openLog(t, dir, nil, 0)
			l.Close()
			r, err := Verify(dir, nil)
			if err != nil || !r.OK || len(r.Repairs) != 1 || r.Repairs[0].CutBytes != 50 {
				t.Fatalf("after reopening: %+v %v, want the 50 torn bytes cut and recorded", r, err)
			}
		})
	}
}

// TestGroupCommitOneWriteOneFsync: under SyncAlways the receipts appended
// while an fsync runs are written together and share the next fsync, and
// no Append returns before the fsync that covers its receipt.
func TestGroupCommitOneWriteOneFsync(t *testing.T) {
	dir := t.TempDir()
	var ds disks
	l, err := Open(Config{Dir: dir, Device: "tc-01", WrapFile: ds.wrap})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	disk := ds.get("chain-000001.jsonl")
	disk.hold()
	defer disk.open() // before Close, also when the test fails
	var returned atomic.Int64
	var wg sync.WaitGroup
	start := func(i int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := l.Append(receipt(i)); err != nil {
				t.Error(err)
			}
			returned.Add(1)
		}()
	}
	start(0)
	<-disk.entered // the first receipt's fsync is running
	for i := 1; i <= 7; i++ {
		start(i)
	}
	eventually(t, "7 receipts queued behind the fsync", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.seq == 8
	})
	if n := returned.Load(); n != 0 {
		t.Fatalf("%d Appends returned while the fsync covering them had not", n)
	}
	if w := disk.writes.Load(); w != 1 {
		t.Fatalf("%d writes while the first fsync runs, want 1 (the rest queued)", w)
	}
	disk.open()
	wg.Wait()
	if w, s := disk.writes.Load(), disk.syncs.Load(); w != 2 || s != 2 {
		t.Fatalf("8 receipts took %d writes and %d fsyncs, want 2 and 2 (one batch behind the first)", w, s)
	}
}

// TestCommitWaitHasADeadline: an fsync that does not return leaves the
// Append waiting at most CommitTimeout, answered DeviceFault.
func TestCommitWaitHasADeadline(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_800_000_000, 0))
	var ds disks
	l, err := Open(Config{Dir: t.TempDir(), Device: "tc-01", Clock: clk, CommitTimeout: 5 * time.Second, WrapFile: ds.wrap})
	if err != nil {
		t.Fatal(err)
	}
	disk := ds.get("chain-000001.jsonl")
	disk.hold()
	defer func() { disk.open(); l.Close() }()
	done := make(chan error, 1)
	go func() { _, err := l.Append(receipt(1)); done <- err }()
	<-disk.entered
	eventually(t, "the Append waits with a deadline", func() bool { return clk.Pending() == 1 })
	clk.Advance(5 * time.Second)
	var err2 error
	eventually(t, "the Append answered at its deadline", func() bool {
		select {
		case err2 = <-done:
			return true
		default:
			return false
		}
	})
	if e, ok := mhp.AsError(err2); !ok || e.Code != mhp.CodeDeviceFault || !strings.Contains(e.Message, "not on stable storage within 5s") {
		t.Fatalf("Append with a stalled fsync = %v, want DeviceFault naming the 5s deadline", err2)
	}
}

// TestFullQueueIsRefused: while the disk holds an fsync, receipts queue up
// to MaxPending; one beyond waits for room at most CommitTimeout and is
// refused DeviceBusy saying why.
func TestFullQueueIsRefused(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_800_000_000, 0))
	var ds disks
	l, err := Open(Config{Dir: t.TempDir(), Device: "tc-01", Clock: clk, CommitTimeout: 5 * time.Second, MaxPending: 200, WrapFile: ds.wrap})
	if err != nil {
		t.Fatal(err)
	}
	disk := ds.get("chain-000001.jsonl")
	disk.hold()
	defer func() { disk.open(); l.Close() }()
	errs := make(chan error, 3)
	appendAsync := func(i int) { go func() { _, err := l.Append(receipt(i)); errs <- err }() }
	appendAsync(1)
	<-disk.entered // receipt 1 is being fsynced
	appendAsync(2)
	eventually(t, "receipt 2 queued", func() bool { l.mu.Lock(); defer l.mu.Unlock(); return l.seq == 2 })
	appendAsync(3) // the queue holds more than 200 bytes: 3 waits for room
	eventually(t, "three waits armed", func() bool { return clk.Pending() == 3 })
	if l.seq != 2 {
		t.Fatalf("receipt 3 was queued past MaxPending")
	}
	clk.Advance(5 * time.Second)
	var busy int
	for i := 0; i < 3; i++ {
		var err error
		select {
		case err = <-errs:
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of 3 Appends answered within 10s of their deadline", i)
		}
		if e, ok := mhp.AsError(err); ok && e.Code == mhp.CodeDeviceBusy && strings.Contains(e.Message, "at most 200 may wait") {
			busy++
		}
	}
	if busy != 1 {
		t.Fatalf("%d Appends refused busy, want the one beyond the queue", busy)
	}
}

// TestHeadSigningDoesNotHoldTheLog: while a signed head waits for its
// fsync, other receipts are appended and answered.
func TestHeadSigningDoesNotHoldTheLog(t *testing.T) {
	dir := t.TempDir()
	pub, priv := testKey(t)
	var ds disks
	l, err := Open(Config{Dir: dir, Device: "tc-01", Key: priv, HeadEvery: 2, Sync: SyncNever, WrapFile: ds.wrap})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(receipt(1)); err != nil {
		t.Fatal(err)
	}
	// heads.jsonl is opened by the first head: sign one, then hold the next.
	if _, err := l.Append(receipt(2)); err != nil {
		t.Fatal(err)
	}
	heads := ds.get("heads.jsonl")
	if heads == nil {
		t.Fatal("no head signed at HeadEvery")
	}
	heads.hold()
	defer heads.open()
	l.Append(receipt(3))
	signed := make(chan error, 1)
	go func() { _, err := l.Append(receipt(4)); signed <- err }() // the cadence signs a head over 4
	<-heads.entered
	done := make(chan error, 1)
	go func() { _, err := l.Append(receipt(5)); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("an Append waited for the head's fsync: head signing holds the log")
	}
	select {
	case <-signed:
		t.Fatal("the Append that signs a head returned before the head was on disk")
	default:
	}
	heads.open()
	if err := <-signed; err != nil {
		t.Fatal(err)
	}
	l.Close()
	if r, err := Verify(dir, pub); err != nil || !r.OK || r.Entries != 5 {
		t.Fatalf("verify = %+v %v", r, err)
	}
}

// TestOneWriterPerDirectory: a second Log on a directory open in this
// process (also through a symlink) is refused rather than fork the chain;
// after Close the directory opens again.
func TestOneWriterPerDirectory(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, nil, 0)
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dir, link, dir + "/."} {
		if _, err := Open(Config{Dir: d, Device: "tc-01"}); err == nil {
			t.Fatalf("a second Log opened on %s", d)
		} else if e, ok := mhp.AsError(err); !ok || e.Code != mhp.CodeDeviceBusy || !strings.Contains(e.Message, "already open in this process") {
			t.Fatalf("second open of %s = %v, want DeviceBusy saying it is open", d, err)
		}
	}
	appendN(t, l, 2, "a")
	l.Close()
	l = openLog(t, link, nil, 0)
	appendN(t, l, 1, "b")
	l.Close()
	if r, err := Verify(dir, nil); err != nil || !r.OK || r.Entries != 3 {
		t.Fatalf("verify = %+v %v", r, err)
	}
}
