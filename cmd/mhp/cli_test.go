package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/client"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/conformance/wire"
	"github.com/openmhp/mhp-go/devicepkg"
	"github.com/openmhp/mhp-go/examples/sim"
	"github.com/openmhp/mhp-go/transport"
)

// TestMain lets the test binary act as the mhp command for stdio targets:
// with MHP_TEST_AS_MAIN=1 it runs the CLI on its arguments.
func TestMain(m *testing.M) {
	if os.Getenv("MHP_TEST_AS_MAIN") == "1" {
		a := newApp()
		a.stderr = io.Discard
		os.Exit(a.run(context.Background(), os.Args[1:]))
	}
	os.Exit(m.Run())
}

// syncBuffer is a bytes.Buffer safe for the CLI's concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type result struct {
	code           int
	stdout, stderr string
}

func testApp() (*app, *syncBuffer, *syncBuffer) {
	out, errb := &syncBuffer{}, &syncBuffer{}
	return &app{stdin: strings.NewReader(""), stdout: out, stderr: errb, getenv: func(string) string { return "" }}, out, errb
}

func runCLI(t *testing.T, args ...string) result {
	t.Helper()
	a, out, errb := testApp()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code := a.run(ctx, args)
	return result{code, out.String(), errb.String()}
}

// servePackage serves a device package over HTTP (httptest, 127.0.0.1:0)
// on fast simulated time.
func servePackage(t testing.TB, dir string) (string, *devicepkg.Device) {
	t.Helper()
	pkg, err := devicepkg.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pkg.Close() })
	dev, err := buildPackage(context.Background(), pkg, sim.Options{Speed: 20000, Tick: time.Millisecond}, (&app{stderr: io.Discard}).quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	if err := dev.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := transport.NewServer(dev, transport.Options{Logger: (&app{stderr: io.Discard}).quietLogger()})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); _ = srv.Close(); _ = dev.Close() })
	return hs.URL, dev
}

const tcPkg = "../../examples/devices/thermocycler-01"
const armPkg = "../../examples/devices/arm-01"

