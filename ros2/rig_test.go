package ros2

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/clock"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/ros2/rosbridgetest"
)

// rig is one adapter driver against one fake rosbridge server.
type rig struct {
	t   testing.TB
	srv *rosbridgetest.Server
	a   *adapter
	d   *binding.Driver
	dev mhp.Device
}

func baseConfig() Config {
	return Config{
		Common:    adapters.Common{Adapter: Kind, Device: mhp.DeviceInfo{ID: "arm-01", Class: "robot_arm"}},
		Reconnect: Reconnect{InitialS: 0.01, MaxS: 0.1},
	}
}

// newRig starts a driver for cfg (URL filled in) against srv. clk may be nil.
func newRig(t testing.TB, srv *rosbridgetest.Server, cfg Config, clk clock.Clock) *rig {
	t.Helper()
	cfg.URL = srv.URL()
	a, d, err := build(cfg, Options{Options: adapters.Options{Clock: clk, Logger: quiet(), Refine: jobGrace(3 * time.Second)}})
	if err != nil {
		t.Fatal(err)
	}
	start(t, d)
	return &rig{t: t, srv: srv, a: a, d: d, dev: mhp.AsSession(d, "test")}
}

// start starts d within the test's deadline and closes it at cleanup.
func start(t testing.TB, d *binding.Driver) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := d.Start(ctx); err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { d.Close() })
}

func (r *rig) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	r.t.Cleanup(cancel)
	return ctx
}

func (r *rig) invoke(name string, params map[string]any) string {
	r.t.Helper()
	res, err := r.dev.Invoke(r.ctx(), mhp.InvokeRequest{Name: name, Params: params})
	if err != nil {
		r.t.Fatalf("invoke %s: %v", name, err)
	}
	return res.Job.ID
}

// jobGrace is a Refine that sets the driver's JobGrace.
func jobGrace(d time.Duration) func(*binding.Config) error {
	return func(bc *binding.Config) error {
		bc.JobGrace = d
		return nil
	}
}

// waitJob polls the job until it is terminal.
func (r *rig) waitJob(id string) *mhp.Job {
	r.t.Helper()
	return conformance.WaitJob(r.t, r.dev, id, wait, nil)
}

func (r *rig) state() mhp.DeviceState {
	p, err := r.dev.Ping(r.ctx())
	if err != nil {
		r.t.Fatal(err)
	}
	return p.State
}

func (r *rig) read(name string) (any, string) {
	r.t.Helper()
	res, err := r.dev.Read(r.ctx(), []string{name})
	if err != nil {
		r.t.Fatalf("read %s: %v", name, err)
	}
	return res.Values[name], res.Unavailable[name]
}

// wantJob checks a terminal job's state, outcome and error text.
func wantJob(t *testing.T, j *mhp.Job, state mhp.JobState, outcome, errText string) {
	t.Helper()
	if j.State != state || j.Outcome != outcome {
		t.Fatalf("job ended %s/%q (%v), want %s/%q", j.State, j.Outcome, j.Error, state, outcome)
	}
	if errText != "" && (j.Error == nil || !strings.Contains(j.Error.Message, errText)) {
		t.Fatalf("job error %v does not mention %q", j.Error, errText)
	}
}

func msgField(t *testing.T, raw json.RawMessage, field string) any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("message %s: %v", raw, err)
	}
	return m[field]
}
