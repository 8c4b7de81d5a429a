package ros2

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
)

// progressFn turns feedback into job progress.
func progressFn(ac ActionConfig, job *binding.Job) func(any) {
	path, _ := parsePath(ac.ProgressField)
	full := ac.ProgressMax
	if full <= 0 {
		full = 1
	}
	var mu sync.Mutex
	last := 0.0
	return func(fb any) {
		mu.Lock()
		defer mu.Unlock()
		if ac.ProgressField != "" {
			if v, err := getPath(fb, path); err == nil {
				if f, ok := mhp.Number(v); ok {
					last = f / full
				}
			}
		}
		job.Progress(last, map[string]any{"feedback": fb})
	}
}

// defaultFirstResponse is the default bound on the first sign of a goal.
const defaultFirstResponse = 30 * time.Second

func (a *adapter) bridgeInfo() Bridge {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.bridge
}

// goalRun is a long action on a ROS 2 action server.
func (a *adapter) goalRun(ac ActionConfig) func(context.Context, *binding.Job) (any, error) {
	item := "action " + ac.Name
	return func(ctx context.Context, job *binding.Job) (any, error) {
		conn := a.connection()
		if conn == nil {
			return nil, refusal(item, "not_connected", "the adapter has not connected yet, nothing was sent")
		}
		a.inflight.Add(1)
		defer a.inflight.Add(-1)
		b := a.bridgeInfo()
		if b.ROS == 1 {
			return nil, refusal(item, "no_action_ops", "the bridge serves ROS 1, and rosbridge on ROS 1 has no action ops (it would drop the goal without a word); nothing was sent")
		}
		if b.Rosapi {
			// rosbridge answers nothing to a goal for a missing server or
			// of another type: ask rosapi first.
			if err := a.checkActionServer(ctx, conn, b, ac); err != nil {
				if !errors.Is(err, errCannotCheck) {
					return nil, err
				}
				a.log.Debug("ros2: cannot check the action server before the goal", "action", ac.ROSAction, "err", err)
			}
		}
		progress := progressFn(ac, job)
		first := make(chan struct{})
		var firstOnce sync.Once
		h, err := conn.SendGoal(ctx, GoalRequest{Action: ac.ROSAction, Type: ac.ActionType, Args: mergeArgs(ac.Args, job.Params()), Feedback: true},
			func(raw json.RawMessage) {
				firstOnce.Do(func() { close(first) })
				progress(decodeValues(raw))
			})
		if err != nil {
			return nil, classify(item, err)
		}
		release := func() {
			if h.Release != nil {
				h.Release()
			}
		}
		sendCancel := func() error {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.reqTimeout)
			defer cancel()
			return conn.CancelGoal(cctx, ac.ROSAction, h.ID)
		}
		firstWait := seconds(ac.FirstResponseS, defaultFirstResponse)
		ft := time.NewTimer(firstWait)
		defer ft.Stop()
		firstCh, firstTimeout := (<-chan struct{})(first), ft.C
	wait:
		for {
			select {
			case r := <-h.Result:
				return a.goalEnd(ac, conn, item, h.ID, r)
			case <-firstCh:
				firstCh, firstTimeout = nil, nil
			case <-firstTimeout:
				cerr := sendCancel()
				release()
				return nil, fmt.Errorf("%s: no action_feedback or action_result for goal %s within %v (first_response_s): rosbridge answers nothing when the action server rejects a goal, when there is no server %s or it has another type than %s, and rosbridge before 2.0 has no action ops at all (this bridge: %s); cancel_action_goal sent (err %v): outcome unknown",
					item, h.ID, firstWait, ac.ROSAction, ac.ActionType, b, cerr)
			case <-ctx.Done():
				break wait
			}
		}
		// Cancel, estop or timeout: ask the robot to cancel, then (unless
		// this is the timeout) let the robot's final status decide.
		cancelled := job.CancelRequested()
		cerr := sendCancel()
		if !cancelled {
			release()
			return nil, fmt.Errorf("%s: no action_result for goal %s before the deadline (%v); cancel_action_goal sent (err %v): outcome unknown",
				item, h.ID, ctx.Err(), cerr)
		}
		wait := seconds(ac.CancelWaitS, 30*time.Second)
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case r := <-h.Result:
			return a.goalEnd(ac, conn, item, h.ID, r)
		case <-t.C:
			release()
			return nil, fmt.Errorf("%s: cancel of goal %s sent (err %v), but no action_result within %v: outcome unknown", item, h.ID, cerr, wait)
		}
	}
}