func TestDeviceVerbs(t *testing.T) {
	url, _ := servePackage(t, tcPkg)
	steps := []struct {
		name   string
		args   []string
		code   int
		stdout []string // substrings
		stderr []string
	}{
		{"describe summary", []string{"describe"}, 0, []string{"thermocycler-01 (thermocycler) SimBio TC-96: idle", "run_protocol", "4..105", "Operating procedure", "references/protocols.md"}, nil},
		{"describe card", []string{"describe", "card"}, 0, []string{"actions: run_protocol, open_lid, close_lid"}, nil},
		{"describe bad tier", []string{"describe", "huge"}, 1, nil, []string{"InvalidParams (-32602)"}},
		{"read all", []string{"read"}, 0, []string{"block_temperature = 22", "lid_closed = false"}, nil},
		{"read names", []string{"read", "lid_closed", "cycle"}, 0, []string{"lid_closed = false\ncycle = 0\n"}, nil},
		{"read unknown", []string{"read", "pressure"}, 1, nil, []string{"refused: UnknownName (-32040)"}},
		{"write", []string{"write", "target_temperature", "50"}, 0, []string{"target_temperature = 50 (applied)"}, nil},
		{"write over max", []string{"write", "target_temperature", "200"}, 1, nil,
			[]string{"refused: LimitViolation (-32010): target_temperature=200 above max 105", "gate: limits", "limits: min 4, max 105"}},
		{"write negative", []string{"write", "target_temperature", "-5"}, 1, nil, []string{"LimitViolation (-32010)", "below min 4"}},
		{"write string where a number is due", []string{"write", "target_temperature", "hot"}, 1, nil, []string{"InvalidValue (-32014)"}},
		{"write dry run", []string{"write", "target_temperature", "60", "--dry-run"}, 0, []string{"dry run: would write target_temperature = 60"}, nil},
		{"write boolean", []string{"write", "lid_heater", "true"}, 0, []string{"lid_heater = true (applied)"}, nil},
		{"invoke needs approval", []string{"invoke", "close_lid"}, 1, nil, []string{"ApprovalRequired (-32012)", "gate: approval"}},
		{"invoke dry run notes", []string{"invoke", "close_lid", "--dry-run"}, 0, []string{"dry run: would run close_lid", "needs approval"}, nil},
		{"invoke interlock", []string{"invoke", "run_protocol", `{"steps":[{"temp":95,"hold_s":1}],"cycles":1}`}, 1, nil,
			[]string{"InterlockOpen (-32011)", "interlock: lid_closed"}},
		{"invoke approved wait", []string{"invoke", "close_lid", "--approved", "--wait"}, 0, []string{"close_lid: done", `"lid_closed":true`}, nil},
		{"invoke nested limit", []string{"invoke", "run_protocol", `{"steps":[{"temp":150,"hold_s":1}],"cycles":1}`}, 1, nil,
			[]string{"LimitViolation (-32010)", "steps[0].temp"}},
		{"invoke bad json", []string{"invoke", "run_protocol", `{"steps":`}, 2, nil, []string{"not a JSON object"}},
		{"invoke wait", []string{"invoke", "run_protocol", `{"steps":[{"temp":95,"hold_s":30},{"temp":60,"hold_s":30}],"cycles":3}`, "--wait"}, 0,
			[]string{"run_protocol started", "progress", "run_protocol: done", `"cycles_completed":3`}, nil},
		{"jobs", []string{"jobs"}, 0, []string{"run_protocol   done      100%", "close_lid      done"}, nil},
		{"job unknown", []string{"job", "job_00000000"}, 1, nil, []string{"JobNotFound (-32041)"}},
		{"limits", []string{"limits"}, 0, []string{"target_temperature     auto     4..105", "open_lid               confirm"}, nil},
		{"ping", []string{"ping"}, 0, []string{"thermocycler-01 idle"}, nil},
		{"resources", []string{"resources"}, 0, []string{"references/protocols.md\nreferences/troubleshooting.md"}, nil},
		{"resource", []string{"resource", "references/protocols.md"}, 0, []string{"Standard PCR programs"}, nil},
		{"resource outside", []string{"resource", "../arm-01/DEVICE.md"}, 1, nil, []string{"InvalidParams (-32602)", "outside the package"}},
		{"rpc", []string{"rpc", "signals/read", `{"names":["cycle"]}`}, 0, []string{`"cycle": 0`}, nil},
		{"rpc unknown method", []string{"rpc", "mhp/teleport"}, 1, nil, []string{"MethodNotFound (-32601)"}},
		{"rpc bad params", []string{"rpc", "ping", "{nope"}, 2, nil, []string{"params are not JSON"}},
		{"release", []string{"release"}, 0, []string{"released"}, nil},
		{"estop", []string{"estop", "smoke", "from", "lid"}, 0, []string{"estop: state estop, stopped true"}, nil},
		{"write in estop", []string{"write", "target_temperature", "50"}, 1, nil, []string{"EStopActive (-32022)", "gate: state"}},
		{"reset", []string{"reset"}, 0, []string{"reset: state idle, verified true"}, nil},
		{"unknown verb", []string{"teleport"}, 2, nil, []string{"unknown verb"}},
		{"missing args", []string{"write", "target_temperature"}, 2, nil, []string{"usage: mhp TARGET write NAME VALUE"}},
		{"unknown flag", []string{"read", "--loud"}, 2, nil, []string{"unknown flag --loud"}},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			r := runCLI(t, append([]string{url}, s.args...)...)
			if r.code != s.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, s.code, r.stdout, r.stderr)
			}
			for _, w := range s.stdout {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("stdout lacks %q:\n%s", w, r.stdout)
				}
			}
			for _, w := range s.stderr {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, r.stderr)
				}
			}
		})
	}
}

