// Package script runs orchestration scripts against a lab: Starlark programs
// (go.starlark.net) that see the same devices as any client, so every call
// passes the same safety gates, and that return only what they print, capped.
// Scripts are sandboxed by construction: Starlark has no file, network or
// process access, and each run has a step budget, a time budget and a
// memory budget (every operator, method and builtin that grows a value is
// checked before it allocates; see Options.MaxMemory). A run ends with its
// context. Runner adds what a host taking scripts from a model needs: a cap
// on concurrent runs and timeouts bounded by the operator's maximum.
//
//	t = lab["thermocycler-01"]
//	t.acquire(60)
//	j = t.wait(t.invoke("run_protocol", steps=[{"temp": 95, "hold_s": 30}], cycles=5))
//	rs = [t.read("block_temperature") for _ in range(500)]
//	print("cycles", j["result"]["cycles_completed"], "mean", sum(rs) / len(rs))
//
// A script can never approve a confirm-gated request: approval comes from a
// person through the host, not from code the model wrote.
package script

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"

	"sync"
	"time"

	"go.starlark.net/starlark"

	"github.com/openmhp/mhp-go"
)

// Lab is what a script reaches: devices by name.
type Lab interface {
	Device(ctx context.Context, name string) (mhp.Device, error)
	Names() []string
}

// Waiter is implemented by devices that can wait for a job on notifications
// (client.Device); others are polled.
type Waiter interface {
	Wait(ctx context.Context, jobID string) (*mhp.Job, error)
}

// Options bound a run. Zero fields take the defaults named.
type Options struct {
	// Filename names the script in errors; default "script.star".
	Filename string
	// MaxSteps is the Starlark step budget; default 50 million.
	MaxSteps uint64
	// Timeout is the wall-clock budget; default 5 minutes.
	Timeout time.Duration
	// MaxOutput caps what print returns, in bytes; default 16 KiB.
	MaxOutput int
	// PollInterval is how often a job is polled when the device cannot wait on notifications; default 200ms.
	PollInterval time.Duration
	// MaxMemory is the memory budget of a run, in bytes: what its string,
	// list, dict, slice and formatting operations allocate, counted
	// cumulatively and checked before each allocation; default 64 MiB.
	MaxMemory int64
	// MaxTimeout is the longest time budget a caller may ask for (a model's
	// timeout_s through the bridge); longer ones are refused; default 1 hour.
	MaxTimeout time.Duration
	// MaxRuns caps the runs a Runner has in progress at once; default 4.
	MaxRuns int
}

func (o Options) withDefaults() Options {
	if o.Filename == "" {
		o.Filename = "script.star"
	}
	if o.MaxSteps == 0 {
		o.MaxSteps = 50_000_000
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Minute
	}
	if o.MaxOutput <= 0 {
		o.MaxOutput = 16 << 10
	}
	if o.PollInterval <= 0 {
		o.PollInterval = 200 * time.Millisecond
	}
	if o.MaxMemory <= 0 {
		o.MaxMemory = 64 << 20
	}
	if o.MaxTimeout <= 0 {
		o.MaxTimeout = time.Hour
	}
	if o.MaxRuns <= 0 {
		o.MaxRuns = 4
	}
	return o
}

// Result is what a run returns: the printed output, capped, and how it ended.
type Result struct {
	Output    string `json:"output"`
	Truncated bool   `json:"truncated,omitempty"`
	Steps     uint64 `json:"steps"`
	// Error says why the script stopped early: a Starlark error, a budget,
	// or a refused device call (MHP carries the structured refusal).
	Error string     `json:"error,omitempty"`
	MHP   *mhp.Error `json:"mhpError,omitempty"`
	// Memory is what the run's growth operations allocated, in bytes (see Options.MaxMemory).
	Memory int64 `json:"memory"`
}

