package opcua

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
)

// A frozen server (process stopped, sockets open) sends nothing: the
// served value turns unavailable after the max age instead of repeating
// the last value forever, and comes back when the server does.
func TestFrozenServerGoesStale(t *testing.T) {
	srv := startFake(t)
	cfg := extraConfig(srv.URL)
	cfg.Timeouts.KeepAliveS = 0.3
	d := startDriver(t, cfg, nil)
	waitSignals(t, d)
	ctx := ctxT(t)
	dev := mhp.AsSession(d, "s1")
	got := make(chan mhp.Notification, 256)
	stop := d.Listen(func(n mhp.Notification) {
		select {
		case got <- n:
		default:
		}
	})
	defer stop()
	if _, err := dev.Subscribe(ctx, []string{"temperature"}); err != nil {
		t.Fatal(err)
	}
	// Healthy and quiet for several max ages: the heartbeat keeps it fresh.
	quiet := time.Now().Add(3 * seconds(cfg.withDefaults().Timeouts.MaxAgeS))
	for time.Now().Before(quiet) {
		r, err := dev.Read(ctx, []string{"temperature"})
		if err != nil || r.Values["temperature"] != 21.5 {
			t.Fatalf("a quiet healthy server went stale: %+v %v", r, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	srv.Freeze()
	eventually(t, "the frozen server's signal to read unavailable", 15*time.Second, func() bool {
		r, err := dev.Read(ctx, []string{"temperature"})
		return err == nil && r.Values["temperature"] == nil && strings.Contains(r.Unavailable["temperature"], "frozen")
	})
	waitNotification(t, got, func(m map[string]any) bool { v, ok := m["value"]; return m["name"] == "temperature" && ok && v == nil })
	srv.Thaw()
	eventually(t, "the value to come back after thawing", 15*time.Second, func() bool {
		r, err := dev.Read(ctx, []string{"temperature"})
		return err == nil && r.Values["temperature"] == 21.5
	})
	waitNotification(t, got, func(m map[string]any) bool { return m["name"] == "temperature" && m["value"] == 21.5 })
}

// countHandler counts log records whose message contains sub.
type countHandler struct {
	sub string
	n   *atomic.Int64
}

func (h countHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h countHandler) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.sub) {
		h.n.Add(1)
	}
	return nil
}
func (h countHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h countHandler) WithGroup(string) slog.Handler      { return h }

// The soak: a healthy link to node-opcua stays up across many keep-alive
// periods (gopcua's default timing dropped it once per keep-alive).
func TestNodeSoakNoSpontaneousDrop(t *testing.T) {
	p := startNode(t)
	cfg := plcConfig(p.url)
	cfg.Timeouts.KeepAliveS = 0.5
	var lost atomic.Int64
	d, err := New(cfg, Options{Logger: slog.New(countHandler{"connection lost", &lost}),
		Tune: func(bc *binding.Config) { bc.PollInterval = 20 * time.Millisecond }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	waitSignals(t, d)
	var changes atomic.Int64
	stop := d.Listen(func(n mhp.Notification) {
		if n.Method == mhp.NotifyBackendLink {
			changes.Add(1)
		}
	})
	defer stop()
	since := d.Link().Since
	soak := 10 * seconds(cfg.Timeouts.KeepAliveS) // ten keep-alive periods
	end := time.Now().Add(soak)
	dev := mhp.AsSession(d, "s1")
	for time.Now().Before(end) {
		r, err := dev.Read(ctx, []string{"temperature"})
		if err != nil || r.Values["temperature"] == nil {
			t.Fatalf("read during the soak: %+v %v", r, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := lost.Load(); n != 0 {
		t.Fatalf("%d spontaneous drops in %s (%d keep-alive periods)", n, soak, 10)
	}
	if l := d.Link(); !l.Connected || l.Since != since || changes.Load() != 0 {
		t.Fatalf("the link changed during the soak: %+v, %d notifications", l, changes.Load())
	}
}