func TestJSONOutput(t *testing.T) {
	url, _ := servePackage(t, tcPkg)
	r := runCLI(t, url, "read", "block_temperature", "--json")
	var rr mhp.ReadResult
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &rr) != nil || rr.Values["block_temperature"] != 22.0 {
		t.Fatalf("read --json: %d %q", r.code, r.stdout)
	}
	r = runCLI(t, url, "write", "target_temperature", "200", "--json")
	var refusal struct {
		Error *mhp.Error `json:"error"`
	}
	if r.code != 1 || json.Unmarshal([]byte(r.stdout), &refusal) != nil || refusal.Error == nil ||
		refusal.Error.Code != mhp.CodeLimitViolation || refusal.Error.Data["max"] != 105.0 || refusal.Error.TS == 0 {
		t.Fatalf("refusal --json: %d %q", r.code, r.stdout)
	}
	r = runCLI(t, url, "describe", "full")
	var d map[string]any
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &d) != nil || d["detail"] != "full" || d["mhp"] == nil {
		t.Fatalf("describe full: %d %.200q", r.code, r.stdout)
	}
}

func TestInvokeWaitDrawsABarOnATerminal(t *testing.T) {
	url, _ := servePackage(t, tcPkg)
	if r := runCLI(t, url, "invoke", "close_lid", "--approved", "--wait"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	a, out, _ := testApp()
	a.tty = true
	code := a.run(context.Background(), []string{url, "invoke", "run_protocol", `{"steps":[{"temp":95,"hold_s":120}],"cycles":2}`, "--wait"})
	if code != 0 || !strings.Contains(out.String(), "% |") /* the progress bar */ || !strings.Contains(out.String(), "run_protocol: done") {
		t.Fatalf("exit %d, output %q", code, out.String())
	}
}

func TestCancelAndFailedJobExitNonZero(t *testing.T) {
	url, dev := servePackage(t, tcPkg)
	runCLI(t, url, "invoke", "close_lid", "--approved", "--wait")
	// A long run, waited on by one CLI and cancelled by another.
	a, out, _ := testApp()
	done := make(chan int, 1)
	go func() {
		done <- a.run(context.Background(), []string{url, "invoke", "run_protocol", `{"steps":[{"temp":95,"hold_s":3600}],"cycles":20}`, "--wait"})
	}()
	var id string
	conformance.EventuallyWithin(t, "the job to start", 10*time.Second, func() bool {
		if jobs, _ := dev.Jobs(context.Background(), mhp.JobsRequest{Active: true}); len(jobs) > 0 {
			id = jobs[0].ID
		}
		return id != ""
	})
	r := runCLI(t, url, "cancel", id)
	if r.code != 0 || !strings.Contains(r.stdout, id) {
		t.Fatalf("cancel: %+v", r)
	}
	select {
	case code := <-done:
		if code != exitRefused || !strings.Contains(out.String(), "run_protocol: cancelled") {
			t.Fatalf("waiting CLI: exit %d, %q", code, out.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waiting CLI did not return after the cancel")
	}
}

func TestAcquireHoldsTheLeaseUntilInterrupted(t *testing.T) {
	url, _ := servePackage(t, armPkg)
	a, out, _ := testApp()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- a.run(ctx, []string{url, "acquire", "30"}) }()
	conformance.EventuallyWithin(t, "the lease to be held", 10*time.Second, func() bool { return strings.Contains(out.String(), "lease held") })
	// Another client is refused while the lease is held.
	r := runCLI(t, url, "invoke", "home", "--wait")
	if r.code != 1 || !strings.Contains(r.stderr, "NotLeased (-32030)") {
		t.Fatalf("second client: %+v", r)
	}
	cancel()
	if code := <-done; code != 0 || !strings.Contains(out.String(), "lease released") {
		t.Fatalf("acquire: %d %q", code, out.String())
	}
	// Released: the other client takes the lease on first use and moves the arm.
	if r := runCLI(t, url, "invoke", "pick_plate", "location=deck_A1", "--wait"); r.code != 0 || !strings.Contains(r.stdout, "pick_plate: done") {
		t.Fatalf("after release: %+v", r)
	}
}

func TestUnreachableAndUsage(t *testing.T) {
	cases := []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"http://127.0.0.1:1", "read"}, exitNoPeer, ""},
		{nil, exitUsage, "Serve a device"},
		{[]string{"frobnicate"}, exitUsage, "unknown command"},
		{[]string{"serve"}, exitUsage, "usage: mhp serve"},
		{[]string{"serve", "sim:arm", "--http", "x", "--stdio"}, exitUsage, "exclude each other"},
		{[]string{"serve", "sim:toaster", "--stdio"}, exitNoPeer, "unknown simulated driver"},
		{[]string{"serve", "/nonexistent/plc.yaml"}, exitNoPeer, "not sim:thermocycler"},
		{[]string{"demo", "--speed", "0"}, exitUsage, "--speed"},
		{[]string{"conformance"}, exitUsage, "usage: mhp conformance"},
		{[]string{"validate"}, exitUsage, "usage: mhp validate DIR"},
	}
	for _, c := range cases {
		r := runCLI(t, c.args...)
		if r.code != c.code || !strings.Contains(r.stderr, c.msg) {
			t.Errorf("%v: exit %d, want %d; stderr %q", c.args, r.code, c.code, r.stderr)
		}
	}
	if r := runCLI(t, "help"); r.code != 0 || !strings.Contains(r.stdout, "mhp TARGET invoke NAME") {
		t.Errorf("help: %+v", r)
	}
}

