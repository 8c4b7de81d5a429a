package sila2_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/sila2"
	"github.com/openmhp/mhp-go/sila2/silatest"
)

// fakeBackend is the adapter's seam as a struct of funcs.
type fakeBackend struct {
	property  func(ctx context.Context, feature, property string) (any, error)
	subscribe func(ctx context.Context, feature, property string, fn func(any) error) error
	call      func(ctx context.Context, feature, command string, params map[string]any) (map[string]any, error)
	start     func(ctx context.Context, feature, command string, params map[string]any) (sila2.Execution, error)
}

func (f *fakeBackend) Property(ctx context.Context, feature, property string) (any, error) {
	return f.property(ctx, feature, property)
}
func (f *fakeBackend) Subscribe(ctx context.Context, feature, property string, fn func(any) error) error {
	if f.subscribe == nil {
		<-ctx.Done()
		return ctx.Err()
	}
	return f.subscribe(ctx, feature, property, fn)
}
func (f *fakeBackend) Call(ctx context.Context, feature, command string, params map[string]any) (map[string]any, error) {
	return f.call(ctx, feature, command, params)
}
func (f *fakeBackend) Start(ctx context.Context, feature, command string, params map[string]any) (sila2.Execution, error) {
	return f.start(ctx, feature, command, params)
}

// fakeExec is an Execution as a struct of funcs.
type fakeExec struct {
	follow func(ctx context.Context, fn func(sila2.ExecInfo)) (sila2.ExecInfo, error)
	result func(ctx context.Context) (map[string]any, error)
	cancel func(ctx context.Context) error
}

func (x *fakeExec) UUID() string            { return "6a2f7a3e-0000-4000-8000-000000000001" }
func (x *fakeExec) Lifetime() time.Duration { return 0 }
func (x *fakeExec) Follow(ctx context.Context, fn func(sila2.ExecInfo)) (sila2.ExecInfo, error) {
	return x.follow(ctx, fn)
}
func (x *fakeExec) Intermediate(ctx context.Context, fn func(map[string]any)) error { return nil }
func (x *fakeExec) Result(ctx context.Context) (map[string]any, error)              { return x.result(ctx) }
func (x *fakeExec) Cancel(ctx context.Context) error                                { return x.cancel(ctx) }

