package script_test

import (
	"context"
	"testing"
	"time"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"

	"github.com/openmhp/mhp-go/script"
)

// BenchmarkMemoryChecks reports the cost of routing growth operations
// through the memory budget as a ratio against the same script run by plain
// Starlark in the same benchmark (no absolute timings are asserted).
func BenchmarkMemoryChecks(b *testing.B) {
	src := `
def main():
    total = 0
    parts = []
    for i in range(2000):
        total += i * 2
        parts.append("%d" % i)
        s = ",".join(parts[-5:])
    return total, len(s)
main()
`
	lab := script.Devices{}
	var plain, checked time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		thread := &starlark.Thread{}
		if _, err := starlark.ExecFileOptions(&syntax.FileOptions{While: true, TopLevelControl: true, GlobalReassign: true}, thread, "b.star", src, nil); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		res, err := script.Run(context.Background(), src, lab, script.Options{})
		if err != nil || res.Error != "" {
			b.Fatal(err, res.Error)
		}
		t2 := time.Now()
		plain += t1.Sub(t0)
		checked += t2.Sub(t1)
	}
	b.ReportMetric(float64(checked)/float64(plain), "checked/plain")
}
