package rosbridgetest

import (
	"encoding/json"
	"strconv"
	"sync"
	"time"
)

// ActionFunc executes one goal. It reports feedback and ends the goal with
// Finish (or FailBridge); if it returns without either, the goal never gets
// a result (like a rejected goal on the real bridge). It runs in the
// connection's worker, so the connection's later ops wait until the goal
// ends (until the connection closes for a goal that never ends), or with
// Options.Concurrent in its own goroutine.
type ActionFunc func(g *Goal)

// AddAction declares a ROS 2 action server of an action type.
func (s *Server) AddAction(name, typ string, fn ActionFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.actions[name] = &action{name: name, typ: typ, fn: fn}
}

// Goal is one goal at the fake robot, ROS 2 or ROS 1 actionlib.
type Goal struct {
	// ID is the goal id: the client's send_action_goal id (ROS 2) or
	// goal_id.id (ROS 1).
	ID     string
	Action string
	Type   string
	Args   json.RawMessage
	// ROS1 is true for an actionlib goal (status codes are actionlib's).
	ROS1 bool

	s        *Server
	c        *conn
	feedback bool

	mu        sync.Mutex
	accepted  bool
	dropped   int
	cancels   int
	cancel    chan struct{}
	done      chan struct{}
	status    int
	finished  bool
	delivered bool
}

// Decode decodes the goal's arguments into v.
func (g *Goal) Decode(v any) error { return json.Unmarshal(g.Args, v) }

// Accept marks the goal accepted by the action server: from now on the
// bridge holds its handle, and with Options.DropEarlyCancel a cancel is no
// longer dropped. Feedback and Finish accept the goal too.
func (g *Goal) Accept() {
	g.mu.Lock()
	g.accepted = true
	g.mu.Unlock()
}

func (g *Goal) isAccepted() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.accepted
}

// DroppedCancels is how many cancel requests were dropped because they
// arrived before the goal was accepted (Options.DropEarlyCancel).
func (g *Goal) DroppedCancels() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.dropped
}

// CancelRequested is closed when the first cancel request for the goal arrives.
func (g *Goal) CancelRequested() <-chan struct{} { return g.cancel }

// Cancels is how many cancel requests arrived for the goal.
func (g *Goal) Cancels() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.cancels
}

// Done is closed once the goal finished.
func (g *Goal) Done() <-chan struct{} { return g.done }

// Status is the terminal status the goal finished with (0 before).
func (g *Goal) Status() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.status
}

// Delivered reports whether the goal's result reached an open connection.
func (g *Goal) Delivered() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.delivered
}

func (g *Goal) requestCancel() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.cancels++
	if g.cancels == 1 {
		close(g.cancel)
	}
}

// Feedback sends feedback values (when the client asked for feedback).
func (g *Goal) Feedback(values any) {
	g.Accept()
	if g.ROS1 {
		g.s.Publish(g.Action+"/feedback", map[string]any{
			"header": header(), "status": g.ros1Status(ActionlibActive, ""), "feedback": values})
		return
	}
	if !g.feedback {
		return
	}
	g.c.send(map[string]any{"op": "action_feedback", "id": g.ID, "action": g.Action, "values": values})
}

func (g *Goal) ros1Status(status int, text string) map[string]any {
	return map[string]any{"goal_id": map[string]any{"stamp": map[string]any{"secs": 0, "nsecs": 0}, "id": g.ID}, "status": status, "text": text}
}

// Finish ends the goal with a terminal status and result values. A ROS 2
// result goes out as action_result with result:true (as rosbridge 2.x
// does for every status); a ROS 1 result on <ns>/result with status.text
// set to text. Later calls do nothing.
func (g *Goal) Finish(status int, values any, text string) {
	g.mu.Lock()
	if g.finished {
		g.mu.Unlock()
		return
	}
	g.finished, g.status, g.accepted = true, status, true
	g.mu.Unlock()
	var ok bool
	if g.ROS1 {
		g.s.publishStatus(g, status, text)
		g.s.Publish(g.Action+"/result", map[string]any{"header": header(), "status": g.ros1Status(status, text), "result": values})
		ok = true
	} else {
		res := map[string]any{"op": "action_result", "id": g.ID, "action": g.Action, "values": values, "status": status, "result": true}
		if g.s.opts.ResultWithoutStatus {
			delete(res, "status")
		}
		ok = g.c.send(res)
	}
	g.s.mu.Lock()
	delete(g.s.goals, g.ID)
	g.s.mu.Unlock()
	g.mu.Lock()
	g.delivered = ok
	g.mu.Unlock()
	close(g.done)
}

