package serial

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// estop stops the instrument without waiting behind ordinary requests
// (003 §5.6): it raises the interrupt so a command in flight gives the line
// up within a read slice, waits for the line at most estop_lock_s, closes
// the port to free a blocked read if it must (and opens it again), then
// flushes queued output (a setpoint queued before the stop never follows
// it), sends the stop sequence, drains it to the wire and flushes input.
// Any failure is an error: the answer says stopped:false.
func (a *adapter) estop(ctx context.Context) error {
	a.line.intr.Add(1)
	defer a.line.intr.Add(-1)
	wait := seconds(a.cfg.Timeouts.EStopLockS)
	if !a.line.acquireWithin(wait) {
		a.line.closePort() // ends a blocked Read; the holder sees the interrupt
		if !a.line.acquireWithin(wait) {
			return fmt.Errorf("serial estop: the line to %s is held by a stuck write; stop commands not sent", a.cfg.Port)
		}
	}
	defer a.line.release()
	p, gen := a.line.current()
	if p == nil {
		var err error
		if p, err = a.line.connect(ctx); err != nil {
			return fmt.Errorf("serial estop: %v; stop commands not sent", err)
		}
		_, gen = a.line.current()
	}
	if err := p.ResetOutputBuffer(); err != nil {
		a.line.drop(gen, err)
		return fmt.Errorf("serial estop: flush output of %s: %v; stop commands not sent", a.cfg.Port, err)
	}
	for i, s := range a.cfg.EStop {
		st := compileStep(s)
		if err := a.line.write(p, gen, []byte(st.send+a.cfg.LineEnding)); err != nil {
			return fmt.Errorf("serial estop: step %d %q: %v", i, st.send, err)
		}
		if err := p.Drain(); err != nil {
			a.line.drop(gen, err)
			return fmt.Errorf("serial estop: drain after %q: %v", st.send, err)
		}
		if st.ack == nil && st.error == nil {
			continue
		}
		reply, err := a.line.readReply(ctx, p, gen, anyOf(st.ack, st.error), seconds(a.cfg.Timeouts.EStopReplyS), false)
		if err != nil {
			if errors.Is(err, errNoReply) && st.ack == nil {
				continue
			}
			return fmt.Errorf("serial estop: %q sent, %v: not known to have stopped", st.send, err)
		}
		if st.error != nil && st.error.MatchString(reply) {
			return fmt.Errorf("serial estop: the instrument refused %q: %s", st.send, reply)
		}
	}
	_ = p.ResetInputBuffer()
	a.line.lastEnd = time.Now()
	return nil
}
