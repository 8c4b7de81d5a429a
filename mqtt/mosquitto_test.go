package mqtt_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/conformance"
)

// mosquittoAddr returns the real broker of the integration tests, or skips.
// .ci/run installs mosquitto from Debian, starts it on 127.0.0.1 and sets
// MHP_PEER_MOSQUITTO (host:port).
func mosquittoAddr(t testing.TB) string {
	t.Helper()
	return conformance.Peer(t, "MOSQUITTO", "host:port of a running mosquitto (.ci/run installs and starts one)")
}

func mosquittoEnv(t testing.TB) brokerEnv {
	return proxiedEnv(t, "mosquitto", mosquittoAddr(t))
}

// TestMosquittoConformance runs the conformance suite through the adapter
// against the fake device, both on a real mosquitto.
func TestMosquittoConformance(t *testing.T) {
	mosquittoAddr(t)
	conformance.Run(t, harness(mosquittoEnv))
}

func TestMosquittoLastWillOpensInterlock(t *testing.T) {
	testLastWill(t, mosquittoEnv(t))
}

func TestMosquittoProgressThenTerminal(t *testing.T) {
	f := startFixture(t, mosquittoEnv(t), conformance.Options{}, nil)
	var mu sync.Mutex
	var order []string
	stop := f.drv.Listen(func(n mhp.Notification) {
		if n.Method == mhp.NotifyJobsProgress || n.Method == mhp.NotifyJobsFinished {
			mu.Lock()
			order = append(order, n.Method)
			mu.Unlock()
		}
	})
	defer stop()
	f.in.Script(conformance.ActionRun, conformance.Block)
	j := invokeRun(t, f.drv)
	waitJob(t, f.drv, j.ID, "progress", func(j *mhp.Job) bool { return j.Progress == 0.5 })
	if got := jobNow(t, f.drv, j.ID); got.State != mhp.JobRunning {
		t.Fatalf("a progress message ended the job: %s", got.State)
	}
	f.in.Release(conformance.ActionRun)
	got := waitJob(t, f.drv, j.ID, "done", func(j *mhp.Job) bool { return j.State.Terminal() })
	if got.State != mhp.JobDone {
		t.Fatalf("job %s, want done", got.State)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(order) < 2 || order[0] != mhp.NotifyJobsProgress || order[len(order)-1] != mhp.NotifyJobsFinished {
		t.Fatalf("notifications %v: want progress before finished", order)
	}
}

func TestMosquittoLostConnectionMidJobFaults(t *testing.T) {
	env := mosquittoEnv(t)
	f := startFixture(t, env, conformance.Options{}, nil)
	f.in.Script(conformance.ActionRun, conformance.Block)
	j := invokeRun(t, f.drv)
	waitJob(t, f.drv, j.ID, "running", func(j *mhp.Job) bool { return j.Progress == 0.5 })
	env.dropAdapter(f.a.ClientID())
	got := waitJob(t, f.drv, j.ID, "failed", func(j *mhp.Job) bool { return j.State.Terminal() })
	if got.State != mhp.JobFailed || got.Outcome != mhp.OutcomeUnknown {
		t.Fatalf("job %s/%s, want failed/unknown", got.State, got.Outcome)
	}
	if s := state(t, f.drv); s != mhp.StateFault {
		t.Fatalf("device %s, want fault", s)
	}
	// after the reconnect a verified reset brings it back
	f.in.Release(conformance.ActionRun)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conformance.EventuallyWithin(t, "reset after reconnect", 10*time.Second, func() bool {
		r, err := f.drv.Reset(ctx)
		return err == nil && r.State == mhp.StateIdle
	})
}

func invokeRun(t *testing.T, d mhp.Device) *mhp.Job {
	t.Helper()
	r, err := d.Invoke(context.Background(), mhp.InvokeRequest{Name: conformance.ActionRun, Params: map[string]any{"duration_s": 1.0}})
	if err != nil {
		t.Fatalf("invoke run: %v", err)
	}
	return r.Job
}
