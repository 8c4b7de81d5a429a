package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
)

// ExpectCode fails t unless err is an [*mhp.Error] with the code; it returns
// the error, never nil (t stops first), so it returns the concrete type.
func ExpectCode(t testing.TB, err error, code mhp.Code) *mhp.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("want %s (%d), got success", code, int(code))
	}
	e, ok := mhp.AsError(err)
	if !ok {
		t.Fatalf("want %s (%d), got a non-MHP error %T: %v", code, int(code), err, err)
	}
	if e.Code != code {
		t.Fatalf("want %s (%d), got %s (%d): %s", code, int(code), e.Code, int(e.Code), e.Message)
	}
	if e.Message == "" {
		t.Errorf("%s has an empty message; it must name what was refused and why", code)
	}
	if e.TS <= 0 {
		t.Errorf("%s carries no ts (the device clock at the refusal): %v", code, e)
	}
	return e
}

// Eventually polls cond every few milliseconds until it holds, failing t after [WaitTimeout].
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	EventuallyWithin(t, what, WaitTimeout, cond)
}

// EventuallyWithin is Eventually with its own deadline: the one polling
// helper every package's tests use (no sleeps to wait for things).
func EventuallyWithin(t testing.TB, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		<-tick.C
	}
}

// WaitJob polls jobs/status on dev until ok holds for job id, and returns
// the job; ok nil waits until the job ended (done, failed or cancelled).
// After within it fails t with the job's last state and the last error, so
// a job that never gets there says where it stopped.
func WaitJob(t testing.TB, dev mhp.Device, id string, within time.Duration, ok func(*mhp.Job) bool) *mhp.Job {
	t.Helper()
	if ok == nil {
		ok = func(j *mhp.Job) bool { return j.State.Terminal() }
	}
	var last *mhp.Job
	var lastErr error
	deadline := time.Now().Add(within)
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), CallTimeout)
		j, err := dev.Job(ctx, id)
		cancel()
		if err == nil && j != nil {
			last = j
			if ok(j) {
				return j
			}
		} else {
			lastErr = err
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s did not get there within %v (last %+v, last error %v)", id, within, last, lastErr)
		}
		<-tick.C
	}
}

// expect fails unless err carries the code.
func (c *C) expect(err error, code mhp.Code) *mhp.Error {
	c.Helper()
	return ExpectCode(c.TB, err, code)
}

// ok fails on an error.
func (c *C) ok(err error, what string) {
	c.Helper()
	if err != nil {
		c.Fatalf("%s: %v", what, err)
	}
}

func (c *C) eventually(what string, cond func() bool) {
	c.Helper()
	Eventually(c.TB, what, cond)
}

func (c *C) call() (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.Ctx, CallTimeout)
}

// write writes a setting as dev.
func (c *C) write(dev mhp.Device, name string, value any) (*mhp.WriteResult, error) {
	ctx, cancel := c.call()
	defer cancel()
	return dev.Write(ctx, mhp.WriteRequest{Name: name, Value: value})
}

// writeReq sends a whole write request as dev.
func (c *C) writeReq(dev mhp.Device, req mhp.WriteRequest) (*mhp.WriteResult, error) {
	ctx, cancel := c.call()
	defer cancel()
	return dev.Write(ctx, req)
}

// mustWrite writes and fails on an error.
func (c *C) mustWrite(dev mhp.Device, name string, value any) *mhp.WriteResult {
	c.Helper()
	r, err := c.write(dev, name, value)
	if err != nil {
		c.Fatalf("write %s=%v: %v", name, value, err)
	}
	return r
}

// invoke invokes an action as dev.
func (c *C) invoke(dev mhp.Device, req mhp.InvokeRequest) (*mhp.InvokeResult, error) {
	ctx, cancel := c.call()
	defer cancel()
	return dev.Invoke(ctx, req)
}

// start invokes an action and returns its job, failing on an error.
func (c *C) start(dev mhp.Device, name string, params map[string]any) *mhp.Job {
	c.Helper()
	r, err := c.invoke(dev, mhp.InvokeRequest{Name: name, Params: params})
	if err != nil {
		c.Fatalf("invoke %s: %v", name, err)
	}
	if r == nil || r.Job == nil || r.Job.ID == "" {
		c.Fatalf("invoke %s: no job in the answer: %+v", name, r)
	}
	return r.Job
}

// runParams are valid params of ActionRun.
func runParams() map[string]any { return map[string]any{"duration_s": 10.0} }

// profileParams are valid params of ActionProfile.
func profileParams() map[string]any {
	return map[string]any{
		"steps":  []any{map[string]any{"temp": 95.0, "hold_s": 30.0}, map[string]any{"temp": 58.0, "hold_s": 30.0}},
		"cycles": 3,
	}
}

