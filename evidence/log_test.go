package evidence

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/openmhp/mhp-go"
)

func testKey(t *testing.T) (ed25519.PublicKey, ed25519.PrivateKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return pub, priv
}

func openLog(t *testing.T, dir string, key ed25519.PrivateKey, seg int) *Log {
	t.Helper()
	l, err := Open(Config{Dir: dir, Device: "tc-01", Key: key, SegmentEntries: seg})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func appendN(t *testing.T, l *Log, n int, session string) {
	t.Helper()
	for i := 0; i < n; i++ {
		_, err := l.Append(Receipt{Session: session, Method: "settings/write", Name: "target_temperature",
			CommandID: fmt.Sprintf("%s-%d", session, i), ParamsDigest: Digest(map[string]any{"value": i}),
			Outcome: OutcomeOK, Result: json.RawMessage(fmt.Sprintf(`{"ok":true,"value":%d}`, i))})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestChainVerifiesAndSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	pub, priv := testKey(t)
	l := openLog(t, dir, priv, 4) // small segments: rotation signs heads
	appendN(t, l, 10, "a")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, priv, 4)
	appendN(t, l, 3, "b")
	if h := l.Head(); h.Seq != 13 || h.VerifySignature(pub) != nil {
		t.Fatalf("head after reopen = %+v, want seq 13 and a valid signature", h)
	}
	l.Close()
	r, err := Verify(dir, pub)
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK || r.Entries != 13 || r.Heads < 3 {
		t.Fatalf("verify = %+v, want ok with 13 entries and the rotation and shutdown heads", r)
	}
}

// TestTamperIsNamed alters the chain in each way an attacker could and checks
// Verify names the first bad place.
// TestThirdPartyRecomputesHash checks the chain's definition without our
// encoder: parse a stored line, drop "hash", canonicalise, SHA-256.
func TestThirdPartyRecomputesHash(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, nil, 0)
	appendN(t, l, 2, "a")
	l.Append(Receipt{Method: "safety/estop", Session: "ü-label", Outcome: OutcomeOK,
		Error: mhp.Errorf(mhp.CodeEStopActive, "stop \"now\"\n").With("reason", "é")})
	l.Close()
	b, _ := os.ReadFile(segmentPath(dir, 1))
	prev := zeroHash
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatal(err)
		}
		want := m["hash"].(string)
		if m["prev"] != prev {
			t.Fatalf("line %d prev %v, want %s", i+1, m["prev"], prev)
		}
		delete(m, "hash")
		c, err := Canonical(m)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(c)
		if got := hex.EncodeToString(sum[:]); got != want {
			t.Fatalf("line %d: independent hash %s, stored %s\ncanonical: %s", i+1, got, want, c)
		}
		if lineCanon, _ := CanonicalJSON([]byte(line)); string(lineCanon) != line {
			t.Fatalf("stored line is not canonical:\n%s\n%s", line, lineCanon)
		}
		prev = want
	}
}

func TestTamperIsNamed(t *testing.T) {
	pub, priv := testKey(t)
	_, otherPriv := testKey(t)
	tests := []struct {
		name   string
		tamper func(t *testing.T, dir string)
		want   string
		seq    uint64
	}{
		{"value changed", func(t *testing.T, dir string) {
			rewrite(t, dir, 1, func(lines []string) []string {
				lines[2] = strings.Replace(lines[2], `"value":2`, `"value":3`, 1)
				return lines
			})
		}, "altered", 3},
		{"entry removed", func(t *testing.T, dir string) {
			rewrite(t, dir, 1, func(lines []string) []string { return append(lines[:1], lines[2:]...) })
		}, "missing", 3},
		{"entries swapped", func(t *testing.T, dir string) {
			rewrite(t, dir, 1, func(lines []string) []string { lines[1], lines[2] = lines[2], lines[1]; return lines })
		}, "seq", 3},
		{"end cut", func(t *testing.T, dir string) {
			rewrite(t, dir, 2, func(lines []string) []string { return lines[:1] })
		}, "removed", 0},
		{"rehashed rewrite", func(t *testing.T, dir string) {
			// An attacker who recomputes the hashes still cannot match the signed heads.
			rewrite(t, dir, 2, func(lines []string) []string {
				var e Entry
				json.Unmarshal([]byte(lines[0]), &e)
				e.Outcome = "refused"
				e.Hash, _ = e.computeHash()
				b, _ := Canonical(e)
				lines[0] = string(b)
				return lines[:1]
			})
		}, "", 0},
		{"head signed by another key", func(t *testing.T, dir string) {
			h := Head{Device: "tc-01", Seq: 1, Hash: firstHash(t, dir), Reason: "shutdown"}
			h.Sign(otherPriv)
			b, _ := Canonical(h)
			f, _ := os.OpenFile(filepath.Join(dir, "heads.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
			f.Write(append(b, '\n'))
			f.Close()
		}, "signature", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l := openLog(t, dir, priv, 4)
			appendN(t, l, 6, "a")
			l.Close()
			tc.tamper(t, dir)
			r, err := Verify(dir, pub)
			if err != nil {
				t.Fatal(err)
			}
			if r.OK || r.Bad == nil {
				t.Fatalf("tampered chain verified: %+v", r)
			}
			if !strings.Contains(r.Bad.Reason, tc.want) {
				t.Fatalf("bad = %+v, want a reason mentioning %q", r.Bad, tc.want)
			}
			if tc.seq != 0 && r.Bad.Seq != tc.seq {
				t.Fatalf("bad = %+v, want seq %d named", r.Bad, tc.seq)
			}
		})
	}
}

func firstHash(t *testing.T, dir string) string {
	b, _ := os.ReadFile(segmentPath(dir, 1))
	var e Entry
	json.Unmarshal(bytes.SplitN(b, []byte("\n"), 2)[0], &e)
	return e.Hash
}

func rewrite(t *testing.T, dir string, seg int, f func([]string) []string) {
	t.Helper()
	p := segmentPath(dir, seg)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	lines = f(lines)
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o640); err != nil {
		t.Fatal(err)
	}
}

