package evidence

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/openmhp/mhp-go"
)

func openShared(t *testing.T, cfg Config) *Log {
	t.Helper()
	cfg.Shared = true
	l, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func appendFor(t *testing.T, d *DeviceLog, n int, session string) {
	t.Helper()
	for i := 0; i < n; i++ {
		if _, err := d.Append(Receipt{Session: session, Method: mhp.MethodSettingsWrite, Name: "sp", CommandID: fmt.Sprintf("%s-%d", session, i),
			Outcome: OutcomeOK, Result: json.RawMessage(fmt.Sprintf(`{"ok":true,"value":%d}`, i))}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSharedLogOfSeveralDevices: one chain holds the receipts of several
// devices, each naming its device; it verifies with per-device counts, its
// heads name the log, and a device's handle lists only its own entries.
func TestSharedLogOfSeveralDevices(t *testing.T) {
	dir := t.TempDir()
	pub, priv := testKey(t)
	l := openShared(t, Config{Dir: dir, Name: "bench-host", Key: priv, SegmentEntries: 4})
	a, b := l.For("tc-01"), l.For("arm-01")
	for i := 0; i < 3; i++ {
		appendFor(t, a, 2, "alice")
		appendFor(t, b, 1, "bob")
	}
	if h := l.Head(); h.Log != "bench-host" || h.Device != "" || h.VerifySignature(pub) != nil || a.Head().Log != h.Log {
		t.Fatalf("head = %+v, want the log's, signed, naming no device", h)
	}
	p, err := a.List(Query{Limit: 50})
	if err != nil || len(p.Entries) != 6 {
		t.Fatalf("tc-01's page = %d entries, %v; want its 6", len(p.Entries), err)
	}
	for _, e := range p.Entries {
		if e.Device != "tc-01" {
			t.Fatalf("tc-01's page holds an entry of %q", e.Device)
		}
	}
	if p, _ := b.List(Query{Latest: true, Limit: 2}); len(p.Entries) != 2 || p.Entries[1].Seq != l.Head().Seq || p.Entries[0].Device != "arm-01" {
		t.Fatalf("arm-01's latest 2 = %+v, want its newest two, oldest first", p.Entries)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openShared(t, Config{Dir: dir, Name: "another-name", Key: priv, SegmentEntries: 4}) // the name it was made with stays
	appendFor(t, l.For("tc-01"), 1, "alice")
	if h := l.Head(); h.Log != "bench-host" {
		t.Fatalf("reopened head names %q, want the log's own name", h.Log)
	}
	l.Close()
	r, err := Verify(dir, pub)
	if err != nil || !r.OK {
		t.Fatalf("verify = %+v, %v", r, err)
	}
	if r.Log != "bench-host" || r.Entries != 11 || r.Devices["tc-01"] != 7 || r.Devices["arm-01"] != 3 || len(r.Devices) != 2 {
		t.Fatalf("report = log %q, %d entries, devices %v; want bench-host, 11 (the log's own first), tc-01 7, arm-01 3", r.Log, r.Entries, r.Devices)
	}
	page, err := ListDir(dir, Query{Device: "arm-01", Latest: true, Limit: 10})
	if err != nil || len(page.Entries) != 3 {
		t.Fatalf("ListDir arm-01 = %d entries, %v; want 3 (read back through the segments)", len(page.Entries), err)
	}
}

// TestSharedLogRules: what a shared log refuses, and what a device's chain
// still refuses (another device's entry spliced in, or opened for another
// device or as a shared log).
func TestSharedLogRules(t *testing.T) {
	devDir, sharedDir := t.TempDir(), t.TempDir()
	l := openLog(t, devDir, nil, 0)
	appendN(t, l, 2, "a")
	if err := l.For("arm-01").Err(); err == nil {
		t.Fatal("a device's chain takes another device's receipts through For")
	}
	if _, err := l.For("tc-01").Append(receipt(1)); err != nil {
		t.Fatalf("the chain's own device through For: %v", err)
	}
	l.Close()
	s := openShared(t, Config{Dir: sharedDir})
	if _, err := s.Append(receipt(1)); err == nil {
		t.Fatal("a shared log took a receipt that names no device")
	}
	if err := s.For("").Err(); err == nil {
		t.Fatal("For with an empty id records")
	}
	appendFor(t, s.For("tc-01"), 1, "a")
	s.Close()
	for _, c := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"shared over a device chain", Config{Dir: devDir, Shared: true}, `chain of device "tc-01", not a shared log`},
		{"device over a shared log", Config{Dir: sharedDir, Device: "tc-01"}, "open it shared"},
		{"another device's chain", Config{Dir: devDir, Device: "arm-01"}, `not of "arm-01"`},
		{"shared with a device", Config{Dir: t.TempDir(), Shared: true, Device: "tc-01"}, "names no device"},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, err := Open(c.cfg)
			if err == nil {
				l.Close()
				t.Fatal("opened")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
		})
	}
	// An entry of another device spliced into a device's chain (re-hashed
	// so the links hold) is still refused: the chain does not begin shared.
	rehash(t, devDir, func(e *Entry) {
		if e.Seq == 2 {
			e.Device = "arm-01"
		}
	})
	if r, _ := Verify(devDir, nil); r.OK || r.Bad.Seq != 2 || !strings.Contains(r.Bad.Reason, `device "arm-01" in a chain of "tc-01"`) {
		t.Fatalf("spliced device chain = %+v, want refused at seq 2", r)
	}
	// A shared log without its first entry is a device chain with mixed devices.
	mixed := t.TempDir()
	s = openShared(t, Config{Dir: mixed})
	appendFor(t, s.For("tc-01"), 1, "a")
	appendFor(t, s.For("arm-01"), 1, "a")
	s.Close()
	rewrite(t, mixed, 1, func(lines []string) []string { return lines[1:] })
	rehash(t, mixed, func(e *Entry) { e.Seq-- })
	if r, _ := Verify(mixed, nil); r.OK || !strings.Contains(r.Bad.Reason, "does not begin as a shared log") {
		t.Fatalf("devices mixed without the shared first entry = %+v, want refused", r)
	}
	// A second shared-log entry later in a chain is refused.
	again := t.TempDir()
	s = openShared(t, Config{Dir: again})
	appendFor(t, s.For("tc-01"), 2, "a")
	s.Close()
	rehash(t, again, func(e *Entry) {
		if e.Seq == 3 {
			e.Method, e.Device = MethodSharedLog, ""
		}
	})
	if r, _ := Verify(again, nil); r.OK || r.Bad.Seq != 3 {
		t.Fatalf("a shared-log entry at seq 3 = %+v, want refused there", r)
	}
	// A receipt of a shared log naming no device is refused.
	rehash(t, again, func(e *Entry) {
		if e.Seq == 3 {
			e.Method = mhp.MethodSettingsWrite
		}
	})
	if r, _ := Verify(again, nil); r.OK || r.Bad.Seq != 3 || !strings.Contains(r.Bad.Reason, "names no device") {
		t.Fatalf("a shared log's receipt without a device = %+v, want refused", r)
	}
}

// TestSharedGroupCommitAcrossDevices: under SyncAlways the receipts of
// several devices appended while an fsync runs share the next write and
// fsync, and none returns before it.
func TestSharedGroupCommitAcrossDevices(t *testing.T) {
	var ds disks
	l := openShared(t, Config{Dir: t.TempDir(), WrapFile: ds.wrap})
	defer l.Close()
	disk := ds.get("chain-000001.jsonl")
	w0, s0 := disk.writes.Load(), disk.syncs.Load() // the log's own first entry
	disk.hold()
	defer disk.open()
	var returned atomic.Int64
	var wg sync.WaitGroup
	start := func(i int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := l.For(fmt.Sprintf("dev-%d", i)).Append(receipt(i)); err != nil {
				t.Error(err)
			}
			returned.Add(1)
		}()
	}
	start(0)
	<-disk.entered
	for i := 1; i <= 7; i++ {
		start(i)
	}
	eventually(t, "7 devices' receipts queued behind the fsync", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.seq == 9
	})
	if n := returned.Load(); n != 0 {
		t.Fatalf("%d Appends returned before the fsync covering them", n)
	}
	disk.open()
	wg.Wait()
	if w, s := disk.writes.Load()-w0, disk.syncs.Load()-s0; w != 2 || s != 2 {
		t.Fatalf("8 devices' receipts took %d writes and %d fsyncs, want 2 and 2", w, s)
	}
	if st := l.CommitStats(); st.Batches != 3 || st.Lines != 9 {
		t.Fatalf("commit stats = %+v, want 3 batches of 9 receipts (the log's first, then 1 and 7)", st)
	}
}

