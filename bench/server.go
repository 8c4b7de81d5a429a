package bench

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// drive sends total requests of body to url from clients concurrent
// clients, each with its own session (sids), and returns the first error.
func drive(hcs []*httpClientSession, url, body string, total int) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var first atomic.Value
	for _, c := range hcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(total) {
				if _, err := post(c.hc, url, c.sid, body); err != nil {
					first.CompareAndSwap(nil, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err, _ := first.Load().(error); err != nil {
		return err
	}
	return nil
}

type httpClientSession struct {
	hc  *http.Client
	sid string
}

// sessions opens n client sessions on url (sid "" for the null server).
func sessions(url string, n int, mhpServer bool) ([]*httpClientSession, error) {
	hc := newHTTPClient(n + 4)
	out := make([]*httpClientSession, n)
	for i := range out {
		out[i] = &httpClientSession{hc: hc}
		if mhpServer {
			sid, err := initialize(hc, url, fmt.Sprintf("cpu-%d", i))
			if err != nil {
				return nil, err
			}
			out[i].sid = sid
		}
	}
	return out, nil
}

// cpuPer drives total requests and returns the server child's CPU per request.
func cpuPer(hcs []*httpClientSession, url, body string, total int) (time.Duration, error) {
	c0, err := childCPU(hcs[0].hc, url)
	if err != nil {
		return 0, err
	}
	if err := drive(hcs, url, body, total); err != nil {
		return 0, err
	}
	c1, err := childCPU(hcs[0].hc, url)
	if err != nil {
		return 0, err
	}
	return (c1 - c0) / time.Duration(total), nil
}

// measureServerCPU is the server's CPU per HTTP request (a server child
// process, 32 clients in this one) against a null JSON-RPC server.
func measureServerCPU(_ context.Context, o Options) (Row, error) {
	const clients = 32
	null, err := startChild("serve:null")
	if err != nil {
		return Row{}, err
	}
	defer null.stop()
	simc, err := startChild("serve:sim")
	if err != nil {
		return Row{}, err
	}
	defer simc.stop()
	nullURL := "http://" + strings.TrimPrefix(null.first, "addr ")
	simURL := "http://" + strings.TrimPrefix(simc.first, "addr ")
	nullS, err := sessions(nullURL, clients, false)
	if err != nil {
		return Row{}, err
	}
	simS, err := sessions(simURL, clients, true)
	if err != nil {
		return Row{}, err
	}
	total := o.n(20000)
	// Warm both (connections, first allocations).
	if err := drive(nullS, nullURL, readBody, clients*4); err != nil {
		return Row{}, err
	}
	if err := drive(simS, simURL, readBody, clients*4); err != nil {
		return Row{}, err
	}
	var base []float64
	ratios := map[string][]float64{}
	kinds := []struct{ name, body string }{{"read", readBody}, {"dry-run write", dryWriteBody}, {"describe summary", summaryBody}}
	for r := 0; r < o.Rounds; r++ {
		nb, err := cpuPer(nullS, nullURL, readBody, total)
		if err != nil {
			return Row{}, fmt.Errorf("null: %w", err)
		}
		base = append(base, float64(nb.Nanoseconds())/1e3)
		for _, k := range kinds {
			c, err := cpuPer(simS, simURL, k.body, total)
			if err != nil {
				return Row{}, fmt.Errorf("%s: %w", k.name, err)
			}
			ratios[k.name] = append(ratios[k.name], float64(c)/float64(nb))
		}
	}
	var parts []string
	for _, k := range kinds {
		parts = append(parts, fmt.Sprintf("%s %sx (median %.2f)", k.name, spread(ratios[k.name], "%.2f"), median(ratios[k.name])))
	}
	return Row{
		What:     "server CPU per HTTP request (server in its own process, 32 clients)",
		Baseline: "null JSON-RPC server " + spread(base, "%.0f") + " us",
		Now:      strings.Join(parts, ", "),
		Goal:     "read <= 1.15x, write and describe <= 1.3x",
		Met: ptr(median(ratios["read"]) <= 1.15 && median(ratios["dry-run write"]) <= 1.3 &&
			median(ratios["describe summary"]) <= 1.3),
	}, nil
}

// estopLatencies times n anonymous estops sent by ec (each followed,
// untimed, by a reset sent by hc).
func estopLatencies(ec, hc *http.Client, url, sid string, n int) ([]time.Duration, error) {
	lat, _, err := estopAndEcho(ec, hc, url, sid, n, nil)
	return lat, err
}

// estopAndEcho is estopLatencies with, when floor is not nil, the floor
// timed after each estop's reset (an echo round trip: under the same
// conditions).
func estopAndEcho(ec, hc *http.Client, url, sid string, n int, floor func() (time.Duration, error)) (lat, echoLat []time.Duration, err error) {
	lat = make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if _, err := post(ec, url, "", estopBody); err != nil {
			return nil, nil, fmt.Errorf("estop: %w", err)
		}
		lat = append(lat, time.Since(t0))
		if _, err := post(hc, url, sid, resetBody); err != nil {
			return nil, nil, fmt.Errorf("reset: %w", err)
		}
		if floor != nil {
			d, err := floor()
			if err != nil {
				return nil, nil, err
			}
			echoLat = append(echoLat, d)
		}
	}
	return lat, echoLat, nil
}

// cores is the serve child's CPU since cpu0 (read at w0) over the wall
// time since, in cores (0 when it cannot be read).
func cores(hc *http.Client, url string, cpu0 time.Duration, w0 time.Time) float64 {
	c1, err := childCPU(hc, url)
	if err != nil {
		return 0
	}
	return float64(c1-cpu0) / float64(time.Since(w0))
}

// measureEStop is the latency of an anonymous safety/estop on a server
// (its own process) saturated by 32 reading clients (a third process),
// against the estop on the idle server: sent on the prober's kept-alive
// connection (the row's judge), and on a new connection each (an estop
// client that dials when it needs to stop). The floor is a TCP echo in the
// server process (echo.go), timed between the loaded estops: what the
// machine and the process's runtime cost any answer under that load.
func measureEStop(_ context.Context, o Options) (Row, error) {
	srv, err := startChild("serve:sim-echo")
	if err != nil {
		return Row{}, err
	}
	defer srv.stop()
	httpAddr, echoAddr := parseServeAddrs(srv.first)
	if echoAddr == "" {
		return Row{}, fmt.Errorf("serve child: %q has no echo address", srv.first)
	}
	url := "http://" + httpAddr
	echo, err := dialEcho(echoAddr)
	if err != nil {
		return Row{}, err
	}
	defer echo.close()
	hc := newHTTPClient(8)
	fresh := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	sid, err := initialize(hc, url, "estop-reset")
	if err != nil {
		return Row{}, err
	}
	n := o.n(300)
	if _, err := estopLatencies(hc, hc, url, sid, 20); err != nil { // warm
		return Row{}, err
	}
	var p50s, p99s, readX, newP50s, newP99s, newIdle, idleUS, echo50, echo99, overFloor, dial50, dial99 []float64
	var niced50, niced99, nicedEcho99, cpuLoaded, cpuNiced []float64
	_, noNice := exec.LookPath("nice")
	canNice := noNice == nil
	for r := 0; r < o.Rounds; r++ {
		idle, err := estopLatencies(hc, hc, url, sid, n)
		if err != nil {
			return Row{}, err
		}
		idleNew, err := estopLatencies(fresh, hc, url, sid, n)
		if err != nil {
			return Row{}, err
		}
		load, err := startChild("load:32:" + url)
		if err != nil {
			return Row{}, err
		}
		if load.first != "ready" {
			load.stop()
			return Row{}, fmt.Errorf("load child: %s", load.first)
		}
		cpu0, _ := childCPU(hc, url)
		w0 := time.Now()
		loaded, echoed, err := estopAndEcho(hc, hc, url, sid, n, echo.roundTrip)
		if err != nil {
			load.stop()
			return Row{}, err
		}
		cpuLoaded = append(cpuLoaded, cores(hc, url, cpu0, w0))
		dialled, dialEchoed, err := estopAndEcho(fresh, hc, url, sid, n, func() (time.Duration, error) { return dialRoundTrip(echoAddr) })
		if err != nil {
			load.stop()
			return Row{}, err
		}
		// A read of one more client under the same load, for comparison.
		reads := make([]time.Duration, 0, n)
		for i := 0; i < n; i++ {
			t0 := time.Now()
			if _, err := post(hc, url, sid, readBody); err != nil {
				load.stop()
				return Row{}, err
			}
			reads = append(reads, time.Since(t0))
		}
		load.stop()
		i50 := quantile(idle, 0.5)
		// The same load from a process at nice 19: its clients take no
		// CPU the server or the prober wait for (as clients on other
		// machines would not), and the server still serves all 32.
		if canNice {
			nl, err := startChildNice("load:32:"+url, 19)
			if err != nil {
				return Row{}, err
			}
			if nl.first != "ready" {
				nl.stop()
				return Row{}, fmt.Errorf("niced load child: %s", nl.first)
			}
			cpu0, _ = childCPU(hc, url)
			w0 = time.Now()
			niced, nicedEcho, err := estopAndEcho(hc, hc, url, sid, n, echo.roundTrip)
			if err != nil {
				nl.stop()
				return Row{}, err
			}
			cpuNiced = append(cpuNiced, cores(hc, url, cpu0, w0))
			nl.stop()
			niced50 = append(niced50, float64(quantile(niced, 0.5))/float64(i50))
			niced99 = append(niced99, float64(quantile(niced, 0.99))/float64(i50))
			nicedEcho99 = append(nicedEcho99, float64(quantile(nicedEcho, 0.99))/float64(i50))
		}
		p50s = append(p50s, float64(quantile(loaded, 0.5))/float64(i50))
		p99s = append(p99s, float64(quantile(loaded, 0.99))/float64(i50))
		readX = append(readX, float64(quantile(reads, 0.5))/float64(i50))
		newP50s = append(newP50s, float64(quantile(dialled, 0.5))/float64(i50))
		newIdle = append(newIdle, float64(quantile(idleNew, 0.5))/float64(i50))
		newP99s = append(newP99s, float64(quantile(dialled, 0.99))/float64(i50))
		idleUS = append(idleUS, float64(i50.Nanoseconds())/1e3)
		echo50 = append(echo50, float64(quantile(echoed, 0.5))/float64(i50))
		echo99 = append(echo99, float64(quantile(echoed, 0.99))/float64(i50))
		overFloor = append(overFloor, float64(quantile(loaded, 0.99))/float64(quantile(echoed, 0.99)))
		dial50 = append(dial50, float64(quantile(dialEchoed, 0.5))/float64(i50))
		dial99 = append(dial99, float64(quantile(dialEchoed, 0.99))/float64(i50))
	}
	return Row{
		What:     "estop under a saturating 32-client load (server, load and prober in 3 processes)",
		Baseline: "idle estop p50 (" + spread(idleUS, "%.0f") + " us)",
		Now: fmt.Sprintf("p50 %sx, p99 %sx idle (a loaded read p50 %sx; an estop on a new connection: idle p50 %sx, loaded p50 %sx, p99 %sx)",
			spread(p50s, "%.1f"), spread(p99s, "%.1f"), spread(readX, "%.1f"), spread(newIdle, "%.1f"), spread(newP50s, "%.1f"),
			spread(newP99s, "%.1f")),
		Goal: "p50 <= 2x, p99 <= 5x idle p50",
		Met:  ptr(median(p50s) <= 2 && median(p99s) <= 5),
		Notes: []string{fmt.Sprintf("estop floor: a TCP echo in the server process, between the loaded estops: p50 %sx, p99 %sx idle estop p50; "+
			"loaded estop p99 / echo p99 %sx (what the HTTP and MHP code add to the tail); a new connection to the echo each: p50 %sx, p99 %sx",
			spread(echo50, "%.1f"), spread(echo99, "%.1f"), spread(overFloor, "%.2f"), spread(dial50, "%.1f"), spread(dial99, "%.1f")),
			nicedNote(canNice, niced50, niced99, nicedEcho99, cpuNiced, cpuLoaded)},
	}, nil
}

// nicedNote is the estop row's line for the load run at nice 19.
func nicedNote(measured bool, p50, p99, echo99, cpuNiced, cpuLoaded []float64) string {
	if !measured {
		return fmt.Sprintf("estop with the load at nice 19: not measured (no nice command); the server busy %s cores under the plain load",
			spread(cpuLoaded, "%.2f"))
	}
	return fmt.Sprintf("estop with the same load from a process at nice 19 (its clients take no CPU the server waits for): p50 %sx, p99 %sx idle estop p50, "+
		"echo p99 %sx; the server busy %s cores (%s under the plain load)",
		spread(p50, "%.1f"), spread(p99, "%.1f"), spread(echo99, "%.1f"), spread(cpuNiced, "%.2f"), spread(cpuLoaded, "%.2f"))
}
