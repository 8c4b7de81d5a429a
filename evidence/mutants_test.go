package evidence

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// Tests that kill the mutations of issue 29 in Verify and VerifyBundle:
// tampering that an attacker who can recompute hashes would try, each of
// which a single removed check would let through.

// rehashLine rewrites an entry's content and recomputes its own hash, as an
// attacker who knows the chain's definition would.
func rehashLine(t *testing.T, line string, edit func(*Entry)) string {
	t.Helper()
	var e Entry
	if err := json.Unmarshal([]byte(line), &e); err != nil {
		t.Fatal(err)
	}
	edit(&e)
	h, err := e.computeHash()
	if err != nil {
		t.Fatal(err)
	}
	e.Hash = h
	b, err := Canonical(e)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestVerifyCatchesRehashedAndCutChains: a middle entry rewritten with its
// own hash recomputed breaks the next entry's prev link (issue 29, item 8:
// the prev check removed); a chain whose first entries were cut off does not
// start at the zero hash (item 9); a missing chain file is named as missing
// (item 11: without that check the chain fails later, for another reason).
// Signed heads are kept intact in each case, so only the named check can
// catch it.
func TestVerifyCatchesRehashedAndCutChains(t *testing.T) {
	pub, priv := testKey(t)
	for _, tc := range []struct {
		name    string
		seg     int // entries per chain file (0: one file)
		tamper  func(t *testing.T, dir string)
		file    string
		seq     uint64
		reasons []string // the reason mentions all of these
	}{
		{"middle entry rewritten and rehashed", 0, func(t *testing.T, dir string) {
			rewrite(t, dir, 1, func(lines []string) []string {
				lines[2] = rehashLine(t, lines[2], func(e *Entry) { e.Outcome = OutcomeRefused })
				return lines
			})
		}, "chain-000001.jsonl", 4, nil},
		{"first entries cut off", 0, func(t *testing.T, dir string) {
			rewrite(t, dir, 1, func(lines []string) []string { return lines[2:] })
		}, "chain-000001.jsonl", 3, nil},
		{"a middle chain file removed", 2, func(t *testing.T, dir string) {
			if err := os.Remove(segmentPath(dir, 2)); err != nil {
				t.Fatal(err)
			}
		}, "chain-000002.jsonl", 0, []string{"missing"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l := openLog(t, dir, priv, tc.seg)
			appendN(t, l, 6, "a")
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if r, err := Verify(dir, pub); err != nil || !r.OK {
				t.Fatalf("the untouched chain: %+v, %v", r, err)
			}
			tc.tamper(t, dir)
			r, err := Verify(dir, pub)
			if err != nil {
				t.Fatal(err)
			}
			if r.OK || r.Bad == nil {
				t.Fatalf("the tampered chain verified: %+v", r)
			}
			if r.Bad.File != tc.file || (tc.seq != 0 && r.Bad.Seq != tc.seq) {
				t.Fatalf("bad = %+v, want file %s seq %d named", r.Bad, tc.file, tc.seq)
			}
			for _, want := range tc.reasons {
				if !strings.Contains(r.Bad.Reason, want) {
					t.Fatalf("bad = %+v, want a reason mentioning %q", r.Bad, want)
				}
			}
		})
	}
}

// TestVerifyBundleCatchesCutsAndRewrites: a signed bundle missing its
// leading entries does not match its head's range (issue 29, item 10: the
// range not compared), and a middle entry rewritten and rehashed breaks the
// link (item 8 on the bundle path). The head itself is left intact.
func TestVerifyBundleCatchesCutsAndRewrites(t *testing.T) {
	pub, priv := testKey(t)
	dir := t.TempDir()
	l := openLog(t, dir, priv, 0)
	appendN(t, l, 2, "other")
	appendN(t, l, 4, "run-1")
	appendN(t, l, 1, "other")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Export(dir, "run-1", priv, &buf); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		tamper func(b *Bundle)
		intact bool
	}{
		{"untouched", func(*Bundle) {}, true},
		{"leading entries dropped", func(b *Bundle) { b.Entries = b.Entries[2:] }, false},
		{"middle entry rewritten and rehashed", func(b *Bundle) {
			line, _ := Canonical(b.Entries[1])
			var e Entry
			json.Unmarshal([]byte(rehashLine(t, string(line), func(e *Entry) { e.Outcome = OutcomeRefused })), &e)
			b.Entries[1] = e
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b Bundle
			if err := json.Unmarshal(buf.Bytes(), &b); err != nil {
				t.Fatal(err)
			}
			tc.tamper(&b)
			out, _ := json.Marshal(b)
			r, err := VerifyBundle(bytes.NewReader(out), pub)
			if err != nil {
				t.Fatal(err)
			}
			if tc.intact {
				if !r.OK || r.First != 3 || r.Last != 6 || r.Heads != 1 {
					t.Fatalf("the untouched bundle: %+v, want entries 3..6 and its signed head", r)
				}
				return
			}
			if r.OK || r.Bad == nil || r.Bad.Reason == "" {
				t.Fatalf("tampered bundle: %+v, want it refused with the reason", r)
			}
		})
	}
}
