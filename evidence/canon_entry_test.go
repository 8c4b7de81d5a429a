package evidence

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/openmhp/mhp-go"
)

// agreeLine checks the one-pass line of e against the two-pass encoding
// Verify uses (computeHash, canonical(true)).
func agreeLine(t testing.TB, e Entry) {
	t.Helper()
	want, err := e.computeHash()
	if err != nil {
		return // not encodable either way (appendLine's own error is checked below)
	}
	var scratch bytes.Buffer
	scratch.WriteString("left alone")
	line, hash, err := e.appendLine([]byte("prefix"), &scratch)
	if err != nil {
		t.Fatalf("appendLine: %v where the two-pass encoding works", err)
	}
	if hash != want {
		t.Fatalf("hash %s, two-pass %s", hash, want)
	}
	e.Hash = want
	old, err := e.canonical(true)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(line); got != "prefix"+string(old)+"\n" {
		t.Fatalf("line\n %s\nwant\n %s", got, old)
	}
	if scratch.String() != "left alone" {
		t.Fatalf("scratch left as %q", scratch.String())
	}
}

// TestEntryLineAgreesWithTheTwoPassEncoding: the line Append writes and the
// hash it records are those Verify recomputes, for entries with and without
// each optional member, errors with data and ts, and awkward strings.
func TestEntryLineAgreesWithTheTwoPassEncoding(t *testing.T) {
	base := Entry{Seq: 1, TS: 1_800_000_000.123456, Device: "tc-01", Prev: zeroHash,
		Receipt: Receipt{Method: mhp.MethodSettingsWrite, Outcome: OutcomeOK}}
	cases := map[string]func(e *Entry){
		"minimal": func(e *Entry) {},
		"every member": func(e *Entry) {
			e.CommandID, e.Session, e.Name, e.Job, e.ParamsDigest = "c-1", "alice/x#1", "sp", "j-1", Digest(42.0)
			e.Result = json.RawMessage(`{"applied":true,"name":"sp","ok":true,"value":42}`)
			e.ResultDigest = strings.Repeat("ab", 32)
		},
		"error with data and ts": func(e *Entry) {
			e.Outcome = OutcomeRefused
			e.Error = &mhp.Error{Code: mhp.CodeLimitViolation, Message: "sp 120 above 100 <&>", Data: map[string]any{"max": 100, "min": 0, "ts": 9}, TS: 1.5}
		},
		"error without data": func(e *Entry) { e.Error = &mhp.Error{Code: mhp.CodeDeviceBusy, Message: "busy"} },
		"awkward strings": func(e *Entry) {
			e.Session, e.Name, e.Device = "\xff\xfe run", "名前\u2028\"\\\x01", "dev😀"
		},
		"big seq and odd ts": func(e *Entry) { e.Seq, e.TS = 1<<53+1, 1e21 },
		"tiny ts":            func(e *Entry) { e.TS = 1.5e-7 },
		"negative zero ts":   func(e *Entry) { e.TS = math.Copysign(0, -1) },
	}
	for name, edit := range cases {
		t.Run(name, func(t *testing.T) {
			e := base
			edit(&e)
			agreeLine(t, e)
		})
	}
}

// TestAppendedLinesAreTheTwoPassEncoding: what Append writes to the file,
// result given as a Go value or as JSON text, is byte for byte the two-pass
// encoding of the entry it returns.
func TestAppendedLinesAreTheTwoPassEncoding(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, nil, 0)
	recs := []Receipt{
		{Method: mhp.MethodSettingsWrite, Name: "sp", Outcome: OutcomeOK, Value: &mhp.WriteResult{OK: true, Name: "sp", Value: 42.0, Applied: true}},
		{Method: mhp.MethodSettingsWrite, Name: "sp", Outcome: OutcomeOK, Result: json.RawMessage(` {"value": 4.50, "ok" : true} `)},
		{Method: mhp.MethodActionsInvoke, Outcome: OutcomeOK, Value: map[string]any{"z": []any{1e21, "é"}, "a": json.RawMessage(`{"b":1,"a":2}`)}},
		{Method: mhp.MethodActionsInvoke, Outcome: OutcomeOK, Value: map[string]any{"big": strings.Repeat("x", MaxResultBytes)}},
		{Method: mhp.MethodActionsInvoke, Outcome: OutcomeOK, Value: math.NaN()}, // not marshallable: left out, as before
		{Method: mhp.MethodSafetyEStop, Outcome: OutcomeRefused, Error: mhp.Errorf(mhp.CodeEStopActive, "stopped").With("reason", "button")},
	}
	var got []Entry
	for _, r := range recs {
		e, err := l.Append(r)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, e)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(segmentPath(dir, 1))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != len(recs) {
		t.Fatalf("%d lines, want %d", len(lines), len(recs))
	}
	for i, e := range got {
		e.resultCanonical = false // as Verify reads it back
		want, err := e.canonical(true)
		if err != nil {
			t.Fatal(err)
		}
		if lines[i] != string(want) {
			t.Fatalf("line %d\n %s\nwant\n %s", i+1, lines[i], want)
		}
		if h, _ := e.computeHash(); h != e.Hash {
			t.Fatalf("line %d: hash %s, recomputed %s", i+1, e.Hash, h)
		}
	}
	if got[3].ResultDigest == "" || got[3].Result != nil {
		t.Fatalf("a result over %d bytes kept as %d bytes, digest %q", MaxResultBytes, len(got[3].Result), got[3].ResultDigest)
	}
	if got[4].Result != nil {
		t.Fatalf("an unmarshallable value kept as %s", got[4].Result)
	}
	if r, err := Verify(dir, nil); err != nil || !r.OK || r.Entries != len(recs) {
		t.Fatalf("verify = %+v, %v", r, err)
	}
}

// FuzzEntryLine: for entries built from arbitrary strings and numbers, the
// one-pass line and hash are the two-pass ones.
func FuzzEntryLine(f *testing.F) {
	f.Add("alice/x#1", "sp\xff", "\u2028<>", uint64(7), 1_800_000_000.5, []byte(`{"a":[1,2]}`), int64(-32010))
	f.Add("", "", "", uint64(1<<60), 1e21, []byte(`"\ud83d\ude00"`), int64(0))
	f.Fuzz(func(t *testing.T, session, name, msg string, seq uint64, ts float64, result []byte, code int64) {
		if math.IsNaN(ts) || math.IsInf(ts, 0) {
			return // a clock never gives these
		}
		e := Entry{Seq: seq, TS: ts, Device: name + "-dev", Prev: zeroHash,
			Receipt: Receipt{Session: session, Method: mhp.MethodSettingsWrite, Name: name, Outcome: msg, CommandID: msg}}
		if c, err := CanonicalJSON(result); err == nil {
			e.Result, e.resultCanonical = c, true
		}
		if code != 0 {
			e.Error = &mhp.Error{Code: mhp.Code(code), Message: msg, Data: map[string]any{name: session, "n": ts}, TS: ts}
		}
		agreeLine(t, e)
	})
}
