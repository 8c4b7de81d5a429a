package mqtt_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/mqtt"
)

// heldLog is a slog handler that holds the first record with message msg
// in its Handle until release: it holds the goroutine that logs it, as a
// loaded machine deschedules it. Other records are discarded.
type heldLog struct {
	msg     string
	held    chan struct{} // closed when the record is being held
	free    chan struct{} // closed by release
	once    sync.Once     // the first matching record only
	relOnce sync.Once
}

func newHeldLog(msg string) *heldLog {
	return &heldLog{msg: msg, held: make(chan struct{}), free: make(chan struct{})}
}

func (h *heldLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *heldLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *heldLog) WithGroup(string) slog.Handler            { return h }
func (h *heldLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != h.msg {
		return nil
	}
	first := false
	h.once.Do(func() { first = true })
	if first {
		close(h.held)
		<-h.free
	}
	return nil
}

func (h *heldLog) release() { h.relOnce.Do(func() { close(h.free) }) }

// TestLateConnectionLostIsNoNewDrop: paho reports a lost connection on one
// goroutine and reconnects on another; under load the report came after
// the new connection was up (seen in the logs as "connected" then
// "connection lost" of the one drop). The late report must not read as a
// drop of the new connection: a job started on it runs to its end and the
// device does not fault. Before the fix the job failed "broker connection
// lost mid-job" and the device faulted: the conformance run's link drop
// with no drop behind it.
func TestLateConnectionLostIsNoNewDrop(t *testing.T) {
	gate := newHeldLog("mqtt: connection lost")
	t.Cleanup(gate.release)
	env := mochiEnv(t)
	f := startFixtureLog(t, env, conformance.Options{}, nil, slog.New(gate))
	pc, ok := f.a.Client().(*mqtt.PahoClient)
	if !ok {
		t.Fatalf("the fixture's client is a %T, want *mqtt.PahoClient", f.a.Client())
	}
	before := pc.State().Conn
	env.dropAdapter(f.a.ClientID())
	select {
	case <-gate.held:
	case <-time.After(10 * time.Second):
		t.Fatal("paho never reported the dropped connection")
	}
	conformance.EventuallyWithin(t, "the reconnect, with the loss report still held", 10*time.Second, func() bool {
		st := pc.State()
		return st.Up && st.Conn > before
	})
	conformance.EventuallyWithin(t, "availability online on the new connection", 5*time.Second, f.a.OnlineNow)
	f.in.Script(conformance.ActionRun, conformance.Block)
	j := invokeRun(t, f.drv)
	waitJob(t, f.drv, j.ID, "running", func(j *mhp.Job) bool { return j.Progress == 0.5 })

	gate.release() // the late report of the old connection's loss
	conformance.EventuallyWithin(t, "the late report handled", 5*time.Second, func() bool { return pc.LastError() != nil })
	f.in.Release(conformance.ActionRun)
	got := waitJob(t, f.drv, j.ID, "ended", func(j *mhp.Job) bool { return j.State.Terminal() })
	if got.State != mhp.JobDone {
		t.Fatalf("job %s/%s (%v) after a late loss report of the old connection, want done", got.State, got.Outcome, got.Error)
	}
	if s := state(t, f.drv); s != mhp.StateIdle {
		t.Fatalf("device %s after a late loss report of the old connection, want idle", s)
	}
	if st := pc.State(); !st.Up {
		t.Fatal("the link reads down after a late loss report of the old connection")
	}
}