// goalEnd maps the result and, for a goal lost with the link, asks the
// action server itself to cancel all its goals once the link is back when
// the config says so (the client's cancel_action_goal by id reaches the
// goal unless the bridge process restarted and lost its goal table).
func (a *adapter) goalEnd(ac ActionConfig, conn Conn, item, id string, r GoalResult) (any, error) {
	if r.Err != nil && ac.CancelAllOnReconnect {
		service := ac.ROSAction + "/_action/cancel_goal"
		go a.retryWhenBack("cancel all goals of "+ac.ROSAction, func(ctx context.Context) error {
			_, err := conn.CallService(ctx, service, cancelAllArgs())
			return err
		})
	}
	return goalOutcome(item, id, r)
}

// cancelAllArgs is an action_msgs/srv/CancelGoal request with a zero goal
// id and a zero stamp: cancel every goal of the action server.
func cancelAllArgs() map[string]any {
	return map[string]any{"goal_info": map[string]any{
		"goal_id": map[string]any{"uuid": make([]int, 16)},
		"stamp":   map[string]any{"sec": 0, "nanosec": 0},
	}}
}

// goalOutcome maps a ROS 2 action_result to the job's end.
func goalOutcome(item, id string, r GoalResult) (any, error) {
	switch {
	case r.Err != nil:
		return nil, fmt.Errorf("%s: goal %s: %w: outcome unknown (its cancel goes out first once the link is back)", item, id, r.Err)
	case !r.Result:
		text := valuesText(r.Values)
		if bridgeRefused(text) {
			// rosbridge could not build the goal message: nothing reached
			// the action server.
			return nil, refusal(item, "rosbridge_rejected", "rosbridge refused goal %s before it reached the robot: %s", id, text).
				With("backend_error", text)
		}
		return nil, fmt.Errorf("%s: rosbridge failed goal %s (result:false, status %d): %s: outcome unknown", item, id, r.Status, text)
	case r.NoStatus:
		return nil, fmt.Errorf("%s: rosbridge sent the action_result of goal %s without a status, as rosbridge builds from Nov 2023 to Oct 2024 (before 2.0.0) do: it does not say whether the goal SUCCEEDED, was CANCELED or ABORTED; upgrade rosbridge_suite to 2.0.0 or later: outcome unknown",
			item, id)
	}
	values := decodeValues(r.Values)
	switch r.Status {
	case StatusSucceeded:
		return values, nil
	case StatusCanceled:
		return values, fmt.Errorf("%w: the robot reports goal %s CANCELED", binding.ErrCancelled, id)
	case StatusAborted:
		return nil, binding.Failed(fmt.Errorf("the robot aborted goal %s: %s", id, valuesText(r.Values)),
			map[string]any{"status": "ABORTED", "values": values})
	}
	return nil, fmt.Errorf("%s: action_result for goal %s carries non-terminal status %s: protocol violation, outcome unknown", item, id, StatusName(r.Status))
}

// ---- ROS 1 actionlib ----

// actionlibRouter demultiplexes one actionlib namespace's result and
// feedback topics to the goals in flight.
type actionlibRouter struct {
	ns, typ string
	mu      sync.Mutex
	goals   map[string]*alGoal
}

type alGoal struct {
	result   chan alResult
	feedback func(any)
	// seen is closed once the server shows it has the goal: listed in a
	// status message, or a feedback or result for it.
	seen     chan struct{}
	seenOnce sync.Once
	// statuses counts status messages that did not list the goal.
	statuses int
}

func (g *alGoal) markSeen() { g.seenOnce.Do(func() { close(g.seen) }) }

type alResult struct {
	status int
	text   string
	values any
	err    error
}

type alStatus struct {
	GoalID struct {
		ID string `json:"id"`
	} `json:"goal_id"`
	Status int    `json:"status"`
	Text   string `json:"text"`
}

func (r *actionlibRouter) add(id string, g *alGoal) {
	r.mu.Lock()
	r.goals[id] = g
	r.mu.Unlock()
}

func (r *actionlibRouter) remove(id string) {
	r.mu.Lock()
	delete(r.goals, id)
	r.mu.Unlock()
}