// paramsFor returns valid params for a fixture action.
func paramsFor(action string) map[string]any {
	switch action {
	case ActionRun:
		return runParams()
	case ActionProfile:
		return profileParams()
	}
	return nil
}

// startBlocked scripts the action to Block, invokes it as dev and waits until
// its work runs at the backend and the job is running.
func (c *C) startBlocked(dev mhp.Device, action string) *mhp.Job {
	c.Helper()
	return c.startScripted(dev, action, Block)
}

// startScripted invokes the action with behaviour b (Block or IgnoreCancel)
// and waits until the job is running at the backend.
func (c *C) startScripted(dev mhp.Device, action string, b Behaviour) *mhp.Job {
	c.Helper()
	before := c.B.Calls(action)
	c.B.Script(action, b)
	j := c.start(dev, action, paramsFor(action))
	c.eventually(fmt.Sprintf("%s to reach the backend", action), func() bool { return c.B.Calls(action) > before })
	return c.waitJob(j.ID, "running", func(j *mhp.Job) bool { return j.State == mhp.JobRunning })
}

// job reads a job's status.
func (c *C) job(dev mhp.Device, id string) (*mhp.Job, error) {
	ctx, cancel := c.call()
	defer cancel()
	return dev.Job(ctx, id)
}

// waitJob polls jobs/status (as Other, so the first session's watchdog is
// not fed) until ok holds.
func (c *C) waitJob(id, what string, ok func(*mhp.Job) bool) *mhp.Job {
	c.Helper()
	defer func() {
		if c.Failed() {
			c.Logf("job %s was awaited to become %s", id, what)
		}
	}()
	return WaitJob(c, c.Other, id, WaitTimeout, ok)
}

// waitTerminal waits until the job is done, failed or cancelled.
func (c *C) waitTerminal(id string) *mhp.Job {
	c.Helper()
	return c.waitJob(id, "terminal", func(j *mhp.Job) bool { return j.State.Terminal() })
}

// describe asks dev for a description.
func (c *C) describe(dev mhp.Device, req mhp.DescribeRequest) (*mhp.Description, error) {
	ctx, cancel := c.call()
	defer cancel()
	return dev.Describe(ctx, req)
}

// state is the device state as device/describe reports it to the second session.
func (c *C) state() mhp.DeviceState {
	c.Helper()
	d, err := c.describe(c.Other, mhp.DescribeRequest{Detail: mhp.DetailCard})
	if err != nil {
		c.Fatalf("describe: %v", err)
	}
	return d.State
}

// wantState fails unless the device is in state s.
func (c *C) wantState(s mhp.DeviceState, why string) {
	c.Helper()
	if got := c.state(); got != s {
		c.Fatalf("device state %q, want %q (%s)", got, s, why)
	}
}

// waitState waits until the device reports state s.
func (c *C) waitState(s mhp.DeviceState) {
	c.Helper()
	c.eventually(fmt.Sprintf("device state %q", s), func() bool { return c.state() == s })
}

// estop calls safety/estop as dev.
func (c *C) estop(dev mhp.Device, reason string) *mhp.EStopResult {
	c.Helper()
	ctx, cancel := c.call()
	defer cancel()
	r, err := dev.EStop(ctx, reason)
	if err != nil {
		c.Fatalf("estop: %v", err)
	}
	return r
}

// reset calls safety/reset as dev.
func (c *C) reset(dev mhp.Device) (*mhp.ResetResult, error) {
	ctx, cancel := c.call()
	defer cancel()
	return dev.Reset(ctx)
}

// acquire takes the lease as dev for ttl.
func (c *C) acquire(dev mhp.Device, ttl time.Duration) *mhp.Lease {
	c.Helper()
	ctx, cancel := c.call()
	defer cancel()
	l, err := dev.Acquire(ctx, ttl)
	if err != nil {
		c.Fatalf("acquire: %v", err)
	}
	if l == nil || l.Holder == "" {
		c.Fatalf("acquire: lease names no holder: %+v", l)
	}
	return l
}

// ping pings as dev and returns the device-clock time.
func (c *C) ping(dev mhp.Device) float64 {
	c.Helper()
	ctx, cancel := c.call()
	defer cancel()
	p, err := dev.Ping(ctx)
	if err != nil {
		c.Fatalf("ping: %v", err)
	}
	return p.TS
}

// fault puts the device in fault through a write whose outcome is unknown.
func (c *C) fault() {
	c.Helper()
	c.B.Script(SettingSetpoint, FailUnknown)
	_, err := c.write(c.Dev, SettingSetpoint, 30.0)
	c.expect(err, mhp.CodeDeviceFault)
	c.B.Script(SettingSetpoint, Normal)
	c.waitState(mhp.StateFault)
}

// noBackendCalls fails if any of the named items was called at the backend
// since the snapshot.
type callSnapshot map[string]int

