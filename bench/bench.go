// Package bench measures the rows of the performance table (issue 30): each
// row times a path against its baseline in the same run, interleaved over a
// few rounds, and reports the ratio (on a shared machine the ratios and the
// allocation counts mean something, absolute times do not). cmd/mhp-bench
// prints the table:
//
//	go run ./cmd/mhp-bench                 # every row
//	go run ./cmd/mhp-bench -rows write,estop -rounds 5
//
// Rows that need a process of their own (server CPU, estop under load,
// 10,000 devices) re-run the calling binary as a child: its main must call
// [MaybeChild] first. MHP_BENCH_CPUPROFILE=<path> writes a CPU profile of
// each serve child to <path>.<null|sim>.<pid>; MHP_BENCH_HEAPPROFILE=<path>
// a heap profile of each devices child to <path>.<bare|mhp>.
package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Row is one line of the table: what was measured, its baseline, what the
// path measured against it and the goal, as text ready to print.
type Row struct {
	Name     string
	What     string
	Baseline string
	Now      string
	Goal     string
	// Met says whether the goal was met, when the row can judge it.
	Met *bool
	// Notes are lines printed under the table (where the time goes).
	Notes []string
}

// Options tune a run.
type Options struct {
	// Rounds is how many interleaved rounds each row runs (default 3).
	Rounds int
	// Scale divides the work of each row (1: the full table; tests use more
	// to run quickly).
	Scale int
	// Devices is the device count of the "devices" row (default 10,000).
	Devices int
	// Log, when set, receives progress lines.
	Log io.Writer
}

func (o Options) withDefaults() Options {
	if o.Rounds <= 0 {
		o.Rounds = 3
	}
	if o.Scale <= 0 {
		o.Scale = 1
	}
	if o.Devices <= 0 {
		o.Devices = 10000
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	return o
}

func (o Options) logf(format string, args ...any) { fmt.Fprintf(o.Log, format+"\n", args...) }

// n scales an iteration count, never below 1.
func (o Options) n(full int) int { return max(1, full/o.Scale) }

// A measurer measures one row.
type measurer func(ctx context.Context, o Options) (Row, error)

var rows = map[string]measurer{
	"write":     measureWrite,
	"cpu":       measureServerCPU,
	"estop":     measureEStop,
	"devices":   measureDevices,
	"evidence":  measureEvidence,
	"evhttp":    measureEvidenceHTTP,
	"directory": measureDirectory,
	"tokens":    measureTokens,
	"sila2":     measureSiLA2,
	"plr":       measurePLR,
}

// order is the table's order.
var order = []string{"write", "cpu", "estop", "devices", "evidence", "evhttp", "directory", "tokens", "sila2", "plr"}

// Names lists the rows in the table's order.
func Names() []string { return slices.Clone(order) }

// Run measures the named rows (all when names is empty), in the table's
// order. A row that fails is reported as a row whose Now names the error.
func Run(ctx context.Context, names []string, o Options) ([]Row, error) {
	o = o.withDefaults()
	if len(names) == 0 {
		names = order
	}
	for _, n := range names {
		if rows[n] == nil {
			return nil, fmt.Errorf("bench: no row %q (rows: %s)", n, strings.Join(order, ", "))
		}
	}
	var out []Row
	for _, n := range order {
		if !slices.Contains(names, n) {
			continue
		}
		o.logf("measuring %s ...", n)
		start := time.Now()
		r, err := rows[n](ctx, o)
		if err != nil {
			r = Row{Name: n, Now: "error: " + err.Error()}
		}
		r.Name = n
		o.logf("  %s took %s", n, time.Since(start).Round(time.Millisecond))
		out = append(out, r)
	}
	return out, nil
}

// Print writes the rows as an aligned table.
func Print(w io.Writer, rs []Row) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "row\twhat\tbaseline\tnow\tgoal\tmet")
	for _, r := range rs {
		met := "-"
		if r.Met != nil {
			met = map[bool]string{true: "yes", false: "NO"}[*r.Met]
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, r.What, r.Baseline, r.Now, r.Goal, met)
	}
	tw.Flush()
	for _, r := range rs {
		for _, n := range r.Notes {
			fmt.Fprintf(w, "%s: %s\n", r.Name, n)
		}
	}
}

func ptr(b bool) *bool { return &b }

// median of durations or floats.
func median[T ~int64 | ~float64](xs []T) T {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// spread formats the min-max of xs with f.
func spread(xs []float64, f string) string {
	s := slices.Clone(xs)
	sort.Float64s(s)
	if len(s) == 1 || fmt.Sprintf(f, s[0]) == fmt.Sprintf(f, s[len(s)-1]) {
		return fmt.Sprintf(f, s[0])
	}
	return fmt.Sprintf(f+"-"+f, s[0], s[len(s)-1])
}

// quantile of sorted-on-demand durations.
func quantile(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// cpuN is the process CPU time (user+system, every thread: the GC's work
// included) of n calls of f: on a shared machine it counts what the path
// costs, not what the other tenants took from it.
func cpuN(n int, f func() error) (time.Duration, error) {
	c0 := cpuNow()
	for i := 0; i < n; i++ {
		if err := f(); err != nil {
			return 0, err
		}
	}
	return cpuNow() - c0, nil
}

// timeN times n calls of f.
func timeN(n int, f func() error) (time.Duration, error) {
	start := time.Now()
	for i := 0; i < n; i++ {
		if err := f(); err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}

func us(d time.Duration) string { return fmt.Sprintf("%.1f us", float64(d.Nanoseconds())/1e3) }
