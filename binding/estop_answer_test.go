package binding_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
)

// hangingStop is a device whose stop hook blocks until released (a frozen
// OPC UA server), then returns err.
func hangingStop(t *testing.T, answer time.Duration, err error) (*binding.Driver, chan struct{}, *notes) {
	t.Helper()
	release := make(chan struct{})
	d, e := binding.New(binding.Config{
		Device:             mhp.DeviceInfo{ID: "frozen-01", Class: "test"},
		Logger:             slog.New(slog.DiscardHandler),
		EStopAnswerTimeout: answer,
		EStop: func(ctx context.Context) error {
			select {
			case <-release:
				return err
			case <-ctx.Done():
				return ctx.Err()
			}
		},
		Actions: []binding.Action{{Spec: mhp.Action{Name: "work", Cancellable: true},
			Run: func(ctx context.Context, j *binding.Job) (any, error) {
				<-ctx.Done()
				return nil, binding.ErrCancelled
			}}},
	})
	if e != nil {
		t.Fatal(e)
	}
	n := &notes{}
	stop := d.Listen(n.add)
	t.Cleanup(func() {
		stop()
		select {
		case <-release:
		default:
			close(release)
		}
		_ = d.Close()
	})
	return d, release, n
}

type notes struct {
	mu  sync.Mutex
	all []mhp.Notification
}

func (n *notes) add(x mhp.Notification) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.all = append(n.all, x)
}

func (n *notes) of(method string) []mhp.Notification {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []mhp.Notification
	for _, x := range n.all {
		if x.Method == method {
			out = append(out, x)
		}
	}
	return out
}

// TestEStopAnswersWithinBoundWhateverTheHook: a stop hook that hangs does
// not hold the answer beyond EStopAnswerTimeout; the answer says
// stopped:false, stop_pending:true; the device is in estop at once; and a
// later safety/estop notification carries the final "stopped" (true, or
// false with stop_error) once the hook returns. Each case runs in a
// synctest bubble: the bound is measured on the bubble's clock, so the
// answer must come at the bound itself, not within a headroom.
func TestEStopAnswersWithinBoundWhateverTheHook(t *testing.T) {
	for _, tt := range []struct {
		name    string
		hookErr error
	}{{"hook_succeeds_late", nil}, {"hook_fails_late", errors.New("PLC refused the stop")}} {
		runInBubble(t, tt.name, func(t *testing.T) {
			const bound = 50 * time.Millisecond
			d, release, n := hangingStop(t, bound, tt.hookErr)
			ctx := mhp.WithSession(context.Background(), "a")
			inv, err := d.Invoke(ctx, mhp.InvokeRequest{Name: "work"})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			res, err := d.EStop(ctx, "frozen backend")
			took := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			if took > bound {
				t.Fatalf("estop answered after %v with a hanging hook, bound %v", took, bound)
			}
			if res.Stopped || !res.StopPending || res.State != mhp.StateEStop {
				t.Fatalf("answer %+v, want stopped:false, stop_pending:true, state estop", res)
			}
			if len(res.Cancelling) != 1 || res.Cancelling[0] != inv.Job.ID {
				t.Fatalf("cancelling %v, want [%s]", res.Cancelling, inv.Job.ID)
			}
			if st := d.State(); st != mhp.StateEStop {
				t.Fatalf("state %s right after the answer, want estop", st)
			}
			first := n.of(mhp.NotifySafetyEStop)
			if len(first) != 1 || first[0].Params["stop_pending"] != true || first[0].Params["stopped"] != false {
				t.Fatalf("safety/estop at the answer: %+v, want one with stop_pending and stopped false", first)
			}
			close(release)
			synctest.Wait()
			all := n.of(mhp.NotifySafetyEStop)
			if len(all) != 2 {
				t.Fatalf("%d safety/estop notifications once the hook returned, want 2", len(all))
			}
			final := all[1].Params
			if final["stop_pending"] != nil || final["stopped"] != (tt.hookErr == nil) {
				t.Fatalf("final safety/estop %v, want stopped %v and no stop_pending", final, tt.hookErr == nil)
			}
			if tt.hookErr != nil && !strings.Contains(final["stop_error"].(string), "PLC refused") {
				t.Fatalf("final safety/estop %v lacks the hook's error", final)
			}
		})
	}
}

// runInBubble runs f as subtest name inside a synctest bubble.
func runInBubble(t *testing.T, name string, f func(t *testing.T)) {
	t.Run(name, func(t *testing.T) { synctest.Test(t, f) })
}

// TestEStopAnswerPromptHookIsFinal: a hook that finishes within the bound
// gives the final answer at once and one notification.
func TestEStopAnswerPromptHookIsFinal(t *testing.T) {
	d, release, n := hangingStop(t, 5*time.Second, nil)
	close(release)
	res, err := d.EStop(mhp.WithSession(context.Background(), "a"), "prompt")
	if err != nil || !res.Stopped || res.StopPending {
		t.Fatalf("answer %+v, %v; want stopped and not pending", res, err)
	}
	if got := n.of(mhp.NotifySafetyEStop); len(got) != 1 || got[0].Params["stopped"] != true {
		t.Fatalf("notifications %+v, want one safety/estop with stopped true", got)
	}
}

