// Package madsci serves a MADSci node (AD-SDL/MADSci, the REST node API of
// RestNode, and the older single-call layout of v0.1-v0.4) as an MHP device.
//
// This package has the shape every adapter has (see package adapters): Load,
// Config.Validate, New, Register.
//
//	src, err := adapters.ReadSource("node.yaml")  // adapter: madsci
//	cfg, err := madsci.Load(src)                  // strict YAML, paths resolved, defaults, validated
//	drv, err := madsci.New(ctx, cfg, madsci.Options{})
//	err = drv.Start(ctx)
//	defer drv.Close()
//
// [Options] embed [adapters.Options] (clock, link clock, poll clock, logger, Refine) next
// to the node seam: [Node] and [Actions] (nil = an HTTP [Client] of
// [Config.NodeURL]), the Retry-After clock and the http.Client. The fake
// node of package madsci/madscitest serves tests and examples.
//
// The node describes itself: GET /info actions become MHP actions (typed args
// become typed params; file args become string params naming local files,
// which are uploaded), GET /state keys become signals (nested objects are
// flattened with "."), GET /status booleans become the node.* signals (busy,
// paused, locked, errored, stopped, ... and node.ready, derived from the
// booleans, never from the description), and the node config keys meant to
// be set at run time become settings (POST /config): those the config file's
// settings block names and those config_schema marks "x-mhp-setting"; the
// node's wiring (node_url, node_id, rate limiting, uvicorn) never.
//
// The node may start after the adapter (link block, [adapters.LinkConfig]):
// the adapter then serves the description its last start with the node up
// saved in link.descriptor_cache (without one, or with link.fail_fast, it
// refuses to start and says why), reports backend connected:false, and
// probes the node with bounded, jittered backoff. A node that comes back
// describing itself as before brings the link up with no restart; one whose
// actions, capabilities or config schema changed keeps the link down with
// that reason (what the gates check never changes under a running device).
// A request that fails below HTTP marks the link down; a start that could
// not connect is refused not_started (nothing was sent, no fault); a 5xx
// reply is the node answering, never a link drop. A running action is
// polled every poll_interval growing to poll_max; a failed poll follows the
// shared poll policy ([adapters.PollRetry], poll_retry): retried with
// back-off (250ms doubling to 5s) for poll_retry.window (2m) from the first
// failure in a row, then the outcome is unknown (fault), the message saying
// whether the node answered an HTTP error (and which) or could not be
// reached. poll_failures (a count) is deprecated. With results_dir set, the
// result files of a succeeded action are downloaded into
// results_dir/<action_id>/ and listed as local_files.
//
// GET /action/{name}/{id}/result answers HTTP 500 for a failed or cancelled
// action that declares a return type (FastAPI validates the reply and
// json_result is None); the adapter then reads GET /action/{id}/result, and
// failing that the status route.
//
// Actions are not pausable unless the config opts in (actions.<name>.pausable:
// true, refused when admin_commands lacks pause or resume): MADSci's pause, as
// the upstream example module implements it, ends the running action and
// resume only clears the node's flag. A json result's json_schema type
// ({"data": {"type": ...}}) becomes json_result's type.
//
// Outcomes are the node's, never assumed:
//
//	succeeded                     -> job done (result: json_result, files, datapoints)
//	failed                        -> job failed with the node's errors (binding.Failed)
//	cancelled                     -> job cancelled (binding.ErrCancelled)
//	paused, still running         -> the job stays running and paused at the node
//	paused, no longer running     -> ended incomplete: cancelled when we asked to
//	                                 cancel, else failed; never done
//	not_ready                     -> refused (*mhp.Error): the action never ran, no fault
//	unknown, no terminal state before the deadline, node unreachable mid-action
//	                              -> outcome unknown: the device latches in fault
//
// The node's word on its own state moves the device state. Every GET
// /status the adapter reads (signal reads, the cancel and pause checks,
// Setup, the reset's wait) is checked, and while the driver runs a status
// watch reads it every status_poll (default 2s on the driver's clock; 0s
// disables the watch, not the checks; stopped by Close, which waits for a
// read in progress):
//
//	errored   -> fault; the reason carries the node's newest errors
//	stopped   -> fault ("madsci node reports stopped"): a safety_stop that
//	             did not come through MHP, or the node stopped itself. Not
//	             estop: an MHP estop is one the driver commanded (it records
//	             who, cancels our jobs, runs the stop hook); a fault says
//	             the same thing that matters (refuse until a verified reset)
//	             without inventing who pressed it. After our own estop the
//	             node is stopped as expected and nothing more is latched.
//	busy, locked, paused, initializing, disconnected
//	          -> node.* signals and the node.ready interlock only. MHP busy
//	             means our jobs: a node busy with another client's action
//	             keeps the device idle and refuses blocking actions at the
//	             interlock.
//	unreachable (the read fails below HTTP)
//	          -> no change of device state: the backend link is down
//	             (ping and describe say so), signals read null, writes
//	             and invokes are refused not_started before anything is
//	             sent, and the link reconnects. A job running meanwhile
//	             ends outcome unknown (fault) when its own polls keep
//	             failing for poll_retry.window.
//
// A fault on the node's word is latched once ([binding.Driver.Fault]), runs
// the fault hook like every fault (the estop hook: safety_stop when
// listed), and refuses writes and invokes with DeviceFault. A failed action
// that left the node errored faults the device by the time the job ends.
//
// A cancel posts the node's cancel admin command (it is node-wide, so only
// while our action is the node's only running action) and keeps polling until
// the node reports how the action ended, bounded by CancelWait. Estop posts
// safety_stop when capabilities.admin_commands lists it; otherwise it sends
// what the node has (cancel, lock) and reports stopped:false with the reason.
// safety/reset posts the node's reset when the node is stopped, errored,
// locked or paused and admin_commands lists reset, then waits (reset_wait)
// until the node is no longer stopped, errored, initializing or
// disconnected, then reads every signal (an unreadable interlock or
// required_for_recovery signal refuses the reset, others are named in the
// answer's unavailable); a node that still reports errored
// or stopped refuses the reset (DeviceFault, the device stays in fault). A
// status read that began before or during the reset never faults the
// device after it.
// 429 replies are retried after their Retry-After (bounded).
//
// # Peers checked against
//
// Served through `mhp serve` and `mhp conformance` against a MADSci v0.7.1
// node; the tests run against the fake (madsci/madscitest).
package madsci
