package ros2

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// side is a connection of its own for one kind of work: one service call at
// a time (pooled), one goal for its whole life, or the estop path. rosbridge
// handles a connection's ops in order, one at a time, so whatever blocks a
// side connection blocks only that work.
type side struct {
	c    *Client
	ws   *websocket.Conn
	kind string // "call" (calls and goals, one at a time) or "stop"

	mu         sync.Mutex
	pending    map[string]chan reply
	advertised map[string]string // stop connection: topics advertised on it
	gone       bool
}

type stopPathKey struct{}

// StopPath marks ctx as the estop path: a [Client] sends a
// [Client.Publish], [Client.Advertise] or [Client.CallService] made with it
// over its dedicated estop connection, which carries nothing else and so
// never waits behind a goal or a slow call. The adapter's estop uses it; a
// program that drives a Client itself uses it for its own stop commands.
func StopPath(ctx context.Context) context.Context {
	return context.WithValue(ctx, stopPathKey{}, true)
}

func isStopPath(ctx context.Context) bool {
	v, _ := ctx.Value(stopPathKey{}).(bool)
	return v
}

// dialSide opens a side connection; a failure is ErrNotConnected (nothing
// was sent).
func (c *Client) dialSide(ctx context.Context, kind string) (*side, error) {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	ws, err := c.dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w (%s connection: %v)", ErrNotConnected, kind, err)
	}
	s := &side{c: c, ws: ws, kind: kind, pending: map[string]chan reply{}, advertised: map[string]string{}}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		ws.CloseNow()
		return nil, ErrClosed
	}
	c.sides[s] = true
	c.wg.Add(1)
	c.mu.Unlock()
	go c.readLoop(ws, s)
	return s, nil
}

func (s *side) expect(id string) chan reply {
	ch := make(chan reply, 1)
	s.mu.Lock()
	s.pending[id] = ch
	s.mu.Unlock()
	return ch
}

func (s *side) forget(id string) {
	s.mu.Lock()
	delete(s.pending, id)
	s.mu.Unlock()
}

func (s *side) deliver(id string, r reply) {
	s.mu.Lock()
	ch := s.pending[id]
	delete(s.pending, id)
	s.mu.Unlock()
	if ch != nil {
		ch <- r
	}
}

// release closes a side connection whose work is over or abandoned.
func (s *side) release() {
	s.mu.Lock()
	s.gone = true
	s.mu.Unlock()
	s.ws.CloseNow()
}

// sideDropped handles the end of a side connection: its pending call gets
// the loss, its goal ends with ErrConnLost and is cancelled over the main
// connection (now, or first thing once it is back).
func (c *Client) sideDropped(s *side, cause error) {
	s.ws.CloseNow()
	s.mu.Lock()
	s.gone = true
	pending := s.pending
	s.pending = map[string]chan reply{}
	s.mu.Unlock()

	c.mu.Lock()
	delete(c.sides, s)
	c.reoweLocked(s.ws)
	for i, x := range c.idle {
		if x == s {
			c.idle = append(c.idle[:i], c.idle[i+1:]...)
			break
		}
	}
	if c.stop == s {
		c.stop = nil
	}
	type lostGoal struct {
		id string
		g  *goalState
	}
	var goals []lostGoal
	for id, g := range c.goals {
		if g.side == s {
			delete(c.goals, id)
			goals = append(goals, lostGoal{id, g})
		}
	}
	closed := c.closed
	c.mu.Unlock()

	lost := ErrConnLost
	if closed {
		lost = ErrClosed
	}
	for _, ch := range pending {
		ch <- reply{err: lost}
	}
	for _, lg := range goals {
		c.opts.Logger.Warn("ros2: the connection of a goal in flight was lost; cancelling it", "action", lg.g.action, "goal", lg.id, "err", cause)
		lg.g.result <- GoalResult{Err: fmt.Errorf("%w (goal %s on %s)", lost, lg.id, lg.g.action)}
		if !closed {
			c.wg.Add(1)
			go func() {
				defer c.wg.Done()
				ctx, cancel := context.WithTimeout(c.ctx, c.opts.RequestTimeout)
				defer cancel()
				_ = c.sendCancel(ctx, lg.g.action, lg.id)
			}()
		}
	}
}

// takeSide returns an idle call connection or dials one.
func (c *Client) takeSide(ctx context.Context) (*side, error) {
	c.mu.Lock()
	for len(c.idle) > 0 {
		s := c.idle[len(c.idle)-1]
		c.idle = c.idle[:len(c.idle)-1]
		s.mu.Lock()
		gone := s.gone
		s.mu.Unlock()
		if !gone {
			c.mu.Unlock()
			return s, nil
		}
	}
	c.mu.Unlock()
	return c.dialSide(ctx, "call")
}

