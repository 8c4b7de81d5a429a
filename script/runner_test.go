package script_test

import (
	"context"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/client"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/script"
)

// hostLab is a device the host reaches through a client connection: writes
// are counted (and can cancel the run), and "hold" runs until cancelled.
type hostLab struct {
	dev     *client.Device
	drv     *binding.Driver
	writes  atomic.Int64
	holding atomic.Bool
	onWrite func(n int64)
}

func newHostLab(t *testing.T) *hostLab {
	t.Helper()
	h := &hostLab{}
	drv, err := binding.New(binding.Config{
		Device: mhp.DeviceInfo{ID: "tc-01"},
		Settings: []binding.Setting{{Spec: mhp.Setting{Name: "sp", Type: mhp.TypeNumber, Limits: mhp.Range(0, 100)},
			Write: func(context.Context, any) (binding.WriteStatus, error) {
				n := h.writes.Add(1)
				if h.onWrite != nil {
					h.onWrite(n)
				}
				return binding.Applied, nil
			}}},
		Actions: []binding.Action{{Spec: mhp.Action{Name: "hold", Duration: mhp.DurationLong},
			Run: func(ctx context.Context, _ *binding.Job) (any, error) {
				h.holding.Store(true)
				<-ctx.Done()
				return nil, ctx.Err()
			}}},
		EStop: func(context.Context) error { return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	h.drv = drv
	h.dev = client.Connect(drv, client.Options{PollEvery: 5 * time.Millisecond})
	t.Cleanup(func() { h.dev.Close(); drv.Close() })
	return h
}

func (h *hostLab) lab() script.Devices { return script.Devices{"tc": h.dev} }

func TestCancelStopsTheRunAtItsNextStep(t *testing.T) {
	h := newHostLab(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h.onWrite = func(n int64) {
		if n == 5 {
			cancel() // the request is cancelled while the script is writing
		}
	}
	res, err := script.Run(ctx, "def main():\n    while True:\n        lab['tc'].write('sp', 1)\nmain()\n", h.lab(), script.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Error, "cancel") {
		t.Fatalf("run did not end with its request: %q", res.Error)
	}
	if n := h.writes.Load(); n > 5 {
		t.Fatalf("%d writes reached the device after the run was cancelled at the 5th", n-5)
	}
}

func TestCancelEndsAnInFlightWait(t *testing.T) {
	h := newHostLab(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *script.Result, 1)
	go func() {
		res, _ := script.Run(ctx, "t = lab['tc']\nt.wait(t.invoke('hold'))\nprint('done')\n", h.lab(), script.Options{})
		done <- res
	}()
	conformance.Eventually(t, "the job running", h.holding.Load)
	cancel()
	select {
	case res := <-done:
		if res.Output != "" || !strings.Contains(res.Error, "cancel") {
			t.Fatalf("after cancel: %+v", res)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a cancelled run kept waiting for its job")
	}
}

func TestRunnerCapsConcurrentRuns(t *testing.T) {
	h := newHostLab(t)
	r := script.NewRunner(script.Options{MaxRuns: 1})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *script.Result, 1)
	go func() {
		res, _ := r.Run(ctx, "sleep(3000)\n", h.lab(), 0)
		done <- res
	}()
	conformance.Eventually(t, "one run in progress", func() bool { return r.Active() == 1 })
	_, err := r.Run(context.Background(), "print('second')\n", h.lab(), 0)
	if me, ok := mhp.AsError(err); !ok || me.Code != mhp.CodeServerError || !strings.Contains(me.Message, "maximum") {
		t.Fatalf("a run over the cap: %v", err)
	}
	cancel()
	select {
	case res := <-done:
		if !strings.Contains(res.Error, "cancel") {
			t.Fatalf("cancelled sleep: %q", res.Error)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a cancelled sleep kept the run going")
	}
	if r.Active() != 0 {
		t.Fatalf("%d runs still counted", r.Active())
	}
	if res, err := r.Run(context.Background(), "print('again')\n", h.lab(), 0); err != nil || res.Output != "again\n" {
		t.Fatalf("run after the slot freed: %+v %v", res, err)
	}
}

func TestRunnerTimeoutBounds(t *testing.T) {
	r := script.NewRunner(script.Options{MaxTimeout: 10 * time.Minute})
	for _, secs := range []float64{1e12, 1e9, 601, -1, math.NaN(), math.Inf(1)} {
		_, err := r.Timeout(secs, "timeout_s")
		me, ok := mhp.AsError(err)
		if !ok || me.Code != mhp.CodeInvalidParams || me.Data["field"] != "timeout_s" || !strings.Contains(me.Message, "10m0s") {
			t.Errorf("timeout_s %v: %v", secs, err)
		}
	}
	if d, err := r.Timeout(30, "timeout_s"); err != nil || d != 30*time.Second {
		t.Fatalf("30 s: %v %v", d, err)
	}
	if d, err := r.Timeout(0, "timeout_s"); err != nil || d != 5*time.Minute {
		t.Fatalf("default: %v %v", d, err)
	}
}

func TestScriptSecondsAreRangeChecked(t *testing.T) {
	h := newHostLab(t)
	for src, want := range map[string]string{
		"t = lab['tc']\nt.wait(t.invoke('hold'), timeout=1e10)\n": "timeout 1e+10 s is above the maximum",
		"lab['tc'].acquire(1e15)\n":                               "ttl 1e+15 s is above the maximum of 86400 s",
		"lab['tc'].acquire(-5)\n":                                 "ttl -5 s must be above 0",
		"sleep(float('nan'))\n":                                   "outside 0..3600",
	} {
		res, _ := script.Run(context.Background(), src, h.lab(), script.Options{})
		if !strings.Contains(res.Error, want) {
			t.Errorf("%q: error %q, want %q", src, res.Error, want)
		}
	}
}

// A lease the host held before the run (mhp_lab acquire) survives a
// script that acquires and ends; a lease the script took is released.
func TestCleanupReleasesOnlyTheRunsLeases(t *testing.T) {
	h := newHostLab(t)
	ctx := context.Background()
	if _, err := h.dev.Acquire(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	res, _ := script.Run(ctx, "lab['tc'].acquire(60)\nlab['tc'].write('sp', 3)\n", h.lab(), script.Options{})
	if res.Error != "" {
		t.Fatal(res.Error)
	}
	if !h.dev.HoldsLease() {
		t.Fatal("the run's clean-up released the host's lease")
	}
	other := mhp.AsSession(h.drv, "someone-else")
	if _, err := other.Acquire(ctx, time.Minute); mhp.CodeOf(err) != mhp.CodeNotLeased {
		t.Fatalf("another session took the host's lease: %v", err)
	}
	if err := h.dev.Release(ctx); err != nil {
		t.Fatal(err)
	}
	res, _ = script.Run(ctx, "lab['tc'].acquire(60)\n", h.lab(), script.Options{})
	if res.Error != "" || h.dev.HoldsLease() {
		t.Fatalf("the run's own lease outlived it: %q leased=%v", res.Error, h.dev.HoldsLease())
	}
}
