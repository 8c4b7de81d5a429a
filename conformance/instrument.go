package conformance

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Errors an Instrument gives its fake server, which turns them into its
// protocol's own refusal, failure or dropped connection.
var (
	// ErrRefused: the backend refused before anything took effect.
	ErrRefused = errors.New("instrument: refused, nothing changed")
	// ErrDropped: the command reached the backend and then the link dropped;
	// the fake should close the connection or never answer.
	ErrDropped = errors.New("instrument: connection dropped after the command was sent")
	// ErrReported: the backend reports that the work failed.
	ErrReported = errors.New("instrument: work failed (simulated)")
	// ErrUnavailable: the signal has no current value.
	ErrUnavailable = errors.New("instrument: signal unavailable")
	// ErrStopFailed: the estop command failed at the backend.
	ErrStopFailed = errors.New("instrument: stop command failed (simulated)")
)

// WorkState is the state of an action's work at the backend.
type WorkState int

// Work states.
const (
	WorkRunning WorkState = iota
	WorkSucceeded
	WorkFailed
	WorkCancelled
	WorkDropped // the link dropped mid-work: the fake must make the outcome unknowable
)

func (s WorkState) String() string {
	return [...]string{"running", "succeeded", "failed", "cancelled", "dropped"}[s]
}

// Instrument is the simulated instrument behind every adapter's fake: fake
// OPC UA, SiLA 2, rosbridge, MADSci, PyLabRobot and MQTT servers keep their
// state here and answer from it, so the suite controls each of them the same
// way through the Backend interface, which Instrument implements.
type Instrument struct {
	mu          sync.Mutex
	signals     map[string]any
	unavailable map[string]bool
	settings    map[string]any
	behaviour   map[string]Behaviour
	calls       map[string]int
	release     map[string]chan struct{}
	stopCalls   int
	reads       int
	failStop    bool
	stopHang    chan struct{} // while set, Stop blocks until it is closed (HangStop(false), ReleaseAll)
	work        map[*Work]bool
}

// NewInstrument returns an instrument at its initial state: temperature 21.5,
// door closed, setpoint 20, mode idle, fan off, guarded level 0, flow rate 1;
// every item Normal.
func NewInstrument() *Instrument {
	return &Instrument{
		signals:     map[string]any{SignalTemperature: 21.5, SignalDoorClosed: true},
		unavailable: map[string]bool{},
		settings: map[string]any{SettingSetpoint: 20.0, SettingMode: "idle", SettingConfirmed: 0.0, SettingForbidden: 0.0, SettingFan: false,
			SettingGuarded: 0.0, SettingFlow: 1.0},
		behaviour: map[string]Behaviour{},
		calls:     map[string]int{},
		release:   map[string]chan struct{}{},
		work:      map[*Work]bool{},
	}
}

// SetSignal implements Backend.
func (in *Instrument) SetSignal(name string, value any) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.signals[name] = value
}

// SetUnavailable implements Backend.
func (in *Instrument) SetUnavailable(name string, unavailable bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.unavailable[name] = unavailable
}

// Script implements Backend.
func (in *Instrument) Script(name string, b Behaviour) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.behaviour[name] = b
}

// Release implements Backend: blocked writes return, blocked work succeeds.
func (in *Instrument) Release(name string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if ch, ok := in.release[name]; ok {
		close(ch)
		delete(in.release, name)
	}
}

// HangStop implements [StopHanger]: while hang is true, estop commands block
// (a frozen controller) until HangStop(false) or ReleaseAll.
func (in *Instrument) HangStop(hang bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	switch {
	case hang && in.stopHang == nil:
		in.stopHang = make(chan struct{})
	case !hang && in.stopHang != nil:
		close(in.stopHang)
		in.stopHang = nil
	}
}

// ReleaseAll releases every blocked call and work (a harness's cleanup).
func (in *Instrument) ReleaseAll() {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.stopHang != nil {
		close(in.stopHang)
		in.stopHang = nil
	}
	for name, ch := range in.release {
		close(ch)
		delete(in.release, name)
	}
}

// Calls implements Backend.
func (in *Instrument) Calls(name string) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.calls[name]
}

// Written implements Backend.
func (in *Instrument) Written(name string) (any, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	v, ok := in.settings[name]
	return v, ok
}

// StopCalls implements Backend.
func (in *Instrument) StopCalls() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.stopCalls
}

// FailStop implements Backend.
func (in *Instrument) FailStop(fail bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.failStop = fail
}

// Reads implements [ReadCounter]: the ReadSignal calls so far.
func (in *Instrument) Reads() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.reads
}

// ReadSignal returns a signal's value, or [ErrUnavailable].
func (in *Instrument) ReadSignal(name string) (any, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.reads++
	if in.unavailable[name] {
		return nil, ErrUnavailable
	}
	if v, ok := in.signals[name]; ok {
		return v, nil
	}
	if v, ok := in.settings[name]; ok {
		return v, nil
	}
	return nil, fmt.Errorf("instrument: no signal %q", name)
}

