package opcuatest

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/gopcua/opcua/id"
	"github.com/gopcua/opcua/server"
	"github.com/gopcua/opcua/ua"
	"github.com/gopcua/opcua/uasc"

	"github.com/openmhp/mhp-go/conformance"
)

// The fake's Part 10 program and LADS functional units.

// ProgramAction is the instrument action name of the Part 10 program "Batch".
const ProgramAction = "batch"

// program is the Part 10 program Batch: Ready -> Running <-> Suspended ->
// Halted, with Result (Boolean) and Yield (Double).
type program struct {
	state  uint32
	result bool
	yield  float64
	work   *conformance.Work
	halted bool
}

func (s *Server) buildProgram(root *server.Node) {
	p := &program{state: 2400}
	s.prog = p
	b := s.object(root, "Batch", "Batch")
	cs := s.variable(b, "CurrentState", "Batch.CurrentState", id.LocalizedText, 1, func() *ua.DataValue {
		s.mu.Lock()
		defer s.mu.Unlock()
		return good(&ua.LocalizedText{EncodingMask: ua.LocalizedTextText, Text: map[uint32]string{2400: "Ready", 2402: "Running", 2404: "Suspended", 2406: "Halted"}[p.state]})
	})
	s.variable(cs, "Id", "Batch.CurrentState.Id", id.NodeID, 1, func() *ua.DataValue {
		s.mu.Lock()
		defer s.mu.Unlock()
		return good(ua.NewNumericNodeID(0, p.state))
	})
	s.variable(b, "Result", "Batch.Result", id.Boolean, 1, func() *ua.DataValue {
		s.mu.Lock()
		defer s.mu.Unlock()
		return good(p.result)
	})
	s.variable(b, "Yield", "Batch.Yield", id.Double, 1, func() *ua.DataValue {
		s.mu.Lock()
		defer s.mu.Unlock()
		return good(p.yield)
	})
	for _, m := range []string{"Start", "Suspend", "Resume", "Halt", "Reset"} {
		s.method(b, m, "Batch."+m, nil)
	}
}

func (s *Server) setProgram(state uint32) {
	s.mu.Lock()
	s.prog.state = state
	s.mu.Unlock()
	s.srv.ChangeNotification(s.nid("Batch.CurrentState.Id"))
	s.srv.ChangeNotification(s.nid("Batch.CurrentState"))
}

// callProgram runs the Part 10 methods.
func (s *Server) callProgram(key string) ua.StatusCode {
	p := s.prog
	s.mu.Lock()
	state, w := p.state, p.work
	s.mu.Unlock()
	switch key {
	case "Batch.Reset":
		if state != 2406 {
			return ua.StatusBadInvalidState
		}
		s.setProgram(2400)
	case "Batch.Start":
		if state != 2400 {
			return ua.StatusBadInvalidState
		}
		w, err := s.In.Start(ProgramAction, nil)
		if err != nil {
			return ua.StatusBadInvalidState
		}
		s.mu.Lock()
		p.work, p.result, p.yield, p.halted = w, false, 0, false
		s.mu.Unlock()
		s.setProgram(2402)
		go func() {
			time.Sleep(Hold)
			<-w.Done()
			st, _, _ := w.State()
			s.mu.Lock()
			switch st {
			case conformance.WorkSucceeded:
				p.result, p.yield = true, 12.5
			default:
				p.result = false
			}
			p.work = nil
			s.mu.Unlock()
			if st == conformance.WorkDropped {
				s.DropConnections()
			}
			s.setProgram(2406)
		}()
	case "Batch.Suspend":
		if state != 2402 {
			return ua.StatusBadInvalidState
		}
		s.setProgram(2404)
	case "Batch.Resume":
		if state != 2404 {
			return ua.StatusBadInvalidState
		}
		s.setProgram(2402)
	case "Batch.Halt":
		if (state != 2402 && state != 2404) || w == nil {
			return ua.StatusBadInvalidState
		}
		w.Cancel()
	default:
		return ua.StatusBadMethodInvalid
	}
	return ua.StatusOK
}

func (s *Server) extraValue(name string) any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.extra[name]
}

