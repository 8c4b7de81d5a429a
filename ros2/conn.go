package ros2

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Conn is the seam between the MHP mapping and rosbridge: the five things the
// adapter asks of a robot. [*Client] implements it over one WebSocket; tests
// can implement it with a struct of funcs, and give it to [New] as
// [Options.Conn].
//
// Errors: [ErrNotConnected] means nothing was sent (the request is refused
// with the robot untouched); [ErrConnLost] and [ErrNoReply] mean the request
// may have reached the robot (the outcome is unknown); [*ServiceError] is
// rosbridge's result:false answer.
type Conn interface {
	// Subscribe delivers the topic's messages to fn until unsubscribe is
	// called. The subscription survives reconnects: fn gets an event with
	// Err set when the link drops, then messages again once it is restored.
	// fn runs on the reader goroutine and must not block.
	Subscribe(ctx context.Context, sub Subscription, fn func(TopicEvent)) (unsubscribe func(), err error)
	// Publish sends one message on a topic, advertising it with typ first
	// (typ "" publishes on an existing topic without advertising). rosbridge
	// never acknowledges a publish.
	Publish(ctx context.Context, topic, typ string, msg any) error
	// CallService calls a service and returns the response's values. ctx
	// should carry a deadline; without one the connection's default applies.
	CallService(ctx context.Context, service string, args any) (json.RawMessage, error)
	// SendGoal sends a ROS 2 action goal. The handle's Result channel gets
	// exactly one GoalResult: the action_result, or Err when the link drops.
	// feedback, when not nil, receives each action_feedback's values on the
	// reader goroutine.
	SendGoal(ctx context.Context, req GoalRequest, feedback func(json.RawMessage)) (GoalHandle, error)
	// CancelGoal asks the robot to cancel an in-flight goal. rosbridge sends
	// no reply: the outcome arrives as the goal's result.
	CancelGoal(ctx context.Context, action, goalID string) error
}

// Subscription is a subscribe request.
type Subscription struct {
	Topic string
	// Type is the message type ("std_msgs/msg/Float64"); without it the
	// topic must already exist on the robot.
	Type string
	// ThrottleMs is the minimum gap between messages rosbridge sends.
	ThrottleMs int
	// QueueLength is how many messages rosbridge queues while throttling.
	QueueLength int
}

// TopicEvent is one message of a subscription, or a lost link (Err set).
type TopicEvent struct {
	Msg json.RawMessage
	// At is the arrival time on the client's clock.
	At  time.Time
	Err error
}

// GoalRequest is a send_action_goal request.
type GoalRequest struct {
	Action string // "/arm/move"
	Type   string // "arm_msgs/action/Move"
	Args   any
	// Feedback asks rosbridge to forward action_feedback.
	Feedback bool
}

// GoalHandle is an in-flight goal.
type GoalHandle struct {
	ID     string
	Result <-chan GoalResult
	// Release, when not nil, is called once the caller stops waiting for
	// the result without having received it (a deadline, an abandoned
	// goal): the Conn forgets the goal and frees what it held for it.
	Release func()
}

// GoalResult is a goal's end as rosbridge reported it.
type GoalResult struct {
	// Status is the action_msgs/GoalStatus code of the result.
	Status int
	Values json.RawMessage
	// Result is the action_result's result flag; false means rosbridge
	// failed the goal itself (Values is then its error string).
	Result bool
	// Err is set when no result can come: the link dropped.
	Err error
	// NoStatus is set when the action_result carried no top-level status,
	// as rosbridge builds from Nov 2023 to Oct 2024 sent it: Status is then
	// meaningless and the outcome cannot be read from it.
	NoStatus bool
}

// ROS 2 action_msgs/GoalStatus codes.
const (
	StatusUnknown   = 0
	StatusAccepted  = 1
	StatusExecuting = 2
	StatusCanceling = 3
	StatusSucceeded = 4
	StatusCanceled  = 5
	StatusAborted   = 6
)

// ROS 1 actionlib_msgs/GoalStatus codes.
const (
	ActionlibPending    = 0
	ActionlibActive     = 1
	ActionlibPreempted  = 2
	ActionlibSucceeded  = 3
	ActionlibAborted    = 4
	ActionlibRejected   = 5
	ActionlibPreempting = 6
	ActionlibRecalling  = 7
	ActionlibRecalled   = 8
	ActionlibLost       = 9
)

// StatusName names a ROS 2 GoalStatus code.
func StatusName(s int) string {
	names := []string{"UNKNOWN", "ACCEPTED", "EXECUTING", "CANCELING", "SUCCEEDED", "CANCELED", "ABORTED"}
	if s >= 0 && s < len(names) {
		return names[s]
	}
	return fmt.Sprintf("status %d", s)
}

// ActionlibStatusName names a ROS 1 actionlib GoalStatus code.
func ActionlibStatusName(s int) string {
	names := []string{"PENDING", "ACTIVE", "PREEMPTED", "SUCCEEDED", "ABORTED", "REJECTED", "PREEMPTING", "RECALLING", "RECALLED", "LOST"}
	if s >= 0 && s < len(names) {
		return names[s]
	}
	return fmt.Sprintf("status %d", s)
}

// Errors of a Conn.
var (
	// ErrNotConnected: the link is down; nothing was sent.
	ErrNotConnected = errors.New("ros2: not connected to rosbridge, nothing was sent")
	// ErrNotSent: the caller's context ended before the request went out.
	ErrNotSent = errors.New("ros2: request not sent (its context ended first)")
	// ErrConnLost: the link dropped after the request was sent.
	ErrConnLost = errors.New("ros2: connection to rosbridge lost after the request was sent")
	// ErrNoReply: no reply came before the deadline. rosbridge drops
	// requests with an unknown name or a wrong type without any answer.
	ErrNoReply = errors.New("ros2: no reply from rosbridge before the deadline")
	// ErrClosed: the client was closed.
	ErrClosed = errors.New("ros2: client closed")
)

// ServiceError is rosbridge's result:false answer to call_service: the
// service does not exist, the arguments did not fit its type, or its handler
// raised.
type ServiceError struct {
	Service string
	Message string
}

// Error names the service and rosbridge's message.
func (e *ServiceError) Error() string {
	return fmt.Sprintf("rosbridge: call_service %s failed: %s", e.Service, e.Message)
}

// NothingExecuted reports whether rosbridge's message says the service
// handler never ran: the service does not exist or the arguments did not
// fit. A raised handler ("responded with an error") or any other message may
// have acted.
func (e *ServiceError) NothingExecuted() bool {
	return bridgeRefused(e.Message) || containsAny(e.Message, "does not exist", "unknown service", "not available")
}

// bridgeRefused reports whether a rosbridge error text says the bridge
// could not build the request from the JSON, so nothing reached the robot:
// rosbridge 2.x "Unable to import ...", "Message type X does not have a
// field Y", "Expected a JSON object for type ...", and 0.11's "... message
// requires a bool for field data, but got a ...".
func bridgeRefused(m string) bool {
	return containsAny(m, "Unable to import", "Unable to load", "does not have a field", "Expected a JSON object", "message requires", "but got a")
}

func containsAny(s string, subs ...string) bool {
	for _, x := range subs {
		if strings.Contains(s, x) {
			return true
		}
	}
	return false
}

// valuesText renders a values field for messages: a JSON string unquoted,
// anything else as JSON text.
func valuesText(raw json.RawMessage) string {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s
	}
	if len(raw) == 0 {
		return "(no values)"
	}
	return string(raw)
}