// Run executes src against the lab. Leases the script acquired are released
// when it ends. The returned error is non-nil only for a bad lab or options;
// script failures are in Result.Error.
func Run(ctx context.Context, src string, lab Lab, opts Options) (*Result, error) {
	if lab == nil {
		return nil, errors.New("script: no lab")
	}
	opts = opts.withDefaults()
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()

	out := &capped{max: opts.MaxOutput}
	r := &runner{ctx: ctx, lab: lab, opts: opts, devices: map[string]*deviceValue{}, mem: &memBudget{max: opts.MaxMemory}}
	thread := &starlark.Thread{
		Name:  "mhp-run",
		Print: func(_ *starlark.Thread, msg string) { out.line(msg) },
		Load: func(*starlark.Thread, string) (starlark.StringDict, error) {
			return nil, errors.New("load is not available in lab scripts")
		},
	}
	thread.SetMaxExecutionSteps(opts.MaxSteps)
	stop := context.AfterFunc(ctx, func() {
		if errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
			thread.Cancel("time budget of " + opts.Timeout.String() + " exhausted")
		} else {
			thread.Cancel("run cancelled: " + context.Cause(ctx).Error())
		}
	})
	defer stop()

	predeclared := starlark.StringDict{
		"lab":   &labValue{r: r},
		"sleep": starlark.NewBuiltin("sleep", r.sleep),
		"sum":   starlark.NewBuiltin("sum", r.sum),
	}
	r.addChecks(predeclared)
	err := execRewritten(thread, opts.Filename, src, predeclared)
	r.releaseAll()
	res := &Result{Output: out.String(), Truncated: out.truncated, Steps: thread.ExecutionSteps(), Memory: r.mem.used}
	if err != nil {
		res.Error = err.Error()
		var ee *starlark.EvalError
		if errors.As(err, &ee) {
			res.Error = ee.Backtrace()
		}
		if me, ok := mhp.AsError(err); ok {
			res.MHP = budgetEnded(ctx, opts.Timeout, me)
			if res.MHP != me {
				res.Error = res.MHP.Message
			}
		}
	}
	return res, nil
}

// ReasonTimeBudget is data.reason of a script stopped because its time
// budget ended during a device call (rather than the link failing).
const ReasonTimeBudget = "time_budget"

// budgetEnded says a device call cut short by the run's own deadline was
// the budget ending, not the transport: the client reports any call that
// got no answer as reason "transport". Whether the request may have acted
// (data.sent, data.outcome) is kept.
func budgetEnded(ctx context.Context, budget time.Duration, me *mhp.Error) *mhp.Error {
	if !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		return me
	}
	out := mhp.Errorf(mhp.CodeServerError, "the script's time budget of %s ended during a device call: %s", budget, mhp.Truncate(me.Message, 512)).
		With(mhp.DataReason, ReasonTimeBudget).With(mhp.DataLimit, budget.Seconds())
	for _, k := range []string{"sent", mhp.DataOutcome} {
		if v, ok := me.Data[k]; ok {
			out = out.With(k, v)
		}
	}
	return out
}

type capped struct {
	mu        sync.Mutex
	buf       bytes.Buffer
	max       int
	truncated bool
}

func (c *capped) line(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.truncated {
		return
	}
	if c.buf.Len()+len(s)+1 > c.max {
		room := c.max - c.buf.Len()
		if room > 0 {
			c.buf.WriteString(s[:min(room, len(s))])
		}
		c.truncated = true
		return
	}
	c.buf.WriteString(s)
	c.buf.WriteByte('\n')
}

func (c *capped) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

type runner struct {
	ctx     context.Context
	lab     Lab
	opts    Options
	mu      sync.Mutex
	devices map[string]*deviceValue
	leased  []*deviceValue
	mem     *memBudget
}

func (r *runner) device(name string) (*deviceValue, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if d, ok := r.devices[name]; ok {
		return d, nil
	}
	dev, err := r.lab.Device(r.ctx, name)
	if err != nil {
		return nil, err
	}
	d := &deviceValue{r: r, name: name, dev: dev}
	r.devices[name] = d
	return d, nil
}

