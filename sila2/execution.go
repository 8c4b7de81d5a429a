package sila2

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/dynamicpb"
)

// Execution is a running observable command.
type Execution interface {
	// UUID is the command execution UUID.
	UUID() string
	// Lifetime is the lifetime of execution the server granted (0: unbounded).
	Lifetime() time.Duration
	// Follow reads the _Info stream, calling fn with each ExecutionInfo,
	// until a finished status (returned) or an error (the stream broke).
	Follow(ctx context.Context, fn func(ExecInfo)) (ExecInfo, error)
	// Intermediate reads the _Intermediate stream until it ends or ctx ends.
	Intermediate(ctx context.Context, fn func(map[string]any)) error
	// Result reads _Result: the responses, or the command's SiLA error.
	Result(ctx context.Context) (map[string]any, error)
	// Cancel asks the server's CancelController to cancel the execution.
	Cancel(ctx context.Context) error
}

// ErrNotCancellable is returned by Execution.Cancel when the server does not
// implement the CancelController feature.
var ErrNotCancellable = errors.New("sila2: the server does not implement CancelController")

// Start initiates an observable command and returns its execution.
func (c *Client) Start(ctx context.Context, feature, command string, params map[string]any) (Execution, error) {
	f, cmd, md, err := c.command(feature, command)
	if err != nil {
		return nil, err
	}
	if !cmd.IsObservable() {
		return nil, fmt.Errorf("sila2: command %s is unobservable: use Call", cmd.Identifier)
	}
	in, err := c.encodeParams(ctx, f, cmd, md, params)
	if err != nil {
		return nil, err
	}
	out, err := c.unary(ctx, f, cmd.Identifier, in, f.FQID("Command", cmd.Identifier))
	if err != nil {
		return nil, err
	}
	id, life := DecodeConfirmation(out)
	if id == "" {
		return nil, &ConnectionError{Err: fmt.Errorf("%s: confirmation without a command execution UUID", cmd.Identifier)}
	}
	return &execution{c: c, f: f, cmd: cmd, id: id, lifetime: life}, nil
}

// Attach returns the execution of an observable command already started
// (by this client before a restart, or by another), to follow it or read
// its result. The server judges the UUID.
func (c *Client) Attach(feature, command, uuid string) (Execution, error) {
	f, cmd, _, err := c.command(feature, command)
	if err != nil {
		return nil, err
	}
	if !cmd.IsObservable() {
		return nil, fmt.Errorf("sila2: command %s is unobservable: nothing to attach to", cmd.Identifier)
	}
	return &execution{c: c, f: f, cmd: cmd, id: uuid}, nil
}

type execution struct {
	c        *Client
	f        *Compiled
	cmd      *Command
	id       string
	lifetime time.Duration
}

func (e *execution) UUID() string            { return e.id }
func (e *execution) Lifetime() time.Duration { return e.lifetime }

var errFinished = errors.New("finished")

func (e *execution) Follow(ctx context.Context, fn func(ExecInfo)) (ExecInfo, error) {
	name := e.cmd.Identifier + "_Info"
	md, _ := e.f.Method(name)
	var last ExecInfo
	err := e.c.serverStream(ctx, e.f, name, e.c.fw.UUID(e.id), md.Output(), func(m *dynamicpb.Message) error {
		last = DecodeExecInfo(m)
		if last.Lifetime > 0 {
			e.lifetime = last.Lifetime
		}
		if fn != nil {
			fn(last)
		}
		if last.Terminal() {
			return errFinished
		}
		return nil
	})
	if err == errFinished {
		return last, nil
	}
	return last, err
}

func (e *execution) Intermediate(ctx context.Context, fn func(map[string]any)) error {
	name := e.cmd.Identifier + "_Intermediate"
	md, ok := e.f.Method(name)
	if !ok {
		return nil
	}
	err := e.c.serverStream(ctx, e.f, name, e.c.fw.UUID(e.id), md.Output(), func(m *dynamicpb.Message) error {
		v, err := e.c.decodeResponses(ctx, e.f, m, e.cmd.Intermediate)
		if err != nil {
			return err
		}
		fn(v)
		return nil
	})
	var ce *ConnectionError
	if errors.As(err, &ce) && errors.Is(err, errStreamEnded) {
		return nil
	}
	return err
}

func (e *execution) Result(ctx context.Context) (map[string]any, error) {
	out, err := e.c.unary(ctx, e.f, e.cmd.Identifier+"_Result", e.c.fw.UUID(e.id), "")
	if err != nil {
		return nil, err
	}
	return e.c.decodeResponses(ctx, e.f, out, e.cmd.Responses)
}

func (e *execution) Cancel(ctx context.Context) error {
	if !e.c.HasFeature(CancelControllerID) {
		return ErrNotCancellable
	}
	_, err := e.c.Call(ctx, CancelControllerID, "CancelCommand", map[string]any{"CommandExecutionUUID": e.id})
	return err
}