// FailBridge ends a ROS 2 goal the way rosbridge reports its own failure:
// action_result with result:false, status 0 and the error string as values.
func (g *Goal) FailBridge(text string) {
	g.mu.Lock()
	if g.finished {
		g.mu.Unlock()
		return
	}
	g.finished = true
	g.mu.Unlock()
	ok := g.c.send(map[string]any{"op": "action_result", "id": g.ID, "action": g.Action, "values": text, "status": 0, "result": false})
	g.s.mu.Lock()
	delete(g.s.goals, g.ID)
	g.s.mu.Unlock()
	g.mu.Lock()
	g.delivered = ok
	g.mu.Unlock()
	close(g.done)
}

// Goals returns the ROS 2 and ROS 1 goals still running.
func (s *Server) Goals() []*Goal {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Goal, 0, len(s.goals))
	for _, g := range s.goals {
		out = append(out, g)
	}
	return out
}

// WaitGoal waits until a goal of the action is running and returns it.
func (s *Server) WaitGoal(timeout time.Duration, actionName string) (*Goal, bool) {
	deadline := time.Now().Add(timeout)
	for {
		s.mu.Lock()
		for _, g := range s.goals {
			if g.Action == actionName {
				s.mu.Unlock()
				return g, true
			}
		}
		ch := s.changed
		s.mu.Unlock()
		left := time.Until(deadline)
		if left <= 0 {
			return nil, false
		}
		t := time.NewTimer(left)
		select {
		case <-ch:
		case <-t.C:
		}
		t.Stop()
	}
}

// Script is a scripted action: feedback, then a terminal status.
type Script struct {
	// Feedback values are sent in order when the goal starts.
	Feedback []any
	// Release, when not nil, holds the goal after its feedback until it is
	// closed (or a cancel is honoured).
	Release <-chan struct{}
	// Status is the terminal status once released; 0 means SUCCEEDED
	// (ActionlibSucceeded for a ROS 1 goal).
	Status int
	// Result is the result values; Text the ROS 1 status text.
	Result any
	Text   string
	// OnCancel is the status reported when a cancel arrives while held: 0
	// means CANCELED (ActionlibPreempted for ROS 1); IgnoreCancel refuses
	// the cancel and runs on until Release.
	OnCancel int
	// Silent never answers the goal (a rejected goal on rosbridge 2.x).
	Silent bool
	// AcceptAfter, when not nil, holds the goal unaccepted (no goal
	// response yet: with Options.DropEarlyCancel a cancel is dropped) until
	// it is closed. Otherwise the goal is accepted at once.
	AcceptAfter <-chan struct{}
}

// IgnoreCancel as Script.OnCancel refuses cancel requests.
const IgnoreCancel = -1

// Scripted returns an ActionFunc playing the script.
func Scripted(sc Script) ActionFunc {
	return func(g *Goal) {
		if sc.Silent {
			return
		}
		if sc.AcceptAfter != nil {
			<-sc.AcceptAfter
		}
		g.Accept()
		for _, f := range sc.Feedback {
			g.Feedback(f)
		}
		status, onCancel := sc.Status, sc.OnCancel
		if status == 0 {
			status = StatusSucceeded
			if g.ROS1 {
				status = ActionlibSucceeded
			}
		}
		if onCancel == 0 {
			onCancel = StatusCanceled
			if g.ROS1 {
				onCancel = ActionlibPreempted
			}
		}
		if sc.Release != nil {
			cancel := g.CancelRequested()
			if onCancel == IgnoreCancel {
				cancel = nil
			}
			select {
			case <-sc.Release:
			case <-cancel:
				g.Finish(onCancel, map[string]any{}, "cancelled on request")
				return
			}
		}
		g.Finish(status, sc.Result, sc.Text)
	}
}

