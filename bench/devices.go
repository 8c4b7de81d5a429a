package bench

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"

	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/transport"
)

type bindingDriver = binding.Driver

var newBindingDriver = binding.New

// childDevices starts arg = "<bare|mhp>:<n>" listeners in this process
// (bare net/http ones, or one simulated thermocycler served over HTTP on
// each), then prints "mem <rss> <go-sys> <heap-inuse> <stack-inuse> <goroutines>"
// and waits for stdin to close.
func childDevices(arg string) error {
	kind, nStr, _ := strings.Cut(arg, ":")
	n, err := strconv.Atoi(nStr)
	if err != nil {
		return err
	}
	if os.Getenv("MHP_BENCH_HEAPPROFILE") != "" {
		runtime.MemProfileRate = 4096 // a fine profile: every server's few hundred bytes show
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addrs := make([]string, 0, n)
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return fmt.Errorf("listener %d: %w", i, err)
		}
		addrs = append(addrs, ln.Addr().String())
		switch kind {
		case "bare":
			hs := &http.Server{Handler: http.HandlerFunc(nullRPC)}
			go func() { _ = hs.Serve(ln) }()
		case "mhp":
			drv, err := newSimDriver(fmt.Sprintf("thermocycler-%05d", i))
			if err != nil {
				return err
			}
			srv := transport.NewServer(drv, transport.Options{Logger: quiet})
			go func() { _ = transport.ServeHTTP(ctx, ln, srv) }()
		default:
			return fmt.Errorf("devices: unknown kind %q", kind)
		}
	}
	// Each serves: one request to the first and the last.
	tr := &http.Transport{}
	hc := &http.Client{Transport: tr}
	for _, a := range []string{addrs[0], addrs[len(addrs)-1]} {
		if kind == "mhp" {
			if _, err := initialize(hc, "http://"+a, "probe"); err != nil {
				return err
			}
		} else if _, err := post(hc, "http://"+a, "", readBody); err != nil {
			return err
		}
	}
	tr.CloseIdleConnections()
	// What stays: the garbage of the set-up collected and returned to the
	// system (in both kinds alike), so RSS is the live footprint.
	runtime.GC()
	debug.FreeOSMemory()
	if path := os.Getenv("MHP_BENCH_HEAPPROFILE"); path != "" {
		// The heap profile of the devices (go tool pprof -sample_index=inuse_space).
		f, err := os.Create(path + "." + kind)
		if err != nil {
			return err
		}
		err = pprof.Lookup("heap").WriteTo(f, 0)
		f.Close()
		if err != nil {
			return err
		}
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Printf("mem %d %d %d %d %d\n", rss(), ms.Sys-ms.HeapReleased, ms.HeapInuse, ms.StackInuse, runtime.NumGoroutine())
	waitStdin()
	return nil
}

// rss is this process's resident set in bytes (0 where /proc is absent).
func rss() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

type memFigures struct {
	rss, goSys, heap, stack int64
	goroutines              int
}

func devicesChild(kind string, n int) (memFigures, error) {
	c, err := startChild(fmt.Sprintf("devices:%s:%d", kind, n))
	if err != nil {
		return memFigures{}, err
	}
	defer c.stop()
	var m memFigures
	if _, err := fmt.Sscanf(c.first, "mem %d %d %d %d %d", &m.rss, &m.goSys, &m.heap, &m.stack, &m.goroutines); err != nil {
		return m, fmt.Errorf("devices child %s: %q: %v", kind, c.first, err)
	}
	return m, nil
}

// measureDevices is n simulated devices, each on its own HTTP listener in
// one process, against n bare net/http listeners (each in a fresh process).
func measureDevices(_ context.Context, o Options) (Row, error) {
	n := o.Devices
	var bare, dev []memFigures
	rounds := min(o.Rounds, 2)
	for r := 0; r < rounds; r++ {
		b, err := devicesChild("bare", n)
		if err != nil {
			return Row{}, err
		}
		d, err := devicesChild("mhp", n)
		if err != nil {
			return Row{}, err
		}
		bare, dev = append(bare, b), append(dev, d)
	}
	mb := func(x int64) float64 { return float64(x) / (1 << 20) }
	var br, dr, ratio []float64
	for i := range bare {
		br, dr = append(br, mb(bare[i].rss)), append(dr, mb(dev[i].rss))
		ratio = append(ratio, float64(dev[i].rss)/float64(bare[i].rss))
	}
	last, lastBare := dev[len(dev)-1], bare[len(bare)-1]
	return Row{
		What: fmt.Sprintf("%d simulated devices, each on its own HTTP listener, one process (RSS)", n),
		Baseline: fmt.Sprintf("bare net/http listeners %s MB (heap %.0f MB, stacks %.0f MB)", spread(br, "%.0f"),
			mb(lastBare.heap), mb(lastBare.stack)),
		Now: fmt.Sprintf("%s MB (%sx; heap %.0f MB, stacks %.0f MB, %d goroutines)", spread(dr, "%.0f"), spread(ratio, "%.2f"),
			mb(last.heap), mb(last.stack), last.goroutines),
		Goal: fmt.Sprintf("<= %.0f MB", 150*float64(n)/10000),
		Met:  ptr(median(dr) <= 150*float64(n)/10000),
	}, nil
}