func (r *runner) releaseAll() {
	r.mu.Lock()
	leased := r.leased
	r.leased = nil
	r.mu.Unlock()
	for _, d := range leased {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), 5*time.Second)
		_ = d.dev.Release(ctx)
		cancel()
	}
}

func (r *runner) sleep(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var secs number
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 1, &secs); err != nil {
		return nil, err
	}
	if secs < 0 || secs > 3600 || secs != secs {
		return nil, fmt.Errorf("sleep: %g s is outside 0..3600", secs)
	}
	t := time.NewTimer(time.Duration(float64(secs) * float64(time.Second)))
	defer t.Stop()
	select {
	case <-t.C:
		return starlark.None, nil
	case <-r.ctx.Done():
		return nil, fmt.Errorf("sleep interrupted: %w", r.ctx.Err())
	}
}

// labValue is the script's `lab`: lab["name"], lab.names().
type labValue struct{ r *runner }

func (l *labValue) String() string        { return "<lab>" }
func (l *labValue) Type() string          { return "lab" }
func (l *labValue) Freeze()               {}
func (l *labValue) Truth() starlark.Bool  { return true }
func (l *labValue) Hash() (uint32, error) { return 0, errors.New("lab is not hashable") }
func (l *labValue) Get(k starlark.Value) (starlark.Value, bool, error) {
	name, ok := starlark.AsString(k)
	if !ok {
		return nil, false, fmt.Errorf("lab[...] takes a device name, not %s", k.Type())
	}
	d, err := l.r.device(name)
	if err != nil {
		return nil, false, err
	}
	return d, true, nil
}
func (l *labValue) Attr(name string) (starlark.Value, error) {
	if name == "names" {
		return starlark.NewBuiltin("names", func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
			names := l.r.lab.Names()
			sort.Strings(names)
			vals := make([]starlark.Value, len(names))
			for i, n := range names {
				vals[i] = starlark.String(n)
			}
			return starlark.NewList(vals), nil
		}), nil
	}
	return nil, nil
}
func (l *labValue) AttrNames() []string { return []string{"names"} }

// deviceValue is one device in a script.
type deviceValue struct {
	r    *runner
	name string
	dev  mhp.Device
}

func (d *deviceValue) String() string        { return "<device " + d.name + ">" }
func (d *deviceValue) Type() string          { return "device" }
func (d *deviceValue) Freeze()               {}
func (d *deviceValue) Truth() starlark.Bool  { return true }
func (d *deviceValue) Hash() (uint32, error) { return starlark.String(d.name).Hash() }

var deviceMethods = []string{"acquire", "cancel", "describe", "estop", "invoke", "job", "read", "read_all", "release", "reset", "wait", "write"}

func (d *deviceValue) AttrNames() []string { return deviceMethods }

func (d *deviceValue) Attr(name string) (starlark.Value, error) {
	var fn func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error)
	switch name {
	case "read":
		fn = d.read
	case "read_all":
		fn = d.readAll
	case "write":
		fn = d.write
	case "invoke":
		fn = d.invoke
	case "wait":
		fn = d.wait
	case "job":
		fn = d.job
	case "cancel":
		fn = d.cancel
	case "estop":
		fn = d.estop
	case "reset":
		fn = d.reset
	case "describe":
		fn = d.describe
	case "acquire":
		fn = d.acquire
	case "release":
		fn = d.release
	default:
		return nil, nil
	}
	if name != "estop" { // estop always goes through
		call := fn
		fn = func(t *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			// The interpreter sees a cancel at its next step; a device call
			// already under way must not start after it either.
			if err := d.r.ctx.Err(); err != nil {
				return nil, fmt.Errorf("%s: run ended: %w", b.Name(), context.Cause(d.r.ctx))
			}
			return call(t, b, args, kwargs)
		}
	}
	return starlark.NewBuiltin(d.name+"."+name, fn), nil
}

