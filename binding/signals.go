package binding

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"time"

	"github.com/openmhp/mhp-go"
)

// ---- describe, read, subscribe ----

// Describe implements [mhp.Device].
//
// The session's touch, the state and the backend link are one hold of mu.
func (d *Driver) Describe(ctx context.Context, req mhp.DescribeRequest) (*mhp.Description, error) {
	sid := mhp.SessionFrom(ctx)
	now := d.reqNow()
	d.mu.Lock()
	d.touchLocked(sid, now)
	state, link := d.stateLocked(), d.linkLocked()
	d.mu.Unlock()
	out, err := mhp.Describe(d.descNow(), state, req)
	if e, ok := mhp.AsError(err); ok {
		return nil, d.stamp(e)
	}
	if out != nil {
		out.Backend = link
	}
	return out, err
}

// Limits implements [mhp.Device]: safety/limits.
func (d *Driver) Limits(ctx context.Context) (*mhp.LimitsReport, error) {
	d.touch(ctx)
	desc := d.descNow()
	r := &mhp.LimitsReport{Settings: map[string]mhp.SettingEnvelope{}, Actions: map[string]mhp.ActionEnvelope{},
		Interlocks: desc.Safety.Interlocks, WatchdogS: desc.Safety.WatchdogS, EStop: desc.Safety.EStop}
	for _, s := range desc.Settings {
		r.Settings[s.Name] = mhp.SettingEnvelope{Limits: s.Limits, Unit: s.Unit, Approval: s.Approval,
			Interlocks: s.Interlocks, DuringJob: s.DuringJob}
	}
	for _, a := range desc.Actions {
		env := mhp.ActionEnvelope{Approval: a.Approval, Interlocks: a.Interlocks}
		for _, p := range a.Params {
			if p.Shape != nil && !p.Shape.Limits.Empty() {
				if env.Limits == nil {
					env.Limits = map[string]*mhp.Limits{}
				}
				env.Limits[p.Name] = p.Shape.Limits
			}
		}
		r.Actions[a.Name] = env
	}
	return r, nil
}

// readSignal reads one signal under ctx, which carries the caller's
// deadline (Signal.Read must honour it). The value is checked finite so it
// can go on the wire.
func (d *Driver) readSignal(ctx context.Context, s *boundSignal) (Sample, error) {
	v, err := s.Read(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return Sample{}, Unavailable("no answer within the deadline: %v", err)
		}
		return Sample{}, err
	}
	if v.Value == nil {
		return Sample{}, Unavailable("no value")
	}
	if !finite(v.Value) {
		return Sample{}, Unavailable("non-finite value %v", v.Value)
	}
	return v, nil
}

// finite reports whether a signal value can go on the wire: not a NaN or
// ±Inf number.
func finite(v any) bool {
	switch x := v.(type) {
	case float64:
		return !math.IsNaN(x) && !math.IsInf(x, 0)
	case float32:
		return !math.IsNaN(float64(x)) && !math.IsInf(float64(x), 0)
	}
	return true
}

// Read implements [mhp.Device]: signals/read. Unreadable signals read null with a reason.
//
// It holds mu once (the session's touch, the closed flag and the link
// state) and allocates the answer and the hooks' context together: the
// context bounds the hooks by InterlockTimeout (unless the caller's
// deadline comes first) and arms no timer unless a hook waits on it.
func (d *Driver) Read(ctx context.Context, names []string) (*mhp.ReadResult, error) {
	sid := mhp.SessionFrom(ctx)
	now := d.reqNow()
	d.mu.Lock()
	d.touchLocked(sid, now)
	closed := d.closed
	down := d.linkDownLocked()
	linkErr := d.linkErrLocked()
	d.mu.Unlock()
	if closed {
		return nil, d.errorf(mhp.CodeDeviceFault, "signals/read: the driver is closed (its backend is released)")
	}
	count := len(names)
	if count == 0 {
		count = len(d.signals.items)
	}
	for _, n := range names { // every name is known before any hook runs
		if _, ok := d.signals.get(n); !ok {
			return nil, d.errorf(mhp.CodeUnknownName, "no signal %q", n).With(mhp.DataKind, "signal").With(mhp.DataName, n)
		}
	}
	call := &readCall{res: mhp.ReadResult{Values: make(map[string]any, count)}}
	out := &call.res
	var rctx context.Context
	if !down && count > 0 {
		var owned bool
		if rctx, owned = readContext(ctx, &call.ctx, d.cfg.InterlockTimeout); owned {
			defer call.ctx.end(context.Canceled)
		}
	}
	for i := 0; i < count; i++ {
		var s *boundSignal
		if len(names) == 0 {
			s = &d.signals.items[i]
		} else {
			s = d.signals.at(names[i])
		}
		var v Sample
		var err error
		if down {
			err = fmt.Errorf("backend unavailable: %s", linkErr)
		} else {
			v, err = d.readSignal(rctx, s)
		}
		if err != nil {
			out.Values[s.Spec.Name] = nil
			if out.Unavailable == nil {
				out.Unavailable = map[string]string{}
			}
			out.Unavailable[s.Spec.Name] = err.Error()
			continue
		}
		out.Values[s.Spec.Name] = v.Value
		if !v.Time.IsZero() {
			if out.Times == nil {
				out.Times = map[string]float64{}
			}
			out.Times[s.Spec.Name] = mhp.UnixSeconds(v.Time)
		}
	}
	out.TS = mhp.UnixSeconds(d.now())
	return out, nil
}