// AddActionlib declares a ROS 1 actionlib server in namespace ns ("/arm/move")
// for action type typ ("arm_msgs/Move"): the topics <ns>/goal
// (typActionGoal), <ns>/cancel (actionlib_msgs/GoalID), <ns>/status
// (actionlib_msgs/GoalStatusArray), <ns>/feedback and <ns>/result. A goal
// published on <ns>/goal runs fn; a GoalID on <ns>/cancel cancels the goal
// with that id (an empty id cancels all of the namespace's goals).
func (s *Server) AddActionlib(ns, typ string, fn ActionFunc) {
	s.AddTopic(ns+"/goal", typ+"ActionGoal", false)
	s.AddTopic(ns+"/cancel", "actionlib_msgs/GoalID", false)
	s.AddTopic(ns+"/status", "actionlib_msgs/GoalStatusArray", false)
	s.AddTopic(ns+"/feedback", typ+"ActionFeedback", false)
	s.AddTopic(ns+"/result", typ+"ActionResult", false)
	s.OnPublish(ns+"/goal", func(msg json.RawMessage) {
		var m struct {
			GoalID struct {
				ID string `json:"id"`
			} `json:"goal_id"`
			Goal json.RawMessage `json:"goal"`
		}
		if json.Unmarshal(msg, &m) != nil {
			s.logf("actionlib %s: bad goal message", ns)
			return
		}
		id := m.GoalID.ID
		if id == "" {
			id = "goal-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		}
		g := &Goal{ID: id, Action: ns, Type: typ, Args: m.Goal, ROS1: true, s: s, cancel: make(chan struct{}), done: make(chan struct{})}
		s.mu.Lock()
		s.goals[id] = g
		s.notifyLocked()
		s.mu.Unlock()
		s.publishStatus(g, ActionlibActive, "")
		go fn(g)
	})
	s.OnPublish(ns+"/cancel", func(msg json.RawMessage) {
		var m struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(msg, &m)
		s.mu.Lock()
		var hit []*Goal
		for _, g := range s.goals {
			if g.ROS1 && g.Action == ns && (m.ID == "" || m.ID == g.ID) {
				hit = append(hit, g)
			}
		}
		s.mu.Unlock()
		for _, g := range hit {
			g.requestCancel()
		}
	})
}

func (s *Server) publishStatus(g *Goal, status int, text string) {
	s.Publish(g.Action+"/status", map[string]any{"header": header(), "status_list": []any{g.ros1Status(status, text)}})
}

func header() map[string]any {
	now := time.Now()
	return map[string]any{"seq": 0, "stamp": map[string]any{"secs": now.Unix(), "nsecs": now.Nanosecond()}, "frame_id": ""}
}

// cancelGoalService serves an action server's hidden
// <action>/_action/cancel_goal (action_msgs/srv/CancelGoal) for a zero goal
// id and stamp: cancel every goal of the action. It reports how many goals
// got the request, and whether the action exists.
func (s *Server) cancelGoalService(actionName string, args json.RawMessage) ([]string, bool) {
	s.mu.Lock()
	_, exists := s.actions[actionName]
	var hit []*Goal
	for _, g := range s.goals {
		if !g.ROS1 && g.Action == actionName {
			hit = append(hit, g)
		}
	}
	s.mu.Unlock()
	if !exists {
		return nil, false
	}
	var a struct {
		GoalInfo struct {
			GoalID struct {
				UUID []int `json:"uuid"`
			} `json:"goal_id"`
		} `json:"goal_info"`
	}
	_ = json.Unmarshal(args, &a)
	for _, b := range a.GoalInfo.GoalID.UUID {
		if b != 0 {
			return []string{}, true // one goal by UUID: rosbridge never tells clients the UUIDs
		}
	}
	ids := []string{}
	for _, g := range hit {
		g.requestCancel()
		ids = append(ids, g.ID)
	}
	return ids, true
}

// sendGoal starts a ROS 2 goal and returns its run. rosbridge 2.x answers
// nothing for a goal to an unknown action server or with another action
// type than the server's (it waits for the server forever), nor for a goal
// the server rejects; on a sequential connection each of these blocks every
// later op.
func (c *conn) sendGoal(m clientMsg, inline bool) func() {
	s := c.s
	s.mu.Lock()
	a, ok := s.actions[m.Action]
	s.mu.Unlock()
	if !ok || !sameType(a.typ, m.ActionType) {
		if !ok {
			s.logf("send_action_goal %s: no such action server (waits for it, no reply)", m.Action)
		} else {
			s.logf("send_action_goal %s: type %s is not the server's %s (waits, no reply)", m.Action, m.ActionType, a.typ)
		}
		if inline {
			return c.blockUntilClosed
		}
		return nil
	}
	g := &Goal{ID: m.ID, Action: m.Action, Type: a.typ, Args: m.Args, s: s, c: c, feedback: m.Feedback,
		cancel: make(chan struct{}), done: make(chan struct{})}
	s.mu.Lock()
	if old, dup := s.goals[m.ID]; dup {
		s.logf("send_action_goal %s: goal id %s already in use (the older handle is replaced)", m.Action, old.ID)
	}
	s.goals[m.ID] = g
	s.notifyLocked()
	s.mu.Unlock()
	return func() {
		a.fn(g)
		if inline {
			select {
			case <-g.done:
			case <-c.ctx.Done():
			}
		}
	}
}

// cancelGoal handles cancel_action_goal: goal handles are shared by every
// connection of the server (a class attribute in rosbridge 2.x), so a cancel
// from any connection reaches the goal. No reply either way.
func (s *Server) cancelGoal(id string) {
	s.mu.Lock()
	g, ok := s.goals[id]
	lost := s.forgotten[id]
	s.mu.Unlock()
	if lost {
		s.logf("cancel_action_goal %s: no such goal: the bridge restarted and lost its handle (no reply)", id)
		return
	}
	if !ok || g.ROS1 {
		s.logf("cancel_action_goal %s: no such goal (no reply)", id)
		return
	}
	if s.opts.DropEarlyCancel && !g.isAccepted() {
		g.mu.Lock()
		g.dropped++
		g.mu.Unlock()
		s.logf("cancel_action_goal %s: arrived before the goal response (dropped silently, as 2.1.0 does)", id)
		return
	}
	g.requestCancel()
}
