package opcua

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/gopcua/opcua/ua"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
)

// Part 10 program states (namespace 0).
var programStates = map[uint32]string{2400: "Ready", 2402: "Running", 2404: "Suspended", 2406: "Halted"}

// programNodes is a Part 10 program's resolved nodes.
type programNodes struct {
	node    *ua.NodeID
	state   *ua.NodeID // CurrentState/Id, else CurrentState
	methods map[string]*ua.NodeID
}

func resolveProgram(ctx context.Context, cl Client, n *ua.NodeID) (*programNodes, error) {
	c, err := children(ctx, cl, n)
	if err != nil {
		return nil, err
	}
	p := &programNodes{node: n, methods: map[string]*ua.NodeID{}}
	cs, ok := c["CurrentState"]
	if !ok {
		return nil, errors.New("no CurrentState")
	}
	p.state = cs
	if cc, err := children(ctx, cl, cs); err == nil && cc["Id"] != nil {
		p.state = cc["Id"]
	}
	for _, m := range []string{"Start", "Suspend", "Resume", "Halt", "Reset"} {
		if x, ok := c[m]; ok {
			p.methods[m] = x
		}
	}
	return p, nil
}

// programState decodes a Part 10 state value (Id or text).
func programState(dv *ua.DataValue) string {
	if dv == nil || dv.Value == nil || isBad(dv.Status) {
		return ""
	}
	switch v := dv.Value.Value().(type) {
	case *ua.NodeID:
		if v != nil && v.Namespace() == 0 {
			return programStates[v.IntID()]
		}
	case *ua.LocalizedText:
		if v != nil {
			return v.Text
		}
	case string:
		return v
	}
	return ""
}

func (a *adapter) program(item ActionItem) (*programNodes, Client, error) {
	a.mu.Lock()
	p := a.progs[item.Program.Node]
	cl := a.cl
	a.mu.Unlock()
	what := "action " + item.Name
	if cl == nil {
		return nil, nil, transportError(what, ErrNotConnected)
	}
	if p == nil {
		var err error
		ctx, cancel := context.WithTimeout(context.Background(), seconds(a.cfg.Timeouts.RequestS))
		defer cancel()
		if p, err = resolveProgram(ctx, cl, a.node(item.Program.Node)); err != nil {
			return nil, nil, refusalError(fmt.Sprintf("%s: program %s: %v", what, item.Program.Node, err), ua.StatusBadNodeIDUnknown)
		}
		a.mu.Lock()
		a.progs[item.Program.Node] = p
		a.mu.Unlock()
	}
	return p, cl, nil
}

// programCall calls one of the program's methods without arguments.
func (a *adapter) programCall(ctx context.Context, item ActionItem, p *programNodes, m string) error {
	n, ok := p.methods[m]
	if !ok {
		return refusalError(fmt.Sprintf("action %s: program %s has no %s method", item.Name, item.Program.Node, m), ua.StatusBadMethodInvalid)
	}
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	_, err := a.call(cctx, fmt.Sprintf("action %s: call %s", item.Name, m), p.node, n, nil)
	return err
}

func (a *adapter) pauseProgram(item ActionItem) func(context.Context, *binding.Job) error {
	return func(ctx context.Context, job *binding.Job) error {
		p, _, err := a.program(item)
		if err != nil {
			return err
		}
		return a.programCall(ctx, item, p, "Suspend")
	}
}

func (a *adapter) resumeProgram(item ActionItem) func(context.Context, *binding.Job) error {
	return func(ctx context.Context, job *binding.Job) error {
		p, _, err := a.program(item)
		if err != nil {
			return err
		}
		return a.programCall(ctx, item, p, "Resume")
	}
}

