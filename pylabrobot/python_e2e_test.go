package pylabrobot_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/pylabrobot"
)

// startPythonBridge runs the real plrbridge.py on the stub machine; the test
// is skipped, saying how to run it, when python3 is not on PATH (it needs
// nothing else: the stub machine stands in for PyLabRobot).
func startPythonBridge(t testing.TB) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found on PATH: to run this end-to-end test of plrbridge.py, install python3 (e.g. apt-get install python3) " +
			"and run go test -run TestPythonBridgeEndToEnd ./pylabrobot/ (the Go fakes of package plrtest cover the adapter meanwhile)")
	}
	script, _ := filepath.Abs(filepath.Join("plrbridge", "plrbridge.py"))
	factory, _ := filepath.Abs(filepath.Join("testdata", "stub_machine.py"))
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, py, script, "--factory", factory+":make", "--port", "0", "--host", "127.0.0.1")
	cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Dir(script))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start plrbridge.py: %v", err)
	}
	t.Cleanup(func() {
		cancel() // kills the process we started
		_ = cmd.Wait()
	})
	urls := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`on (http://127\.0\.0\.1:\d+)`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				urls <- m[1]
			}
		}
	}()
	select {
	case u := <-urls:
		return u
	case <-time.After(15 * time.Second):
		t.Fatal("plrbridge.py did not report its address within 15s")
	}
	return ""
}

// TestPythonBridgeEndToEnd drives the real plrbridge.py through the
// adapter twice: long-polling (with a poll interval of an hour, so every
// end, progress report, cancel, write and the reset's setup can only reach
// the job through the bridge's long-poll), and polling every 10ms as
// against an older bridge (long_poll: false).
func TestPythonBridgeEndToEnd(t *testing.T) {
	for _, c := range []struct {
		name     string
		longPoll bool
		interval time.Duration
	}{
		{"long_poll", true, time.Hour},
		{"polling", false, 10 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			url := startPythonBridge(t)
			cfg := fastConfig(pylabrobot.ModeBridge, url)
			cfg.PollInterval = c.interval
			cfg.LongPoll = &c.longPoll
			testPythonBridge(t, cfg)
		})
	}
}

func testPythonBridge(t *testing.T, cfg pylabrobot.Config) {
	cfg.Settings = map[string]pylabrobot.SettingMapping{"target_temperature": {Method: "set_temperature", Type: mhp.TypeNumber, Unit: "degC", Limits: mhp.Range(4, 95)}}
	f := start(t, cfg)
	ctx := context.Background()
	desc := f.drv.Descriptor()
	add, ok := desc.Action("add")
	if !ok {
		t.Fatalf("actions %v", desc.Actions)
	}
	if a, _ := add.Params.Get("a"); a.Type != mhp.TypeInteger || a.Optional {
		t.Errorf("add.a = %+v", a)
	}
	if b, _ := add.Params.Get("b"); !b.Optional || b.Default != 2.0 {
		t.Errorf("add.b = %+v", b)
	}

	id := f.invoke(t, "add", map[string]any{"a": 40})
	if j := f.finish(t, id); j.State != mhp.JobDone || j.Result != 42.0 {
		t.Fatalf("add: %+v %v", j, j.Error)
	}
	id = f.invoke(t, "explode", nil)
	if j := f.finish(t, id); j.State != mhp.JobFailed || j.Outcome != mhp.OutcomeFailed {
		t.Fatalf("explode: %+v", j)
	}

	id = f.invoke(t, "hold", map[string]any{"seconds": 30})
	f.waitJob(t, id, "progress 0.5", func(j *mhp.Job) bool { return j.Progress == 0.5 && j.Extra["message"] == "holding" })
	if _, err := f.dev.CancelJob(ctx, id); err != nil {
		t.Fatal(err)
	}
	if j := f.finish(t, id); j.State != mhp.JobCancelled {
		t.Fatalf("hold after cancel: %+v %v", j, j.Error)
	}

	id = f.invoke(t, "stubborn", map[string]any{"seconds": 30})
	f.waitJob(t, id, "running", func(j *mhp.Job) bool { return j.Extra["status"] == pylabrobot.TaskRunning })
	if _, err := f.dev.CancelJob(ctx, id); err != nil {
		t.Fatal(err)
	}
	if j := f.finish(t, id); j.State != mhp.JobDone || j.Result != "finished anyway" {
		t.Fatalf("a coroutine that ignored the cancel: %+v, want done", j)
	}

	if w, err := f.dev.Write(ctx, mhp.WriteRequest{Name: "target_temperature", Value: 37.0}); err != nil || !w.Applied {
		t.Fatalf("write: %+v %v", w, err)
	}
	r, err := f.dev.Read(ctx, []string{"temperature", "setup_finished"})
	if err != nil || r.Values["temperature"] != 37.0 || r.Values["setup_finished"] != false {
		t.Fatalf("read: %+v %v", r, err)
	}

	// Sequence[Union[TipSpot, Trash]]: resource names, resolved by the
	// bridge inside the Union; a Well is refused before anything runs.
	drop, _ := desc.Action("drop_tips")
	if p, _ := drop.Params.Get("tip_spots"); p.Type != mhp.TypeArray || p.Items == nil || p.Items.Type != mhp.TypeString {
		t.Fatalf("drop_tips.tip_spots = %+v, want an array of resource names", p)
	}
	id = f.invoke(t, "drop_tips", map[string]any{"tip_spots": []any{"tip_A1", "trash"}})
	if j := f.finish(t, id); j.State != mhp.JobDone || fmt.Sprint(j.Result) != "[TipSpot:tip_A1 Trash:trash]" {
		t.Fatalf("drop_tips: %+v %v", j, j.Error)
	}
	id = f.invoke(t, "drop_tips", map[string]any{"tip_spots": []any{"well_A1"}})
	if j := f.finish(t, id); j.State != mhp.JobFailed || j.Outcome != mhp.OutcomeNotStarted {
		t.Fatalf("drop_tips into a well: %+v, want refused not_started", j)
	}

	id = f.invoke(t, "setup", nil)
	if j := f.finish(t, id); j.State != mhp.JobDone {
		t.Fatalf("setup: %+v", j)
	}
	res, err := f.dev.EStop(ctx, "e2e")
	if err != nil || !res.Stopped {
		t.Fatalf("estop: %+v %v", res, err)
	}
	r, _ = f.dev.Read(ctx, []string{"stops"})
	if r.Values["stops"] != 1.0 {
		t.Fatalf("machine.stop() calls = %v", r.Values["stops"])
	}
	// stop() left the machine not set up: the reset runs setup again.
	rr, err := f.dev.Reset(ctx)
	if err != nil || !rr.Verified {
		t.Fatalf("reset after the stop: %+v %v", rr, err)
	}
	if r, _ := f.dev.Read(ctx, []string{"setup_finished"}); r.Values["setup_finished"] != true {
		t.Fatalf("setup_finished after the reset: %v", r.Values)
	}
}
