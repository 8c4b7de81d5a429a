package sila2_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/sila2"
	"github.com/openmhp/mhp-go/sila2/silatest"
)

const labConfig = `adapter: sila2
device: {id: tc-01, class: incubator, make: Example}
features: [GreetingProvider, TemperatureController]
default_approval: auto
poll_interval_s: 0.02
resubscribe_s: 0.3
cancel_wait_s: 5
commands:
  - {command: TemperatureController/SetMode, setting: mode}
`

// openAdapter fronts the lab with the adapter (TLS pinned); extra is YAML appended to labConfig.
func openAdapter(t *testing.T, l *lab, extra string) *binding.Driver {
	t.Helper()
	return openConfig(t, l, labConfig+extra)
}

// openConfig fronts the lab with the adapter of the config text, its
// endpoint and TLS pin added.
func openConfig(t *testing.T, l *lab, config string) *binding.Driver {
	t.Helper()
	tlsLine := fmt.Sprintf("tls: {pin_sha256: %q}\n", l.cert.PinSHA256)
	text := config + fmt.Sprintf("endpoint: %s\n", l.addr) + tlsLine
	cfg, err := sila2.Load(adapters.Source{Path: "lab.yaml", Data: []byte(text)})
	if err != nil {
		t.Fatal(err)
	}
	d, err := sila2.New(ctxT(t), cfg, sila2.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func invoke(t *testing.T, d mhp.Device, name string, params map[string]any) *mhp.Job {
	t.Helper()
	r, err := d.Invoke(ctxT(t), mhp.InvokeRequest{Name: name, Params: params})
	if err != nil {
		t.Fatalf("invoke %s: %v", name, err)
	}
	return r.Job
}

func waitJob(t *testing.T, d mhp.Device, id string, ok func(*mhp.Job) bool) *mhp.Job {
	t.Helper()
	return conformance.WaitJob(t, d, id, testTimeout, ok)
}

func terminal(j *mhp.Job) bool { return j.State.Terminal() }

func deviceState(t *testing.T, d mhp.Device) mhp.DeviceState {
	t.Helper()
	p, err := d.Ping(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return p.State
}

func TestAdapterDescribeHasConstraintLimits(t *testing.T) {
	l := startLab(t, silatest.Options{CancelController: true})
	d := openAdapter(t, l, `  - command: TemperatureController/ControlTemperature
    params: {target_temperature: {limits: {max: 340}}}
`)
	desc := d.Descriptor()
	ct, ok := desc.Action("control_temperature")
	if !ok {
		t.Fatalf("no control_temperature action in %+v", desc.Actions)
	}
	p, _ := ct.Params.Get("target_temperature")
	if p.Type != mhp.TypeNumber || p.Unit != "K" || p.Limits == nil || p.Limits.ExclusiveMin == nil || *p.Limits.ExclusiveMin != 277 ||
		p.Limits.Max == nil || *p.Limits.Max != 340 {
		t.Fatalf("target_temperature shape %+v limits %+v: want number K, exclusiveMin 277 (FDL), max 340 (config narrows 363)", p, p.Limits)
	}
	if ct.Duration != mhp.DurationLong || !ct.Cancellable {
		t.Fatalf("observable command with CancelController: %+v, want long and cancellable", ct)
	}
	if ct.Returns == nil || ct.Returns.Properties["reached_temperature"] == nil {
		t.Fatalf("returns %+v", ct.Returns)
	}
	hello, _ := desc.Action("say_hello")
	name, _ := hello.Params.Get("name")
	if hello.Duration != mhp.DurationShort || hello.Cancellable || name.Limits == nil || name.Limits.MaxLength == nil || *name.Limits.MaxLength != 20 {
		t.Fatalf("say_hello %+v name %+v", hello, name)
	}
	mode, ok := desc.Setting("mode")
	if !ok || mode.Type != mhp.TypeString || mode.Limits == nil || fmt.Sprint(mode.Limits.Enum) != "[Heat Cool Off]" {
		t.Fatalf("mode setting from a data type definition: %+v", mode)
	}
	cur, ok := desc.Signal("current_temperature")
	if !ok || cur.Type != mhp.TypeNumber || cur.Unit != "K" {
		t.Fatalf("current_temperature signal %+v", cur)
	}
	prof, ok := desc.Signal("profile")
	if !ok || prof.Type != mhp.TypeArray {
		t.Fatalf("profile signal %+v", prof)
	}
	if _, ok := desc.Action("set_mode"); ok {
		t.Fatal("SetMode is a setting; it must not also be an action")
	}
	// The describe answer carries the limits too.
	full, err := d.Describe(ctxT(t), mhp.DescribeRequest{Detail: mhp.DetailFull})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := full.Action("control_temperature")
	if p, _ := a.Params.Get("target_temperature"); p.Limits == nil || *p.Limits.Max != 340 {
		t.Fatalf("describe: %+v", a)
	}
}

func TestAdapterConfigMayOnlyNarrow(t *testing.T) {
	l := startLab(t, silatest.Options{})
	text := labConfig + "  - {command: TemperatureController/ControlTemperature, params: {target_temperature: {limits: {max: 400}}}}\n" +
		fmt.Sprintf("endpoint: %s\ntls: {pin_sha256: %q}\n", l.addr, l.cert.PinSHA256)
	cfg, err := sila2.Load(adapters.Source{Path: "lab.yaml", Data: []byte(text)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = sila2.New(ctxT(t), cfg, sila2.Options{})
	if err == nil || !strings.Contains(err.Error(), "widen") {
		t.Fatalf("a config widening the server's max must be refused, got %v", err)
	}
	// Without CancelController, observable commands are not cancellable.
	d := openAdapter(t, l, "")
	desc := d.Descriptor()
	if ct, _ := desc.Action("control_temperature"); ct.Cancellable {
		t.Fatal("control_temperature cancellable although the server has no CancelController")
	}
}

func TestAdapterSignals(t *testing.T) {
	l := startLab(t, silatest.Options{})
	d := openAdapter(t, l, "")
	r, err := d.Read(ctxT(t), []string{"start_year", "profile"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Values["start_year"] != int64(2024) {
		t.Fatalf("start_year %v", r.Values)
	}
	if steps, _ := r.Values["profile"].([]any); len(steps) != 2 {
		t.Fatalf("profile %v", r.Values["profile"])
	}
	readCurrent := func() (any, string) {
		r, err := d.Read(ctxT(t), []string{"current_temperature"})
		if err != nil {
			t.Fatal(err)
		}
		return r.Values["current_temperature"], r.Unavailable["current_temperature"]
	}
	conformance.EventuallyWithin(t, "first subscribed value", testTimeout, func() bool { v, _ := readCurrent(); return v == 293.15 })
	l.thermo.Set(301.5)
	conformance.EventuallyWithin(t, "updated value", testTimeout, func() bool { v, _ := readCurrent(); return v == 301.5 })
	// Stream loss: the signal reads unavailable (null), never a stale value.
	l.srv.Stop()
	conformance.EventuallyWithin(t, "unavailable after the stream broke", testTimeout, func() bool { v, why := readCurrent(); return v == nil && why != "" })
}

func TestAdapterTerminalStates(t *testing.T) {
	type step func(t *testing.T, l *lab, d *binding.Driver, j *mhp.Job)
	endWith := func(o silatest.Outcome) step {
		return func(t *testing.T, l *lab, d *binding.Driver, j *mhp.Job) {
			if err := l.thermo.End(o, testTimeout); err != nil {
				t.Fatal(err)
			}
		}
	}
	cancelJob := func(t *testing.T, l *lab, d *binding.Driver, j *mhp.Job) {
		if _, err := d.CancelJob(ctxT(t), j.ID); err != nil {
			t.Fatalf("cancel: %v", err)
		}
	}
	for _, tc := range []struct {
		name    string
		action  string
		params  map[string]any
		wait    bool // wait for the command to run at the server before acting
		steps   []step
		state   mhp.JobState
		outcome string
		fault   bool
		check   func(t *testing.T, j *mhp.Job)
	}{
		{name: "success", action: "control_temperature", params: map[string]any{"target_temperature": 310.0}, wait: true,
			steps: []step{endWith(silatest.Reach)}, state: mhp.JobDone,
			check: func(t *testing.T, j *mhp.Job) {
				if res, _ := j.Result.(map[string]any); res["reached_temperature"] != 310.0 || j.Progress != 1 {
					t.Fatalf("result %v progress %v", j.Result, j.Progress)
				}
			}},
		{name: "defined_error", action: "control_temperature", params: map[string]any{"target_temperature": 355.0},
			state: mhp.JobFailed, outcome: mhp.OutcomeFailed,
			check: func(t *testing.T, j *mhp.Job) {
				id, _ := j.Error.Data["error_identifier"].(string)
				if !strings.HasSuffix(id, "/DefinedExecutionError/TemperatureNotReachable") || !strings.Contains(j.Error.Message, "beyond the heater") {
					t.Fatalf("job error %+v", j.Error)
				}
			}},
		{name: "interrupted", action: "control_temperature", params: map[string]any{"target_temperature": 300.0}, wait: true,
			steps: []step{endWith(silatest.Interrupt)}, state: mhp.JobFailed, outcome: mhp.OutcomeFailed},
		{name: "cancel_honoured", action: "control_temperature", params: map[string]any{"target_temperature": 300.0}, wait: true,
			steps: []step{cancelJob}, state: mhp.JobCancelled},
		{name: "cancel_ignored", action: "stabilize", wait: true,
			steps: []step{cancelJob, func(t *testing.T, l *lab, d *binding.Driver, j *mhp.Job) {
				// The server acknowledged the cancel; the command runs on.
				if got, _ := d.Job(ctxT(t), j.ID); got.State != mhp.JobRunning {
					t.Fatalf("job %s after an ignored cancel, want running", got.State)
				}
			}, endWith(silatest.Reach)}, state: mhp.JobDone},
		{name: "stream_dropped", action: "control_temperature", params: map[string]any{"target_temperature": 300.0}, wait: true,
			steps: []step{endWith(silatest.Drop)}, state: mhp.JobFailed, outcome: mhp.OutcomeUnknown, fault: true},
		{name: "unobservable_done", action: "say_hello", params: map[string]any{"name": "MHP"}, state: mhp.JobDone,
			check: func(t *testing.T, j *mhp.Job) {
				if res, _ := j.Result.(map[string]any); res["greeting"] != "Hello SiLA 2 MHP" {
					t.Fatalf("result %v", j.Result)
				}
			}},
		{name: "unobservable_undefined_error", action: "say_hello", params: map[string]any{"name": ""}, state: mhp.JobFailed,
			outcome: mhp.OutcomeFailed},
		{name: "server_validation_error", action: "say_hello", params: map[string]any{"name": "Nobody"}, state: mhp.JobFailed,
			check: func(t *testing.T, j *mhp.Job) {
				if j.Error.Code != mhp.CodeLimitViolation || j.Error.Data["field"] != "name" || !strings.Contains(j.Error.Message, "Nobody is not a name") {
					t.Fatalf("validation error %+v", j.Error)
				}
				if strings.Contains(j.Error.Message, "==") {
					t.Fatalf("raw base64 leaked: %s", j.Error.Message)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := startLab(t, silatest.Options{CancelController: true})
			d := openAdapter(t, l, "")
			j := invoke(t, d, tc.action, tc.params)
			if tc.wait {
				select {
				case <-l.thermo.Running():
				case <-time.After(testTimeout):
					t.Fatal("the command never ran at the server")
				}
				waitJob(t, d, j.ID, func(j *mhp.Job) bool { return j.Progress > 0 })
			}
			for _, s := range tc.steps {
				s(t, l, d, j)
			}
			got := waitJob(t, d, j.ID, terminal)
			if got.State != tc.state {
				t.Fatalf("job %+v (error %+v), want %s", got, got.Error, tc.state)
			}
			if tc.outcome != "" && got.Outcome != tc.outcome {
				t.Fatalf("outcome %q, want %q (error %+v)", got.Outcome, tc.outcome, got.Error)
			}
			if st := deviceState(t, d); (st == mhp.StateFault) != tc.fault {
				t.Fatalf("device state %s, fault wanted: %v", st, tc.fault)
			}
			if tc.check != nil {
				tc.check(t, got)
			}
		})
	}
}

func TestAdapterProgressAndIntermediate(t *testing.T) {
	l := startLab(t, silatest.Options{CancelController: true})
	d := openAdapter(t, l, "")
	j := invoke(t, d, "control_temperature", map[string]any{"target_temperature": 305.0})
	<-l.thermo.Running()
	got := waitJob(t, d, j.ID, func(j *mhp.Job) bool { return j.Extra["intermediate"] != nil && j.Extra["eta_s"] != nil })
	if got.Progress != 0.25 || got.Extra["eta_s"] != 30.0 {
		t.Fatalf("progress %v extra %v", got.Progress, got.Extra)
	}
	if im, _ := got.Extra["intermediate"].(map[string]any); im["current_temperature"] != 293.15 {
		t.Fatalf("intermediate %v", got.Extra["intermediate"])
	}
	if err := l.thermo.End(silatest.Reach, testTimeout); err != nil {
		t.Fatal(err)
	}
	waitJob(t, d, j.ID, terminal)
}

func TestAdapterRefusesBeforeSending(t *testing.T) {
	l := startLab(t, silatest.Options{CancelController: true})
	d := openAdapter(t, l, "")
	for _, tc := range []struct {
		name, item string
		do         func() error
	}{
		{"below exclusive min", "TemperatureController/ControlTemperature", func() error {
			_, err := d.Invoke(ctxT(t), mhp.InvokeRequest{Name: "control_temperature", Params: map[string]any{"target_temperature": 277.0}})
			return err
		}},
		{"above max", "TemperatureController/ControlTemperature", func() error {
			_, err := d.Invoke(ctxT(t), mhp.InvokeRequest{Name: "control_temperature", Params: map[string]any{"target_temperature": 364.0}})
			return err
		}},
		{"too long", "GreetingProvider/SayHello", func() error {
			_, err := d.Invoke(ctxT(t), mhp.InvokeRequest{Name: "say_hello", Params: map[string]any{"name": strings.Repeat("x", 21)}})
			return err
		}},
		{"not in set", "TemperatureController/SetMode", func() error {
			_, err := d.Write(ctxT(t), mhp.WriteRequest{Name: "mode", Value: "Boil"})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.do()
			if mhp.CodeOf(err) != mhp.CodeLimitViolation {
				t.Fatalf("want LimitViolation, got %v", err)
			}
			if n := l.srv.Calls(tc.item); n != 0 {
				t.Fatalf("%s reached the server %d times", tc.item, n)
			}
		})
	}
	// And a valid write does reach it.
	if _, err := d.Write(ctxT(t), mhp.WriteRequest{Name: "mode", Value: "Cool"}); err != nil || l.thermo.Mode() != "Cool" {
		t.Fatalf("write mode: %v (mode %s)", err, l.thermo.Mode())
	}
}

func TestAdapterLockController(t *testing.T) {
	l := startLab(t, silatest.Options{LockController: true})
	d := openAdapter(t, l, "lock: {identifier: mhp-lock-1}\n")
	if got := l.srv.Locked(); got != "mhp-lock-1" {
		t.Fatalf("server lock %q after Start", got)
	}
	// Calls carry the LockIdentifier metadata, so they pass the lock.
	j := invoke(t, d, "say_hello", map[string]any{"name": "locked"})
	if got := waitJob(t, d, j.ID, terminal); got.State != mhp.JobDone {
		t.Fatalf("locked call: %+v %+v", got, got.Error)
	}
	// Another client without the lock is refused: INVALID_METADATA.
	other := l.dial(t, sila2.TLSConfig{PinSHA256: l.cert.PinSHA256})
	_, err := other.Call(ctxT(t), "GreetingProvider", "SayHello", map[string]any{"name": "intruder"})
	if se, ok := sila2.AsSiLAError(err); !ok || se.Kind != sila2.KindFramework || se.FrameworkType != sila2.FrameworkInvalidMetadata {
		t.Fatalf("unlocked client: %v", err)
	}
	// SiLAService takes no metadata, and the adapter sends none there.
	if _, err := other.ServerInfo(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if got := l.srv.Locked(); got != "" {
		t.Fatalf("lock %q left after Close", got)
	}
}

func TestAdapterLegacyPlaintext(t *testing.T) {
	l := startLab(t, silatest.Options{Legacy: true})
	text := labConfig + fmt.Sprintf("endpoint: %s\ntls: {insecure_plaintext: true}\n", l.addr)
	cfg, err := sila2.Load(adapters.Source{Path: "legacy.yaml", Data: []byte(text)})
	if err != nil {
		t.Fatal(err)
	}
	d, err := sila2.New(ctxT(t), cfg, sila2.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	desc := d.Descriptor()
	if _, ok := desc.Action("say_hello"); !ok {
		t.Fatal("legacy server: no say_hello")
	}
}

func TestRegisterBuildsFromFile(t *testing.T) {
	l := startLab(t, silatest.Options{})
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "server-ca.pem"), l.cert.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	text := labConfig + fmt.Sprintf("endpoint: %s\ntls: {ca: server-ca.pem}\n", l.addr)
	path := filepath.Join(dir, "instrument.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	r := adapters.NewRegistry()
	if err := sila2.Register(r); err != nil {
		t.Fatal(err)
	}
	d, err := r.Open(ctxT(t), path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Descriptor().ID != "tc-01" {
		t.Fatalf("descriptor %+v", d.Descriptor().DeviceInfo)
	}
	if err := sila2.Register(r); err == nil {
		t.Fatal("registering sila2 twice must fail")
	}
}

func TestConfigValidate(t *testing.T) {
	base := "adapter: sila2\ndevice: {id: x}\nendpoint: h:1\n"
	for _, tc := range []struct {
		name, text, want string
	}{
		{"no tls", base, "tls"},
		{"plaintext with pin", base + "tls: {insecure_plaintext: true, pin_sha256: ab}\n", "excludes"},
		{"unknown field", base + "tls: {insecure_plaintext: true}\nfeaturez: []\n", "featurez"},
		{"bad approval", base + "tls: {insecure_plaintext: true}\ndefault_approval: maybe\n", "maybe"},
		{"bad ref", base + "tls: {insecure_plaintext: true}\ncommands: [{command: NoSlash}]\n", "Feature/Item"},
		{"action and setting", base + "tls: {insecure_plaintext: true}\ncommands: [{command: F/C, action: a, setting: s}]\n", "exclude"},
		{"no endpoint", "adapter: sila2\ndevice: {id: x}\ntls: {insecure_plaintext: true}\n", "endpoint"},
		{"bad metadata key", base + "tls: {insecure_plaintext: true}\nmetadata: {Token: x}\n", "Metadata"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := sila2.Load(adapters.Source{Path: "c.yaml", Data: []byte(tc.text)})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want an error mentioning %q, got %v", tc.want, err)
			}
		})
	}
}

func TestEStopCommand(t *testing.T) {
	in, d := conformanceDriver(t)
	r, err := d.EStop(ctxT(t), "test")
	if err != nil || !r.Stopped {
		t.Fatalf("estop %+v %v", r, err)
	}
	if in.StopCalls() != 1 {
		t.Fatalf("stop calls %d", in.StopCalls())
	}
	desc := d.Descriptor()
	if _, ok := desc.Action("stop"); ok {
		t.Fatal("the estop command must not also be an action")
	}
}

func TestAdapterPauseResume(t *testing.T) {
	l := startLab(t, silatest.Options{CancelController: true, PauseController: true, Unpausable: []string{"Stabilize"}})
	d := openAdapter(t, l, "")
	desc := d.Descriptor()
	if ct, _ := desc.Action("control_temperature"); !ct.Pausable {
		t.Fatal("observable command not pausable although the server has PauseController")
	}
	if sh, _ := desc.Action("say_hello"); sh.Pausable {
		t.Fatal("an unobservable command cannot be paused")
	}
	j := invoke(t, d, "control_temperature", map[string]any{"target_temperature": 300.0})
	<-l.thermo.Running()
	running := waitJob(t, d, j.ID, func(j *mhp.Job) bool { return j.Extra["command_execution_uuid"] != nil })
	x, ok := l.srv.Exec(running.Extra["command_execution_uuid"].(string))
	if !ok {
		t.Fatal("the server does not know the job's execution")
	}
	if _, err := d.PauseJob(ctxT(t), j.ID); err != nil {
		t.Fatal(err)
	}
	if !x.Paused() {
		t.Fatal("jobs/pause did not reach the server")
	}
	if _, err := d.ResumeJob(ctxT(t), j.ID); err != nil {
		t.Fatal(err)
	}
	if x.Paused() {
		t.Fatal("jobs/resume did not reach the server")
	}
	if err := l.thermo.End(silatest.Reach, testTimeout); err != nil {
		t.Fatal(err)
	}
	if got := waitJob(t, d, j.ID, terminal); got.State != mhp.JobDone {
		t.Fatalf("job %+v", got)
	}
	// The server refuses to pause Stabilize: NotSupported, the job runs on unpaused.
	st := invoke(t, d, "stabilize", nil)
	<-l.thermo.Running()
	waitJob(t, d, st.ID, func(j *mhp.Job) bool { return j.Extra["command_execution_uuid"] != nil })
	_, err := d.PauseJob(ctxT(t), st.ID)
	if mhp.CodeOf(err) != mhp.CodeNotSupported {
		t.Fatalf("pause refused by the server: %v, want NotSupported", err)
	}
	if got, _ := d.Job(ctxT(t), st.ID); got.Paused || got.State != mhp.JobRunning {
		t.Fatalf("refused pause changed the job: %+v", got)
	}
	if err := l.thermo.End(silatest.Reach, testTimeout); err != nil {
		t.Fatal(err)
	}
	waitJob(t, d, st.ID, terminal)
}

func TestAdapterKeepsTimedLock(t *testing.T) {
	l := startLab(t, silatest.Options{LockController: true})
	openAdapter(t, l, "lock: {identifier: kept, timeout_s: 1}\n")
	if l.srv.Locked() != "kept" {
		t.Fatal("not locked")
	}
	l.srv.ForceUnlock() // the lock timed out at the server
	conformance.EventuallyWithin(t, "the adapter to lock the server again", testTimeout, func() bool { return l.srv.Locked() == "kept" })
}