// buildUnit makes FU_<action>: FunctionalUnitState {CurrentState {Id},
// Start, Stop, Abort, RunningStateMachine {CurrentState {Id}}}.
func (s *Server) buildUnit(root *server.Node, action string) {
	u := &unit{name: action, state: 5085, runState: 5120}
	s.units[action] = u
	key := "FU_" + action
	fu := s.object(root, key, key)
	sm := s.object(fu, "FunctionalUnitState", key+".FunctionalUnitState")
	cs := s.variable(sm, "CurrentState", key+".FunctionalUnitState.CurrentState", id.LocalizedText, 1, func() *ua.DataValue {
		s.mu.Lock()
		defer s.mu.Unlock()
		return good(&ua.LocalizedText{EncodingMask: ua.LocalizedTextText, Text: ladsName(u.state)})
	})
	s.variable(cs, "Id", key+".FunctionalUnitState.CurrentState.Id", id.NodeID, 1, func() *ua.DataValue {
		s.mu.Lock()
		defer s.mu.Unlock()
		return good(s.ladsID(u.state))
	})
	s.method(sm, "Start", key+".Start", []*ua.Argument{{Name: "Properties", DataType: ua.NewNumericNodeID(0, id.KeyValuePair), ValueRank: 1, Description: &ua.LocalizedText{}}})
	s.method(sm, "StartProgram", key+".StartProgram", []*ua.Argument{
		{Name: "ProgramTemplateId", DataType: ua.NewNumericNodeID(0, id.String), ValueRank: -1, Description: &ua.LocalizedText{}},
		{Name: "Properties", DataType: s.ladsID(3003), ValueRank: 1, Description: &ua.LocalizedText{}},
		{Name: "SupervisoryJobId", DataType: ua.NewNumericNodeID(0, id.String), ValueRank: -1, Description: &ua.LocalizedText{}},
		{Name: "SupervisoryTaskId", DataType: ua.NewNumericNodeID(0, id.String), ValueRank: -1, Description: &ua.LocalizedText{}},
		{Name: "Samples", DataType: s.ladsID(3002), ValueRank: 1, Description: &ua.LocalizedText{}},
	})
	pm := s.object(fu, "ProgramManager", key+".ProgramManager")
	ap := s.object(pm, "ActiveProgram", key+".ActiveProgram")
	s.variable(ap, "CurrentRuntime", key+".ActiveProgram.CurrentRuntime", id.Double, 1, func() *ua.DataValue {
		s.mu.Lock()
		defer s.mu.Unlock()
		return good(u.progress * 1000)
	})
	s.variable(ap, "EstimatedRuntime", key+".ActiveProgram.EstimatedRuntime", id.Double, 1, func() *ua.DataValue { return good(1000.0) })
	s.variable(ap, "DeviceProgramRunId", key+".ActiveProgram.DeviceProgramRunId", id.String, 1, func() *ua.DataValue {
		s.mu.Lock()
		defer s.mu.Unlock()
		return good(u.runID)
	})
	rs := s.object(pm, "ResultSet", key+".ResultSet")
	for i := 0; i < resultSlots; i++ {
		i := i
		rk := fmt.Sprintf("%s.Result%d", key, i)
		r := s.object(rs, fmt.Sprintf("Result%d", i), rk)
		s.variable(r, "DeviceProgramRunId", rk+".DeviceProgramRunId", id.String, 1, func() *ua.DataValue {
			s.mu.Lock()
			defer s.mu.Unlock()
			return good(u.results[i].runID)
		})
		vs := s.object(r, "VariableSet", rk+".VariableSet")
		s.variable(vs, "ok", rk+".ok", id.Boolean, 1, func() *ua.DataValue {
			s.mu.Lock()
			defer s.mu.Unlock()
			return good(u.results[i].ok)
		})
		s.variable(vs, "action", rk+".action", id.String, 1, func() *ua.DataValue {
			s.mu.Lock()
			defer s.mu.Unlock()
			return good(u.results[i].action)
		})
	}
	s.method(sm, "Stop", key+".Stop", nil)
	s.method(sm, "Abort", key+".Abort", nil)
	s.method(sm, "Clear", key+".Clear", nil)
	rsm := s.object(sm, "RunningStateMachine", key+".RunningStateMachine")
	rcs := s.variable(rsm, "CurrentState", key+".RunningStateMachine.CurrentState", id.LocalizedText, 1, func() *ua.DataValue {
		s.mu.Lock()
		defer s.mu.Unlock()
		return good(&ua.LocalizedText{EncodingMask: ua.LocalizedTextText, Text: ladsName(u.runState)})
	})
	s.variable(rcs, "Id", key+".RunningStateMachine.CurrentState.Id", id.NodeID, 1, func() *ua.DataValue {
		s.mu.Lock()
		defer s.mu.Unlock()
		return good(s.ladsID(u.runState))
	})
}

func ladsName(n uint32) string {
	return map[uint32]string{5085: "Stopped", 5099: "Running", 5100: "Stopping", 5159: "Aborting", 5160: "Aborted", 5143: "Clearing",
		5120: "Idle", 5168: "Execute", 5128: "Complete"}[n]
}

