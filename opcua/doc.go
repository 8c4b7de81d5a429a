// Package opcua wraps an OPC UA server (a PLC, a LADS instrument) as an MHP
// device with no Go code: a config file ([Config]) lists the variables that
// become signals and settings, the methods, LADS functional units (their
// programs or Start; LADS control functions are not actions, and a config
// that makes one an action is refused: map their TargetValue and
// CurrentValue as a setting and a signal) and Part 10
// programs that become actions, and the estop; [New] turns it into a
// [binding.Driver], and [Register] adds the "opcua" kind to an adapter registry
// so that `mhp serve plc.yaml` serves it.
//
// This package has the shape every adapter has (see package adapters):
// Load, Config.Validate, New, Register.
//
//	src, err := adapters.ReadSource("plc.yaml")
//	cfg, err := opcua.Load(src)                          // strict YAML, paths resolved, validated
//	drv, err := opcua.New(ctx, cfg, opcua.Options{})     // unstarted; Options.Dial is the seam
//	err = drv.Start(ctx)
//	defer drv.Close()
//
// Package [github.com/openmhp/mhp-go/opcua/opcuatest] is a fake server for
// tests: point the config's endpoint at it and leave [Options].Dial nil.
//
// The mapping talks to the server only through the [Client] interface (read,
// write, call, browse, subscribe); [Conn] implements it over gopcua v0.8.0
// with security None or Basic256Sha256/SignAndEncrypt, anonymous or
// username identity, a pinned server certificate, and reconnection with
// backoff that rebuilds the subscriptions (re-resolving nsu= node ids).
//
// The driver starts whether or not the server is up (unless
// reconnect.fail_fast): it reports the link to [binding.Driver.SetLink], so
// ping and describe carry "backend", reads are unavailable and actuation is
// refused not_started while it is down. A drop with nothing in flight never
// faults the device; a write or call cut by it leaves the outcome unknown.
// Units and ranges come from the server's EngineeringUnits and EURange
// ([Probe], run by Register, then every connection, each refining the
// running driver's descriptor, see [binding.Driver.Refine]): a unit fills
// in an item without one, an EURange becomes the limits of a numeric
// setting without any, and a later connection's range replaces an earlier
// one's (never the config's); a config limit wider than a node's EURange
// is refused (at load, or every write of that setting when a later
// connection finds it so). A lads
// action pointed at a LADS control function is refused likewise: the
// config at load or start, its invokes when the server is reached later.
//
// Outcomes are honest. A refusing status code is an *mhp.Error naming the
// OPC UA code (in the message and data.opcua_status), and the device state
// is unchanged:
//
//	BadOutOfRange                                 -> LimitViolation
//	BadTypeMismatch, BadInvalidArgument,
//	  BadArgumentsMissing, BadTooManyArguments    -> InvalidValue
//	BadNotWritable, BadWriteNotSupported,
//	  BadMethodInvalid, BadNotExecutable,
//	  BadNotImplemented                           -> NotSupported (the node or method cannot)
//	BadUserAccessDenied                           -> Forbidden (our OPC UA user may not)
//	BadInvalidState, BadLocked                    -> DeviceBusy (busy, needs Clear, locked)
//	BadNodeIdUnknown/Invalid, BadAttributeIdInvalid,
//	  BadServerNotConnected, ServiceFault codes   -> ServerError (stale mapping, not connected)
//	any other Bad code answering a write          -> ServerError (the server did not apply it)
//
// Beyond refusals:
//   - a method that ran and answered another Bad code (BadDeviceFailure, ...)
//     failed with a known outcome: the job ends failed, no fault;
//   - a timeout, a lost connection or a closed session after a write or call
//     was sent leaves the outcome unknown: the device latches in fault;
//   - writes and calls are never retried;
//   - LADS and Part 10 jobs end as the server's state machine says:
//     completed -> done, stopped/halted by our cancel -> cancelled, aborted
//     by the device -> failed; an end that is ambiguous is resolved by
//     reading the program's result, otherwise the outcome is unknown.
//
// Signals are served from one subscription (value, source timestamp,
// status; Bad or stale reads null). The subscription carries a heartbeat
// (the server's CurrentTime) so that a frozen server is noticed: beyond
// timeouts.max_age_s without word from it, signals read unavailable.
// Signals used as interlocks are read live, or, with
// timeouts.interlock_max_age_s, served from the subscription while its
// values are known current within that bound. After an
// applied write, the node's signals show the written value at once.
//
// # Peers checked against
//
// Served through `mhp serve` and `mhp conformance` against open62541 1.4.19
// (Basic256Sha256 with a username; it revises a 50 ms publishing interval to
// 100 ms, which the keep-alive follows) and node-opcua 2.186.4 (a PLC and a
// LADS device: testdata/server.mjs); the tests run against the gopcua
// v0.8.0 fake (opcua/opcuatest) and, with MHP_PEER_OPCUA=1, against
// node-opcua 2.186.4 (TestNode*: units and EURange read at a connection
// after a late server start, and a range moved by a restart, among them).
// The refusal of a LADS control
// function as an action is checked against the fake only: server.mjs has
// no control function, and open62541 was not run again for it.
package opcua