// runProgram starts a Part 10 program and follows CurrentState: Halted
// after our Halt -> cancelled; any other end (Halted, or back to Ready)
// is resolved by the Result variable: success -> done (with Outputs),
// failure -> failed, unreadable -> outcome unknown.
func (a *adapter) runProgram(item ActionItem) func(context.Context, *binding.Job) (any, error) {
	spec := item.Program
	return func(ctx context.Context, job *binding.Job) (any, error) {
		what := "action " + item.Name
		p, cl, err := a.program(item)
		if err != nil {
			return nil, err
		}
		wctx, wcancel := a.callCtx(ctx)
		events, stop, err := a.watchState(wctx, cl, []*ua.NodeID{p.state})
		wcancel()
		if err != nil {
			return nil, transportError(what+": watch the program state", err)
		}
		defer stop()
		state := ""
		first := time.NewTimer(seconds(a.cfg.Timeouts.RequestS))
		defer first.Stop()
		for state == "" {
			select {
			case e := <-events:
				state = programState(e.dv)
			case <-first.C:
				return nil, transportError(what+": program state", ua.StatusBadServerNotConnected)
			}
		}
		if state != "Ready" && state != "Halted" {
			return nil, refusalError(fmt.Sprintf("%s: program %s is %s", what, spec.Node, state), ua.StatusBadInvalidState).With("program_state", state)
		}
		if state == "Halted" {
			// A halted program needs Reset before Start.
			if err := a.programCall(ctx, item, p, "Reset"); err != nil {
				return nil, err
			}
		}
		if err := a.programCall(ctx, item, p, "Start"); err != nil {
			return nil, err
		}
		sawRunning, haltSent := false, false
		startBy := time.NewTimer(seconds(a.cfg.Timeouts.StartS))
		defer startBy.Stop()
		ctxDone := ctx.Done()
		var giveUp <-chan time.Time
		for {
			select {
			case e := <-events:
				s := programState(e.dv)
				if s == "" {
					continue
				}
				state = s
				switch s {
				case "Running", "Suspended":
					sawRunning = true
				case "Halted", "Ready":
					if !sawRunning && s == "Ready" {
						continue
					}
					return a.programResult(ctx, item, haltSent)
				}
			case <-startBy.C:
				if !sawRunning {
					return nil, fmt.Errorf("%s: Start was accepted but the program did not reach Running within %gs (state %q): outcome unknown", what, a.cfg.Timeouts.StartS, state)
				}
			case <-ctxDone:
				ctxDone = nil
				haltSent = true
				if err := a.programCall(ctx, item, p, "Halt"); err != nil {
					if _, refused := mhp.AsError(err); !refused {
						return nil, err
					}
				}
				tm := time.NewTimer(seconds(a.cfg.Timeouts.CancelS))
				defer tm.Stop()
				giveUp = tm.C
			case <-giveUp:
				return nil, fmt.Errorf("%s: no final state within %gs of Halt (state %q): outcome unknown", what, a.cfg.Timeouts.CancelS, state)
			}
		}
	}
}

// programResult maps a program's end. Halted is both "completed" and
// "stopped" in Part 10, so the Result variable decides: success -> done
// (even after our Halt: it completed anyway), failure -> cancelled when we
// sent Halt, else failed. Without a readable result only our Halt is
// certain (cancelled); any other end has an unknown outcome.
func (a *adapter) programResult(ctx context.Context, item ActionItem, haltSent bool) (any, error) {
	spec := item.Program
	what := "action " + item.Name
	cl := a.client()
	var res []*ua.DataValue
	var err error
	rctx, cancel := a.callCtx(ctx)
	defer cancel()
	if spec.Result != "" && cl != nil {
		res, err = cl.Read(rctx, []*ua.ReadValueID{{NodeID: a.node(spec.Result), AttributeID: ua.AttributeIDValue}})
	}
	if spec.Result == "" || cl == nil || err != nil || isBad(res[0].Status) || res[0].Value == nil {
		if haltSent {
			return nil, binding.ErrCancelled
		}
		return nil, fmt.Errorf("%s: the program halted and no readable result says how it ended: outcome unknown", what)
	}
	v := res[0].Value.Value()
	ok := false
	switch x := v.(type) {
	case bool:
		ok = x
	case ua.StatusCode:
		ok = isGood(x)
	default:
		ok = spec.Success != nil && reflect.DeepEqual(fromValue(v), fromValue(normalise(spec.Success)))
	}
	out := map[string]any{"result": fromValue(v)}
	if !ok && haltSent {
		return nil, binding.ErrCancelled
	}
	if !ok {
		return nil, binding.Failed(fmt.Errorf("%s: the program ended with result %v", what, fromValue(v)), out)
	}
	for name, n := range spec.Outputs {
		r, err := cl.Read(rctx, []*ua.ReadValueID{{NodeID: a.node(n), AttributeID: ua.AttributeIDValue}})
		if err == nil && !isBad(r[0].Status) {
			out[name] = fromVariant(r[0].Value)
		}
	}
	return out, nil
}
