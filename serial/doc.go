// Package serial is the adapter for instruments that speak ASCII over a
// serial port (hotplate stirrers, balances, syringe pumps, often through a
// USB adapter): an `adapter: serial` config file maps each signal onto a
// query and a reply pattern, each setting onto a command with {value},
// each action onto a command sequence with {param} placeholders and an
// optional completion query, and the estop onto a stop sequence.
//
// The line carries one ordinary command at a time. Input is flushed
// before every command and after every timeout, and a reply is the first
// line matching the command's own pattern (a stale, echoed or garbled line
// is discarded), so a late reply never answers the next command. Writes
// run under a timer: a write stuck longer than timeouts.write_s is a fault
// (go.bug.st/serial's Write has no timeout).
//
// What a setting write answers:
//   - no ack, error or readback configured: `sent` (nothing confirmed it);
//   - the ack pattern, or the readback signal showing the value: `applied`;
//   - the error pattern: refused, nothing took effect;
//   - no reply when an ack is expected, or a readback that differs: the
//     outcome is unknown and the device latches in fault.
//
// The estop (003 §5.6) does not wait behind ordinary requests: it raises
// an interrupt that a command in flight sees within 100 ms, waits at most
// timeouts.estop_lock_s for the line, closes the port to free a blocked
// read if it must and opens it again, flushes queued output, sends the
// stop sequence, drains it to the wire and flushes input. Any failure
// answers stopped:false.
//
// Every connect and reconnect flushes the port, checks `identify` and arms
// the instrument's own watchdog (resent every seconds/2). When the port
// fails (a USB adapter pulled) the port is closed, the link is reported
// down and the adapter reopens the configured path with backoff; open it
// by /dev/serial/by-id/... so that re-enumeration finds it again.
package serial
