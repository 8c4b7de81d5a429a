// Package pylabrobot serves a PyLabRobot machine as an MHP device, through
// either of two HTTP APIs:
//
//   - the plrbridge (mode "bridge", pylabrobot/plrbridge/plrbridge.py), a small
//     Python program that holds any PyLabRobot machine object and serves its
//     public coroutines: each method becomes an action with typed params (from
//     the Python signatures), the readable state (setup_finished, zero-argument
//     get_* coroutines) becomes signals, configured setter methods become
//     settings, and estop calls the machine's stop(). Tasks end done, failed,
//     cancelled (only when the coroutine really ended by CancelledError) or
//     unknown (timeout: the device latches in fault);
//   - the legacy liquid-handling server (mode "legacy", PyLabRobot's lh-server,
//     2022-08 to 2026-02): setup, stop, pick-up-tips, drop-tips, aspirate,
//     dispense and labware become actions, GET /status becomes the
//     setup_finished signal. That API has no cancel and no e-stop: its actions
//     are not cancellable and estop answers stopped:false.
//
// Outcomes are the backend's: a refusal before a task exists (400, 404,
// 409, the legacy server's 500 HTML page for an unknown resource) fails the
// job with outcome not_started and no fault; a task that errors fails the
// job (known outcome); a lost task (404 for an id we created: the server
// restarted), a lost connection, an unknown status or no terminal status
// before the deadline is outcome unknown and latches the device in fault.
//
// A running task is followed to its end by polling GET /tasks/{id}. A
// bridge whose /describe says bridge.long_poll_s (plrbridge 2) is
// long-polled: each poll asks it to hold the answer until the task's
// version changes (status, progress, message) or long_poll_wait (5s)
// passes, so a task's end or progress reaches the job at once, with no
// poll interval on the path. Older bridges, long_poll: false and the
// legacy server are polled every poll_interval (200ms). A cancel or estop
// never waits behind a long-poll: the poll is cut by the job's context and
// the cancel or stop is its own request. Failed polls follow the shared
// poll policy ([adapters.PollRetry], poll_retry): retried with back-off
// (250ms doubling to 5s) for poll_retry.window (2m) from the first failure
// in a row, then the outcome is unknown (fault); a bridge that answered an
// HTTP error is said to have answered it, only one that gave no answer is
// "unreachable"; a 404 for the task still means the bridge restarted
// (outcome unknown at once). poll_failures (a count) is deprecated.
//
// Resource parameters are names of deck resources, described as strings
// (and arrays of them) with the classes they admit; plrbridge resolves them
// inside Optional, Union and Sequence (drop_tips' Sequence[Union[TipSpot,
// Trash]], move_plate's Union[ResourceStack, ResourceHolder, Coordinate]).
//
// PyLabRobot's stop() (the estop) tears the backend down: setup_finished
// reads false and the machine refuses every command. A reset therefore runs
// setup again when the bridge serves setup_finished and it reads false, and
// verifies only once it reads true (reset_setup: false refuses such a reset
// instead).
//
// The backend may start after the adapter (link block, [adapters.LinkConfig]):
// in bridge mode the adapter then serves the /describe its last start with
// the bridge up saved in link.descriptor_cache (without one, or with
// link.fail_fast, it refuses to start), reports backend connected:false,
// refuses actuation not_started and reconnects with bounded, jittered
// backoff; a bridge that comes back describing another machine is not
// adopted. The legacy server's API is fixed, so it needs no cache. A submit
// that could not connect is not_started (nothing ran), never a fault; a link
// that drops with a task in flight ends it outcome unknown (fault).
//
// # The adapter shape
//
// This package has the shape every adapter has (see package adapters): Load,
// Config.Validate, New, Register.
//
//	const Kind = "pylabrobot"                               // the config file's `adapter:`
//	func Load(src adapters.Source) (Config, error)          // strict YAML, paths resolved, validated
//	func (c Config) Validate() error                        // no I/O: what the file says is coherent
//	func New(ctx context.Context, cfg Config, opt Options) (*binding.Driver, error)
//	func Register(r *adapters.Registry) error               // Kind -> Load, then New
//
// [Options] embed [adapters.Options] (clock, link clock, poll clock, logger, Refine) next
// to the backend seam: [Machine] and [Tasks] (the bridge) or [Legacy] (the
// liquid-handling server), nil for the HTTP clients of [Config.URL]. The
// fakes of both APIs are in package plrtest.
//
// # Peers checked against
//
// Served through `mhp serve` and `mhp conformance` against PyLabRobot 0.2.2
// behind plrbridge (pylabrobot/plrbridge); the tests run against the fake
// (pylabrobot/plrtest) and, where Python is installed, the real plrbridge.
package pylabrobot
