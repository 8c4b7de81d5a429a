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

func TestEvidenceVerb(t *testing.T) {
	dir := t.TempDir()
	priv, pub := filepath.Join(dir, "k.pem"), filepath.Join(dir, "k.pub")
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		a := &app{stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
		return a.run(context.Background(), args), out.String(), errb.String()
	}
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
