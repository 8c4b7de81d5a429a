package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openmhp/mhp-go/evidence"
)

// runEvidenceCLI runs the CLI and returns its exit code, stdout and stderr.
func runEvidenceCLI(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	a := &app{stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
	return a.run(context.Background(), args), out.String(), errb.String()
}

func TestEvidenceVerb(t *testing.T) {
	dir := t.TempDir()
	priv, pub := filepath.Join(dir, "k.pem"), filepath.Join(dir, "k.pub")
	run := runEvidenceCLI
	if code, _, e := run("evidence", "keygen", priv, pub); code != exitOK {
		t.Fatalf("keygen: %d %s", code, e)
	}
	key, err := evidence.LoadPrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	chain := filepath.Join(dir, "chain")
	lg, err := evidence.Open(evidence.Config{Dir: chain, Device: "tc-01", Key: key})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		lg.Append(evidence.Receipt{Method: "settings/write", Name: "sp", Session: "run-a", Outcome: evidence.OutcomeOK})
	}
	lg.Close()
	if code, out, e := run("evidence", "verify", chain, "--pub", pub); code != exitOK || !strings.Contains(out, "intact: 5 entries") {
		t.Fatalf("verify intact: %d %q %q", code, out, e)
	}
	bundle := filepath.Join(dir, "run.json")
	if code, _, e := run("evidence", "export", chain, "--session", "run-a", "--key", priv, "--out", bundle); code != exitOK {
		t.Fatalf("export: %d %s", code, e)
	}
	if code, out, _ := run("evidence", "verify", bundle, "--pub", pub); code != exitOK {
		t.Fatalf("verify bundle: %d %s", code, out)
	}
	// Tamper: the verb exits 1 and names the entry.
	seg := filepath.Join(chain, "chain-000001.jsonl")
	b, _ := os.ReadFile(seg)
	os.WriteFile(seg, bytes.Replace(b, []byte(`"seq":3`), []byte(`"seq":33`), 1), 0o640)
	code, out, _ := run("evidence", "verify", chain, "--pub", pub, "--json")
	var rep evidence.Report
	json.Unmarshal([]byte(out), &rep)
	if code != exitRefused || rep.OK || rep.Bad == nil || rep.Bad.Line != 3 {
		t.Fatalf("verify tampered: exit %d, report %+v", code, rep)
	}
	if code, _, _ := run("evidence", "verify"); code != exitUsage {
		t.Fatalf("verify without a target exits %d", code)
	}
}

