package opcua

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/gopcua/opcua/id"
	"github.com/gopcua/opcua/ua"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
)

// Signals (served from the subscription, staleness, read-after-write),
// reset verification and settings.

// onValue is the subscription callback: it caches the value and pushes it
// (null when bad) to the driver's subscribers.
func (a *adapter) onValue(i int, dv *ua.DataValue) {
	if i < 0 || i >= len(a.latest) {
		return
	}
	now := a.clk.Now()
	a.mu.Lock()
	prev := a.latest[i]
	if !isBad(dv.Status) && !prev.floor.IsZero() && !dv.SourceTimestamp.IsZero() && dv.SourceTimestamp.Before(prev.floor) {
		// Sampled before a write we saw applied: never show it after.
		a.mu.Unlock()
		return
	}
	a.latest[i] = sample{have: true, dv: dv, at: now, floor: prev.floor, liveUntil: prev.liveUntil}
	a.mu.Unlock()
	if a.drv == nil || a.cfg.Signals[i].StaleAfterS > 0 {
		return
	}
	s, err := a.sampleOf(i, sample{have: true, dv: dv, at: now})
	if err != nil {
		a.drv.PublishSignal(a.cfg.Signals[i].Name, binding.Sample{Value: nil})
		return
	}
	a.drv.PublishSignal(a.cfg.Signals[i].Name, s)
}

// sampleOf judges one cached value: bad status or stale -> unavailable.
func (a *adapter) sampleOf(i int, s sample) (binding.Sample, error) {
	item := a.cfg.Signals[i]
	dv := s.dv
	if dv == nil {
		return binding.Sample{}, binding.Unavailable("%s: no value", item.Name)
	}
	if isBad(dv.Status) {
		if codeOnly(dv.Status) == ua.StatusBadServerNotConnected {
			return binding.Sample{}, binding.Unavailable("%s: the OPC UA server is not connected", item.Name)
		}
		return binding.Sample{}, binding.Unavailable("%s: OPC UA status %s", item.Name, StatusName(dv.Status))
	}
	if age, ok := a.subscriptionAge(); ok && age > seconds(a.cfg.Timeouts.MaxAgeS) {
		return binding.Sample{}, binding.Unavailable("%s: the subscription has not heard from the server for %.1fs (max age %gs): the server may be frozen",
			item.Name, age.Seconds(), a.cfg.Timeouts.MaxAgeS)
	}
	t := dv.SourceTimestamp
	if t.IsZero() {
		t = dv.ServerTimestamp
	}
	if item.StaleAfterS > 0 {
		ref := t
		if ref.IsZero() || s.at.After(ref) && dv.SourceTimestamp.IsZero() {
			ref = s.at
		}
		if age := a.clk.Now().Sub(ref); age > seconds(item.StaleAfterS) {
			return binding.Sample{}, binding.Unavailable("%s: value is %.1fs old (stale after %gs)", item.Name, age.Seconds(), item.StaleAfterS)
		}
	}
	if t.IsZero() {
		t = s.at
	}
	return binding.Sample{Value: fromVariant(dv.Value), Time: t}, nil
}

// subscriptionAge is how long ago the subscription last heard from the
// server (real time: the Client's clock); ok is false when the Client
// cannot tell or no subscription runs.
func (a *adapter) subscriptionAge() (time.Duration, bool) {
	h, ok := a.client().(interface{ Heard() time.Time })
	if !ok {
		return 0, false
	}
	t := h.Heard()
	if t.IsZero() {
		return 0, false
	}
	return time.Since(t), true
}

// subscriptionFresh reports whether the subscription's values are known
// current within timeouts.interlock_max_age_s: every change sampled before
// the subscription last heard from the server has arrived, so a value is
// at most (time since then + a sampling interval) old. Unset, or a Client
// that cannot tell: not fresh (interlocks are read live).
func (a *adapter) subscriptionFresh() bool {
	if a.cfg.Timeouts.InterlockMaxAgeS <= 0 {
		return false
	}
	age, ok := a.subscriptionAge()
	return ok && age+seconds(a.cfg.Timeouts.PublishS) <= seconds(a.cfg.Timeouts.InterlockMaxAgeS)
}