// putSide returns a call connection whose call was answered to the pool.
func (c *Client) putSide(s *side) {
	c.mu.Lock()
	if !c.closed && len(c.idle) < c.opts.MaxIdle {
		c.idle = append(c.idle, s)
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	s.release()
}

// stopSide returns the estop connection, dialling it (and advertising the
// estop topics on it) when there is none.
func (c *Client) stopSide(ctx context.Context) (*side, error) {
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, ErrClosed
		}
		if c.stop != nil && c.stop.isGone() {
			c.stop = nil // released after a call got no answer
		}
		if c.stop != nil {
			s := c.stop
			c.mu.Unlock()
			return s, nil
		}
		if ch := c.stopDialing; ch != nil {
			c.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, fmt.Errorf("%w: %v", ErrNotSent, ctx.Err())
			}
		}
		c.stopDialing = make(chan struct{})
		adverts := make(map[string]string, len(c.stopAdverts))
		for t, typ := range c.stopAdverts {
			adverts[t] = typ
		}
		c.mu.Unlock()

		s, err := c.dialSide(ctx, "stop")
		if err == nil {
			for topic, typ := range adverts {
				if err = c.write(ctx, s.ws, map[string]any{"op": "advertise", "id": "advertise:" + topic, "topic": topic, "type": typ}); err != nil {
					break
				}
				s.mu.Lock()
				s.advertised[topic] = typ
				s.mu.Unlock()
			}
		}
		c.mu.Lock()
		close(c.stopDialing)
		c.stopDialing = nil
		if err == nil && !s.isGone() {
			c.stop = s
		}
		c.mu.Unlock()
		if err != nil {
			if s != nil {
				s.release()
			}
			return nil, err
		}
		return s, nil
	}
}

func (s *side) isGone() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gone
}

// stopPublish publishes over the estop connection.
func (c *Client) stopPublish(ctx context.Context, topic, typ string, msg any) error {
	ctx, cancel := c.withDeadline(ctx)
	defer cancel()
	s, err := c.stopSide(ctx)
	if err != nil {
		return err
	}
	if err := c.stopAdvertise(ctx, s, topic, typ); err != nil {
		return err
	}
	if err := c.write(ctx, s.ws, map[string]any{"op": "publish", "topic": topic, "msg": msg}); err != nil {
		if errors.Is(err, ErrNotSent) {
			return err
		}
		return fmt.Errorf("%w: publish %s: %v", ErrConnLost, topic, err)
	}
	return nil
}

// stopAdvertise advertises topic on the estop connection s unless it is
// already, and records it for the estop connections to come.
func (c *Client) stopAdvertise(ctx context.Context, s *side, topic, typ string) error {
	if typ == "" {
		return nil
	}
	c.mu.Lock()
	c.stopAdverts[topic] = typ
	c.mu.Unlock()
	s.mu.Lock()
	need := s.advertised[topic] != typ
	s.advertised[topic] = typ
	s.mu.Unlock()
	if !need {
		return nil
	}
	if err := c.write(ctx, s.ws, map[string]any{"op": "advertise", "id": "advertise:" + topic, "topic": topic, "type": typ}); err != nil {
		s.mu.Lock()
		delete(s.advertised, topic)
		s.mu.Unlock()
		if errors.Is(err, ErrNotSent) {
			return err
		}
		return fmt.Errorf("%w (advertise %s failed: %v)", ErrNotConnected, topic, err)
	}
	return nil
}

// CallService implements Conn. The call runs alone on a connection of its
// own (from a small pool; with a context from StopPath, the estop
// connection); a call that gets no answer before the deadline takes that
// connection down, since rosbridge would hold every later op behind it.
func (c *Client) CallService(ctx context.Context, service string, args any) (json.RawMessage, error) {
	ctx, cancel := c.withDeadline(ctx)
	defer cancel()
	stop := isStopPath(ctx)
	var s *side
	var err error
	if stop {
		s, err = c.stopSide(ctx)
	} else {
		s, err = c.takeSide(ctx)
	}
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	id := c.nextID("call_service:" + service)
	c.mu.Unlock()
	ch := s.expect(id)
	if args == nil {
		args = map[string]any{}
	}
	start := time.Now()
	if err := c.write(ctx, s.ws, map[string]any{"op": "call_service", "id": id, "service": service, "args": args}); err != nil {
		s.forget(id)
		if errors.Is(err, ErrNotSent) {
			if !stop {
				c.putSide(s)
			}
			return nil, err
		}
		return nil, fmt.Errorf("%w: call_service %s: %v", ErrConnLost, service, err)
	}
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, fmt.Errorf("%w: call_service %s", r.err, service)
		}
		if !stop {
			c.putSide(s)
		}
		if !r.result {
			return nil, &ServiceError{Service: service, Message: valuesText(r.values)}
		}
		return r.values, nil
	case <-ctx.Done():
		s.forget(id)
		s.release()
		return nil, fmt.Errorf("%w: call_service %s got no service_response within %v (rosbridge answers nothing for a wrong type, and on ROS 2 nothing for a service handler that raised)",
			ErrNoReply, service, time.Since(start).Round(time.Millisecond))
	}
}