// TestEvidenceVerifyTailAndEarlierHead: with --pub an unsigned tail fails,
// naming how many entries are unsigned, unless --allow-unsigned-tail accepts
// them; an emptied heads file fails like a missing one; --head catches a
// chain whose heads were all replaced.
func TestEvidenceVerifyTailAndEarlierHead(t *testing.T) {
	dir := t.TempDir()
	priv, pub := filepath.Join(dir, "k.pem"), filepath.Join(dir, "k.pub")
	run := runEvidenceCLI
	run("evidence", "keygen", priv, pub)
	key, _ := evidence.LoadPrivateKey(priv)
	chain := filepath.Join(dir, "chain")
	lg, err := evidence.Open(evidence.Config{Dir: chain, Device: "tc-01", Key: key, HeadEvery: 4})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 6; i++ { // a head at 4; 5 and 6 unsigned, as after kill -9
		lg.Append(evidence.Receipt{Method: "settings/write", Name: "sp", Outcome: evidence.OutcomeOK})
	}
	earlier := lg.Head()
	headFile := filepath.Join(dir, "head.json")
	hb, _ := json.Marshal(earlier)
	os.WriteFile(headFile, hb, 0o640)
	if code, out, _ := run("evidence", "verify", chain, "--pub", pub); code != exitRefused || !strings.Contains(out, "2 entries (seq 5..6) are not covered by a signed head") {
		t.Fatalf("verify with 2 unsigned entries: %d %q, want exit 1 naming 2 entries", code, out)
	}
	if code, out, e := run("evidence", "verify", chain, "--pub", pub, "--allow-unsigned-tail", "2"); code != exitOK {
		t.Fatalf("verify allowing 2: %d %q %q", code, out, e)
	}
	lg.Close()
	if code, out, e := run("evidence", "verify", chain, "--pub", pub, "--head", headFile); code != exitOK || !strings.Contains(out, "earlier head at seq 6") {
		t.Fatalf("verify against the earlier head: %d %q %q", code, out, e)
	}
	heads := filepath.Join(chain, "heads.jsonl")
	saved, _ := os.ReadFile(heads)
	os.WriteFile(heads, nil, 0o640) // `: > heads.jsonl`
	if code, out, _ := run("evidence", "verify", chain, "--pub", pub); code != exitRefused || !strings.Contains(out, "no signed heads") {
		t.Fatalf("verify with an emptied heads file: %d %q, want exit 1", code, out)
	}
	os.WriteFile(heads, saved, 0o640)
	// Cut the last entry and replace the heads by one over the cut chain, signed with the key.
	seg := filepath.Join(chain, "chain-000001.jsonl")
	b, _ := os.ReadFile(seg)
	lines := strings.SplitAfter(string(b), "\n")
	os.WriteFile(seg, []byte(strings.Join(lines[:5], "")), 0o640)
	rep, _ := evidence.Verify(chain, nil)
	h := evidence.Head{Device: "tc-01", Seq: rep.Last, Hash: rep.Hash, Reason: "shutdown"}
	h.Sign(key)
	c, _ := evidence.Canonical(h)
	os.WriteFile(heads, append(c, '\n'), 0o640)
	if code, _, _ := run("evidence", "verify", chain, "--pub", pub); code != exitOK {
		t.Fatalf("setup: the re-signed cut chain should pass without --head (exit %d)", code)
	}
	if code, out, _ := run("evidence", "verify", chain, "--pub", pub, "--head", headFile); code != exitRefused || !strings.Contains(out, "seq 6") {
		t.Fatalf("verify --head of a cut, re-signed chain: %d %q, want exit 1 naming seq 6", code, out)
	}
	if code, _, _ := run("evidence", "verify", chain, "--allow-unsigned-tail", "x", "--pub", pub); code != exitUsage {
		t.Fatalf("a bad --allow-unsigned-tail exits %d", code)
	}
}

// TestEvidenceVerbOnASharedLog: verify names the shared log and counts each
// device; list --device keeps to one device (--latest its newest); export
// --device is a bundle that verifies on its own.
func TestEvidenceVerbOnASharedLog(t *testing.T) {
	dir := t.TempDir()
	priv, pub := filepath.Join(dir, "k.pem"), filepath.Join(dir, "k.pub")
	run := runEvidenceCLI
	if code, _, e := run("evidence", "keygen", priv, pub); code != exitOK {
		t.Fatalf("keygen: %d %s", code, e)
	}
	key, _ := evidence.LoadPrivateKey(priv)
	logDir := filepath.Join(dir, "lab")
	lg, err := evidence.Open(evidence.Config{Dir: logDir, Shared: true, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		for _, d := range []string{"tc-01", "arm-01"} {
			if _, err := lg.For(d).Append(evidence.Receipt{Method: "settings/write", Name: "sp", Session: "run-" + d, Outcome: evidence.OutcomeOK}); err != nil {
				t.Fatal(err)
			}
		}
	}
	lg.Close()
	if code, out, e := run("evidence", "verify", logDir, "--pub", pub); code != exitOK || !strings.Contains(out, `shared log "lab" of 2 devices: arm-01 3 tc-01 3`) {
		t.Fatalf("verify: %d %q %q", code, out, e)
	}
	code, out, e := run("evidence", "list", logDir, "--device", "arm-01", "--latest", "--limit", "2")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != exitOK || len(lines) != 2 || !strings.HasPrefix(lines[1], "7\t") ||
		strings.Contains(out, "tc-01") {
		t.Fatalf("list --device arm-01 --latest --limit 2: %d %q %q; want seq 5 and 7 of arm-01 only", code, out, e)
	}
	if code, _, e := run("evidence", "list", logDir, "--limit", "0"); code != exitUsage {
		t.Fatalf("list --limit 0: %d %s, want a usage error", code, e)
	}
	bundle := filepath.Join(dir, "tc.json")
	if code, _, e := run("evidence", "export", logDir, "--device", "tc-01", "--key", priv, "--out", bundle); code != exitOK {
		t.Fatalf("export --device: %d %s", code, e)
	}
	if code, out, _ := run("evidence", "verify", bundle, "--pub", pub); code != exitOK || !strings.Contains(out, "intact: 5 entries (seq 2..6)") {
		t.Fatalf("verify the device's bundle: %d %s", code, out)
	}
}