// TestSharedLogRepairAndStop: a torn line in a shared log is cut and
// recorded when it reopens (a receipt of the log, naming no device); a
// failed write stops every device's handle.
func TestSharedLogRepairAndStop(t *testing.T) {
	dir := t.TempDir()
	var disk *fullDisk
	l := openShared(t, Config{Dir: dir, WrapFile: func(f File) File {
		disk = &fullDisk{File: f}
		disk.budget.Store(1 << 20)
		return disk
	}})
	appendFor(t, l.For("tc-01"), 2, "a")
	disk.budget.Store(30)
	if _, err := l.For("arm-01").Append(receipt(1)); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("append on a full disk = %v, want ENOSPC", err)
	}
	if l.For("tc-01").Err() == nil {
		t.Fatal("another device's handle still records after the log stopped")
	}
	l.Close()
	l = openShared(t, Config{Dir: dir})
	appendFor(t, l.For("arm-01"), 1, "b")
	l.Close()
	r, err := Verify(dir, nil)
	if err != nil || !r.OK || len(r.Repairs) != 1 || r.Repairs[0].CutBytes != 30 || r.Devices["arm-01"] != 1 {
		t.Fatalf("after reopening: %+v %v, want the 30-byte cut recorded", r, err)
	}
	// A shared log whose first entry was torn starts again with it.
	torn := t.TempDir()
	os.WriteFile(segmentPath(torn, 1), []byte(`{"seq":1,"ts":1,"dev`), 0o640)
	l = openShared(t, Config{Dir: torn, Name: "lab"})
	appendFor(t, l.For("tc-01"), 1, "a")
	l.Close()
	if r, _ := Verify(torn, nil); !r.OK || r.Log != "lab" || len(r.Repairs) != 1 || r.Devices["tc-01"] != 1 {
		t.Fatalf("torn first line = %+v, want the shared log begun again and the cut recorded", r)
	}
}

