// Package silatest is a reusable fake SiLA 2 server for tests: give it
// Feature Definitions (FDL) and Go handlers and it serves them over real
// gRPC with the same run-time descriptors the sila2 client builds (no
// generated stubs). It implements SiLAService itself and, on request,
// CancelController and LockController; it speaks the SiLA error model
// (ABORTED + base64 SiLAError), validates parameters against their
// constraints, runs observable commands with _Info/_Intermediate/_Result,
// checks -bin metadata, serves TLS with a certificate made in the test, and
// can play a legacy (v1.0-era) server.
//
// [Backend] and [Execution] fake the adapter's seam instead ([sila2.Backend],
// [sila2.Options].Backend) as structs of funcs, for driving the adapter
// without a server: a stream that never comes back, a result lost after
// success.
package silatest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/openmhp/mhp-go/sila2"
)

// Exec is one observable command execution at the fake.
type Exec struct {
	// Params are the validated parameters.
	Params map[string]any
	// UUID is the command execution UUID.
	UUID string
	// Accepted is what the command's Accept hook returned.
	Accepted any
	// Command is the command's identifier.
	Command string

	srv      *Server
	mu       sync.Mutex
	info     sila2.ExecInfo
	changed  chan struct{}
	inter    []map[string]any
	result   map[string]any
	err      error
	dropped  bool
	paused   bool
	cancel   chan struct{}
	cancelOn sync.Once
	stopped  chan struct{}
	stopOn   sync.Once
	done     chan struct{}
}

// ServerStopped is closed when the server stops: a handler must return.
func (x *Exec) ServerStopped() <-chan struct{} { return x.stopped }

// Progress reports progress (0..1) and the estimated remaining time.
func (x *Exec) Progress(p float64, remaining time.Duration) {
	x.mu.Lock()
	x.info.Status, x.info.Progress, x.info.Remaining = sila2.StatusRunning, p, remaining
	x.bump()
	x.mu.Unlock()
}

// Intermediate publishes an intermediate response.
func (x *Exec) Intermediate(v map[string]any) {
	x.mu.Lock()
	x.inter = append(x.inter, v)
	x.bump()
	x.mu.Unlock()
}

// CancelRequested is closed when CancelController asked to cancel.
func (x *Exec) CancelRequested() <-chan struct{} { return x.cancel }

// Paused reports whether PauseController paused the execution.
func (x *Exec) Paused() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.paused
}

// Done is closed when the execution finished.
func (x *Exec) Done() <-chan struct{} { return x.done }

func (x *Exec) bump() {
	close(x.changed)
	x.changed = make(chan struct{})
}

func (x *Exec) abort() { x.cancelOn.Do(func() { close(x.cancel) }) }

func (x *Exec) finish(res map[string]any, err error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.result, x.err = res, err
	switch {
	case errors.Is(err, ErrDrop):
		x.dropped = true
	case err != nil:
		x.info.Status = sila2.StatusFinishedWithError
	default:
		x.info.Status, x.info.Progress, x.info.Remaining = sila2.StatusFinishedSuccessfully, 1, 0
	}
	x.bump()
	close(x.done)
}

func (x *Exec) snapshot() (sila2.ExecInfo, bool, bool, chan struct{}) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.info, x.dropped, x.info.Terminal(), x.changed
}