func TestEStopAnswerTimeoutValidated(t *testing.T) {
	base := func() binding.Config { return binding.Config{Device: mhp.DeviceInfo{ID: "v"}} }
	for _, tt := range []struct {
		name string
		set  func(*binding.Config)
		want string
	}{
		{"negative", func(c *binding.Config) { c.EStopAnswerTimeout = -time.Second }, "EStopAnswerTimeout"},
		{"above_stop_timeout", func(c *binding.Config) {
			c.StopTimeout, c.EStopAnswerTimeout = time.Second, 2*time.Second
		}, "exceeds StopTimeout"},
		{"above_default_stop_timeout", func(c *binding.Config) { c.EStopAnswerTimeout = 11 * time.Second }, "exceeds StopTimeout"},
		{"default", func(*binding.Config) {}, ""},
		{"within", func(c *binding.Config) { c.StopTimeout, c.EStopAnswerTimeout = time.Second, time.Second }, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := base()
			tt.set(&c)
			err := c.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate: %v, want an error naming %q", err, tt.want)
			}
		})
	}
}

// TestEStopResultDecodesCancelled: an answer from a driver that still names
// the list "cancelled" decodes into Cancelling.
func TestEStopResultDecodesCancelled(t *testing.T) {
	for _, body := range []string{
		`{"state":"estop","stopped":true,"cancelled":["job_1"]}`,
		`{"state":"estop","stopped":true,"cancelling":["job_1"]}`,
	} {
		var r mhp.EStopResult
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			t.Fatal(err)
		}
		if len(r.Cancelling) != 1 || r.Cancelling[0] != "job_1" || !r.Stopped || r.State != mhp.StateEStop {
			t.Fatalf("%s decoded as %+v", body, r)
		}
	}
}

// TestAbandonedJobAfterEStopCostsOneReassertion: a Run that ignores the
// estop is abandoned after JobGrace (the job fails, outcome unknown, the
// device latches fault too) without the fault hook running the stop again;
// reset is refused while the Run is still out; when it finally returns the
// stop is re-asserted exactly once, and reset then succeeds. It runs in a
// synctest bubble: JobGrace passes on the bubble's clock.
func TestAbandonedJobAfterEStopCostsOneReassertion(t *testing.T) {
	synctest.Test(t, testAbandonedJobAfterEStopCostsOneReassertion)
}

func testAbandonedJobAfterEStopCostsOneReassertion(t *testing.T) {
	var mu sync.Mutex
	var log []string
	send := func(c string) { mu.Lock(); log = append(log, c); mu.Unlock() }
	snapshot := func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), log...) }
	release := make(chan struct{})
	d, err := binding.New(binding.Config{
		Device:   mhp.DeviceInfo{ID: "stubborn-02", Class: "test"},
		Logger:   slog.New(slog.DiscardHandler),
		JobGrace: 20 * time.Millisecond,
		EStop:    func(context.Context) error { send("stop"); return nil },
		Actions: []binding.Action{{Spec: mhp.Action{Name: "heat", Cancellable: true},
			Run: func(context.Context, *binding.Job) (any, error) {
				<-release // deaf to its context
				send("heat")
				return "hot", nil
			}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	ctx := mhp.WithSession(context.Background(), "a")
	inv, err := d.Invoke(ctx, mhp.InvokeRequest{Name: "heat"})
	if err != nil {
		t.Fatal(err)
	}
	synctest.Wait()
	if j, _ := d.Job(ctx, inv.Job.ID); j.State != mhp.JobRunning {
		t.Fatalf("job %s, want running", j.State)
	}
	if _, err := d.EStop(ctx, "stop"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // JobGrace, on the bubble's clock
	synctest.Wait()
	if j, _ := d.Job(ctx, inv.Job.ID); j.State != mhp.JobFailed || j.Outcome != mhp.OutcomeUnknown {
		t.Fatalf("abandoned job %+v, want failed with outcome unknown", j)
	}
	_, _ = d.Ping(ctx)
	if got := snapshot(); len(got) != 1 {
		t.Fatalf("backend heard %v after the abandonment, want only the one stop (no fault-hook stop)", got)
	}
	_, err = d.Reset(ctx)
	if e, ok := mhp.AsError(err); !ok || e.Code != mhp.CodeDeviceBusy || e.Data["cut_off"] != 1 {
		t.Fatalf("reset while the abandoned Run is out: %v, want DeviceBusy naming the cut-off call", err)
	}
	close(release)
	synctest.Wait()
	if got := snapshot(); len(got) != 3 || got[1] != "heat" || got[2] != "stop" {
		t.Fatalf("backend heard %v, want [stop heat stop]", got)
	}
	if _, err := d.Reset(ctx); err != nil {
		t.Fatalf("reset after the Run returned: %v", err)
	}
	_, _ = d.Ping(ctx)
	if got := snapshot(); len(got) != 3 {
		t.Fatalf("backend heard %v, want exactly one re-assertion", got)
	}
}