// SendGoal implements Conn. The goal gets a connection of its own (an idle
// one of the pool or a new one), held until its result arrives (then it
// returns to the pool) or the handle is released (then it is closed).
func (c *Client) SendGoal(ctx context.Context, req GoalRequest, feedback func(json.RawMessage)) (GoalHandle, error) {
	ctx, cancel := c.withDeadline(ctx)
	defer cancel()
	s, err := c.takeSide(ctx)
	if err != nil {
		return GoalHandle{}, err
	}
	c.mu.Lock()
	id := c.goalID(req.Action)
	g := &goalState{action: req.Action, result: make(chan GoalResult, 1), feedback: feedback, side: s}
	c.goals[id] = g
	c.mu.Unlock()
	args := req.Args
	if args == nil {
		args = map[string]any{}
	}
	op := map[string]any{"op": "send_action_goal", "id": id, "action": req.Action, "action_type": req.Type, "args": args, "feedback": req.Feedback}
	// A failed write drops the goal's connection: the drop handler then
	// delivers ErrConnLost on the handle and cancels the goal, in case it
	// went out.
	if err := c.write(ctx, s.ws, op); errors.Is(err, ErrNotSent) {
		c.mu.Lock()
		delete(c.goals, id)
		c.mu.Unlock()
		s.release()
		return GoalHandle{}, err
	}
	return GoalHandle{ID: id, Result: g.result, Release: func() { c.releaseGoal(id) }}, nil
}

// releaseGoal forgets a goal whose result nobody waits for any more and
// closes its connection (rosbridge does not cancel a goal when its client
// goes away; the caller has sent its cancel already).
func (c *Client) releaseGoal(id string) {
	c.mu.Lock()
	g := c.goals[id]
	delete(c.goals, id)
	c.mu.Unlock()
	if g != nil {
		g.side.release()
	}
}

// CancelGoal implements Conn. The cancel goes over the main connection,
// never the goal's own (rosbridge would hold it there until the goal
// ends); rosbridge 2.x finds the goal from any connection. A cancel sent
// before the first feedback is sent again when that feedback arrives
// (rosbridge 2.1.0 drops a cancel that arrives before the goal response).
func (c *Client) CancelGoal(ctx context.Context, action, goalID string) error {
	c.mu.Lock()
	if g := c.goals[goalID]; g != nil && g.feedbacks == 0 {
		g.cancelled = true
	}
	c.mu.Unlock()
	return c.sendCancel(ctx, action, goalID)
}

// sendCancel writes cancel_action_goal on the main connection, or, while it
// is down, on a call connection; when neither can be had, the cancel is
// owed: it goes out first once the main connection is back.
func (c *Client) sendCancel(ctx context.Context, action, goalID string) error {
	msg := map[string]any{"op": "cancel_action_goal", "id": goalID, "action": action}
	ctx, cancel := c.withDeadline(ctx)
	defer cancel()
	c.mu.Lock()
	ws, err := c.current()
	c.mu.Unlock()
	if errors.Is(err, ErrClosed) {
		return err
	}
	// A write can succeed on a connection whose peer is already gone: the
	// cancel stays owed for a while, so a reconnect soon after sends it again
	// (a second cancel of the same goal is harmless).
	// If that connection drops within the window, it is owed again until
	// the next main connection however long that takes (reoweLocked).
	recheck := owedOp{what: "cancel of goal " + goalID + " on " + action, msg: msg, expires: c.opts.Clock.Now().Add(c.opts.RequestTimeout)}
	if ws != nil {
		if err := c.write(ctx, ws, msg); err == nil {
			c.mu.Lock()
			recheck.via = ws
			c.oweLocked(recheck)
			if c.ws != ws { // dropped while writing
				c.reoweLocked(ws)
			}
			c.mu.Unlock()
			return nil
		}
	} else if s, err := c.takeSide(ctx); err == nil {
		if err := c.write(ctx, s.ws, msg); err == nil {
			c.putSide(s)
			// The main connection is down: whatever took this write (an
			// idle side connection about to be found dead, a restarted
			// bridge that lost the goal's handle) proves nothing, so the
			// cancel stays owed, without expiry, until the next main
			// connection sends it again (a second cancel is harmless).
			c.mu.Lock()
			c.oweLocked(owedOp{what: recheck.what, msg: msg})
			c.mu.Unlock()
			return nil
		}
	}
	c.mu.Lock()
	c.oweLocked(owedOp{what: "cancel of goal " + goalID + " on " + action, msg: msg})
	c.mu.Unlock()
	return fmt.Errorf("%w: cancel_action_goal %s is sent first once the link is back", ErrNotConnected, goalID)
}