func (r *actionlibRouter) onResult(e TopicEvent) {
	if e.Err != nil {
		// The link dropped: a result sent meanwhile is lost for good.
		r.mu.Lock()
		goals := r.goals
		r.goals = map[string]*alGoal{}
		r.mu.Unlock()
		for _, g := range goals {
			g.result <- alResult{err: e.Err}
		}
		return
	}
	var m struct {
		Status alStatus        `json:"status"`
		Result json.RawMessage `json:"result"`
	}
	if json.Unmarshal(e.Msg, &m) != nil {
		return
	}
	r.mu.Lock()
	g := r.goals[m.Status.GoalID.ID]
	delete(r.goals, m.Status.GoalID.ID)
	r.mu.Unlock()
	if g != nil {
		g.markSeen()
		g.result <- alResult{status: m.Status.Status, text: m.Status.Text, values: decodeValues(m.Result)}
	}
}

func (r *actionlibRouter) onFeedback(e TopicEvent) {
	if e.Err != nil {
		return
	}
	var m struct {
		Status   alStatus        `json:"status"`
		Feedback json.RawMessage `json:"feedback"`
	}
	if json.Unmarshal(e.Msg, &m) != nil {
		return
	}
	r.mu.Lock()
	g := r.goals[m.Status.GoalID.ID]
	r.mu.Unlock()
	if g == nil {
		return
	}
	g.markSeen()
	if g.feedback != nil {
		g.feedback(decodeValues(m.Feedback))
	}
}

// onStatus marks the goals a status message lists as seen, and counts the
// status messages that did not list the others.
func (r *actionlibRouter) onStatus(e TopicEvent) {
	if e.Err != nil {
		return
	}
	var m struct {
		StatusList []alStatus `json:"status_list"`
	}
	if json.Unmarshal(e.Msg, &m) != nil {
		return
	}
	listed := make(map[string]bool, len(m.StatusList))
	for _, st := range m.StatusList {
		listed[st.GoalID.ID] = true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, g := range r.goals {
		if listed[id] {
			g.markSeen()
		} else {
			g.statuses++
		}
	}
}

func (r *actionlibRouter) unlistedStatuses(g *alGoal) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return g.statuses
}

func goalIDMsg(id string) map[string]any {
	return map[string]any{"stamp": map[string]any{"secs": 0, "nsecs": 0}, "id": id}
}

