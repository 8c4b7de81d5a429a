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
package pylabrobot
