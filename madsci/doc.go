// Package madsci serves a MADSci node (AD-SDL/MADSci, the REST node API of
// RestNode, and the older single-call layout of v0.1-v0.4) as an MHP device.
//
// The node describes itself: GET /info actions become MHP actions (typed args
// become typed params; file args become string params naming local files,
// which are uploaded), GET /state keys become signals (nested objects are
// flattened with "."), GET /status booleans become the node.* signals (busy,
// paused, locked, errored, stopped, ... and node.ready, derived from the
// booleans, never from the description), and the node's config becomes
// settings (POST /config).
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
// A cancel posts the node's cancel admin command (it is node-wide, so only
// while our action is the node's only running action) and keeps polling until
// the node reports how the action ended, bounded by CancelWait. Estop posts
// safety_stop when capabilities.admin_commands lists it; otherwise it sends
// what the node has (cancel, lock) and reports stopped:false with the reason.
// safety/reset posts the node's reset when the node is stopped, errored,
// locked or paused, waits for it to recover, then reads every signal.
// 429 replies are retried after their Retry-After (bounded).
package madsci