func (d *deviceValue) read(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var name string
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 1, &name); err != nil {
		return nil, err
	}
	res, err := d.dev.Read(d.r.ctx, []string{name})
	if err != nil {
		return nil, err
	}
	return toStarlark(res.Values[name])
}

func (d *deviceValue) readAll(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(kwargs) > 0 {
		return nil, fmt.Errorf("%s: takes signal names only", b.Name())
	}
	names := make([]string, 0, len(args))
	for _, a := range args {
		s, ok := starlark.AsString(a)
		if !ok {
			return nil, fmt.Errorf("%s: signal names are strings, not %s", b.Name(), a.Type())
		}
		names = append(names, s)
	}
	res, err := d.dev.Read(d.r.ctx, names)
	if err != nil {
		return nil, err
	}
	return toStarlark(res.Values)
}

func (d *deviceValue) write(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var name string
	var value starlark.Value
	dry := false
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "name", &name, "value", &value, "dry_run?", &dry); err != nil {
		return nil, err
	}
	if err := d.r.mem.charge(b.Name()+" value", reprSize(value, huge)); err != nil {
		return nil, err
	}
	v, err := fromStarlark(value)
	if err != nil {
		return nil, err
	}
	res, err := d.dev.Write(d.r.ctx, mhp.WriteRequest{Name: name, Value: v, DryRun: dry})
	if err != nil {
		return nil, err
	}
	return toStarlark(res)
}

func (d *deviceValue) invoke(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("%s: takes the action name, then params as keywords", b.Name())
	}
	name, ok := starlark.AsString(args[0])
	if !ok {
		return nil, fmt.Errorf("%s: the action name is a string", b.Name())
	}
	params := map[string]any{}
	for _, kv := range kwargs {
		k := string(kv[0].(starlark.String))
		if k == "approved" {
			return nil, mhp.Errorf(mhp.CodeApprovalRequired, "scripts cannot approve: %s needs a person's confirmation through the host", name)
		}
		if err := d.r.mem.charge(b.Name()+" "+k, reprSize(kv[1], huge)); err != nil {
			return nil, err
		}
		v, err := fromStarlark(kv[1])
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", b.Name(), k, err)
		}
		params[k] = v
	}
	res, err := d.dev.Invoke(d.r.ctx, mhp.InvokeRequest{Name: name, Params: params})
	if err != nil {
		return nil, err
	}
	return toStarlark(res.Job)
}

func jobID(v starlark.Value) (string, error) {
	if s, ok := starlark.AsString(v); ok {
		return s, nil
	}
	if m, ok := v.(*starlark.Dict); ok {
		id, found, _ := m.Get(starlark.String("id"))
		if s, ok := starlark.AsString(id); found && ok {
			return s, nil
		}
	}
	return "", fmt.Errorf("want a job or a job id, not %s", v.Type())
}

func (d *deviceValue) wait(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var jv starlark.Value
	var timeout number
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "job", &jv, "timeout?", &timeout); err != nil {
		return nil, err
	}
	id, err := jobID(jv)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", b.Name(), err)
	}
	ctx := d.r.ctx
	if timeout != 0 {
		// Above the run's own budget a timeout changes nothing: the run ends first.
		dur, err := seconds("timeout", float64(timeout), max(d.r.opts.MaxTimeout, d.r.opts.Timeout))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", b.Name(), err)
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, dur)
		defer cancel()
	}
	job, err := WaitJob(ctx, d.dev, id, d.r.opts.PollInterval)
	if err != nil {
		return nil, err
	}
	return toStarlark(job)
}