func TestParseValueAndArgs(t *testing.T) {
	values := []struct {
		in   string
		want any
	}{
		{"95", 95.0}, {"-5", -5.0}, {"true", true}, {`"95"`, "95"}, {"hot", "hot"}, {"[1,2]", []any{1.0, 2.0}},
		{"null", nil}, {"95 degrees", "95 degrees"}, {`{"a":1}`, map[string]any{"a": 1.0}},
	}
	for _, v := range values {
		got, _ := json.Marshal(parseValue(v.in))
		want, _ := json.Marshal(v.want)
		if string(got) != string(want) {
			t.Errorf("parseValue(%q) = %s, want %s", v.in, got, want)
		}
	}
	p, err := parseArgs([]string{"write", "x", "-5", "--dry-run", "--token-file=f", "--timeout", "3"}, deviceFlags)
	if err != nil || strings.Join(p.args, " ") != "write x -5" || !p.has("dry-run") || p.flags["token-file"] != "f" || p.flags["timeout"] != "3" {
		t.Fatalf("parseArgs: %+v %v", p, err)
	}
	if _, err := parseArgs([]string{"--timeout"}, deviceFlags); err == nil {
		t.Fatal("a flag without its value was accepted")
	}
}

func TestTokenFile(t *testing.T) {
	pkg, _ := devicepkg.Load(tcPkg)
	defer pkg.Close()
	dev, _ := buildPackage(context.Background(), pkg, sim.Options{}, nil)
	defer dev.Close()
	hs := httptest.NewServer(transport.NewServer(dev, transport.Options{Token: "s3cret"}).Handler())
	defer hs.Close()
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := runCLI(t, hs.URL, "ping"); r.code == 0 {
		t.Fatalf("no token accepted: %+v", r)
	}
	if r := runCLI(t, hs.URL, "ping", "--token-file", tok); r.code != 0 {
		t.Fatalf("with token: %+v", r)
	}
	if r := runCLI(t, hs.URL, "rpc", "ping", "--token-file", tok); r.code != 0 {
		t.Fatalf("rpc with token: %+v", r)
	}
}

