package binding_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/clock"
)

// TestBackendLink: while the adapter reports its link down, nothing reaches
// the backend (reads, writes, invokes and reset verification are refused
// before their hooks run), estop still latches, and the device works again
// once the link is back, without a fault.
func TestBackendLink(t *testing.T) {
	var reads, writes, runs atomic.Int32
	clk := clock.NewManual(time.Unix(1_800_000_000, 0))
	drv, err := binding.New(binding.Config{
		Device: mhp.DeviceInfo{ID: "link-01", Class: "test"},
		Clock:  clk,
		Signals: []binding.Signal{{Spec: mhp.Signal{Name: "t", Type: mhp.TypeNumber},
			Read: func(context.Context) (binding.Sample, error) { reads.Add(1); return binding.Sample{Value: 1.0}, nil }}},
		Settings: []binding.Setting{{Spec: mhp.Setting{Name: "sp", Type: mhp.TypeNumber, Limits: mhp.Range(0, 10)},
			Write: func(context.Context, any) (binding.WriteStatus, error) { writes.Add(1); return binding.Applied, nil }}},
		Actions: []binding.Action{{Spec: mhp.Action{Name: "go"},
			Run: func(context.Context, *binding.Job) (any, error) { runs.Add(1); return nil, nil }}},
		EStop: func(context.Context) error { return errors.New("link down") },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	ctx := mhp.WithSession(context.Background(), "s1")

	p, _ := drv.Ping(ctx)
	if p.Backend != nil {
		t.Fatalf("ping carries backend %+v before the adapter reported a link", p.Backend)
	}
	drv.SetLink(false, errors.New("dial tcp 127.0.0.1:4840: connection refused"))
	p, _ = drv.Ping(ctx)
	if p.Backend == nil || p.Backend.Connected || p.Backend.Error == "" || p.Backend.Since == 0 {
		t.Fatalf("ping backend = %+v, want connected:false with since and error", p.Backend)
	}
	desc, err := drv.Describe(ctx, mhp.DescribeRequest{Detail: mhp.DetailCard})
	if err != nil || desc.Backend == nil || desc.Backend.Connected {
		t.Fatalf("describe backend = %+v (%v), want connected:false", desc.Backend, err)
	}
	r, err := drv.Read(ctx, nil)
	if err != nil || r.Values["t"] != nil || r.Unavailable["t"] == "" {
		t.Fatalf("read while down = %+v, %v; want t null and unavailable", r, err)
	}
	for _, call := range []struct {
		name string
		do   func() error
	}{
		{"write", func() error { _, err := drv.Write(ctx, mhp.WriteRequest{Name: "sp", Value: 5.0}); return err }},
		{"dry-run write", func() error {
			_, err := drv.Write(ctx, mhp.WriteRequest{Name: "sp", Value: 5.0, DryRun: true})
			return err
		}},
		{"invoke", func() error { _, err := drv.Invoke(ctx, mhp.InvokeRequest{Name: "go"}); return err }},
	} {
		err := call.do()
		e, ok := mhp.AsError(err)
		if !ok || e.Code != mhp.CodeServerError || e.Data["outcome"] != mhp.OutcomeNotStarted || e.Data["gate"] != "state" {
			t.Fatalf("%s while the link is down: %v, want ServerError at the state gate with outcome not_started", call.name, err)
		}
	}
	if reads.Load()+writes.Load()+runs.Load() != 0 {
		t.Fatalf("hooks ran while the link was down: reads %d writes %d runs %d", reads.Load(), writes.Load(), runs.Load())
	}
	if st := drv.State(); st != mhp.StateIdle {
		t.Fatalf("state %s after refusals while the link is down, want idle (no fault)", st)
	}

	drv.SetLink(true, nil)
	if _, err := drv.Write(ctx, mhp.WriteRequest{Name: "sp", Value: 5.0}); err != nil {
		t.Fatalf("write after the link came back: %v", err)
	}
	p, _ = drv.Ping(ctx)
	if p.Backend == nil || !p.Backend.Connected || p.Backend.Error != "" {
		t.Fatalf("ping backend = %+v after the link came back, want connected:true", p.Backend)
	}

	// Estop always latches; reset cannot verify against a backend that is down.
	drv.SetLink(false, errors.New("EOF"))
	res, err := drv.EStop(ctx, "test")
	if err != nil || res.State != mhp.StateEStop {
		t.Fatalf("estop while down: %+v, %v", res, err)
	}
	if _, err := drv.Reset(ctx); err == nil {
		t.Fatal("reset verified while the backend link is down")
	}
	drv.SetLink(true, nil)
	if _, err := drv.Reset(ctx); err != nil {
		t.Fatalf("reset once the link is back: %v", err)
	}
}

// TestBackendLinkNotifies: with a listener attached, each link change is
// published once as notifications/backend/link (and SetLink returns with
// the driver unlocked: the next call does not deadlock or double-unlock).
func TestBackendLinkNotifies(t *testing.T) {
	drv, err := binding.New(binding.Config{Device: mhp.DeviceInfo{ID: "link-02", Class: "test"},
		Signals: []binding.Signal{{Spec: mhp.Signal{Name: "t", Type: mhp.TypeNumber},
			Read: func(context.Context) (binding.Sample, error) { return binding.Sample{Value: 1.0}, nil }}}})
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	got := make(chan mhp.Notification, 8)
	drv.Listen(func(n mhp.Notification) {
		if n.Method == mhp.NotifyBackendLink {
			got <- n
		}
	})
	drv.SetLink(false, errors.New("refused"))
	drv.SetLink(false, errors.New("refused"))
	drv.SetLink(true, nil)
	for i, want := range []bool{false, true} {
		n := <-got
		b, _ := n.Params["backend"].(*mhp.BackendLink)
		if b == nil || b.Connected != want {
			t.Fatalf("notification %d: %+v, want connected %v", i, n.Params, want)
		}
	}
	select {
	case n := <-got:
		t.Fatalf("an unchanged link was published again: %+v", n.Params)
	default:
	}
	if l := drv.Link(); l == nil || !l.Connected {
		t.Fatalf("link %+v", l)
	}
}
