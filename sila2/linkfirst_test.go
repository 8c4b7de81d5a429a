package sila2_test

import (
	"sync"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/sila2/silatest"
)

// TestLinkUpBeforeSignalsAfterARestart: after the server restarts, the
// backend link is reported up before the first signal update of the new
// connection. Before the fix values flowed (the resubscription is quicker
// than the link's probe) seconds before the link-up notification.
func TestLinkUpBeforeSignalsAfterARestart(t *testing.T) {
	l := startLab(t, silatest.Options{})
	d := openAdapter(t, l, "link: {retry_min: 1s, retry_max: 2s}\n")
	ctx := mhp.WithSession(ctxT(t), "watcher")
	if _, err := d.Subscribe(ctx, []string{"current_temperature"}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var events []string // "down", "up", "value" in the order published
	d.Listen(func(n mhp.Notification) {
		mu.Lock()
		defer mu.Unlock()
		switch n.Method {
		case mhp.NotifyBackendLink:
			if b, ok := n.Params["backend"].(*mhp.BackendLink); ok {
				events = append(events, map[bool]string{true: "up", false: "down"}[b.Connected])
			}
		case mhp.NotifySignalsUpdate:
			if n.Params["value"] != nil {
				events = append(events, "value")
			}
		}
	})
	// Before the restart the temperature differs from the relaunched
	// server's 293.15 K, so its first value is an update (equal values are
	// not published again).
	l.thermo.Set(300)
	conformance.Eventually(t, "the 300 K value", func() bool {
		r, err := d.Read(ctx, []string{"current_temperature"})
		return err == nil && r.Values["current_temperature"] == 300.0
	})
	l.srv.Stop()
	conformance.Eventually(t, "the link down", linkUp(d, false))
	relaunch(t, l)
	conformance.EventuallyWithin(t, "a value after the restart", 20*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		down := -1
		for i, e := range events {
			if e == "down" {
				down = i
			}
		}
		for _, e := range events[down+1:] {
			if e == "value" {
				return true
			}
		}
		return false
	})
	mu.Lock()
	defer mu.Unlock()
	down := -1
	for i, e := range events {
		if e == "down" {
			down = i
		}
	}
	for _, e := range events[down+1:] {
		if e == "up" {
			return
		}
		if e == "value" {
			t.Fatalf("a signal update came before the link-up after the restart: %v", events)
		}
	}
}