// actionlibRun is a long action on a ROS 1 actionlib server, over topics.
func (a *adapter) actionlibRun(ac ActionConfig, r *actionlibRouter) func(context.Context, *binding.Job) (any, error) {
	item := "action " + ac.Name
	cancelTopic, cancelType := r.ns+"/cancel", "actionlib_msgs/GoalID"
	return func(ctx context.Context, job *binding.Job) (any, error) {
		conn := a.connection()
		if conn == nil {
			return nil, refusal(item, "not_connected", "the adapter has not connected yet, nothing was sent")
		}
		a.inflight.Add(1)
		defer a.inflight.Add(-1)
		id := fmt.Sprintf("mhp-%s-%s-%s", a.cfg.Device.ID, job.ID(), strconv.FormatInt(time.Now().UnixNano(), 36))
		progress := progressFn(ac, job)
		g := &alGoal{result: make(chan alResult, 1), feedback: progress, seen: make(chan struct{})}
		r.add(id, g)
		defer r.remove(id)
		goal := map[string]any{"header": map[string]any{}, "goal_id": goalIDMsg(id), "goal": mergeArgs(ac.Args, job.Params())}
		if err := conn.Publish(ctx, r.ns+"/goal", r.typ+"ActionGoal", goal); err != nil {
			return nil, classify(item, err)
		}
		sendCancel := func() error {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.reqTimeout)
			defer cancel()
			return conn.Publish(cctx, cancelTopic, cancelType, goalIDMsg(id))
		}
		firstWait := seconds(ac.FirstResponseS, defaultFirstResponse)
		ft := time.NewTimer(firstWait)
		defer ft.Stop()
		seen, firstTimeout := (<-chan struct{})(g.seen), ft.C
		var res alResult
	wait:
		for {
			select {
			case res = <-g.result:
				break wait
			case <-seen:
				seen, firstTimeout = nil, nil
			case <-firstTimeout:
				cerr := sendCancel()
				if n := r.unlistedStatuses(g); n > 0 {
					// The server kept publishing its status without our
					// goal: it never got it.
					return nil, refusal(item, "goal_not_taken", "the actionlib server at %s published %d status messages in %v without listing goal %s: it never took the goal (rosbridge drops a goal of a wrong action_type %s without a word); cancel sent (err %v)",
						r.ns, n, firstWait, id, ac.ActionType, cerr)
				}
				return nil, fmt.Errorf("%s: no status, feedback or result for actionlib goal %s on %s within %v (first_response_s): is the actionlib server running, with type %s? cancel sent (err %v): outcome unknown",
					item, id, r.ns, firstWait, ac.ActionType, cerr)
			case <-ctx.Done():
				cancelled := job.CancelRequested()
				cerr := sendCancel()
				if !cancelled {
					return nil, fmt.Errorf("%s: no result for actionlib goal %s before the deadline (%v); cancel sent (err %v): outcome unknown", item, id, ctx.Err(), cerr)
				}
				wait := seconds(ac.CancelWaitS, 30*time.Second)
				t := time.NewTimer(wait)
				defer t.Stop()
				select {
				case res = <-g.result:
				case <-t.C:
					return nil, fmt.Errorf("%s: cancel of actionlib goal %s sent (err %v), but no result within %v: outcome unknown", item, id, cerr, wait)
				}
				break wait
			}
		}
		if res.err != nil {
			what := "cancel of actionlib goal " + id
			if owe, ok := conn.(interface {
				PublishFirstOnReconnect(what, topic, typ string, msg any)
			}); ok {
				owe.PublishFirstOnReconnect(what, cancelTopic, cancelType, goalIDMsg(id))
			} else {
				go a.retryWhenBack(what, func(ctx context.Context) error {
					return conn.Publish(ctx, cancelTopic, cancelType, goalIDMsg(id))
				})
			}
			return nil, fmt.Errorf("%s: actionlib goal %s: %w: outcome unknown (the goal is cancelled once the link is back)", item, id, res.err)
		}
		switch res.status {
		case ActionlibSucceeded:
			return res.values, nil
		case ActionlibPreempted, ActionlibRecalled:
			return res.values, fmt.Errorf("%w: the robot reports goal %s %s", binding.ErrCancelled, id, ActionlibStatusName(res.status))
		case ActionlibAborted:
			return nil, binding.Failed(fmt.Errorf("the robot aborted goal %s: %s", id, res.text),
				map[string]any{"status": "ABORTED", "text": res.text, "values": res.values})
		case ActionlibRejected:
			return nil, refusal(item, "robot_rejected", "the robot rejected goal %s: %s", id, res.text).With("backend_error", res.text)
		}
		return nil, fmt.Errorf("%s: actionlib result for goal %s has status %s (%s): outcome unknown", item, id, ActionlibStatusName(res.status), res.text)
	}
}

// retryWindow bounds how long a cancel for a goal lost with the link is
// retried while the link stays down.
const retryWindow = 10 * time.Minute

// retryWhenBack runs fn until it succeeds or fails for another reason than
// a link that is down, with backoff, until the adapter closes: a ROS 1 cancel
// or a ROS 2 cancel-all for a goal whose client vanished (the robot keeps
// executing it).
func (a *adapter) retryWhenBack(what string, fn func(ctx context.Context) error) {
	wait := 50 * time.Millisecond
	giveUp := time.Now().Add(retryWindow)
	for {
		if time.Now().After(giveUp) {
			a.log.Error("ros2: gave up after " + retryWindow.String() + " without a link: " + what)
			return
		}
		ctx, cancel := context.WithTimeout(a.ctx, a.reqTimeout)
		err := fn(ctx)
		cancel()
		switch {
		case err == nil:
			a.log.Warn("ros2: sent after the reconnect: " + what)
			return
		case !errors.Is(err, ErrNotConnected) && !errors.Is(err, ErrConnLost) && !errors.Is(err, ErrNoReply):
			a.log.Error("ros2: failed after the reconnect: "+what, "err", err)
			return
		}
		upc := a.linkUpCh()
		select {
		case <-upc:
			upc = nil // up already: wait out the backoff
		default:
		}
		t := time.NewTimer(wait)
		select {
		case <-a.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		case <-upc:
			t.Stop() // the link is back: at once
		}
		wait = min(wait*2, 5*time.Second)
	}
}