func TestValidateCommand(t *testing.T) {
	widen := t.TempDir()
	if err := os.WriteFile(filepath.Join(widen, "DEVICE.md"), []byte("---\nid: tc-9\nclass: thermocycler\ndescription: Test.\ndriver: sim:thermocycler\n---\nBody.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(widen, "descriptor.yaml"), []byte("settings:\n  - name: target_temperature\n    limits: {min: 0, max: 150}\n  - name: spin\nsafety: {estop: true}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		dir  string
		code int
		want []string
	}{
		{tcPkg, 0, []string{"is valid and merges over its driver's bindings"}},
		{armPkg, 0, []string{"ok:"}},
		{"../../devicepkg/testdata/bad-descriptor", 1, []string{
			"descriptor.yaml:13: settings.target_temperature.limits: min 105 is above max 4",
			"descriptor.yaml:25: actions.run_protocol.examples[0]: invalid example: cycles=200 above max 99",
			"safety.estop", "problem(s)"}},
		{"../../devicepkg/testdata/bad-card", 1, []string{"DEVICE.md: id:", "DEVICE.md: description: 1100 characters"}},
		{widen, 1, []string{"settings.target_temperature.limits: min 0 is wider", "settings.spin: no setting \"spin\""}},
	}
	for _, c := range cases {
		r := runCLI(t, "validate", c.dir)
		if r.code != c.code {
			t.Errorf("%s: exit %d, want %d\n%s", c.dir, r.code, c.code, r.stdout)
		}
		for _, w := range c.want {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("%s: output lacks %q:\n%s", c.dir, w, r.stdout)
			}
		}
	}
	r := runCLI(t, "validate", "../../devicepkg/testdata/bad-descriptor", "--json")
	var v struct {
		Valid    bool                `json:"valid"`
		Problems []devicepkg.Problem `json:"problems"`
	}
	if r.code != 1 || json.Unmarshal([]byte(r.stdout), &v) != nil || v.Valid || len(v.Problems) < 10 || v.Problems[0].File == "" {
		t.Fatalf("validate --json: %+v", r)
	}
}

func TestDemoOnce(t *testing.T) {
	r := runCLI(t, "demo", "--once", "--http", "127.0.0.1:0", "--speed", "2000")
	if r.code != 0 {
		t.Fatalf("demo exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, w := range []string{"[ 1] describe both devices", "refused: ApprovalRequired (-32012)", "refused: LimitViolation (-32010)",
		`"cycles_completed":3`, "PCR workflow complete", "curl -s http://127.0.0.1:"} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("demo output lacks %q", w)
		}
	}
}

func TestDemoKeepsServing(t *testing.T) {
	a, out, _ := testApp()
	urls := make(chan []string, 1)
	a.ready = func(u []string) { urls <- u }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- a.run(ctx, []string{"demo", "--http", "127.0.0.1:0", "--speed", "2000"}) }()
	var u []string
	select {
	case u = <-urls:
	case <-time.After(20 * time.Second):
		t.Fatal("demo did not start")
	}
	func() {
		defer func() {
			if t.Failed() {
				t.Logf("demo output: %s", out.String())
			}
		}()
		conformance.EventuallyWithin(t, "the workflow to finish", 30*time.Second, func() bool { return strings.Contains(out.String(), "Serving until Ctrl-C") })
	}()
	// A person pokes the lab.
	r := runCLI(t, u[1], "read", "occupied", "holding")
	if r.code != 0 || !strings.Contains(r.stdout, `occupied = ["deck_A1"]`) || !strings.Contains(r.stdout, "holding = false") {
		t.Fatalf("poke: %+v", r)
	}
	if r := runCLI(t, "conformance", u[0]); r.code != 0 {
		t.Fatalf("conformance on the demo thermocycler: %s", r.stdout)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("demo exit %d", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("demo did not stop on cancel")
	}
}

