package adapters_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/clock"
	"github.com/openmhp/mhp-go/conformance"
)

func TestBackoffBoundedAndJittered(t *testing.T) {
	for _, tc := range []struct {
		name string
		rnd  float64
	}{{"low", 0}, {"high", 0.999}} {
		b := adapters.NewBackoff(100*time.Millisecond, time.Second, func() float64 { return tc.rnd })
		var prev time.Duration
		for i := 0; i < 20; i++ {
			d := b.Next()
			if d < 50*time.Millisecond || d > time.Second {
				t.Fatalf("%s: wait %d = %v, outside [min/2, max]", tc.name, i, d)
			}
			if d < prev {
				t.Fatalf("%s: wait %d = %v shrank from %v before reaching max", tc.name, i, d, prev)
			}
			prev = d
		}
		if prev < 500*time.Millisecond {
			t.Fatalf("%s: backoff never reached max/2: %v", tc.name, prev)
		}
		b.Reset()
		if d := b.Next(); d > 100*time.Millisecond {
			t.Fatalf("%s: after Reset the wait is %v, want <= min", tc.name, d)
		}
	}
	// Two adapters with different draws do not retry in step.
	a := adapters.NewBackoff(time.Second, time.Second, func() float64 { return 0.1 })
	b := adapters.NewBackoff(time.Second, time.Second, func() float64 { return 0.9 })
	if a.Next() == b.Next() {
		t.Fatal("jitter does not spread the waits")
	}
}

// TestLinkReconnects: a link that goes down reports it, probes with backoff
// on the clock, stays down while probes fail (with the probe's error), and
// comes up on the first good probe.
func TestLinkReconnects(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_800_000_000, 0))
	var fail atomic.Bool
	var probes atomic.Int32
	fail.Store(true)
	l := adapters.NewLink(adapters.LinkOptions{Name: "test", Clock: clk, Rand: func() float64 { return 0 },
		Config: adapters.LinkConfig{RetryMin: time.Second, RetryMax: 4 * time.Second},
		Probe: func(ctx context.Context) error {
			probes.Add(1)
			if fail.Load() {
				return errors.New("still refused")
			}
			return nil
		}})
	defer l.Close()
	type report struct {
		up  bool
		err string
	}
	reports := make(chan report, 16)
	l.Attach(func(up bool, err error) {
		r := report{up: up}
		if err != nil {
			r.err = err.Error()
		}
		reports <- r
	})
	l.Down(errors.New("connection refused"))
	if r := <-reports; r.up || r.err != "connection refused" {
		t.Fatalf("first report %+v", r)
	}
	if clk.Pending() != 0 {
		t.Fatal("a link probes before Start")
	}
	l.Start()
	for i := 0; i < 3; i++ {
		ch := l.Changed()
		waitPending(t, clk)
		clk.Advance(4 * time.Second)
		if r := <-reports; r.up || r.err != "still refused" {
			t.Fatalf("probe %d report %+v", i, r)
		}
		_ = ch
	}
	fail.Store(false)
	ch := l.Changed()
	waitPending(t, clk)
	clk.Advance(4 * time.Second)
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("the link did not come up after a good probe")
	}
	if !l.Connected() || l.Err() != nil {
		t.Fatalf("link after a good probe: connected %v err %v", l.Connected(), l.Err())
	}
	n := probes.Load()
	clk.Advance(time.Minute)
	if probes.Load() != n || clk.Pending() != 0 {
		t.Fatal("a link that is up keeps probing")
	}
}

func waitPending(t *testing.T, clk *clock.Manual) {
	t.Helper()
	conformance.EventuallyWithin(t, "a probe to be scheduled", 10*time.Second, func() bool { return clk.Pending() > 0 })
}

func TestUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = http.Get("http://" + addr + "/status")
	if !adapters.Unreachable(err) {
		t.Fatalf("a refused connection is not unreachable: %v", err)
	}
	for _, e := range []error{nil, errors.New("EOF"), context.DeadlineExceeded} {
		if adapters.Unreachable(e) {
			t.Fatalf("%v counted as unreachable", e)
		}
	}
	if e := adapters.NotSent("invoke go", err); e.Data["outcome"] != "not_started" {
		t.Fatalf("NotSent data %+v", e.Data)
	}
}

func TestDescriptorCache(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.json")
	desc := map[string]any{"b": 2, "a": []any{1, "x"}}
	if err := adapters.SaveDescriptor(path, "madsci", "http://n", desc); err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if _, err := adapters.LoadDescriptor(path, "madsci", "http://n", &back); err != nil {
		t.Fatal(err)
	}
	if !adapters.SameDescription(desc, back) {
		t.Fatalf("round trip changed the description: %v", back)
	}
	if adapters.SameDescription(desc, map[string]any{"b": 3, "a": []any{1, "x"}}) {
		t.Fatal("different descriptions compare equal")
	}
	if _, err := adapters.LoadDescriptor(path, "madsci", "http://other", &back); err == nil {
		t.Fatal("a cache of another backend was accepted")
	}
}