// Subscribe implements [mhp.Device]: signals/subscribe for this session.
func (d *Driver) Subscribe(ctx context.Context, names []string) (*mhp.SubscribeResult, error) {
	s := d.touch(ctx)
	if len(names) == 0 {
		for _, sig := range d.desc.Signals {
			names = append(names, sig.Name)
		}
	}
	for _, n := range names {
		if _, ok := d.signals.get(n); !ok {
			return nil, d.errorf(mhp.CodeUnknownName, "no signal %q", n).With(mhp.DataKind, "signal").With(mhp.DataName, n)
		}
	}
	d.mu.Lock()
	rec := d.sessions[s]
	if rec == nil {
		if d.sessions == nil {
			d.sessions = map[string]*sessionRec{}
		}
		rec = &sessionRec{lastSeen: d.now()}
		d.sessions[s] = rec
	}
	if rec.subs == nil {
		rec.subs = map[string]bool{}
	}
	for _, n := range names {
		rec.subs[n] = true
		delete(d.lastValues, n) // the next poll publishes the current value
	}
	if d.poller == nil && !d.closed {
		d.poller = d.clk.AfterFunc(0, d.poll)
	}
	d.mu.Unlock()
	return &mhp.SubscribeResult{Subscribed: names}, nil
}

// Unsubscribe implements [mhp.Device].
func (d *Driver) Unsubscribe(ctx context.Context, names []string) error {
	s := d.touch(ctx)
	d.mu.Lock()
	defer d.mu.Unlock()
	rec := d.sessions[s]
	if rec == nil {
		return nil
	}
	if len(names) == 0 {
		rec.subs = nil
		return nil
	}
	for _, n := range names {
		delete(rec.subs, n)
	}
	return nil
}

// subscribedLocked lists the signals any session subscribed.
func (d *Driver) subscribedLocked() map[string]bool {
	out := map[string]bool{}
	for _, rec := range d.sessions {
		for n := range rec.subs {
			out[n] = true
		}
	}
	return out
}

// poll reads subscribed, non-pushed signals and publishes changes; it
// reschedules itself while anything is subscribed.
func (d *Driver) poll() {
	d.mu.Lock()
	names := make([]string, 0, 8)
	for n := range d.subscribedLocked() {
		if !d.signals.at(n).Pushed {
			names = append(names, n)
		}
	}
	if len(names) == 0 || d.closed {
		// Nothing to poll (pushed signals publish themselves): the next
		// Subscribe starts the poller again.
		d.poller = nil
		d.mu.Unlock()
		return
	}
	// Close cancels pctx and waits for done, so no poll reads the backend
	// once the Close hook runs.
	pctx, cancel := context.WithTimeout(context.Background(), d.cfg.InterlockTimeout)
	done := make(chan struct{})
	d.pollCancel, d.pollDone = cancel, done
	d.mu.Unlock()
	sort.Strings(names)
	for _, n := range names {
		if errors.Is(pctx.Err(), context.Canceled) { // closed
			break
		}
		v, err := d.readSignal(pctx, d.signals.at(n))
		var val any
		if err == nil {
			val = v.Value
		}
		d.offer(n, val, v.Time)
	}
	cancel()
	d.mu.Lock()
	d.pollCancel, d.pollDone = nil, nil
	if !d.closed {
		d.poller = d.clk.AfterFunc(d.cfg.PollInterval, d.poll)
	}
	d.mu.Unlock()
	close(done)
}

// offer publishes a signal value if it changed and someone subscribed.
func (d *Driver) offer(name string, value any, at time.Time) {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return
	}
	prev, seen := d.lastValues[name]
	if seen && reflect.DeepEqual(prev, value) {
		d.mu.Unlock()
		return
	}
	if d.lastValues == nil {
		d.lastValues = map[string]any{}
	}
	d.lastValues[name] = value
	if !d.subscribedLocked()[name] {
		d.mu.Unlock()
		return
	}
	p := map[string]any{"name": name, "value": value}
	if !at.IsZero() {
		p["time"] = mhp.UnixSeconds(at)
	}
	d.publishLocked(mhp.NotifySignalsUpdate, p)
}

// PublishSignal is how an adapter with a push source (an OPC UA subscription,
// a topic) reports a new sample; subscribers get notifications/signals/update.
func (d *Driver) PublishSignal(name string, s Sample) {
	if _, ok := d.signals.get(name); !ok {
		return
	}
	if !finite(s.Value) { // as a read does: a NaN or ±Inf is no value (JSON cannot carry it)
		s.Value = nil
	}
	d.offer(name, s.Value, s.Time)
}