func TestServeHTTPAndConformance(t *testing.T) {
	for _, target := range []string{"sim:thermocycler", "sim:arm", armPkg} {
		t.Run(target, func(t *testing.T) {
			a, _, errb := testApp()
			urls := make(chan []string, 1)
			a.ready = func(u []string) { urls <- u }
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan int, 1)
			go func() { done <- a.run(ctx, []string{"serve", target, "--http", "127.0.0.1:0"}) }()
			var u []string
			select {
			case u = <-urls:
			case code := <-done:
				t.Fatalf("serve exited %d: %s", code, errb.String())
			}
			r := runCLI(t, "conformance", u[0])
			if r.code != 0 || !strings.Contains(r.stdout, "PASS  gates/limits") || !strings.Contains(r.stdout, "0 failed") {
				t.Errorf("conformance: %d\n%s", r.code, r.stdout)
			}
			r = runCLI(t, "conformance", u[0], "--json")
			var res wire.Report
			if json.Unmarshal([]byte(r.stdout), &res) != nil || len(res.Results) != len(wire.Checks()) || res.Failed != 0 {
				t.Errorf("conformance --json: %s", r.stdout)
			}
			cancel()
			if code := <-done; code != 0 {
				t.Fatalf("serve exit %d: %s", code, errb.String())
			}
		})
	}
}

// lax is a broken device: it reads unknown signals as null instead of
// refusing them, and accepts any describe tier.
type lax struct{ mhp.Device }

func (l lax) Read(ctx context.Context, names []string) (*mhp.ReadResult, error) {
	return &mhp.ReadResult{Values: map[string]any{}, TS: mhp.UnixSeconds(time.Now())}, nil
}

