package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/auth"
	"github.com/openmhp/mhp-go/client"
	"github.com/openmhp/mhp-go/console"
	"github.com/openmhp/mhp-go/directory"
	"github.com/openmhp/mhp-go/metrics"
	"github.com/openmhp/mhp-go/transport"
)

// newLogger is the servers' structured log on w: text, or JSON lines with
// --log-format json (for log collectors).
func newLogger(w io.Writer, p parsed, level slog.Level) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: level}
	switch f := p.flags["log-format"]; f {
	case "", "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	default:
		return nil, fmt.Errorf("--log-format %q: want text or json", f)
	}
}

// consoleHosts are the host names besides IP addresses and localhost under which the
// console page may call the server: the listen host when it names one, and
// the comma-separated --allow-host names (e.g. the name a lab PC is
// reached by when serving on 0.0.0.0).
func consoleHosts(addr, extra string) []string {
	var out []string
	if host, _, err := net.SplitHostPort(transport.LoopbackDefault(addr)); err == nil && host != "" && net.ParseIP(host) == nil {
		out = append(out, host)
	}
	for _, h := range strings.Split(extra, ",") {
		if h = strings.TrimSpace(h); h != "" {
			out = append(out, h)
		}
	}
	return out
}

// serveDeviceConsole serves the transport with the device console (GET /)
// and the metrics (GET /metrics) mounted next to it, all behind the
// transport's guard (Host check, credentials).
func serveDeviceConsole(ctx context.Context, ln net.Listener, srv *transport.Server, mx *metrics.Metrics, addr, hosts string) error {
	h, err := console.Device(console.Config{
		Server:    srv, // its guard
		Transport: mx.Middleware(srv.Handler(), srv.Methods()),
		Metrics:   mx.Handler(""), // behind the guard
		Hosts:     consoleHosts(addr, hosts),
	})
	if err != nil {
		return err
	}
	return transport.ServeHandler(ctx, ln, srv, h) // the transport's timeouts and connection limit
}

// labHandler is the directory's HTTP face: the lab page, estop-all, the
// metrics and the directory's JSON-RPC, behind the guard (Host check,
// credentials).
func labHandler(dir *directory.Directory, pool *connPool, mx *metrics.Metrics, a *auth.Authenticator, addr, hosts string, log *slog.Logger) (http.Handler, error) {
	chosts := consoleHosts(addr, hosts)
	return console.Lab(console.LabConfig{
		Directory: mx.Middleware(dir.Handler(), []string{mhp.MethodInitialize, mhp.MethodPing, "directory/search", "directory/get"}),
		EStopAll: func(ctx context.Context, reason string) []console.EStopAnswer {
			return pool.estopAll(ctx, dir.Index(), reason, log)
		},
		Guard:   auth.Guard{Auth: a, Hosts: chosts, Logger: log},
		Metrics: mx.Handler(""), // behind the guard
		Hosts:   chosts,
	})
}

// estopAll stops every indexed device in parallel (at most 32 at once) and
// returns each one's answer; a device that does not answer within ctx is
// reported with the error.
func (p *connPool) estopAll(ctx context.Context, idx *directory.Index, reason string, log *slog.Logger) []console.EStopAnswer {
	cards := idx.Rank("", directory.Filter{}, 0)
	out := make([]console.EStopAnswer, len(cards))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i, c := range cards {
		wg.Add(1)
		go func(i int, c directory.Card) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			start := time.Now()
			a := console.EStopAnswer{Target: c.Target, ID: c.ID}
			d, err := p.get(ctx, c.Target)
			if err == nil {
				res, eerr := d.EStop(ctx, reason)
				if eerr != nil {
					p.drop(c.Target, d)
					err = eerr
				} else {
					a.State, a.Stopped, a.Cancel, a.Error = string(res.State), res.Stopped, client.EStopJobs(res), res.StopError
					a.Pending = stopPending(res)
				}
			}
			if err != nil {
				a.Error = err.Error()
			}
			a.Seconds = time.Since(start).Seconds()
			out[i] = a
			log.Warn("lab estop-all", "device", c.ID, "target", c.Target, "state", a.State, "stopped", a.Stopped, "err", a.Error, "took", time.Since(start))
		}(i, c.Card)
	}
	wg.Wait()
	return out
}

// stopPending reads stop_pending from an estop answer (servers that bound
// the stop command's wait report it), whatever the Go type carries.
func stopPending(res *mhp.EStopResult) bool {
	b, err := json.Marshal(res)
	if err != nil {
		return false
	}
	var v struct {
		StopPending bool `json:"stop_pending"`
	}
	return json.Unmarshal(b, &v) == nil && v.StopPending
}
