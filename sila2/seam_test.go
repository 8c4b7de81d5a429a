package sila2_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/sila2"
	"github.com/openmhp/mhp-go/sila2/silatest"
)

func seamDriver(t *testing.T, b sila2.Backend) *binding.Driver {
	t.Helper()
	cfg, err := sila2.Load(adapters.Source{Path: "seam.yaml", Data: []byte(`adapter: sila2
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
	d, err := sila2.New(ctxT(t), cfg, sila2.Options{Backend: b,
		Features: []string{silatest.TemperatureControllerFDL, silatest.CancelControllerFDL}})
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
		check   func(t *testing.T, j *mhp.Job)
	}{
		{name: "info stream never comes back", state: mhp.JobFailed, outcome: mhp.OutcomeUnknown, fault: true, text: "no _Info stream",
			start: func() (sila2.Execution, error) {
				return &silatest.Execution{FollowFunc: func(ctx context.Context, fn func(sila2.ExecInfo)) (sila2.ExecInfo, error) {
					fn(running)
					return running, lost
				}}, nil
			}},
		{name: "success but _Result lost", state: mhp.JobFailed, outcome: mhp.OutcomeUnknown, fault: true, text: "_Result",
			start: func() (sila2.Execution, error) {
				return &silatest.Execution{
					FollowFunc: func(context.Context, func(sila2.ExecInfo)) (sila2.ExecInfo, error) {
						return sila2.ExecInfo{Status: sila2.StatusFinishedSuccessfully}, nil
					},
					ResultFunc: func(context.Context) (map[string]any, error) { return nil, lost },
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
				return &silatest.Execution{
					FollowFunc: func(ctx context.Context, fn func(sila2.ExecInfo)) (sila2.ExecInfo, error) {
						fn(running)
						select {
						case <-cancelled:
							return sila2.ExecInfo{Status: sila2.StatusFinishedWithError}, nil
						case <-ctx.Done():
							return running, ctx.Err()
						}
					},
					CancelFunc: func(context.Context) error { close(cancelled); return nil },
					ResultFunc: func(context.Context) (map[string]any, error) {
						return nil, &sila2.Error{Kind: sila2.KindDefined, Identifier: "x/y/Z/v1/DefinedExecutionError/Aborted", Message: "stopped"}
					},
				}, nil
			},
			// The cancelled job keeps the server's error id and message.
			// Before the fix it kept nothing of it.
			check: func(t *testing.T, j *mhp.Job) {
				res, _ := j.Result.(map[string]any)
				se, _ := res["sila_error"].(map[string]any)
				if se["identifier"] != "x/y/Z/v1/DefinedExecutionError/Aborted" || se["message"] != "stopped" {
					t.Fatalf("cancelled job result %v, want the server's error id and message", j.Result)
				}
			}},
		{name: "cancel refused, command runs to the end", cancel: true, state: mhp.JobDone,
			start: func() (sila2.Execution, error) {
				refused := make(chan struct{})
				return &silatest.Execution{
					FollowFunc: func(ctx context.Context, fn func(sila2.ExecInfo)) (sila2.ExecInfo, error) {
						fn(running)
						<-refused
						return sila2.ExecInfo{Status: sila2.StatusFinishedSuccessfully}, nil
					},
					CancelFunc: func(context.Context) error {
						close(refused)
						return &sila2.Error{Kind: sila2.KindDefined, Identifier: sila2.CancelControllerID + "/DefinedExecutionError/OperationNotSupported"}
					},
					ResultFunc: func(context.Context) (map[string]any, error) {
						return map[string]any{"reached_temperature": 300.0}, nil
					},
				}, nil
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := seamDriver(t, &silatest.Backend{StartFunc: func(context.Context, string, string, map[string]any) (sila2.Execution, error) {
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
			if tc.check != nil {
				tc.check(t, got)
			}
		})
	}
}

func TestSeamSignalReadFailureIsUnavailable(t *testing.T) {
	d := seamDriver(t, &silatest.Backend{PropertyFunc: func(context.Context, string, string) (any, error) {
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

// TestNewBackendSeam: Options.Backend and Options.Features go together, and
// a definition that does not parse is refused by its index, before
// anything reaches the backend.
func TestNewBackendSeam(t *testing.T) {
	cfg, err := sila2.Load(adapters.Source{Path: "seam.yaml", Data: []byte("adapter: sila2\ndevice: {id: seam}\nendpoint: unused:1\ntls: {insecure_plaintext: true}\n")})
	if err != nil {
		t.Fatal(err)
	}
	touched := false
	b := &silatest.Backend{
		PropertyFunc: func(context.Context, string, string) (any, error) { touched = true; return nil, nil },
		CallFunc: func(context.Context, string, string, map[string]any) (map[string]any, error) {
			touched = true
			return nil, nil
		},
	}
	for _, tc := range []struct {
		name string
		opt  sila2.Options
		want string
	}{
		{"backend without features", sila2.Options{Backend: b}, "Options.Features"},
		{"features without backend", sila2.Options{Features: []string{silatest.TemperatureControllerFDL}}, "Options.Backend"},
		{"bad definition", sila2.Options{Backend: b, Features: []string{silatest.TemperatureControllerFDL, "<Feature"}}, "Options.Features[1]"},
		{"lock mode needs the client", sila2.Options{Backend: b, Features: []string{silatest.LockControllerFDL}}, "needs the SiLA client"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cfg
			if tc.name == "lock mode needs the client" {
				c.Lock = &sila2.LockConfig{Mode: sila2.LockLease}
			}
			d, err := sila2.New(ctxT(t), c, tc.opt)
			if err == nil {
				_ = d.Close()
				t.Fatalf("built a driver, want a refusal naming %s", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not name %s", err, tc.want)
			}
		})
	}
	if touched {
		t.Fatal("a refused New reached the backend")
	}
}
