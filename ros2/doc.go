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
// This package has the shape every adapter has (see package adapters):
// Load, Config.Validate, New, Register.
//
//	src, err := adapters.ReadSource("robot.yaml")
//	cfg, err := ros2.Load(src)                        // strict YAML, validated
//	drv, err := ros2.New(ctx, cfg, ros2.Options{})    // unstarted; Start dials Config.URL
//	err = drv.Start(ctx)
//	defer drv.Close()
//
// The backend seam is [Options.Conn]: nil dials a [Client] to [Config.URL]
// at Start; a test passes a [Conn] of its own, or points Config.URL at the
// fake rosbridge server of package ros2/rosbridgetest.
//
// # Mapping (see Config)
//
//   - topic -> signal: subscribe with throttle_rate and queue_length, take a
//     field path of the message, keep the last value with its arrival time;
//     a value older than max_age_s, a null (NaN on the robot), a value of
//     the wrong type or a lost link reads as unavailable, so an interlock on
//     it is open. int64 and uint64 fields arrive as exact JSON integers and
//     stay exact (never through float64); uint8[] and char[] fields (fixed
//     size too) arrive as base64 strings: a string signal reads the string,
//     an array signal the bytes, and a path like "data[3]" one byte. Time and
//     Duration are {sec, nanosec} objects;
//   - setting -> publish on a topic (advertised first). rosbridge never
//     acknowledges a publish, so the write reports "sent" unless a state
//     topic confirms the value within a deadline ("applied"); no
//     confirmation in time is an unknown outcome. A setting may instead
//     call a service (success:false = refused, nothing changed);
//   - service -> short action: call_service with a deadline. result:false
//     for a missing service ("Service X does not exist") or for a request
//     the bridge could not build ("... does not have a field ...",
//     "Expected a JSON object for type ...", "Unable to import ...", 0.11's
//     "... requires a bool for field ..., but got ...") is a refusal,
//     not_started; a raising handler (0.11 answers result:false "responded
//     with an error", 2.x answers nothing) or no reply is an unknown outcome;
//     std_srvs/Trigger-like success:false is a failed job with the message;
//   - ROS 2 action -> job: the action server's existence and type are
//     checked through rosapi before the goal is sent (a missing server or
//     another type is refused, not_started: rosbridge would answer nothing
//     at all); send_action_goal with feedback (progress from a configurable
//     field); action_result status SUCCEEDED -> done, CANCELED -> cancelled,
//     ABORTED -> failed; result:false with a bridge refusal -> not_started;
//     any other result:false, a non-terminal status, a result without
//     status, a lost link or no result before the deadline -> outcome
//     unknown (the device faults). No action_feedback and no action_result
//     within first_response_s (default 30 s) ends the goal with that error
//     (a rejected goal gets no answer from rosbridge). A cancel sends
//     cancel_action_goal and the job ends with whatever final status the
//     robot reports;
//   - ROS 1 actionlib -> job over <ns>/goal, /cancel, /status, /feedback,
//     /result: SUCCEEDED -> done, PREEMPTED/RECALLED -> cancelled, ABORTED
//     -> failed, REJECTED -> refused (not started), LOST or anything else ->
//     unknown. A goal the server never lists in <ns>/status within
//     first_response_s ends: not_started when status messages kept coming
//     without it (rosbridge dropped the goal, e.g. a misspelt action_type),
//     unknown when no status came at all;
//   - estop -> the robot's own e-stop: a topic publish or a Trigger service
//     call, with a deadline; a failure leaves the device in estop with
//     stopped:false.
//
// # Connections: nothing waits behind a goal
//
// rosbridge handles each WebSocket connection's ops in order, one at a
// time (its IncomingQueue). With the server settings as shipped
// (call_services_in_new_thread and send_action_goals_in_new_thread false)
// a service call holds the connection until it is answered and a goal
// until it ends; a goal that is rejected, sent to a missing action server
// or of the wrong type, and on ROS 2 a service whose handler raised, is
// never answered and holds it for good. The Client therefore spreads the
// work over connections of its own kind (see [Client]): one main connection
// for topics and cancels (ops rosbridge handles at once), a pooled
// connection per service call, a connection per goal for its life, and a
// dedicated estop connection. Estop, cancel and reads never wait behind a
// goal or a slow call, whatever the thread settings. A robot therefore sees
// two connections from the device at rest (main and estop), plus one per
// service call or goal in flight, of which at most two stay open idle.
//
// # Link, start and reconnects
//
// The device starts whether or not the bridge answers (fail_fast: true
// restores the old refusal to start). While the main connection is down the
// driver reports the backend link down (ping and device/describe carry
// "backend"), signals read unavailable, writes and invokes are refused
// not_started; the client redials with exponential backoff. On each
// reconnect the cancels owed for goals orphaned by a drop go out first
// (rosbridge does not cancel a vanished client's goals), then
// advertisements and subscriptions are restored; those goals' jobs end with
// outcome unknown. rosbridge 2.x keeps goal handles in one table shared by
// every connection of the server process, so the cancel reaches a goal sent
// on a dropped connection (unless the bridge itself restarted:
// [ActionConfig.CancelAllOnReconnect] then also calls the action server's
// <action>/_action/cancel_goal with a zero goal id). The same sharing lets
// one client cancel another's goal by id, so goal ids carry a random
// per-client prefix: unique across processes and restarts. A cancel sent
// before the goal's first feedback is sent again when that feedback
// arrives, because rosbridge 2.1.0 drops a cancel that arrives before the
// goal response.
//
// # rosbridge versions and server settings
//
// The adapter asks rosapi at start (or when the bridge first comes up) what
// the bridge is, logs it plainly ([Bridge.String]), and with check_types
// checks the config against it:
//   - rosbridge_suite 2.0.0 (humble) and 2.1.0 (jazzy, rolling) on ROS 2:
//     everything above. /rosapi/get_ros_version says ROS 2 and the distro,
//     /rosapi/action_servers lists action servers and
//     /rosapi/service_type gives an action server's type (through its hidden
//     <action>/_action/send_goal service); topic types may be spelt
//     "pkg/msg/Type" or "pkg/Type";
//   - rosbridge builds from Nov 2023 to Oct 2024 (before 2.0.0): their
//     action_result has no top-level status, so the outcome of a goal cannot
//     be read; such a goal ends unknown with an error that says so;
//   - rosbridge 1.x on ROS 2 (humble 1.3.x): no action ops (a goal is only
//     logged as an unknown operation). rosapi does not tell it from 2.x, so
//     the probe cannot either; such a goal ends after first_response_s with
//     an error that names this cause;
//   - rosbridge_suite 0.11.x on ROS 1: no ROS 2 action ops (ROS 2 actions
//     are refused not_started; use actionlib), types are spelt "pkg/Type"
//     only (check_types refuses "pkg/msg/Type": the bridge would drop it
//     silently), an unknown service answers result:false "does not exist",
//     a raising handler result:false "responded with an error";
//   - call_services_in_new_thread / send_action_goals_in_new_thread true:
//     nothing changes for the adapter (it never shares a connection between
//     long work and urgent work).
//
// [Conn] is the seam between the mapping and the wire; package
// ros2/rosbridgetest is a fake rosbridge server for integration tests that
// plays each of these versions and settings.
//
// # Peers checked against
//
// Served through `mhp serve` and `mhp conformance` against the unmodified
// rosbridge_suite 2.1.0 (ROS 2; its rosapi lists no type for the hidden
// <action>/_action/send_goal and serves no /rosapi/action_type, so
// check_types warns instead of checking an action's type) and 0.11.17
// (ROS 1); the tests run against the fake (ros2/rosbridgetest), which plays
// those releases.
package ros2