func (s *Server) start(stream grpc.ServerStream, r route, in *dynamicpb.Message) error {
	cmd, _ := r.f.c.Feature.Command(r.item)
	vals, err := s.params(r.f, cmd, in)
	if err != nil {
		return err
	}
	h := r.f.h.Observable[r.item]
	if h == nil {
		return frameworkErr(sila2.FrameworkCommandExecutionNotAccepted, "command %s has no handler", r.item)
	}
	s.count(r.f, r.item)
	var accepted any
	if acc := r.f.h.Accept[r.item]; acc != nil {
		v, err := acc(stream.Context(), vals)
		if err != nil {
			return err
		}
		accepted = v
	}
	x := &Exec{Params: vals, Accepted: accepted, Command: r.item, UUID: newUUID(), srv: s, changed: make(chan struct{}), cancel: make(chan struct{}), stopped: make(chan struct{}), done: make(chan struct{}),
		info: sila2.ExecInfo{Status: sila2.StatusWaiting, Progress: 0, Remaining: -1}}
	s.mu.Lock()
	s.execs[x.UUID] = x
	s.mu.Unlock()
	go func() {
		res, err := h(context.Background(), x)
		x.finish(res, err)
		if errors.Is(err, ErrDrop) {
			s.mu.Lock()
			delete(s.execs, x.UUID)
			s.mu.Unlock()
		}
	}()
	return stream.SendMsg(s.fw.Confirmation(x.UUID, s.opts.Lifetime))
}

func (s *Server) exec(in *dynamicpb.Message) (*Exec, error) {
	id := strings.ToLower(sila2.DecodeUUID(in))
	s.mu.Lock()
	x, ok := s.execs[id]
	s.mu.Unlock()
	if !ok {
		return nil, frameworkErr(sila2.FrameworkInvalidCommandExecutionUUID, "no command execution %q", id)
	}
	return x, nil
}

func (s *Server) info(ctx context.Context, stream grpc.ServerStream, in *dynamicpb.Message) error {
	x, err := s.exec(in)
	if err != nil {
		return err
	}
	brk := s.breaker()
	for {
		info, dropped, terminal, changed := x.snapshot()
		if dropped {
			return ErrDrop
		}
		if err := stream.SendMsg(s.fw.ExecutionInfo(info)); err != nil {
			return err
		}
		if terminal {
			return nil
		}
		select {
		case <-changed:
		case <-brk:
			return status.Error(codes.Unavailable, "silatest: stream broken")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (s *Server) intermediate(ctx context.Context, stream grpc.ServerStream, r route, md protoreflect.MethodDescriptor, in *dynamicpb.Message) error {
	x, err := s.exec(in)
	if err != nil {
		return err
	}
	cmd, _ := r.f.c.Feature.Command(r.item)
	sent := 0
	for {
		x.mu.Lock()
		pending := append([]map[string]any(nil), x.inter[sent:]...)
		terminal, dropped, changed := x.info.Terminal(), x.dropped, x.changed
		x.mu.Unlock()
		for _, v := range pending {
			out, err := r.f.c.EncodeElements(md.Output(), cmd.Intermediate, v)
			if err != nil {
				return err
			}
			if err := stream.SendMsg(out); err != nil {
				return err
			}
			sent++
		}
		if dropped {
			return ErrDrop
		}
		if terminal {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (s *Server) result(stream grpc.ServerStream, r route, md protoreflect.MethodDescriptor, in *dynamicpb.Message) error {
	x, err := s.exec(in)
	if err != nil {
		return err
	}
	x.mu.Lock()
	terminal, res, xerr := x.info.Terminal(), x.result, x.err
	x.mu.Unlock()
	if !terminal {
		return frameworkErr(sila2.FrameworkCommandExecutionNotFinished, "command execution %s has not finished", x.UUID)
	}
	if xerr != nil {
		if _, ok := sila2.AsSiLAError(xerr); !ok {
			xerr = &sila2.Error{Kind: sila2.KindUndefined, Message: xerr.Error()}
		}
		return xerr
	}
	cmd, _ := r.f.c.Feature.Command(r.item)
	if res, err = s.offerDownloads(r.f, cmd.Responses, res); err != nil {
		return err
	}
	out, err := r.f.c.EncodeElements(md.Output(), cmd.Responses, res)
	if err != nil {
		return &sila2.Error{Kind: sila2.KindUndefined, Message: "handler responses: " + err.Error()}
	}
	return stream.SendMsg(out)
}
