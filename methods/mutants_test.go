package methods_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/methods"
)

// TestSavedMethodUnchangedByItsUse: what a caller does with a method it got
// (an invoke's override merged into its params, a change to a nested step)
// never rewrites the saved method: the next Get and the next plain invoke
// see it as saved. Catches Store.Get handing out the stored params map, or a
// shallow copy of it (issue 29, item 14).
func TestSavedMethodUnchangedByItsUse(t *testing.T) {
	var mu sync.Mutex
	var runs []map[string]any
	store, err := methods.Open(copyPkg(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	dev := methods.Wrap(thermo(t, &runs, &mu), store)
	ctx := mhp.WithSession(context.Background(), "agent-1")
	saved := func() (cycles, firstTemp float64) {
		t.Helper()
		m, err := store.Get("pcr-30")
		if err != nil {
			t.Fatal(err)
		}
		cycles, _ = mhp.Number(m.Params["cycles"])
		firstTemp, _ = mhp.Number(m.Params["steps"].([]any)[0].(map[string]any)["temp"])
		return cycles, firstTemp
	}
	if c, temp := saved(); c != 30 || temp != 95 {
		t.Fatalf("pcr-30 as loaded: cycles %v, first step %v degC; want 30 and 95", c, temp)
	}
	// An invoke overriding cycles.
	res, err := dev.Invoke(ctx, mhp.InvokeRequest{Method: "pcr-30", Params: map[string]any{"cycles": 2.0}})
	if err != nil {
		t.Fatal(err)
	}
	conformance.WaitJob(t, dev, res.Job.ID, 10*time.Second, nil)
	if c, _ := saved(); c != 30 {
		t.Fatalf("pcr-30 after an invoke overriding cycles with 2: cycles %v, want 30 as saved", c)
	}
	// A caller editing what Get returned, nested values included.
	m, err := store.Get("pcr-30")
	if err != nil {
		t.Fatal(err)
	}
	m.Params["cycles"] = 99.0
	m.Params["steps"].([]any)[0].(map[string]any)["temp"] = 4.0
	got, err := dev.Get(ctx, methods.GetRequest{Name: "pcr-30"})
	if err != nil {
		t.Fatal(err)
	}
	got.Params["steps"].([]any)[0].(map[string]any)["temp"] = 5.0
	if c, temp := saved(); c != 30 || temp != 95 {
		t.Fatalf("pcr-30 after an override and edits of its copies: cycles %v, first step %v degC; want 30 and 95 as saved", c, temp)
	}
	// The next plain invoke runs the method as saved.
	res, err = dev.Invoke(ctx, mhp.InvokeRequest{Method: "pcr-30"})
	if err != nil {
		t.Fatal(err)
	}
	conformance.WaitJob(t, dev, res.Job.ID, 10*time.Second, nil)
	mu.Lock()
	defer mu.Unlock()
	if len(runs) != 2 {
		t.Fatalf("%d runs, want 2", len(runs))
	}
	if c, _ := mhp.Number(runs[1]["cycles"]); c != 30 {
		t.Fatalf("the plain invoke after an override ran %v cycles, want the saved 30", runs[1]["cycles"])
	}
}
