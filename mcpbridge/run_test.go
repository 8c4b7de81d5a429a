package mcpbridge_test

import (
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/client"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/mcpbridge"
	"github.com/openmhp/mhp-go/script"
)

// countingBridge serves one device whose reads are counted, with at most
// one script run at a time.
func countingBridge(t *testing.T, onRead func(n int64)) (*lab, *atomic.Int64) {
	t.Helper()
	reads := new(atomic.Int64)
	drv, err := binding.New(binding.Config{
		Device: mhp.DeviceInfo{ID: "d", Tags: []string{"simulated"}}, // the default policy lets scripts drive simulated devices only
		Signals: []binding.Signal{{Spec: mhp.Signal{Name: "n", Type: mhp.TypeNumber},
			Read: func(context.Context) (binding.Sample, error) {
				n := reads.Add(1)
				onRead(n)
				return binding.Sample{Value: float64(n)}, nil
			}}},
		EStop: func(context.Context) error { return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drv.Close() })
	b, err := mcpbridge.New(mcpbridge.Config{
		Finder: &mcpbridge.Named{Targets: map[string]string{"d": "mem:d"}, Simulated: map[string]bool{"d": true}},
		Dial: func(context.Context, string) (*client.Device, error) {
			return client.Connect(drv, client.Options{}), nil
		},
		Script: script.Options{MaxRuns: 1, MaxTimeout: 20 * time.Minute},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return &lab{bridge: b}, reads
}

// A model's request cancelled (notifications/cancelled) ends its run: the
// device sees no more than the read in flight, and the run's slot frees.
func TestRunEndsWithItsRequest(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var cancelledAt atomic.Int64
	started := make(chan struct{})
	l, reads := countingBridge(t, func(n int64) {
		if n == 1 {
			close(started)
		}
	})
	cs := connect(t, l, nil)
	loop := "def main():\n    while True:\n        lab['d'].read('n')\nmain()\n"
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mhp_run", Arguments: map[string]any{"script": loop}})
		done <- err
	}()
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("the run ended before its first read: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the run made no read within 30 s")
	}
	// The cap: a second run is refused while the first goes on.
	res, body := call(t, cs, "mhp_run", map[string]any{"script": "print('two')"})
	if !res.IsError || errCode(body) != float64(mhp.CodeServerError) || !strings.Contains(jsonString(body), "maximum") {
		t.Fatalf("a run over the cap: %v", body)
	}
	// Now cancel the first call: its run must stop.
	cancelledAt.Store(reads.Load())
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the cancelled call returned a result")
	}
	// The slot frees once the run has stopped.
	conformance.Eventually(t, "the cancelled run ended", func() bool {
		res, _ := call(t, cs, "mhp_run", map[string]any{"script": "print('three')"})
		return !res.IsError
	})
	// Nothing more reaches the device once the run has ended (the SDK
	// delivers the cancellation asynchronously, so a few reads may land
	// between the client's cancel and the server's; script.Run's own test
	// pins "at the next step").
	after := reads.Load()
	call(t, cs, "mhp_run", map[string]any{"script": "print('four')"})
	if n := reads.Load(); n != after {
		t.Fatalf("%d reads reached the device after the cancelled run ended", n-after)
	}
	t.Logf("reads between the client's cancel and the run's end: %d", after-cancelledAt.Load())
}

func TestRunTimeoutIsBounded(t *testing.T) {
	l, _ := countingBridge(t, func(int64) {})
	cs := connect(t, l, nil)
	for _, secs := range []float64{1e12, 1e9, 1201, -3} {
		res, body := call(t, cs, "mhp_run", map[string]any{"script": "print(1)", "timeout_s": secs})
		// The schema refuses past 3600 s and below 1 s, the runner past its own
		// maximum (20m0s here): each names its bound.
		if !res.IsError || errCode(body) != float64(mhp.CodeInvalidParams) || !strings.Contains(jsonString(body), "timeout_s") ||
			!(strings.Contains(jsonString(body), "20m0s") || strings.Contains(jsonString(body), "maximum 3600") || strings.Contains(jsonString(body), "minimum 1")) {
			t.Errorf("timeout_s %g: %v", secs, body)
		}
	}
	if res, body := call(t, cs, "mhp_run", map[string]any{"script": "print(1)", "timeout_s": 30}); res.IsError {
		t.Fatalf("timeout_s 30: %v", body)
	}
}

// mhp_lab acquire, then a script that acquires and ends: the bridge's lease stays.
func TestRunKeepsTheBridgesLease(t *testing.T) {
	l, _ := countingBridge(t, func(int64) {})
	cs := connect(t, l, nil)
	if res, body := call(t, cs, "mhp_lab", map[string]any{"op": "acquire", "device": "d"}); res.IsError {
		t.Fatalf("acquire: %v", body)
	}
	if res, body := call(t, cs, "mhp_run", map[string]any{"script": "lab['d'].acquire(60)\nprint(lab['d'].read('n'))"}); res.IsError {
		t.Fatalf("run: %v", body)
	}
	_, body := call(t, cs, "mhp_lab", map[string]any{"op": "list"})
	if !strings.Contains(jsonString(body), `"leased":true`) {
		t.Fatalf("the run released the bridge's lease: %v", body)
	}
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// Three scripts of "x" * 1e9 took mhp-mcp to 8.8 GB; each is now refused at
// once by the run's memory budget and the heap stays near its baseline.
func TestRunMemoryBudget(t *testing.T) {
	l, _ := countingBridge(t, func(int64) {})
	cs := connect(t, l, nil)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := 0; i < 3; i++ {
		res, body := call(t, cs, "mhp_run", map[string]any{"script": `s = "x" * 1000000000` + "\nprint(len(s))"})
		if !res.IsError || !strings.Contains(jsonString(body), "memory budget of 64.0 MiB per run exceeded") {
			t.Fatalf("run %d: %v", i, body)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 64<<20 {
		t.Fatalf("heap grew %d MiB over three refused runs", grew>>20)
	}
	if total := after.TotalAlloc - before.TotalAlloc; total > 256<<20 {
		t.Fatalf("%d MiB allocated for three refused runs", total>>20)
	}
}