// WaitJob waits for a job to end: on notifications when the device can,
// else by polling jobs/status every interval, until ctx ends.
func WaitJob(ctx context.Context, dev mhp.Device, id string, every time.Duration) (*mhp.Job, error) {
	if w, ok := dev.(Waiter); ok {
		return w.Wait(ctx, id)
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		j, err := dev.Job(ctx, id)
		if err != nil {
			return nil, err
		}
		if j.State.Terminal() {
			return j, nil
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for job %s: %w", id, ctx.Err())
		}
	}
}

func (d *deviceValue) job(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var jv starlark.Value
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 1, &jv); err != nil {
		return nil, err
	}
	id, err := jobID(jv)
	if err != nil {
		return nil, err
	}
	j, err := d.dev.Job(d.r.ctx, id)
	if err != nil {
		return nil, err
	}
	return toStarlark(j)
}

func (d *deviceValue) cancel(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var jv starlark.Value
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 1, &jv); err != nil {
		return nil, err
	}
	id, err := jobID(jv)
	if err != nil {
		return nil, err
	}
	j, err := d.dev.CancelJob(d.r.ctx, id)
	if err != nil {
		return nil, err
	}
	return toStarlark(j)
}

func (d *deviceValue) estop(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	reason := "script"
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "reason?", &reason); err != nil {
		return nil, err
	}
	res, err := d.dev.EStop(context.WithoutCancel(d.r.ctx), reason)
	if err != nil {
		return nil, err
	}
	return toStarlark(res)
}

func (d *deviceValue) reset(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 0); err != nil {
		return nil, err
	}
	res, err := d.dev.Reset(d.r.ctx)
	if err != nil {
		return nil, err
	}
	return toStarlark(res)
}

func (d *deviceValue) describe(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	detail := mhp.DetailSummary
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "detail?", &detail); err != nil {
		return nil, err
	}
	res, err := d.dev.Describe(d.r.ctx, mhp.DescribeRequest{Detail: detail})
	if err != nil {
		return nil, err
	}
	return toStarlark(res)
}

func (d *deviceValue) acquire(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	ttl := number(60)
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "ttl?", &ttl); err != nil {
		return nil, err
	}
	dur, err := seconds("ttl", float64(ttl), maxLeaseTTL)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", b.Name(), err)
	}
	// A lease the connection already held (the bridge's, an earlier run's
	// that is still going) is renewed, not taken over: the run's clean-up
	// releases only leases the run itself acquired.
	held := false
	if h, ok := mhp.Find[interface{ HoldsLease() bool }](d.dev); ok {
		held = h.HoldsLease()
	}
	l, err := d.dev.Acquire(d.r.ctx, dur)
	if err != nil {
		return nil, err
	}
	if !held {
		d.r.mu.Lock()
		d.r.leased = append(d.r.leased, d)
		d.r.mu.Unlock()
	}
	return toStarlark(l)
}

func (d *deviceValue) release(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 0); err != nil {
		return nil, err
	}
	return starlark.None, d.dev.Release(d.r.ctx)
}

var _ starlark.Mapping = (*labValue)(nil)
var _ starlark.HasAttrs = (*deviceValue)(nil)

// Devices is a Lab of devices already at hand, by name.
type Devices map[string]mhp.Device

// Device returns the named device or UnknownName.
func (m Devices) Device(_ context.Context, name string) (mhp.Device, error) {
	d, ok := m[name]
	if !ok {
		return nil, mhp.Errorf(mhp.CodeUnknownName, "no device %q in this lab", name).With(mhp.DataKind, "device").With(mhp.DataName, name)
	}
	return d, nil
}

// Names lists the devices.
func (m Devices) Names() []string {
	out := make([]string, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	return out
}

// number unpacks an int or a float argument.
type number float64

// Unpack implements starlark.Unpacker.
func (n *number) Unpack(v starlark.Value) error {
	f, ok := starlark.AsFloat(v)
	if !ok {
		return fmt.Errorf("want a number, not %s", v.Type())
	}
	*n = number(f)
	return nil
}
