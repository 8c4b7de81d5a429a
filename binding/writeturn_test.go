package binding_test

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/conformance"
)

// turnDevice has one setting whose hook records the values it was called
// with and, for the value 0, blocks until release is closed (ignoring its
// context, as a vendor call that cannot be interrupted does).
type turnDevice struct {
	drv     *binding.Driver
	inHook  chan struct{} // closed when the blocking write is in its hook
	release chan struct{}
	closed  atomic.Bool // the Close hook ran

	mu    sync.Mutex
	order []float64 // hook calls, in order
}

func newTurnDevice(t *testing.T) *turnDevice {
	t.Helper()
	td := &turnDevice{inHook: make(chan struct{}), release: make(chan struct{})}
	drv, err := binding.New(binding.Config{
		Device: mhp.DeviceInfo{ID: "turn-01", Class: "test"},
		Logger: slog.New(slog.DiscardHandler),
		EStop:  func(context.Context) error { return nil },
		Close:  func() error { td.closed.Store(true); return nil },
		Settings: []binding.Setting{{Spec: mhp.Setting{Name: "sp", Type: mhp.TypeNumber},
			Write: func(_ context.Context, v any) (binding.WriteStatus, error) {
				f := v.(float64)
				td.mu.Lock()
				td.order = append(td.order, f)
				td.mu.Unlock()
				if f == 0 {
					close(td.inHook)
					<-td.release
				}
				return binding.Applied, nil
			}}},
		JobGrace: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drv.Close() })
	td.drv = drv
	return td
}

func (td *turnDevice) calls() []float64 {
	td.mu.Lock()
	defer td.mu.Unlock()
	return append([]float64(nil), td.order...)
}

// write starts a write of v in its own goroutine, with ctx wrapped so the
// test sees when the write waits for the request lock.
func (td *turnDevice) write(ctx context.Context, v float64) (*doneSignal, chan error) {
	dctx := newDoneSignal(ctx)
	res := make(chan error, 1)
	go func() {
		_, err := td.drv.Write(dctx, mhp.WriteRequest{Name: "sp", Value: v})
		res <- err
	}()
	return dctx, res
}

// TestRequestLockHandedOnInArrivalOrder: writes queued behind a write at
// the backend get the request lock one at a time, in the order they came;
// one whose caller gives up while it waits is answered DeviceBusy, never
// reaches the backend, and does not hold up the writes behind it.
func TestRequestLockHandedOnInArrivalOrder(t *testing.T) {
	td := newTurnDevice(t)
	_, first := td.write(context.Background(), 0)
	waitClosed(t, td.inHook, "the first write to reach its hook")
	gaveUp, cancel := context.WithCancel(context.Background())
	defer cancel()
	b, bErr := td.write(gaveUp, 1)
	waitClosed(t, b.waiting, "write 1 to queue")
	c, cErr := td.write(context.Background(), 2)
	waitClosed(t, c.waiting, "write 2 to queue")
	d, dErr := td.write(context.Background(), 3)
	waitClosed(t, d.waiting, "write 3 to queue")

	cancel()
	conformance.ExpectCode(t, <-bErr, mhp.CodeDeviceBusy)
	close(td.release)
	for i, ch := range []chan error{first, cErr, dErr} {
		if err := <-ch; err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	got := td.calls()
	if len(got) != 3 || got[0] != 0 || got[1] != 2 || got[2] != 3 {
		t.Fatalf("the backend heard %v, want [0 2 3] (arrival order, the abandoned write 1 never)", got)
	}
}

// TestWriteInEStopRefusedWithoutWaitingForTheLock: in estop a write is
// refused at once, even while a write cut off by the estop still holds the
// request lock at a backend that ignores its context; it does not wait
// for that write to return.
func TestWriteInEStopRefusedWithoutWaitingForTheLock(t *testing.T) {
	td := newTurnDevice(t)
	_, first := td.write(context.Background(), 0)
	waitClosed(t, td.inHook, "the first write to reach its hook")
	if _, err := td.drv.EStop(context.Background(), "test"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := td.drv.Write(ctx, mhp.WriteRequest{Name: "sp", Value: 1.0})
	conformance.ExpectCode(t, err, mhp.CodeEStopActive)
	close(td.release)
	e := conformance.ExpectCode(t, <-first, mhp.CodeEStopActive) // cut off: never ok
	if e.Data[mhp.DataOutcome] != mhp.OutcomeUnknown {
		t.Fatalf("cut-off write: data %v, want outcome unknown", e.Data)
	}
}

// TestCloseWaitsForTheWriteAtTheBackend: Close lets a write at the backend
// return before the Close hook releases the backend (bounded by JobGrace).
func TestCloseWaitsForTheWriteAtTheBackend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		td := newTurnDevice(t)
		_, first := td.write(context.Background(), 0)
		synctest.Wait() // the write is in its hook, blocked
		closed := make(chan error, 1)
		go func() { closed <- td.drv.Close() }()
		synctest.Wait() // Close is blocked too: waiting for the write, or done
		if td.closed.Load() {
			t.Fatal("the Close hook ran while a write was at the backend")
		}
		close(td.release)
		if err := <-first; err != nil {
			t.Fatalf("write: %v", err)
		}
		if err := <-closed; err != nil {
			t.Fatalf("Close: %v", err)
		}
		if !td.closed.Load() {
			t.Fatal("the Close hook did not run")
		}
	})
}

// TestSettingsChangedOnlyForAnOkWrite: a write answered ok is published as
// notifications/settings/changed (name, value, by, applied); a write cut
// off by an estop, answered EStopActive, is not.
func TestSettingsChangedOnlyForAnOkWrite(t *testing.T) {
	td := newTurnDevice(t)
	var mu sync.Mutex
	var changed []map[string]any
	stop := td.drv.Listen(func(n mhp.Notification) {
		if n.Method == mhp.NotifySettingsChanged {
			mu.Lock()
			changed = append(changed, n.Params)
			mu.Unlock()
		}
	})
	defer stop()
	seen := func() []map[string]any {
		mu.Lock()
		defer mu.Unlock()
		return append([]map[string]any(nil), changed...)
	}
	ctx := mhp.WithSession(context.Background(), "s1")
	if _, err := td.drv.Write(ctx, mhp.WriteRequest{Name: "sp", Value: 5.0}); err != nil {
		t.Fatal(err)
	}
	if got := seen(); len(got) != 1 || got[0]["name"] != "sp" || got[0]["value"] != 5.0 || got[0]["by"] != "s1" || got[0]["applied"] != true {
		t.Fatalf("after an ok write: %v, want one settings/changed for sp=5 by s1, applied", got)
	}
	_, first := td.write(ctx, 0)
	waitClosed(t, td.inHook, "the write to reach its hook")
	if _, err := td.drv.EStop(context.Background(), "test"); err != nil {
		t.Fatal(err)
	}
	close(td.release)
	conformance.ExpectCode(t, <-first, mhp.CodeEStopActive)
	if got := seen(); len(got) != 1 {
		t.Fatalf("a write cut off by the estop was published: %v", got)
	}
}