// TestSharedExportOfOneDevice: a device's export spans its first to its
// last entry with the other devices' entries in between, verifies on its
// own, and its head names the log; a head relabelled fails the signature.
func TestSharedExportOfOneDevice(t *testing.T) {
	dir := t.TempDir()
	pub, priv := testKey(t)
	l := openShared(t, Config{Dir: dir, Key: priv})
	appendFor(t, l.For("arm-01"), 1, "x")
	appendFor(t, l.For("tc-01"), 1, "a")
	appendFor(t, l.For("arm-01"), 2, "x")
	appendFor(t, l.For("tc-01"), 1, "a")
	appendFor(t, l.For("arm-01"), 1, "x")
	l.Close()
	var buf bytes.Buffer
	if err := ExportWith(dir, ExportOptions{Device: "tc-01", Key: priv}, &buf); err != nil {
		t.Fatal(err)
	}
	var b Bundle
	json.Unmarshal(buf.Bytes(), &b)
	if len(b.Entries) != 4 || b.Head.First != 3 || b.Head.Seq != 6 || b.Head.Log == "" || b.Head.Device != "" {
		t.Fatalf("bundle = %d entries, head %+v; want seq 3..6 (arm-01's two in between) under the log's head", len(b.Entries), b.Head)
	}
	r, err := VerifyBundle(bytes.NewReader(buf.Bytes()), pub)
	if err != nil || !r.OK || r.Devices["tc-01"] != 2 || r.Devices["arm-01"] != 2 {
		t.Fatalf("verify bundle = %+v, %v", r, err)
	}
	b.Head.Log, b.Head.Device = "", "tc-01" // claim it is tc-01's own chain
	relabelled, _ := json.Marshal(b)
	if r, _ := VerifyBundle(bytes.NewReader(relabelled), pub); r.OK {
		t.Fatalf("a shared range relabelled as one device's verified: %+v", r)
	}
}

