package bench

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/directory"
	"github.com/openmhp/mhp-go/evidence"
	"github.com/openmhp/mhp-go/guard"
	"github.com/openmhp/mhp-go/transport"
)

// plainDriver is a driver with one auto-approved setting "sp" (0..100).
func plainDriver(id string) (*binding.Driver, error) {
	return binding.New(binding.Config{
		Device: mhp.DeviceInfo{ID: id, Class: "test"},
		Settings: []binding.Setting{{Spec: mhp.Setting{Name: "sp", Type: mhp.TypeNumber, Limits: mhp.Range(0, 100)},
			Write: func(context.Context, any) (binding.WriteStatus, error) { return binding.Applied, nil }}},
	})
}

// guarded is dev behind the guard writing evidence to a fresh log in dir.
func guarded(dev mhp.Device, dir, id string, sync evidence.SyncPolicy) (mhp.Device, func(), error) {
	lg, err := evidence.Open(evidence.Config{Dir: dir, Device: id, Sync: sync, SegmentEntries: 1 << 20})
	if err != nil {
		return nil, nil, err
	}
	g, err := guard.New(dev, guard.Config{Evidence: lg})
	if err != nil {
		lg.Close()
		return nil, nil, err
	}
	return g, func() { lg.Close() }, nil
}

// measureEvidence is a settings/write in process with an evidence receipt
// (SyncNever) against the bare driver.
func measureEvidence(_ context.Context, o Options) (Row, error) {
	dir, err := os.MkdirTemp("", "mhp-bench-evidence-")
	if err != nil {
		return Row{}, err
	}
	defer os.RemoveAll(dir)
	bare, err := plainDriver("bench-01")
	if err != nil {
		return Row{}, err
	}
	defer bare.Close()
	inner, err := plainDriver("bench-01")
	if err != nil {
		return Row{}, err
	}
	defer inner.Close()
	ev, closeLog, err := guarded(inner, dir, "bench-01", evidence.SyncNever)
	if err != nil {
		return Row{}, err
	}
	defer closeLog()
	ctx := mhp.WithSession(context.Background(), "bench")
	req := mhp.WriteRequest{Name: "sp", Value: 42.0}
	wr := func(d mhp.Device) func() error { return func() error { _, err := d.Write(ctx, req); return err } }
	n := o.n(20000)
	var added []float64
	for r := 0; r < o.Rounds; r++ {
		tb, err := cpuN(n, wr(bare))
		if err != nil {
			return Row{}, err
		}
		te, err := cpuN(n, wr(ev))
		if err != nil {
			return Row{}, err
		}
		added = append(added, float64((te-tb).Nanoseconds())/float64(n)/1e3)
	}
	ab := testing.AllocsPerRun(500, func() { _ = wr(bare)() })
	ae := testing.AllocsPerRun(500, func() { _ = wr(ev)() })
	return Row{
		What:     "evidence receipt in process (settings/write, SyncNever)",
		Baseline: fmt.Sprintf("bare write, %.0f allocs", ab),
		Now:      fmt.Sprintf("+%s us CPU, +%.0f allocs", spread(added, "%.1f"), ae-ab),
		Goal:     "<= +5 us, <= +15 allocs",
		Met:      ptr(median(added) <= 5 && ae-ab <= 15),
	}, nil
}

// serveDevices serves each device on its own loopback listener and
// returns their URLs and a stop function.
func serveDevices(devs []mhp.Device) ([]string, func(), error) {
	ctx, cancel := context.WithCancel(context.Background())
	var urls []string
	var srvs []*transport.Server
	stop := func() {
		cancel()
		for _, s := range srvs {
			s.Close()
		}
	}
	for _, d := range devs {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			stop()
			return nil, nil, err
		}
		srv := transport.NewServer(d, transport.Options{Logger: quiet})
		srvs = append(srvs, srv)
		go func() { _ = transport.ServeHTTP(ctx, ln, srv) }()
		urls = append(urls, "http://"+ln.Addr().String())
	}
	return urls, stop, nil
}

