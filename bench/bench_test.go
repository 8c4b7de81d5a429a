package bench_test

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/openmhp/mhp-go/bench"
)

func TestMain(m *testing.M) {
	bench.MaybeChild()
	os.Exit(m.Run())
}

// The rows run end to end at a tiny scale (in process and in child
// processes) and print a table naming each; no row errs. Nothing here is
// timed: the figures of a tiny run mean nothing.
func TestRowsRunAtTinyScale(t *testing.T) {
	names := []string{"write", "cpu", "devices", "evidence", "directory"}
	rs, err := bench.Run(context.Background(), names, bench.Options{Rounds: 1, Scale: 200, Devices: 20})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != len(names) {
		t.Fatalf("%d rows, want %d", len(rs), len(names))
	}
	var buf bytes.Buffer
	bench.Print(&buf, rs)
	for i, r := range rs {
		if r.Name != names[i] || strings.HasPrefix(r.Now, "error") || r.Baseline == "" || r.Met == nil {
			t.Errorf("row %d: %+v", i, r)
		}
		if !strings.Contains(buf.String(), r.What) {
			t.Errorf("the table lacks %q:\n%s", r.What, buf.String())
		}
	}
	if _, err := bench.Run(context.Background(), []string{"nope"}, bench.Options{}); err == nil {
		t.Fatal("an unknown row was accepted")
	}
}