func TestPartialLastLineRepairedOnOpen(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, nil, 0)
	appendN(t, l, 3, "a")
	l.Close()
	f, _ := os.OpenFile(segmentPath(dir, 1), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"seq":4,"ts":1,"dev`) // a crash in the middle of an append
	f.Close()
	if r, _ := Verify(dir, nil); r.OK || !strings.Contains(r.Bad.Reason, "incomplete") {
		t.Fatalf("verify of a partial last line = %+v, want it named", r)
	}
	l = openLog(t, dir, nil, 0)
	appendN(t, l, 1, "b")
	l.Close()
	r, err := Verify(dir, nil)
	if err != nil || !r.OK || r.Entries != 5 {
		t.Fatalf("after repair: %+v %v, want 5 intact entries (3, the repair, 1)", r, err)
	}
	if len(r.Repairs) != 1 || r.Repairs[0].Seq != 4 || r.Repairs[0].CutBytes != 20 || !strings.HasPrefix(r.Repairs[0].CutStart, `{"seq":4`) {
		t.Fatalf("repairs = %+v, want the cut of 20 bytes recorded at seq 4", r.Repairs)
	}
}

func TestConcurrentAppendsKeepOneChain(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, nil, 50)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			appendN(t, l, 40, fmt.Sprintf("s%d", g))
		}(g)
	}
	wg.Wait()
	l.Close()
	r, err := Verify(dir, nil)
	if err != nil || !r.OK || r.Entries != 320 {
		t.Fatalf("verify = %+v, %v; want 320 intact entries", r, err)
	}
}

func TestListPagesAndFilters(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, nil, 100)
	appendN(t, l, 300, "a") // more than the in-memory window: early pages come from disk
	appendN(t, l, 5, "b")
	defer l.Close()
	var got []uint64
	after := uint64(0)
	for pages := 0; ; pages++ {
		p, err := l.List(Query{After: after, Limit: 70})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range p.Entries {
			got = append(got, e.Seq)
		}
		if p.Next == 0 {
			break
		}
		after = p.Next
		if pages > 10 {
			t.Fatal("paging does not end")
		}
	}
	if len(got) != 305 || got[0] != 1 || got[304] != 305 {
		t.Fatalf("paged %d entries (%v...), want 1..305 once each", len(got), got[:3])
	}
	p, _ := l.List(Query{CommandID: "b-3"})
	if len(p.Entries) != 1 || p.Entries[0].Session != "b" {
		t.Fatalf("filter by command id = %+v", p.Entries)
	}
	p, _ = l.List(Query{Limit: 100000})
	if len(p.Entries) != MaxPage {
		t.Fatalf("a huge limit gave %d entries, want the cap %d", len(p.Entries), MaxPage)
	}
}

func TestLargeResultKeptAsDigest(t *testing.T) {
	l := openLog(t, t.TempDir(), nil, 0)
	defer l.Close()
	big, _ := json.Marshal(map[string]string{"blob": strings.Repeat("x", 2*MaxResultBytes)})
	e, err := l.Append(Receipt{Method: "actions/invoke", Outcome: OutcomeOK, Result: big})
	if err != nil {
		t.Fatal(err)
	}
	if e.Result != nil || len(e.ResultDigest) != 64 {
		t.Fatalf("a %d-byte result was kept inline (%d bytes) or without digest", len(big), len(e.Result))
	}
}

func TestBundleExportAndVerify(t *testing.T) {
	dir := t.TempDir()
	pub, priv := testKey(t)
	otherPub, _ := testKey(t)
	l := openLog(t, dir, priv, 0)
	appendN(t, l, 3, "other")
	appendN(t, l, 2, "run-1")
	appendN(t, l, 1, "other")
	appendN(t, l, 2, "run-1")
	l.Append(Receipt{Method: "safety/estop", Session: "other", Outcome: OutcomeOK, Error: mhp.Errorf(mhp.CodeEStopActive, "x")})
	l.Close()
	var buf bytes.Buffer
	if err := Export(dir, "run-1", priv, &buf); err != nil {
		t.Fatal(err)
	}
	r, err := VerifyBundle(bytes.NewReader(buf.Bytes()), pub)
	if err != nil || !r.OK || r.First != 4 || r.Last != 8 {
		t.Fatalf("bundle verify = %+v, %v; want entries 4..8 intact", r, err)
	}
	if r, _ := VerifyBundle(bytes.NewReader(buf.Bytes()), otherPub); r.OK {
		t.Fatal("bundle verified against the wrong public key")
	}
	tampered := bytes.Replace(buf.Bytes(), []byte(`"run-1-1"`), []byte(`"run-1-9"`), 1)
	if r, _ := VerifyBundle(bytes.NewReader(tampered), pub); r.OK {
		t.Fatal("a tampered bundle verified")
	}
}