// watchFreshness turns pushed signals null when the subscription goes
// quiet beyond the max age (a frozen server sends nothing, so nothing else
// would), and pushes the cached values again when it speaks.
func (a *adapter) watchFreshness(stop <-chan struct{}) {
	maxAge := seconds(a.cfg.Timeouts.MaxAgeS)
	t := time.NewTicker(max(maxAge/4, 10*time.Millisecond))
	defer t.Stop()
	stale := false
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		age, ok := a.subscriptionAge()
		now := ok && age > maxAge
		if now == stale || a.drv == nil {
			continue
		}
		stale = now
		if stale {
			a.log.Warn("opcua: the subscription is quiet beyond the max age; signals read unavailable", "endpoint", a.cfg.Endpoint, "age", age)
		}
		for i, it := range a.cfg.Signals {
			if it.StaleAfterS > 0 {
				continue // polled: the driver reads it anew
			}
			a.mu.Lock()
			smp := a.latest[i]
			a.mu.Unlock()
			out, err := a.sampleOf(i, smp)
			if err != nil {
				out = binding.Sample{Value: nil}
			}
			a.drv.PublishSignal(it.Name, out)
		}
	}
}

// readSignal serves a signal from the subscription's latest value; before
// the first value arrives it reads the node directly.
func (a *adapter) readSignal(i int) func(context.Context) (binding.Sample, error) {
	item := a.cfg.Signals[i]
	return func(ctx context.Context) (binding.Sample, error) {
		a.mu.Lock()
		s := a.latest[i]
		cl := a.cl
		a.mu.Unlock()
		if s.have && !time.Now().Before(s.liveUntil) && (!a.live[item.Name] || a.subscriptionFresh()) {
			return a.sampleOf(i, s)
		}
		if cl == nil {
			return binding.Sample{}, binding.Unavailable("%s: not connected", item.Name)
		}
		res, err := cl.Read(ctx, []*ua.ReadValueID{{NodeID: a.node(item.Node), AttributeID: ua.AttributeIDValue}})
		if err != nil {
			return binding.Sample{}, binding.Unavailable("%s: read: %v", item.Name, err)
		}
		return a.sampleOf(i, sample{have: true, dv: res[0], at: a.clk.Now()})
	}
}