// httpWrites runs one writer per url for total writes (all writers) and
// returns the writes per second and this process's CPU time per write
// (servers and writers both run here).
func httpWrites(urls []string, total int) (float64, time.Duration, error) {
	hcs := make([]*httpClientSession, len(urls))
	hc := newHTTPClient(len(urls) + 4)
	for i, u := range urls {
		sid, err := initialize(hc, u, fmt.Sprintf("writer-%d", i))
		if err != nil {
			return 0, 0, err
		}
		hcs[i] = &httpClientSession{hc: hc, sid: sid}
	}
	body := `{"jsonrpc":"2.0","id":7,"method":"settings/write","params":{"name":"sp","value":42}}`
	start, cpu0 := time.Now(), cpuNow()
	errs := make(chan error, len(urls))
	per := max(1, total/len(urls))
	for i, c := range hcs {
		go func() {
			for k := 0; k < per; k++ {
				if _, err := post(c.hc, urls[i], c.sid, body); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range urls {
		if err := <-errs; err != nil {
			return 0, 0, err
		}
	}
	n := per * len(urls)
	return float64(n) / time.Since(start).Seconds(), (cpuNow() - cpu0) / time.Duration(n), nil
}

// measureEvidenceHTTP is real writes over HTTP from 8 writers on 8
// devices, each with its own server: with evidence in one shared log (the
// host's layout: one chain, one committer, one fsync per batch across the
// devices) under SyncNever and SyncAlways, against the same without
// evidence. For comparison it also measures the earlier layout (a chain per
// device: 8 fsync streams) and 8 writers on one device, each under
// SyncAlways against its own no-evidence baseline.
func measureEvidenceHTTP(_ context.Context, o Options) (Row, error) {
	const writers = 8
	dir, err := os.MkdirTemp("", "mhp-bench-evhttp-")
	if err != nil {
		return Row{}, err
	}
	defer os.RemoveAll(dir)
	type config struct {
		sync    *evidence.SyncPolicy
		devices int
		perDev  bool // a chain per device instead of one shared log
	}
	logs := map[int]*evidence.Log{} // the shared logs, by config
	setup := func(c config, n int) ([]string, func(), error) {
		var devs []mhp.Device
		var closers []func()
		closeAll := func() {
			for i := len(closers) - 1; i >= 0; i-- {
				closers[i]()
			}
		}
		var shared *evidence.Log
		if c.sync != nil && !c.perDev {
			lg, err := evidence.Open(evidence.Config{Dir: filepath.Join(dir, fmt.Sprintf("shared-%d", n)), Shared: true, Sync: *c.sync, SegmentEntries: 1 << 20})
			if err != nil {
				return nil, nil, err
			}
			shared, logs[n] = lg, lg
			closers = append(closers, func() { lg.Close() })
		}
		for i := 0; i < c.devices; i++ {
			id := fmt.Sprintf("writer-dev-%d", i)
			d, err := plainDriver(id)
			if err != nil {
				closeAll()
				return nil, nil, err
			}
			closers = append(closers, func() { d.Close() })
			var dev mhp.Device = d
			switch {
			case shared != nil:
				g, err := guard.New(d, guard.Config{Evidence: shared.For(id)})
				if err != nil {
					closeAll()
					return nil, nil, err
				}
				dev = g
			case c.sync != nil:
				g, cl, err := guarded(d, filepath.Join(dir, fmt.Sprintf("dev-%d-%d", n, i)), id, *c.sync)
				if err != nil {
					closeAll()
					return nil, nil, err
				}
				dev = g
				closers = append(closers, cl)
			}
			devs = append(devs, dev)
		}
		urls, stop, err := serveDevices(devs)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		for len(urls) < writers { // one device: every writer on its server
			urls = append(urls, urls[0])
		}
		return urls, func() { stop(); closeAll() }, nil
	}
	never, always := evidence.SyncNever, evidence.SyncAlways
	configs := []config{{nil, writers, false}, {&never, writers, false}, {&always, writers, false}, {&always, writers, true}, {nil, 1, false}, {&always, 1, false}}
	urls := make([][]string, len(configs))
	for i, c := range configs {
		u, stop, err := setup(c, i)
		if err != nil {
			return Row{}, err
		}
		defer stop()
		urls[i] = u
	}
	total := o.n(8000)
	var base, base1, rNever, rAlways, rPerDev, rOne, cNever, cAlways, perFsync, fsyncUs, busy []float64
	for r := 0; r < o.Rounds; r++ {
		var tp [6]float64
		var cpu [6]time.Duration
		for i := range configs {
			before, start := logs[2].CommitStats(), time.Now()
			if tp[i], cpu[i], err = httpWrites(urls[i], total); err != nil {
				return Row{}, err
			}
			if i == 2 { // the shared log under SyncAlways: how its group commit went
				st, el := logs[2].CommitStats(), time.Since(start)
				b, l, f := st.Batches-before.Batches, st.Lines-before.Lines, st.Fsync-before.Fsync
				if b > 0 {
					perFsync, fsyncUs = append(perFsync, float64(l)/float64(b)), append(fsyncUs, float64(f.Microseconds())/float64(b))
					busy = append(busy, 100*float64(f)/float64(el))
				}
			}
		}
		base, base1 = append(base, tp[0]), append(base1, tp[4])
		rNever, rAlways, rPerDev, rOne = append(rNever, tp[1]/tp[0]), append(rAlways, tp[2]/tp[0]), append(rPerDev, tp[3]/tp[0]), append(rOne, tp[5]/tp[4])
		cNever, cAlways = append(cNever, float64(cpu[1])/float64(cpu[0])), append(cAlways, float64(cpu[2])/float64(cpu[0]))
	}
	return Row{
		What:     "real writes over HTTP with evidence (8 writers, 8 devices, one shared log; and the earlier layouts)",
		Baseline: "no evidence " + spread(base, "%.0f") + " writes/s (1 device: " + spread(base1, "%.0f") + ")",
		Now: fmt.Sprintf("SyncNever %sx (median %.2f; CPU per write %sx), SyncAlways %sx (median %.2f; CPU per write %sx; one shared log, group commit across devices); "+
			"earlier layouts: 8 chains SyncAlways %sx (median %.2f; an fsync stream each), 1 device SyncAlways %sx (median %.2f)",
			spread(rNever, "%.2f"), median(rNever), spread(cNever, "%.2f"), spread(rAlways, "%.2f"), median(rAlways), spread(cAlways, "%.2f"),
			spread(rPerDev, "%.2f"), median(rPerDev), spread(rOne, "%.2f"), median(rOne)),
		Goal: "SyncNever >= 0.9x, SyncAlways >= 0.6x",
		Met:  ptr(median(rNever) >= 0.9 && median(rAlways) >= 0.6),
		Notes: []string{fmt.Sprintf("the shared log under SyncAlways committed %s receipts per fsync; an fsync took %s us and ran %s%% of the time "+
			"(a write waits for the fsync running when it arrives, then for its own)",
			spread(perFsync, "%.1f"), spread(fsyncUs, "%.0f"), spread(busy, "%.0f"))},
	}, nil
}

// syntheticCards are n cards across 8 classes and 40 bays.
func syntheticCards(n int) []directory.Card {
	classes := []string{"thermocycler", "robot_arm", "plate_reader", "liquid_handler", "incubator", "centrifuge", "hotplate", "microscope"}
	out := make([]directory.Card, n)
	for i := range out {
		c := classes[i%len(classes)]
		out[i] = directory.Card{DeviceInfo: mhp.DeviceInfo{ID: fmt.Sprintf("%s-%05d", c, i), Class: c,
			Location: fmt.Sprintf("bay %d", i%40+1), Tags: []string{c[:4], "lab"}},
			Signals: []string{"temperature", "door_closed"}, Actions: []string{"run", "stop"}, Target: fmt.Sprint(i)}
	}
	return out
}

// measureDirectory is a search over 100,000 cards against 2,000.
func measureDirectory(_ context.Context, o Options) (Row, error) {
	small, big := directory.NewIndex(syntheticCards(2000)), directory.NewIndex(syntheticCards(100000))
	const q = "heat a 96-well plate for pcr in bay 12 thermocycler"
	f := directory.Filter{Class: "thermocycler"}
	search := func(x *directory.Index) func() error {
		return func() error {
			if got := x.Rank(q, f, 3); len(got) != 3 {
				return fmt.Errorf("search found %d, want 3", len(got))
			}
			return nil
		}
	}
	var sUs, bUs, ratio []float64
	for r := 0; r < o.Rounds; r++ {
		ns, nb := o.n(5000), o.n(500)
		ts, err := cpuN(ns, search(small))
		if err != nil {
			return Row{}, err
		}
		tb, err := cpuN(nb, search(big))
		if err != nil {
			return Row{}, err
		}
		s, b := float64(ts.Nanoseconds())/float64(ns)/1e3, float64(tb.Nanoseconds())/float64(nb)/1e3
		sUs, bUs, ratio = append(sUs, s), append(bUs, b), append(ratio, b/s)
	}
	return Row{
		What:     "directory search (top 3, class filter)",
		Baseline: "2,000 cards " + spread(sUs, "%.0f") + " us CPU",
		Now:      fmt.Sprintf("100,000 cards %s us CPU, %sx for 50x the cards", spread(bUs, "%.0f"), spread(ratio, "%.1f")),
		Goal:     "100,000 cards <= 1000 us, growth at most linear (<= 50x)",
		Met:      ptr(median(bUs) <= 1000 && median(ratio) <= 50),
	}, nil
}

// moduleRoot is the directory of this module's go.mod.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %v", err)
	}
	p := strings.TrimSpace(string(out))
	if p == "" || p == os.DevNull {
		return "", fmt.Errorf("not inside the module (run from the mhp-go checkout)")
	}
	return filepath.Dir(p), nil
}

var tokenLine = regexp.MustCompile(`(?m)^(find \(3 results, live state\)|summary of \S+|select run_protocol \+ setpoint|find -> summary -> select):\s+(\d+) tokens`)

// bridgeLine is examples/scale's count of the same path through mhp-mcp.
var bridgeLine = regexp.MustCompile(`(?m)^through mhp-mcp, as the model reads it \(fenced\): .*= (\d+) tokens`)

// measureTokens runs go run ./examples/scale and reads its token counts.
func measureTokens(ctx context.Context, _ Options) (Row, error) {
	root, err := moduleRoot()
	if err != nil {
		return Row{}, err
	}
	cmd := exec.CommandContext(ctx, "go", "run", "./examples/scale")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return Row{}, fmt.Errorf("go run ./examples/scale: %v: %s", err, out)
	}
	got := map[string]int{}
	for _, m := range tokenLine.FindAllStringSubmatch(string(out), -1) {
		k := m[1]
		if strings.HasPrefix(k, "summary of") {
			k = "summary"
		}
		got[k], _ = strconv.Atoi(m[2])
	}
	bridged := ""
	if m := bridgeLine.FindStringSubmatch(string(out)); m != nil {
		bridged = "; through mhp-mcp, fenced: " + m[1]
	}
	path, ok := got["find -> summary -> select"]
	if !ok {
		return Row{}, fmt.Errorf("examples/scale printed no path total: %s", out)
	}
	return Row{
		What:     "the agent's find -> summary -> select over 2,000 devices (examples/scale)",
		Baseline: "the seed's 1,087 tokens, the Python reference 1,346",
		Now: fmt.Sprintf("%d tokens (find %d, summary %d, select %d)", path, got["find (3 results, live state)"], got["summary"],
			got["select run_protocol + setpoint"]) + bridged,
		Goal: "<= 700 tokens",
		Met:  ptr(path <= 700),
	}, nil
}

var _ = http.MethodPost