// TestSafetyReceiptSignsAHeadInASharedLog: an estop of one device on a
// shared log is followed by a signed head, as on a device's own chain.
func TestSafetyReceiptSignsAHeadInASharedLog(t *testing.T) {
	dir := t.TempDir()
	pub, priv := testKey(t)
	l := openShared(t, Config{Dir: dir, Key: priv})
	defer l.Close()
	appendFor(t, l.For("arm-01"), 1, "x")
	e, err := l.For("tc-01").Append(Receipt{Method: mhp.MethodSafetyEStop, Outcome: OutcomeOK})
	if err != nil {
		t.Fatal(err)
	}
	if got := lastSignedSeq(dir); got != e.Seq {
		t.Fatalf("after tc-01's estop (seq %d) the last signed head covers seq %d", e.Seq, got)
	}
	if r, _ := Verify(dir, pub); !r.OK || r.Unsigned != 0 {
		t.Fatalf("verify = %+v", r)
	}
}

// TestContinueHandsAChainOverOnce: a device's own chain is recorded in the
// shared log where it ended, once per end; a chain that grew since is
// recorded again; a damaged one is recorded with why, and said so.
func TestContinueHandsAChainOverOnce(t *testing.T) {
	s := openShared(t, Config{Dir: t.TempDir()})
	defer s.Close()
	tc := s.For("tc-01")
	if _, moved, err := Continue(tc, t.TempDir(), ContinueOptions{}); moved || err != nil {
		t.Fatalf("a folder without a chain: moved %v, %v", moved, err)
	}
	old := t.TempDir()
	l := openLog(t, old, nil, 0)
	appendN(t, l, 2, "a")
	l.Close()
	for i, want := range []struct {
		moved bool
		seq   uint64
	}{{true, 2}, {false, 2}} {
		c, moved, err := Continue(tc, old, ContinueOptions{})
		if err != nil || moved != want.moved || c.Seq != want.seq || c.Hash == "" {
			t.Fatalf("hand-over %d = %+v moved %v, %v; want moved %v at seq %d", i, c, moved, err, want.moved, want.seq)
		}
	}
	l = openLog(t, old, nil, 0)
	appendN(t, l, 1, "b")
	l.Close()
	if c, moved, err := Continue(tc, old, ContinueOptions{}); err != nil || !moved || c.Seq != 3 {
		t.Fatalf("after the earlier chain grew: %+v moved %v, %v; want recorded again at seq 3", c, moved, err)
	}
	altered := strings.Replace(readFile(t, segmentPath(old, 1)), "target_temperature", "target_temperaturX", 1)
	os.WriteFile(segmentPath(old, 1), []byte(altered), 0o640)
	c, moved, err := Continue(tc, old, ContinueOptions{})
	if err == nil || !moved || c.Error == "" {
		t.Fatalf("a damaged earlier chain: %+v moved %v, %v; want the hand-over recorded with its error, and the error", c, moved, err)
	}
	p, _ := tc.List(Query{Limit: 50})
	if len(p.Entries) != 3 || p.Entries[2].Method != MethodContinued {
		t.Fatalf("the shared log holds %d hand-overs of tc-01, want 3", len(p.Entries))
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