// verify is the adapter's part of the reset check: the server answers (a
// connection being rebuilt after a drop is waited for, bounded by ctx and the
// request timeout) and every LADS functional unit can Start (Aborted ones are
// cleared; see verifyUnits). The signals are read by the binding after it:
// an unreadable interlock or required_for_recovery signal refuses the reset,
// any other is named in the answer.
func (a *adapter) verify(ctx context.Context) error {
	cl := a.client()
	if cl == nil {
		return errors.New("opcua: not connected")
	}
	req := []*ua.ReadValueID{{NodeID: ua.NewNumericNodeID(0, id.Server_ServerStatus_State), AttributeID: ua.AttributeIDValue}}
	deadline := time.Now().Add(seconds(a.cfg.Timeouts.RequestS))
	var err error
	for {
		_, err = cl.Read(ctx, req)
		if err == nil || !connectionTrouble(err) || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err != nil {
		return fmt.Errorf("opcua: verify: the server does not answer: %w", err)
	}
	return a.verifyUnits(ctx, cl)
}

// ---- settings ----

func (a *adapter) typeOf(ctx context.Context, node string) (ua.TypeID, error) {
	a.mu.Lock()
	t, ok := a.types[node]
	cl := a.cl
	a.mu.Unlock()
	if ok {
		return t, nil
	}
	if cl == nil {
		return 0, mhp.Errorf(mhp.CodeServerError, "node %s: the OPC UA server is not connected (nothing was sent)", node).With("reason", "not_connected")
	}
	res, err := cl.Read(ctx, []*ua.ReadValueID{{NodeID: a.node(node), AttributeID: ua.AttributeIDDataType}})
	if err != nil {
		return 0, mhp.Errorf(mhp.CodeServerError, "node %s: data type unreadable (nothing was written): %v", node, err).With("reason", "type_unknown")
	}
	if isBad(res[0].Status) || res[0].Value == nil {
		return 0, refusalError(fmt.Sprintf("node %s: reading its data type", node), res[0].Status)
	}
	t = builtinOf(dataTypeOf(res[0].Value.Value()))
	a.mu.Lock()
	a.types[node] = t
	a.mu.Unlock()
	return t, nil
}

// write converts and writes one value, classifying the outcome; it never retries.
func (a *adapter) write(ctx context.Context, what, node string, forced ua.TypeID, value any) (*ua.Variant, error) {
	t := forced
	if t == 0 {
		var err error
		if t, err = a.typeOf(ctx, node); err != nil {
			return nil, err
		}
	}
	v, err := toVariant(what, value, t)
	if err != nil {
		return nil, err
	}
	cl := a.client()
	if cl == nil {
		return nil, mhp.Errorf(mhp.CodeServerError, "%s refused: the OPC UA server is not connected (nothing was sent)", what).With("reason", "not_connected")
	}
	sc, err := cl.Write(ctx, a.node(node), v)
	if err != nil {
		return nil, transportError(what, err)
	}
	if isBad(sc) {
		return nil, refusalError(what, sc)
	}
	return v, nil
}

func (a *adapter) writeSetting(item SettingItem) func(context.Context, any) (binding.WriteStatus, error) {
	readBack := item.ReadBack == nil || *item.ReadBack
	return func(ctx context.Context, value any) (binding.WriteStatus, error) {
		if err := a.rangeGate(item, value); err != nil {
			return binding.Applied, err
		}
		what := fmt.Sprintf("setting %s: write %v to %s", item.Name, value, item.Node)
		v, err := a.write(ctx, what, item.Node, typeNames[item.DataType], value)
		if err != nil {
			if _, refused := mhp.AsError(err); refused {
				return binding.Applied, err
			}
			return binding.Sent, err
		}
		if !readBack {
			a.afterWrite(item.Node, nil, v)
			return binding.Applied, nil
		}
		// Read back: the server said Good; the node's value confirms it.
		cl := a.client()
		if cl == nil {
			return binding.Sent, nil
		}
		res, err := cl.Read(ctx, []*ua.ReadValueID{{NodeID: a.node(item.Node), AttributeID: ua.AttributeIDValue}})
		if err != nil || isBad(res[0].Status) || res[0].Value == nil {
			return binding.Sent, nil
		}
		if reflect.DeepEqual(fromVariant(res[0].Value), fromVariant(v)) {
			a.afterWrite(item.Node, res[0], v)
			return binding.Applied, nil
		}
		a.log.Info("opcua: read-back differs from the written value", "setting", item.Name, "wrote", fromVariant(v), "read", fromVariant(res[0].Value))
		return binding.Sent, nil
	}
}

// afterWrite makes the signals of a node written with an applied result
// show the new value at once (the subscription lags by a sampling and a
// publishing interval): the read-back value becomes the cached one and a
// floor against older notifications; without a read-back, the signals are
// read live for a max age.
func (a *adapter) afterWrite(node string, readBack *ua.DataValue, v *ua.Variant) {
	idx := a.sigByNode[node]
	if len(idx) == 0 {
		return
	}
	now := a.clk.Now()
	a.mu.Lock()
	for _, i := range idx {
		smp := a.latest[i]
		if readBack != nil {
			smp = sample{have: true, dv: readBack, at: now, floor: readBack.SourceTimestamp}
		} else {
			smp.liveUntil = time.Now().Add(seconds(a.cfg.Timeouts.MaxAgeS))
		}
		a.latest[i] = smp
	}
	a.mu.Unlock()
	if readBack == nil || a.drv == nil {
		return
	}
	for _, i := range idx {
		if a.cfg.Signals[i].StaleAfterS > 0 {
			continue
		}
		if out, err := a.sampleOf(i, sample{have: true, dv: readBack, at: now}); err == nil {
			a.drv.PublishSignal(a.cfg.Signals[i].Name, out)
		}
	}
}