func seamDriver(t *testing.T, b sila2.Backend) *binding.Driver {
	t.Helper()
	fw, err := sila2.NewFramework()
	if err != nil {
		t.Fatal(err)
	}
	var feats []*sila2.Compiled
	for _, text := range []string{silatest.TemperatureControllerFDL, silatest.CancelControllerFDL} {
		f, err := sila2.ParseFDL([]byte(text))
		if err != nil {
			t.Fatal(err)
		}
		c, err := sila2.Compile(fw, f)
		if err != nil {
			t.Fatal(err)
		}
		feats = append(feats, c)
	}
	cfg, err := sila2.ParseConfig(adapters.Source{Path: "seam.yaml", Data: []byte(`adapter: sila2
device: {id: seam}
endpoint: unused:1
tls: {insecure_plaintext: true}
features: [TemperatureController]
default_approval: auto
resubscribe_s: 0.2
cancel_wait_s: 2
`)})
	if err != nil {
		t.Fatal(err)
	}
	d, err := sila2.Bind(cfg, feats, b, sila2.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func TestSeamOutcomes(t *testing.T) {
	lost := &sila2.ConnectionError{Code: codes.Unavailable, Err: errors.New("link down")}
	refused := &sila2.ConnectionError{Code: codes.Unavailable, Err: errors.New(
		`rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:50052: connect: connection refused"`)}
	running := sila2.ExecInfo{Status: sila2.StatusRunning, Progress: 0.5, Remaining: -1}
	for _, tc := range []struct {
		name    string
		start   func() (sila2.Execution, error)
		cancel  bool
		state   mhp.JobState
		outcome string
		fault   bool
		text    string
	}{
		{name: "info stream never comes back", state: mhp.JobFailed, outcome: mhp.OutcomeUnknown, fault: true, text: "no _Info stream",
			start: func() (sila2.Execution, error) {
				return &fakeExec{follow: func(ctx context.Context, fn func(sila2.ExecInfo)) (sila2.ExecInfo, error) {
					fn(running)
					return running, lost
				}}, nil
			}},
		{name: "success but _Result lost", state: mhp.JobFailed, outcome: mhp.OutcomeUnknown, fault: true, text: "_Result",
			start: func() (sila2.Execution, error) {
				return &fakeExec{
					follow: func(context.Context, func(sila2.ExecInfo)) (sila2.ExecInfo, error) {
						return sila2.ExecInfo{Status: sila2.StatusFinishedSuccessfully}, nil
					},
					result: func(context.Context) (map[string]any, error) { return nil, lost },
				}, nil
			}},
		{name: "initiating call lost", state: mhp.JobFailed, outcome: mhp.OutcomeUnknown, fault: true,
			start: func() (sila2.Execution, error) { return nil, lost }},
		// The server was down and no connection was ever made: gRPC sent
		// nothing, so nothing ran (the legacy Python server's case).
		{name: "server down, connection refused", state: mhp.JobFailed, outcome: mhp.OutcomeNotStarted, text: "nothing was sent",
			start: func() (sila2.Execution, error) { return nil, refused }},
		{name: "initiating call not accepted", state: mhp.JobFailed, outcome: mhp.OutcomeNotStarted,
			start: func() (sila2.Execution, error) {
				return nil, &sila2.Error{Kind: sila2.KindFramework, FrameworkType: sila2.FrameworkCommandExecutionNotAccepted, Message: "busy"}
			}},
		{name: "cancel confirmed", cancel: true, state: mhp.JobCancelled,
			start: func() (sila2.Execution, error) {
				cancelled := make(chan struct{})
				return &fakeExec{
					follow: func(ctx context.Context, fn func(sila2.ExecInfo)) (sila2.ExecInfo, error) {
						fn(running)
						select {
						case <-cancelled:
							return sila2.ExecInfo{Status: sila2.StatusFinishedWithError}, nil
						case <-ctx.Done():
							return running, ctx.Err()
						}
					},
					cancel: func(context.Context) error { close(cancelled); return nil },
					result: func(context.Context) (map[string]any, error) {
						return nil, &sila2.Error{Kind: sila2.KindDefined, Identifier: "x/y/Z/v1/DefinedExecutionError/Aborted", Message: "stopped"}
					},
				}, nil
			}},
		{name: "cancel refused, command runs to the end", cancel: true, state: mhp.JobDone,
			start: func() (sila2.Execution, error) {
				refused := make(chan struct{})
				return &fakeExec{
					follow: func(ctx context.Context, fn func(sila2.ExecInfo)) (sila2.ExecInfo, error) {
						fn(running)
						<-refused
						return sila2.ExecInfo{Status: sila2.StatusFinishedSuccessfully}, nil
					},
					cancel: func(context.Context) error {
						close(refused)
						return &sila2.Error{Kind: sila2.KindDefined, Identifier: sila2.CancelControllerID + "/DefinedExecutionError/OperationNotSupported"}
					},
					result: func(context.Context) (map[string]any, error) {
						return map[string]any{"reached_temperature": 300.0}, nil
					},
				}, nil
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := seamDriver(t, &fakeBackend{start: func(context.Context, string, string, map[string]any) (sila2.Execution, error) {
				return tc.start()
			}})
			j := invoke(t, d, "control_temperature", map[string]any{"target_temperature": 300.0})
			if tc.cancel {
				waitJob(t, d, j.ID, func(j *mhp.Job) bool { return j.Progress == 0.5 })
				if _, err := d.CancelJob(ctxT(t), j.ID); err != nil {
					t.Fatal(err)
				}
			}
			got := waitJob(t, d, j.ID, terminal)
			if got.State != tc.state || (tc.outcome != "" && got.Outcome != tc.outcome) {
				t.Fatalf("job %s outcome %q (%+v), want %s %q", got.State, got.Outcome, got.Error, tc.state, tc.outcome)
			}
			if tc.text != "" && !strings.Contains(got.Error.Message, tc.text) {
				t.Fatalf("error %q does not mention %q", got.Error.Message, tc.text)
			}
			if st := deviceState(t, d); (st == mhp.StateFault) != tc.fault {
				t.Fatalf("device %s, fault wanted %v", st, tc.fault)
			}
		})
	}
}

func TestSeamSignalReadFailureIsUnavailable(t *testing.T) {
	d := seamDriver(t, &fakeBackend{property: func(context.Context, string, string) (any, error) {
		return nil, &sila2.ConnectionError{Code: codes.Unavailable, Err: errors.New("down")}
	}})
	r, err := d.Read(ctxT(t), []string{"profile"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Values["profile"] != nil || !strings.Contains(r.Unavailable["profile"], "down") {
		t.Fatalf("read %+v", r)
	}
	if deviceState(t, d) != mhp.StateIdle {
		t.Fatal("a failed read must not fault the device")
	}
}
