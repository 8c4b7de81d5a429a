// Command mhp-bench prints the performance table of issue 30: every row
// measured against its baseline in the same run, as ratios.
//
//	go run ./cmd/mhp-bench                       # every row
//	go run ./cmd/mhp-bench -rows write,estop     # some rows
//	go run ./cmd/mhp-bench -rows write -cpuprofile write.pprof
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"strings"

	"github.com/openmhp/mhp-go/bench"
)

func main() {
	bench.MaybeChild()
	rowsFlag := flag.String("rows", "", "comma-separated rows to measure (default all: "+strings.Join(bench.Names(), ",")+")")
	rounds := flag.Int("rounds", 3, "interleaved rounds per row")
	devices := flag.Int("devices", 10000, "devices in the devices row")
	scale := flag.Int("scale", 1, "divide every row's work by this (quicker, noisier)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of this process to the file")
	quiet := flag.Bool("q", false, "no progress lines")
	flag.Parse()
	var names []string
	if *rowsFlag != "" {
		names = strings.Split(*rowsFlag, ",")
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "mhp-bench:", err)
			os.Exit(1)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "mhp-bench:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	o := bench.Options{Rounds: *rounds, Scale: *scale, Devices: *devices}
	if !*quiet {
		o.Log = os.Stderr
	}
	rs, err := bench.Run(context.Background(), names, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mhp-bench:", err)
		os.Exit(2)
	}
	bench.Print(os.Stdout, rs)
}
