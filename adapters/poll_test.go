package adapters_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/clock"
)

// TestPollRetrySchedule: failed polls are retried after a back-off that
// doubles and is capped, trimmed so that the last retry falls on the
// window's edge; the give-up names what the backend answered (an HTTP
// status, never "unreachable") or that it gave no answer, and for how long.
// An answered poll starts a new window. The waits are on a stepping clock:
// no real sleep.
func TestPollRetrySchedule(t *testing.T) {
	answered := errors.New("HTTP 500: Internal Server Error")
	refused := errors.New("dial tcp 127.0.0.1:9: connect: connection refused")
	ms := time.Millisecond
	cases := []struct {
		name     string
		policy   adapters.PollRetry
		statuses []int // one per failed poll; 0: no answer
		waits    []time.Duration
		want     []string // in the give-up message
		not      []string
	}{
		{name: "answered_500_for_the_window",
			policy:   adapters.PollRetry{Backoff: 100 * ms, MaxBackoff: 800 * ms, Window: 3 * time.Second},
			statuses: []int{500, 500, 500, 500, 500, 500, 500},
			// 100, 200, 400, 800 (cap), 800, then 700 to the edge at 3s.
			waits: []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 800 * ms, 700 * ms},
			want:  []string{"answered HTTP 500", "7 polls in a row", "for 3s (poll_retry.window 3s)"},
			not:   []string{"unreachable"}},
		{name: "unreachable_for_the_window",
			policy:   adapters.PollRetry{Backoff: time.Second, MaxBackoff: 4 * time.Second, Window: 10 * time.Second},
			statuses: []int{0, 0, 0, 0, 0},
			waits:    []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 3 * time.Second},
			want:     []string{"the bridge is unreachable", "5 polls in a row got no answer", "for 10s"},
			not:      []string{"HTTP"}},
		{name: "mixed_says_both",
			policy:   adapters.PollRetry{Backoff: time.Second, MaxBackoff: time.Second, Window: 2 * time.Second},
			statuses: []int{502, 0, 502},
			waits:    []time.Duration{time.Second, time.Second},
			want:     []string{"answered HTTP 502 to 2 of them and 1 got no answer"}},
		{name: "deprecated_poll_failures_bounds_the_count",
			policy:   adapters.PollRetry{Backoff: 10 * ms, MaxBackoff: 10 * ms, Window: time.Hour, MaxFailures: 3},
			statuses: []int{500, 500, 500},
			waits:    []time.Duration{10 * ms, 10 * ms},
			want:     []string{"answered HTTP 500 to 3 polls", "(poll_failures 3)"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clk := clock.NewStep(time.Unix(1_800_000_000, 0))
			c.policy.Clock = clk
			f := c.policy.Follow("bridge task 7 (run)", "the bridge")
			var got []time.Duration
			var end error
			for i, st := range c.statuses {
				err := answered
				if st == 0 {
					err = refused
				}
				wait, gerr := f.Failed(st, err)
				if gerr != nil {
					if i != len(c.statuses)-1 {
						t.Fatalf("gave up after %d failures, want %d: %v", i+1, len(c.statuses), gerr)
					}
					end = gerr
					break
				}
				got = append(got, wait)
				if err := c.policy.Sleep(context.Background(), wait); err != nil {
					t.Fatal(err)
				}
			}
			if end == nil {
				t.Fatalf("never gave up after %d failures (waits %v)", len(c.statuses), got)
			}
			if !slices.Equal(got, c.waits) || !slices.Equal(clk.Waits(), c.waits) {
				t.Errorf("waits %v (clock %v), want %v", got, clk.Waits(), c.waits)
			}
			e, ok := mhp.AsError(end)
			if !ok || e.Code != mhp.CodeDeviceFault || !e.OutcomeUnknown() {
				t.Fatalf("give-up %#v, want a DeviceFault with outcome unknown", end)
			}
			for _, w := range c.want {
				if !strings.Contains(e.Message, w) {
					t.Errorf("message %q lacks %q", e.Message, w)
				}
			}
			for _, w := range c.not {
				if strings.Contains(e.Message, w) {
					t.Errorf("message %q says %q", e.Message, w)
				}
			}
		})
	}
}

// TestPollRetryBackoffs: the default policy's whole window, as the
// adapters' tests expect it: 250ms doubling to 5s, 5s until 1m57.75s,
// then 2.25s to the edge at 2m.
func TestPollRetryBackoffs(t *testing.T) {
	want := []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second}
	for range 22 {
		want = append(want, 5*time.Second)
	}
	want = append(want, 2250*time.Millisecond)
	if got := (adapters.PollRetry{}).Backoffs(); !slices.Equal(got, want) {
		t.Fatalf("default backoffs %v, want %v", got, want)
	}
	if got := (adapters.PollRetry{Backoff: time.Nanosecond, MaxBackoff: time.Nanosecond, Window: time.Hour}).Backoffs(); len(got) != 4096 {
		t.Fatalf("%d backoffs, want the bound 4096", len(got))
	}
}

// TestPollRetryRecovers: an answered poll resets the record, so failures
// spread over a long job never add up to the window.
func TestPollRetryRecovers(t *testing.T) {
	clk := clock.NewStep(time.Unix(1_800_000_000, 0))
	p := adapters.PollRetry{Backoff: time.Second, MaxBackoff: 8 * time.Second, Window: 10 * time.Second, Clock: clk}
	f := p.Follow("job", "the node")
	for round := 0; round < 5; round++ {
		for i := 0; i < 3; i++ {
			wait, err := f.Failed(500, errors.New("500"))
			if err != nil {
				t.Fatalf("round %d: gave up: %v", round, err)
			}
			if want := time.Second << i; wait != want {
				t.Fatalf("round %d failure %d: wait %v, want %v (the back-off restarts after an answer)", round, i, wait, want)
			}
			_ = p.Sleep(context.Background(), wait)
		}
		f.OK()
		if f.Failing() != 0 {
			t.Fatal("OK kept the failures")
		}
	}
}

func TestPollRetryValidate(t *testing.T) {
	cases := []struct {
		p    adapters.PollRetry
		want string
	}{
		{adapters.PollRetry{}, ""},
		{adapters.PollRetry{Backoff: -time.Second}, "poll_retry.backoff"},
		{adapters.PollRetry{Backoff: 2 * time.Second, MaxBackoff: time.Second}, "poll_retry.max_backoff"},
		{adapters.PollRetry{Window: -time.Second}, "poll_retry.window"},
		{adapters.PollRetry{Backoff: time.Minute, Window: time.Second}, "shorter than poll_retry.backoff"},
		{adapters.PollRetry{MaxFailures: -1}, "poll_failures"},
	}
	for _, c := range cases {
		err := c.p.Validate()
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("Validate(%+v) = %v, want %q", c.p, err, c.want)
		}
	}
	d := adapters.PollRetry{}.Defaults()
	if d.Backoff != 250*time.Millisecond || d.MaxBackoff != 5*time.Second || d.Window != 2*time.Minute || d.Clock == nil {
		t.Errorf("defaults %+v", d)
	}
	if d := (adapters.PollRetry{Backoff: 10 * time.Second}).Defaults(); d.MaxBackoff != 10*time.Second {
		t.Errorf("max_backoff below an explicit backoff: %v", d.MaxBackoff)
	}
}

// TestPollRetrySleepCut: a sleep ends with its context.
func TestPollRetrySleepCut(t *testing.T) {
	p := adapters.PollRetry{Clock: clock.NewManual(time.Unix(0, 0))} // never advanced
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Sleep(ctx, time.Hour) }()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("sleep = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the sleep outlived its context")
	}
}
