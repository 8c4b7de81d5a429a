// Package ros2 is the MHP adapter for ROS robots: a robot's topics, services
// and actions become one MHP device (a binding.Driver), reached through the
// rosbridge v2 JSON protocol over WebSocket (rosbridge_server from
// rosbridge_suite on the robot, default ws://robot:9090).
//
// No cgo and no ROS install: the adapter is pure Go (coder/websocket). It
// does not use github.com/bluenviron/goroslib/v2, which the Go module proxy
// does not serve and which speaks only ROS 1; nor rclgo, which needs cgo and
// a sourced ROS 2. Through rosbridge the same adapter serves ROS 2 robots and
// ROS 1 robots (ROS 1 actionlib over its topics).
//
// Mapping (see Config):
//   - topic -> signal: subscribe with throttle_rate and queue_length, take a
//     field path of the message, keep the last value with its arrival time;
//     a value older than max_age_s, a null (NaN on the robot), a value of
//     the wrong type or a lost link reads as unavailable, so an interlock on
//     it is open;
//   - setting -> publish on a topic (advertised first). rosbridge never
//     acknowledges a publish, so the write reports "sent" unless a state
//     topic confirms the value within a deadline ("applied"); no
//     confirmation in time is an unknown outcome. A setting may instead
//     call a service (success:false = refused, nothing changed);
//   - service -> short action: call_service with a deadline; result:false
//     for a missing service or arguments that do not fit is a refusal
//     (nothing ran); a raising handler or no reply is an unknown outcome;
//     std_srvs/Trigger-like success:false is a failed job with the message;
//   - ROS 2 action -> job: send_action_goal with feedback (progress from a
//     configurable field); action_result status SUCCEEDED -> done, CANCELED
//     -> cancelled, ABORTED -> failed; result:false, a non-terminal status, a
//     lost link or no result before the deadline -> outcome unknown (the
//     device faults). A cancel sends cancel_action_goal and the job ends with
//     whatever final status the robot reports;
//   - ROS 1 actionlib -> job over <ns>/goal, /cancel, /feedback, /result:
//     SUCCEEDED -> done, PREEMPTED/RECALLED -> cancelled, ABORTED -> failed,
//     REJECTED -> refused (not started), LOST or anything else -> unknown;
//   - estop -> the robot's own e-stop: a topic publish or a Trigger service
//     call, with a deadline; a failure leaves the device in estop with
//     stopped:false.
//
// Connection: one WebSocket per robot (Client). A single reader goroutine
// routes replies by id; every request has a deadline, because rosbridge
// drops bad ops, unknown names and wrong types silently, without an error.
// After a drop the client redials with exponential backoff, restores every
// subscription, and cancels the goals that were in flight at the drop
// (rosbridge does not cancel a vanished client's goals); their jobs end
// with outcome unknown. Caveat: rosbridge 2.x keeps goal handles per
// connection, so a cancel_action_goal sent on the new connection may not
// reach a goal sent on the old one: ActionConfig.CancelAllOnReconnect then
// also calls the action server's <action>/_action/cancel_goal with a zero
// goal id (every goal of that server). ROS 1 actionlib cancels by goal id
// over a topic and always reaches the goal.
//
// Conn is the seam between the mapping and the wire; package
// ros2/rosbridgetest is a fake rosbridge server for integration tests.
package ros2
