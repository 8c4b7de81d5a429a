package script_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/script"
)

func testLab(t *testing.T) (script.Devices, *atomic.Int64) {
	t.Helper()
	reads := new(atomic.Int64)
	drv, err := binding.New(binding.Config{
		Device: mhp.DeviceInfo{ID: "tc-01"},
		Signals: []binding.Signal{{Spec: mhp.Signal{Name: "temp", Type: mhp.TypeNumber},
			Read: func(context.Context) (binding.Sample, error) {
				n := reads.Add(1)
				return binding.Sample{Value: 20.0 + float64(n%3)}, nil
			}}},
		Settings: []binding.Setting{{Spec: mhp.Setting{Name: "sp", Type: mhp.TypeNumber, Limits: mhp.Range(0, 100)},
			Write: func(context.Context, any) (binding.WriteStatus, error) { return binding.Applied, nil }}},
		Actions: []binding.Action{
			{Spec: mhp.Action{Name: "cycle", Params: mhp.Params{{Name: "n", Shape: &mhp.Shape{Type: mhp.TypeInteger}}}},
				Run: func(ctx context.Context, j *binding.Job) (any, error) {
					return map[string]any{"cycles_completed": j.Params()["n"]}, nil
				}},
			{Spec: mhp.Action{Name: "open_lid", Approval: mhp.ApprovalConfirm},
				Run: func(context.Context, *binding.Job) (any, error) { return nil, nil }},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drv.Close() })
	return script.Devices{"tc": unwrapper{mhp.AsSession(drv, "script-test"), drv}}, reads
}

func TestFiveHundredReadsOneLine(t *testing.T) {
	lab, reads := testLab(t)
	src := `
t = lab["tc"]
t.acquire(30)
j = t.wait(t.invoke("cycle", n=5), timeout=10)
rs = [t.read("temp") for _ in range(500)]
print("cycles", j["result"]["cycles_completed"], "mean", sum(rs) / len(rs))
`
	res, err := script.Run(context.Background(), src, lab, script.Options{PollInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Error != "" {
		t.Fatalf("script failed: %s", res.Error)
	}
	if reads.Load() != 500 {
		t.Fatalf("%d reads reached the device, want 500", reads.Load())
	}
	lines := strings.Split(strings.TrimSpace(res.Output), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "cycles 5 mean 21") {
		t.Fatalf("output %q", res.Output)
	}
	// The script's lease ended with the run: another session can take it.
	other := mhp.AsSession(lab["tc"].(interface{ Unwrap() mhp.Device }).Unwrap(), "someone-else")
	if _, err := other.Acquire(context.Background(), time.Minute); err != nil {
		t.Fatalf("the script's lease outlived the run: %v", err)
	}
}

func TestBudgetsStopRunawayScripts(t *testing.T) {
	lab, _ := testLab(t)
	res, _ := script.Run(context.Background(), "while True:\n    pass\n", lab, script.Options{MaxSteps: 100_000})
	if !strings.Contains(res.Error, "too many steps") {
		t.Fatalf("step budget: %q", res.Error)
	}
	res, _ = script.Run(context.Background(), "while True:\n    lab['tc'].read('temp')\n", lab,
		script.Options{Timeout: 50 * time.Millisecond, MaxSteps: 1 << 62})
	if res.Error == "" {
		t.Fatal("time budget did not stop the script")
	}
}

func TestRefusalsAndCaps(t *testing.T) {
	lab, _ := testLab(t)
	res, _ := script.Run(context.Background(), "lab['tc'].write('sp', 500)\nprint('unreached')\n", lab, script.Options{})
	if res.MHP == nil || res.MHP.Code != mhp.CodeLimitViolation || res.Output != "" {
		t.Fatalf("refusal: %+v", res)
	}
	res, _ = script.Run(context.Background(), "lab['tc'].invoke('open_lid', approved=True)\n", lab, script.Options{})
	if res.MHP == nil || res.MHP.Code != mhp.CodeApprovalRequired {
		t.Fatalf("a script approved a confirm action: %+v", res)
	}
	res, _ = script.Run(context.Background(), "for i in range(1000):\n    print('line', i)\n", lab, script.Options{MaxOutput: 100})
	if !res.Truncated || len(res.Output) > 100 {
		t.Fatalf("output cap: %d bytes, truncated %v", len(res.Output), res.Truncated)
	}
	res, _ = script.Run(context.Background(), "load('x.star', 'y')\n", lab, script.Options{})
	if res.Error == "" {
		t.Fatal("load was allowed")
	}
}

// unwrapper lets a test reach the driver behind a session view.
type unwrapper struct {
	mhp.Device
	drv mhp.Device
}

func (u unwrapper) Unwrap() mhp.Device { return u.drv }