func (in *Instrument) releaseChan(name string) chan struct{} {
	ch, ok := in.release[name]
	if !ok {
		ch = make(chan struct{})
		in.release[name] = ch
	}
	return ch
}

// WriteSetting applies a write as scripted: Normal applies it; Block waits
// for Release (then applies) or ctx; Refuse returns [ErrRefused] and changes
// nothing; [FailReported] returns [ErrReported] and changes nothing (the backend
// reported the failure); [FailUnknown] applies it and returns [ErrDropped] (the
// fake must then drop the reply).
func (in *Instrument) WriteSetting(ctx context.Context, name string, value any) error {
	in.mu.Lock()
	in.calls[name]++
	b := in.behaviour[name]
	var ch chan struct{}
	if b == Block {
		ch = in.releaseChan(name)
	}
	in.mu.Unlock()
	switch b {
	case Refuse:
		return ErrRefused
	case Block:
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if b == FailReported {
		// The backend reports that the write failed: a known outcome, so
		// nothing changed.
		return ErrReported
	}
	in.mu.Lock()
	in.settings[name] = value
	in.mu.Unlock()
	if b == FailUnknown {
		return ErrDropped
	}
	return nil
}

// Start begins an action's work as scripted. Refuse returns [ErrRefused] and
// no work. Every other behaviour returns Work whose end the fake reports.
func (in *Instrument) Start(name string, params map[string]any) (*Work, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.calls[name]++
	b := in.behaviour[name]
	if b == Refuse {
		return nil, ErrRefused
	}
	w := &Work{Action: name, Params: params, done: make(chan struct{}), cancel: make(chan struct{})}
	switch b {
	// Work that ends at once is never registered, so finishing it needs no
	// instrument lock (which Start holds).
	case Normal:
		w.finish(WorkSucceeded, map[string]any{"ok": true, "action": name}, nil)
	case FailReported:
		w.finish(WorkFailed, nil, ErrReported)
	case FailUnknown:
		w.finish(WorkDropped, nil, ErrDropped)
	case Block, IgnoreCancel:
		w.in = in
		in.work[w] = true
		rel := in.releaseChan(name)
		honour := b == Block
		go w.run(rel, honour)
	}
	return w, nil
}

// Stop is the estop command: it counts the call, blocks while HangStop is
// set, cancels running work (which ends cancelled) and fails when FailStop
// is set.
func (in *Instrument) Stop() error {
	in.mu.Lock()
	in.stopCalls++
	fail, hang := in.failStop, in.stopHang
	var running []*Work
	for w := range in.work {
		running = append(running, w)
	}
	in.mu.Unlock()
	if hang != nil {
		<-hang
	}
	if fail {
		return ErrStopFailed
	}
	for _, w := range running {
		w.stop()
	}
	return nil
}

// Work is one action's work at the backend.
type Work struct {
	Action string
	Params map[string]any

	in       *Instrument
	mu       sync.Mutex
	state    WorkState
	result   any
	err      error
	progress float64
	done     chan struct{}
	cancel   chan struct{}
	once     sync.Once
	stopped  chan struct{}
}

func (w *Work) run(release chan struct{}, honourCancel bool) {
	w.SetProgress(0.5)
	cancel := w.cancel
	for {
		select {
		case <-release:
			w.finish(WorkSucceeded, map[string]any{"ok": true, "action": w.Action}, nil)
			return
		case <-cancel:
			if honourCancel {
				w.finish(WorkCancelled, nil, nil)
				return
			}
			cancel = nil // acknowledged, ignored
		case <-w.stopChan():
			w.finish(WorkCancelled, nil, nil)
			return
		}
	}
}

func (w *Work) stopChan() chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped == nil {
		w.stopped = make(chan struct{})
	}
	return w.stopped
}

func (w *Work) stop() {
	ch := w.stopChan()
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case <-ch:
	default:
		close(ch)
	}
}

func (w *Work) finish(s WorkState, result any, err error) {
	w.mu.Lock()
	if w.state != WorkRunning {
		w.mu.Unlock()
		return
	}
	w.state, w.result, w.err = s, result, err
	if s == WorkSucceeded {
		w.progress = 1
	}
	w.mu.Unlock()
	if w.in != nil {
		w.in.mu.Lock()
		delete(w.in.work, w)
		w.in.mu.Unlock()
	}
	close(w.done)
}

// Cancel asks the work to stop. Block work honours it and ends cancelled;
// [IgnoreCancel] work acknowledges it and runs on.
func (w *Work) Cancel() { w.once.Do(func() { close(w.cancel) }) }

// Done is closed when the work ended.
func (w *Work) Done() <-chan struct{} { return w.done }

// State returns the work's state, its result and its error.
func (w *Work) State() (WorkState, any, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.state, w.result, w.err
}

// Progress is the work's progress, 0..1.
func (w *Work) Progress() float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.progress
}

// SetProgress sets the work's progress.
func (w *Work) SetProgress(p float64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.progress = p
}

var _ Backend = (*Instrument)(nil)
