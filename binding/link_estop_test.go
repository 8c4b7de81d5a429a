package binding_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/conformance"
)

// A stop that failed because the backend link was down is sent again when
// the link comes back (the first word the backend hears on it), and a
// notifications/safety/estop says stopped:true once it took; a stop that
// succeeded, or a device out of estop, sends nothing at a link change.
func TestStopSentAgainWhenTheLinkComesBack(t *testing.T) {
	var down atomic.Bool
	var stops atomic.Int32
	drv, err := binding.New(binding.Config{
		Device: mhp.DeviceInfo{ID: "relink-01", Class: "test"},
		Settings: []binding.Setting{{Spec: mhp.Setting{Name: "sp", Type: mhp.TypeNumber, Limits: mhp.Range(0, 10)},
			Write: func(context.Context, any) (binding.WriteStatus, error) { return binding.Applied, nil }}},
		EStop: func(context.Context) error {
			stops.Add(1)
			if down.Load() {
				return errors.New("publish estop: not connected")
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	var mu sync.Mutex
	var confirmed []map[string]any
	drv.Listen(func(n mhp.Notification) {
		if n.Method != mhp.NotifySafetyEStop {
			return
		}
		if p := n.Params; p != nil && p["stopped"] == true {
			mu.Lock()
			confirmed = append(confirmed, p)
			mu.Unlock()
		}
	})
	ctx := mhp.WithSession(context.Background(), "s1")

	// A link flap with the device idle sends no stop.
	drv.SetLink(false, errors.New("broker gone"))
	drv.SetLink(true, nil)
	if n := stops.Load(); n != 0 {
		t.Fatalf("a link flap outside estop sent %d stop(s)", n)
	}

	// The stop fails into the dropped link: stopped:false, and nothing more
	// while the link stays down.
	down.Store(true)
	drv.SetLink(false, errors.New("broker gone"))
	r, err := drv.EStop(ctx, "stop while the link is down")
	if err != nil || r.Stopped || r.State != mhp.StateEStop {
		t.Fatalf("estop into a down link = %+v, %v; want stopped:false in estop", r, err)
	}
	if n := stops.Load(); n != 1 {
		t.Fatalf("%d stop commands, want 1", n)
	}
	// The link comes back: the stop goes out again, and it is confirmed.
	down.Store(false)
	drv.SetLink(true, nil)
	conformance.EventuallyWithin(t, "the stop sent again on the new link", 10*time.Second, func() bool { return stops.Load() == 2 })
	conformance.EventuallyWithin(t, "the estop notification saying stopped", 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(confirmed) == 1
	})
	mu.Lock()
	if by := confirmed[0]["by"]; by != "driver" {
		t.Errorf("the confirming notification names %v, want the driver", by)
	}
	mu.Unlock()
	if s := drv.State(); s != mhp.StateEStop {
		t.Fatalf("state %s after the stop was sent again, want estop (only a reset leaves it)", s)
	}

	// Confirmed now: another flap sends nothing.
	drv.SetLink(false, errors.New("broker gone"))
	drv.SetLink(true, nil)
	if _, err := drv.Reset(ctx); err != nil {
		t.Fatalf("reset: %v", err)
	}
	if n := stops.Load(); n != 2 {
		t.Fatalf("%d stop commands after a flap with the stop confirmed, want 2", n)
	}

	// A stop re-sent into a link that dropped again stays owed: the next
	// link up sends it once more.
	down.Store(true)
	drv.SetLink(false, errors.New("broker gone"))
	if r, _ := drv.EStop(ctx, "again"); r.Stopped {
		t.Fatal("estop into a down link answered stopped")
	}
	drv.SetLink(true, nil) // up, but the stop fails again
	conformance.EventuallyWithin(t, "the stop sent again", 10*time.Second, func() bool { return stops.Load() == 4 })
	down.Store(false)
	drv.SetLink(false, errors.New("broker gone"))
	drv.SetLink(true, nil)
	conformance.EventuallyWithin(t, "the stop sent once more on the next link", 10*time.Second, func() bool { return stops.Load() == 5 })
	conformance.EventuallyWithin(t, "the second confirmation", 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(confirmed) == 2
	})
}