// setUnit changes a unit's states and notifies subscribers.
func (s *Server) setUnit(u *unit, state, runState uint32) {
	s.mu.Lock()
	if state != 0 {
		u.state = state
	}
	if runState != 0 {
		u.runState = runState
	}
	s.mu.Unlock()
	key := "FU_" + u.name
	for _, n := range []string{".FunctionalUnitState.CurrentState", ".FunctionalUnitState.CurrentState.Id", ".RunningStateMachine.CurrentState", ".RunningStateMachine.CurrentState.Id"} {
		s.srv.ChangeNotification(s.nid(key + n))
	}
}

// startUnit starts a functional unit's run and follows its work.
func (s *Server) startUnit(sc *uasc.SecureChannel, u *unit, m *ua.CallMethodRequest, respond func(*ua.CallMethodResult) *ua.CallResponse) *ua.CallResponse {
	status := func(code ua.StatusCode) *ua.CallResponse { return respond(&ua.CallMethodResult{StatusCode: code}) }
	program := strings.HasSuffix(m.MethodID.StringID(), ".StartProgram")
	s.mu.Lock()
	busy := u.state != 5085
	s.mu.Unlock()
	if busy {
		return status(ua.StatusBadInvalidState)
	}
	params := map[string]any{}
	if program {
		if len(m.InputArguments) != 5 {
			return status(ua.StatusBadArgumentsMissing)
		}
		if _, ok := m.InputArguments[0].Value().(string); !ok {
			return respond(&ua.CallMethodResult{StatusCode: ua.StatusBadInvalidArgument, InputArgumentResults: []ua.StatusCode{ua.StatusBadTypeMismatch, 0, 0, 0, 0}})
		}
		if eos, ok := m.InputArguments[1].Value().([]*ua.ExtensionObject); ok {
			for _, eo := range eos {
				if kv, ok := eo.Value.(*KeyValue); ok {
					var v any = kv.Value
					var f float64
					if json.Unmarshal([]byte(kv.Value), &f) == nil {
						v = f
					}
					params[kv.Key] = v
				}
			}
		}
	} else if len(m.InputArguments) == 1 {
		if eos, ok := m.InputArguments[0].Value().([]*ua.ExtensionObject); ok {
			for _, eo := range eos {
				if kv, ok := eo.Value.(*ua.KeyValuePair); ok && kv.Key != nil {
					var v any
					if kv.Value != nil {
						v = kv.Value.Value()
					}
					params[kv.Key.Name] = v
				}
			}
		}
	}
	w, err := s.In.Start(u.name, params)
	if err != nil {
		return status(ua.StatusBadInvalidState)
	}
	s.mu.Lock()
	u.work = w
	u.runs++
	runID := fmt.Sprintf("%s-%d", u.name, u.runs)
	u.runID = runID
	u.progress = 0
	s.mu.Unlock()
	s.srv.ChangeNotification(s.nid("FU_" + u.name + ".ActiveProgram.CurrentRuntime"))
	s.setUnit(u, 5099, 5168)
	go func() {
		time.Sleep(Hold) // let subscribers see Running
		<-w.Done()
		st, _, _ := w.State()
		s.mu.Lock()
		estopped := u.estopped
		u.estopped = false
		s.mu.Unlock()
		switch {
		case estopped:
			s.setUnit(u, 5159, 0)
			time.Sleep(Hold)
			s.setUnit(u, 5160, 5120) // stays Aborted until Clear
		case st == conformance.WorkSucceeded:
			s.mu.Lock()
			u.progress = 1
			u.results[u.next%resultSlots] = result{runID: runID, ok: true, action: u.name}
			u.next++
			s.mu.Unlock()
			s.setUnit(u, 0, 5128)
			time.Sleep(Hold)
			s.setUnit(u, 5085, 5120)
		case st == conformance.WorkCancelled:
			s.setUnit(u, 5100, 0)
			time.Sleep(Hold)
			s.setUnit(u, 5085, 5120)
		case st == conformance.WorkFailed:
			s.setUnit(u, 5159, 0)
			time.Sleep(Hold)
			s.setUnit(u, 5160, 5120)
			time.Sleep(Hold)
			s.setUnit(u, 5085, 0) // cleared by the device
		default: // dropped: the link goes, the unit ends without a trace
			s.DropConnections()
			s.setUnit(u, 5085, 5120)
		}
		s.mu.Lock()
		u.work = nil
		s.mu.Unlock()
	}()
	if program {
		return respond(&ua.CallMethodResult{StatusCode: ua.StatusOK, OutputArguments: []*ua.Variant{ua.MustVariant(runID)}})
	}
	return status(ua.StatusOK)
}
