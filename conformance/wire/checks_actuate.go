package wire

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/openmhp/mhp-go"
)

func checkClientHeader(ctx context.Context, c *checker) outcome {
	if !c.http() {
		return skipf("HTTP only")
	}
	conn, err := Dial(c.target, DialOptions{Token: c.opts.Token, HTTPClient: c.opts.HTTPClient, NoSession: true})
	if err != nil {
		return failf("%v", err)
	}
	defer conn.Close()
	r, err := conn.Call(ctx, "initialize", InitParams(mhp.ProtocolVersion, "mhp-wire"))
	if err != nil || r.Error != nil {
		return failf("initialize: %v%v", errOr(err), errString(r.Error))
	}
	r, err = conn.Call(ctx, "device/describe", map[string]any{"detail": "card"})
	if err != nil {
		return failf("describe with X-MHP-Client only: no answer: %v", err)
	}
	if r.Error != nil {
		return failf("after initialize, a client that sends X-MHP-Client and no Mhp-Session is refused: %s", r.Error)
	}
	return pass()
}

// estop sends safety/estop and checks the answer: a result, state estop.
func estop(ctx context.Context, conn *Conn) error {
	r, err := conn.Call(ctx, "safety/estop", map[string]any{"reason": "mhp conformance"})
	if err != nil {
		return fmt.Errorf("no answer: %v", err)
	}
	if r.Error != nil {
		return fmt.Errorf("refused: %s", r.Error)
	}
	var res struct {
		State string `json:"state"`
	}
	if err := json.Unmarshal(r.Result, &res); err != nil {
		return fmt.Errorf("unreadable answer: %v", err)
	}
	if res.State != "" && res.State != string(mhp.StateEStop) {
		return fmt.Errorf("answered state %q, want estop", res.State)
	}
	return nil
}

// restore resets the device from whichever session may (the lease holder
// first), and reports a device it could not bring out of estop. A device
// with a watchdog refuses an unleased reset (NotLeased lease_required), and
// the estop dropped the lease: the session takes the lease, resets and
// releases it.
func (c *checker) restore(ctx context.Context, sessions ...*session) string {
	for _, s := range append(sessions, c.main) {
		if s == nil {
			continue
		}
		_, e, err := s.call(ctx, "safety/reset", nil)
		if err == nil && e == nil {
			return ""
		}
		if err != nil || e.Code != mhp.CodeNotLeased {
			continue
		}
		if _, ae, aerr := s.call(ctx, "session/acquire", map[string]any{"ttl": 30}); aerr != nil || ae != nil {
			continue // another client holds it: try the next session
		}
		_, e, err = s.call(ctx, "safety/reset", nil)
		_, _, _ = s.call(ctx, "session/release", nil)
		if err == nil && e == nil {
			return ""
		}
	}
	return "; the device could not be reset: reset it by hand"
}

func checkEStopLeased(ctx context.Context, c *checker) outcome {
	a, err := c.open(ctx)
	if err != nil {
		return failf("first client: %v", err)
	}
	defer a.close()
	b, err := c.open(ctx)
	if err != nil {
		return failf("second client: %v", err)
	}
	defer b.close()
	held := false
	if c.http() {
		if _, e, err := a.call(ctx, "session/acquire", map[string]any{"ttl": 30}); err == nil && (e == nil || e.Code == mhp.CodeNotLeased) {
			held = true // by a, or by someone else: either way not by b
		}
	}
	err = estop(ctx, b.c)
	left := c.restore(ctx, a, b)
	_, _, _ = a.call(ctx, "session/release", nil)
	if err != nil {
		return failf("estop from a client without the lease: %v%s", err, left)
	}
	if !held {
		return passf("estop answered (no lease held elsewhere to test against)%s", left)
	}
	return passf("estop answered while another client held the lease%s", left)
}

func checkEStopAnyCaller(ctx context.Context, c *checker) outcome {
	conn, err := c.dial()
	if err != nil {
		return failf("%v", err)
	}
	defer conn.Close()
	err = estop(ctx, conn)
	left := c.restore(ctx)
	if err != nil {
		return failf("estop before initialize: %v%s", err, left)
	}
	return passf("estop before initialize answered%s", left)
}