func (c *C) snapshot() callSnapshot {
	s := callSnapshot{}
	d := WithExtras(FixtureDescriptor())
	for _, x := range d.Settings {
		s[x.Name] = c.B.Calls(x.Name)
	}
	for _, x := range d.Actions {
		s[x.Name] = c.B.Calls(x.Name)
	}
	return s
}

func (c *C) noCallsSince(s callSnapshot, why string) {
	c.Helper()
	for name, n := range s {
		if got := c.B.Calls(name); got != n {
			c.Fatalf("%s reached the backend (%d -> %d calls) although %s", name, n, got, why)
		}
	}
}

// written returns the setting's value at the backend.
func (c *C) written(name string) any {
	v, _ := c.B.Written(name)
	return v
}

// wantWritten fails unless the backend holds value for the setting.
func (c *C) wantWritten(name string, value any, why string) {
	c.Helper()
	if got := c.written(name); !sameValue(got, value) {
		c.Fatalf("backend %s=%v, want %v (%s)", name, got, value, why)
	}
}

// advance moves the driver clock by d when the harness can, else waits d in real time.
func (c *C) advance(d time.Duration) {
	if c.F.Advance != nil {
		c.F.Advance(d)
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-c.Ctx.Done():
	}
}

// num converts a decoded number of any Go type to float64.
func num(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case float32:
		return float64(x), true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case int32:
		return float64(x), true
	case uint64:
		return float64(x), true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	}
	return 0, false
}

// sameValue compares values as JSON would: numbers by value.
func sameValue(a, b any) bool {
	fa, oka := num(a)
	fb, okb := num(b)
	if oka && okb {
		return fa == fb
	}
	return reflect.DeepEqual(normalise(a), normalise(b))
}

// normalise round-trips v through JSON so that in-process values (structs,
// typed slices) and values decoded from the wire compare alike.
func normalise(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return v
	}
	return out
}

// asMap normalises v to a JSON object.
func asMap(v any) map[string]any {
	m, _ := normalise(v).(map[string]any)
	return m
}

// contains reports whether list (any slice) holds s.
func contains(list any, s string) bool {
	l, _ := normalise(list).([]any)
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// dataNum returns e.Data[key] as a number.
func dataNum(e *mhp.Error, key string) (float64, bool) {
	if e == nil || e.Data == nil {
		return 0, false
	}
	return num(e.Data[key])
}

// recorder keeps every notification a device publishes, normalised to JSON
// values, in order.
type recorder struct {
	mu   sync.Mutex
	got  []mhp.Notification
	wake chan struct{}
}

// record starts recording dev's notifications until the check ends.
func (c *C) record(dev mhp.Device) *recorder {
	r := &recorder{wake: make(chan struct{}, 1)}
	stop := dev.Listen(func(n mhp.Notification) {
		n.Params = asMap(n.Params)
		r.mu.Lock()
		r.got = append(r.got, n)
		r.mu.Unlock()
		select {
		case r.wake <- struct{}{}:
		default:
		}
	})
	c.Cleanup(stop)
	return r
}

func (r *recorder) all() []mhp.Notification {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]mhp.Notification(nil), r.got...)
}

// find returns the first notification matching.
func (r *recorder) find(match func(mhp.Notification) bool) (mhp.Notification, bool) {
	for _, n := range r.all() {
		if match(n) {
			return n, true
		}
	}
	return mhp.Notification{}, false
}

// wait waits for a notification matching, failing after WaitTimeout. tick,
// when not nil, runs on every poll (to advance a manual clock).
func (r *recorder) wait(c *C, what string, match func(mhp.Notification) bool, tick func()) mhp.Notification {
	c.Helper()
	deadline := time.NewTimer(WaitTimeout)
	defer deadline.Stop()
	poll := time.NewTicker(10 * time.Millisecond)
	defer poll.Stop()
	for {
		if n, ok := r.find(match); ok {
			return n
		}
		select {
		case <-r.wake:
		case <-poll.C:
			if tick != nil {
				tick()
			}
		case <-deadline.C:
			var methods []string
			for _, n := range r.all() {
				methods = append(methods, n.Method)
			}
			c.Fatalf("no %s notification within %v (got %v)", what, WaitTimeout, methods)
		}
	}
}

// method matches notifications by method.
func method(m string) func(mhp.Notification) bool {
	return func(n mhp.Notification) bool { return n.Method == m }
}

// jobOf returns the job object a jobs/* notification carries.
func jobOf(n mhp.Notification) map[string]any {
	j, _ := n.Params["job"].(map[string]any)
	return j
}

// jobNote matches a jobs/* notification of the job id, and state when not empty.
func jobNote(m, id string, state mhp.JobState) func(mhp.Notification) bool {
	return func(n mhp.Notification) bool {
		if n.Method != m {
			return false
		}
		j := jobOf(n)
		return j != nil && j["id"] == id && (state == "" || j["state"] == string(state))
	}
}
