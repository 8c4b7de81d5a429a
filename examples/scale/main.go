// Command scale is the 2,000-device scale demo: simulated devices across 8
// classes and 40 bays behind a directory. It prints what loading every
// descriptor up front would cost an agent (bytes/4 tokens, as the spec
// counts) against the path find -> summary -> select of two items, and the
// search latency.
//
//	go run ./examples/scale            # 2,000 devices
//	go run ./examples/scale -n 100000  # a bigger lab
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/directory"
)

func main() {
	n := flag.Int("n", 2000, "number of simulated devices")
	flag.Parse()
	// The in-process bridge's session notices are not the demo's output.
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if _, err := run(context.Background(), os.Stdout, *n); err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(1)
	}
}

// Report is what the demo measured.
type Report struct {
	Devices       int
	NaiveTokens   int
	PathTokens    int
	FindTokens    int
	SummaryTokens int
	SelectTokens  int
	SearchLatency time.Duration
	Found         string
	// FindJSON, SummaryJSON and SelectJSON are what each step handed the
	// agent, as counted.
	FindJSON, SummaryJSON, SelectJSON []byte
	// Bridge is the same path as the model reads it through mhp-mcp.
	Bridge *BridgeTokens
}

// tokens counts as the spec does: bytes of JSON / 4.
func tokens(v any) int { return len(mustJSON(v)) / 4 }

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func run(ctx context.Context, w io.Writer, n int) (*Report, error) {
	devices := make(map[string]*binding.Driver, n)
	var cards []directory.Card
	naive := 0
	for i := 0; i < n; i++ {
		cfg := device(i)
		drv, err := binding.New(cfg)
		if err != nil {
			return nil, err
		}
		defer drv.Close()
		devices[cfg.Device.ID] = drv
		full, err := drv.Describe(ctx, mhp.DescribeRequest{Detail: mhp.DetailFull})
		if err != nil {
			return nil, err
		}
		naive += tokens(full)
		card, _ := drv.Describe(ctx, mhp.DescribeRequest{Detail: mhp.DetailCard})
		cards = append(cards, directory.CardFrom(card, "sim:"+cfg.Device.ID))
	}
	dir, err := directory.New(directory.Config{Index: directory.NewIndex(cards),
		Pinger: directory.PingerFunc(func(ctx context.Context, target string) (mhp.DeviceState, error) {
			p, err := devices[target[len("sim:"):]].Ping(ctx)
			if err != nil {
				return "", err
			}
			return p.State, nil
		})})
	if err != nil {
		return nil, err
	}
	q := directory.Query{Query: "heat a 96-well plate to 95 C for PCR in bay 12", Class: "thermocycler", State: "idle", Limit: 3}
	const rounds = 200
	start := time.Now()
	var found []directory.Result
	for i := 0; i < rounds; i++ {
		found, err = dir.Search(ctx, q)
		if err != nil {
			return nil, err
		}
	}
	latency := time.Since(start) / rounds
	if len(found) == 0 {
		return nil, fmt.Errorf("the search found nothing")
	}
	dev := devices[found[0].ID]
	summary, err := dev.Describe(ctx, mhp.DescribeRequest{Detail: mhp.DetailSummary})
	if err != nil {
		return nil, err
	}
	sel, err := dev.Describe(ctx, mhp.DescribeRequest{Select: &mhp.Selection{Actions: []string{"run_protocol"}, Settings: []string{"target_temperature"}}})
	if err != nil {
		return nil, err
	}
	// The find step costs what mhp_find hands the agent: the results with
	// what they share said once (directory.Compact).
	agentFound, err := directory.Compact(found)
	if err != nil {
		return nil, err
	}
	r := &Report{Devices: n, NaiveTokens: naive, SearchLatency: latency, Found: found[0].ID,
		FindJSON: mustJSON(agentFound), SummaryJSON: mustJSON(summary), SelectJSON: mustJSON(sel)}
	r.FindTokens, r.SummaryTokens, r.SelectTokens = len(r.FindJSON)/4, len(r.SummaryJSON)/4, len(r.SelectJSON)/4
	r.PathTokens = r.FindTokens + r.SummaryTokens + r.SelectTokens
	if r.Bridge, err = throughBridge(ctx, dir, devices, q); err != nil {
		return nil, fmt.Errorf("through mhp-mcp: %w", err)
	}
	fmt.Fprintf(w, "%d simulated devices, %d classes, 40 bays\n", n, len(classes))
	fmt.Fprintf(w, "every descriptor up front:       %9d tokens\n", r.NaiveTokens)
	fmt.Fprintf(w, "find (3 results, live state):    %9d tokens\n", r.FindTokens)
	fmt.Fprintf(w, "summary of %-20s %9d tokens\n", r.Found+":", r.SummaryTokens)
	fmt.Fprintf(w, "select run_protocol + setpoint:  %9d tokens\n", r.SelectTokens)
	fmt.Fprintf(w, "find -> summary -> select:       %9d tokens (%.3f%% of up front)\n", r.PathTokens, 100*float64(r.PathTokens)/float64(r.NaiveTokens))
	fmt.Fprintf(w, "through mhp-mcp, as the model reads it (fenced): find %d + summary %d + select %d = %d tokens\n",
		r.Bridge.Find, r.Bridge.Summary, r.Bridge.Select, r.Bridge.Path)
	fmt.Fprintf(w, "search with live pings:          %9s per query (mean of %d)\n", latency.Round(time.Microsecond), rounds)
	ids := make([]string, len(found))
	for i, f := range found {
		ids[i] = fmt.Sprintf("%s (%s, %s, score %.2f)", f.ID, f.Location, f.State, f.Score)
	}
	sort.Strings(ids)
	fmt.Fprintf(w, "found: %v\n", ids)
	return r, nil
}