func TestConformanceCatchesABrokenServer(t *testing.T) {
	d, closeDev, err := openTarget(context.Background(), "sim:thermocycler", sim.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closeDev()
	hs := httptest.NewServer(transport.NewServer(lax{d}, transport.Options{Logger: (&app{stderr: io.Discard}).quietLogger()}).Handler())
	defer hs.Close()
	r := runCLI(t, "conformance", hs.URL)
	if r.code != exitRefused || !strings.Contains(r.stdout, "FAIL  read/unknown") || !strings.Contains(r.stdout, "FAIL  read/all") {
		t.Fatalf("exit %d\n%s", r.code, r.stdout)
	}
}

func TestServeStdioInProcess(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	a, _, _ := testApp()
	a.stdin, a.stdout = inR, outW
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- a.run(ctx, []string{"serve", tcPkg, "--stdio"}); outW.Close() }()
	d, err := client.DialStream(ctx, outR, inW, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	v, err := d.Get(ctx, "block_temperature")
	if err != nil || v != 22.0 {
		t.Fatalf("read over stdio: %v %v", v, err)
	}
	list, err := d.ListResources(ctx)
	if err != nil || len(list) == 0 {
		t.Fatalf("resources over stdio: %v %v", list, err)
	}
	_ = d.Close()
	cancel()
	inW.Close()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("serve --stdio exit %d", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve --stdio did not stop")
	}
}

// TestStdioTarget runs the CLI against `stdio:<this test binary> serve …`
// (the binary acts as mhp under MHP_TEST_AS_MAIN).
func TestStdioTarget(t *testing.T) {
	t.Setenv("MHP_TEST_AS_MAIN", "1")
	target := "stdio:" + os.Args[0] + " serve " + armPkg + " --stdio --speed 5000"
	r := runCLI(t, target, "invoke", "pick_plate", "location=deck_A1", "--wait")
	if r.code != 0 || !strings.Contains(r.stdout, "pick_plate: done") {
		t.Fatalf("invoke over stdio: %+v", r)
	}
	r = runCLI(t, target, "rpc", "signals/read", `{"names":["position"]}`)
	if r.code != 0 || !strings.Contains(r.stdout, `"position": "home"`) {
		t.Fatalf("rpc over stdio: %+v", r)
	}
	r = runCLI(t, "conformance", target)
	if r.code != 0 || !strings.Contains(r.stdout, "SKIP  lease/exclusive") {
		t.Fatalf("conformance over stdio: %+v", r)
	}
}

func TestDemoFallsBackWhenDefaultPortsAreTaken(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	port := taken.Addr().(*net.TCPAddr).Port
	log := (&app{stderr: io.Discard}).quietLogger()
	lab, err := startDemoLab(context.Background(), "127.0.0.1", port, false, 100, log, serverTrust{})
	if err != nil {
		t.Fatalf("default ports taken: %v", err)
	}
	defer lab.stop()
	if lab.note == "" || strings.HasSuffix(lab.urls[demoTC], ":"+strconv.Itoa(port)) {
		t.Fatalf("no fallback: %+v", lab)
	}
	// An explicitly asked port that is taken is an error.
	if _, err := startDemoLab(context.Background(), "127.0.0.1", port, true, 100, log, serverTrust{}); err == nil {
		t.Fatal("a taken explicit port was not reported")
	}
}

func TestRunScriptAgainstTheDemoLab(t *testing.T) {
	log := (&app{stderr: io.Discard}).quietLogger()
	lab, err := startDemoLab(context.Background(), "127.0.0.1", 0, true, 20000, log, serverTrust{})
	if err != nil {
		t.Fatal(err)
	}
	defer lab.stop()
	tc, arm := "thermocycler-01="+lab.urls[demoTC], "arm-01="+lab.urls[demoArm]
	r := runCLI(t, "run", "../../examples/devices/arm-01/scripts/load_thermocycler.star", tc, arm)
	if r.code != 0 || !strings.Contains(r.stdout, "plate moved from deck_A1 to the thermocycler") {
		t.Fatalf("load: %+v", r)
	}
	// The plate is in the thermocycler: loading again is refused by the arm,
	// and the refusal comes back with its code.
	r = runCLI(t, "run", "../../examples/devices/arm-01/scripts/load_thermocycler.star", tc, arm)
	if r.code != exitRefused || !strings.Contains(r.stderr, "InvalidValue (-32014)") || !strings.Contains(r.stderr, "no plate at deck_A1") {
		t.Fatalf("second load: %+v", r)
	}
	// The PCR script refuses to start with the lid open.
	r = runCLI(t, "run", "../../examples/devices/thermocycler-01/scripts/pcr.star", tc)
	if r.code != exitRefused || !strings.Contains(r.stderr, "close the lid first") {
		t.Fatalf("pcr with the lid open: %+v", r)
	}
	if r := runCLI(t, "run", "nope.star", tc); r.code != exitUsage {
		t.Fatalf("missing script: %+v", r)
	}
	if r := runCLI(t, "run", "../../examples/devices/thermocycler-01/scripts/pcr.star", "tc"); r.code != exitUsage {
		t.Fatalf("bad lab entry: %+v", r)
	}
}

func TestInterruptedWaitLeavesTheJobRunning(t *testing.T) {
	url, dev := servePackage(t, tcPkg)
	runCLI(t, url, "invoke", "close_lid", "--approved", "--wait")
	a, _, errb := testApp()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- a.run(ctx, []string{url, "invoke", "run_protocol", `{"steps":[{"temp":95,"hold_s":3600}],"cycles":20}`, "--wait"})
	}()
	conformance.EventuallyWithin(t, "the job to start", 10*time.Second, func() bool {
		jobs, _ := dev.Jobs(context.Background(), mhp.JobsRequest{Active: true})
		return len(jobs) > 0
	})
	cancel() // Ctrl-C
	if code := <-done; code != exitRefused || !strings.Contains(errb.String(), "stopped waiting") {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	jobs, _ := dev.Jobs(context.Background(), mhp.JobsRequest{Active: true})
	if len(jobs) != 1 || jobs[0].CancelRequested {
		t.Fatalf("the job did not run on: %+v", jobs)
	}
}
