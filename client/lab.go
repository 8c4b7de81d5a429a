package client

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/openmhp/mhp-go"
)

// Lab is a set of named devices connected lazily: a device is dialled on
// first use (a failed dial is retried on the next use). It is safe for
// concurrent use.
type Lab struct {
	opts Options

	mu      sync.Mutex
	entries map[string]*labEntry
	closed  bool
}

type labEntry struct {
	target string
	mu     sync.Mutex // serialises dialling
	dev    *Device
}

// NewLab returns a lab of the named targets (see Dial for target forms).
// Nothing is dialled yet.
func NewLab(targets map[string]string, opts Options) *Lab {
	l := &Lab{opts: opts.withDefaults(), entries: map[string]*labEntry{}}
	for name, t := range targets {
		l.entries[name] = &labEntry{target: t}
	}
	return l
}

// Add puts an already connected device in the lab under name (an
// in-process device from Connect, say); the lab closes it on Close.
func (l *Lab) Add(name string, d *Device) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return fmt.Errorf("client: lab is closed")
	}
	if _, ok := l.entries[name]; ok {
		return fmt.Errorf("client: lab already has a device %q", name)
	}
	l.entries[name] = &labEntry{target: "in-process", dev: d}
	return nil
}

// Names lists the lab's devices, sorted.
func (l *Lab) Names() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, 0, len(l.entries))
	for n := range l.entries {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Device returns the named device, dialling it on first use.
func (l *Lab) Device(ctx context.Context, name string) (*Device, error) {
	l.mu.Lock()
	e, ok := l.entries[name]
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("client: lab is closed")
	}
	if !ok {
		return nil, mhp.Errorf(mhp.CodeUnknownName, "the lab has no device %q (it has %v)", name, l.Names()).With(mhp.DataName, name)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.dev != nil {
		return e.dev, nil
	}
	d, err := Dial(ctx, e.target, l.opts)
	if err != nil {
		return nil, fmt.Errorf("lab device %s (%s): %w", name, e.target, err)
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		d.Close()
		return nil, fmt.Errorf("client: lab is closed")
	}
	l.mu.Unlock()
	e.dev = d
	return d, nil
}

// EStop outcome statuses.
const (
	// EStopStopped: the device answered, is in estop and its stop hook succeeded.
	EStopStopped = "stopped"
	// EStopUnconfirmed: the device answered and is in estop, but its stop
	// hook failed (stopped:false): a person must check the hardware.
	EStopUnconfirmed = "unconfirmed"
	// EStopError: the device was not reached or did not answer in time.
	EStopError = "error"
)

// EStopOutcome is one device's result of [Lab.EStopAll].
type EStopOutcome struct {
	// Status is [EStopStopped], [EStopUnconfirmed] or [EStopError].
	Status string
	// OK reports that the device answered the estop (Status is not [EStopError]).
	OK bool
	// Result is the device's answer, when it answered.
	Result *mhp.EStopResult
	// Err says why the device was not reached, or why it answered with an error.
	Err error
	// Took is how long the device took to answer or fail.
	Took time.Duration
}

// EStopAll sends safety/estop to every device of the lab in parallel,
// dialling those not yet connected, each bounded by [Options.EStopTimeout] (and
// ctx), and returns every device's outcome. It never stops early: a device
// that fails does not delay the others.
func (l *Lab) EStopAll(ctx context.Context, reason string) map[string]EStopOutcome {
	names := l.Names()
	out := make(map[string]EStopOutcome, len(names))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := l.estopOne(ctx, name, reason)
			mu.Lock()
			out[name] = o
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

func (l *Lab) estopOne(ctx context.Context, name, reason string) EStopOutcome {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, l.opts.EStopTimeout)
	defer cancel()
	type answer struct {
		res *mhp.EStopResult
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		d, err := l.Device(ctx, name)
		if err != nil {
			ch <- answer{err: err}
			return
		}
		res, err := d.EStop(ctx, reason)
		ch <- answer{res, err}
	}()
	var a answer
	select {
	case a = <-ch:
	case <-ctx.Done():
		// A dial that ignores ctx must not hold up the fleet stop.
		a.err = fmt.Errorf("estop %s: no answer within %v: %w", name, l.opts.EStopTimeout, ctx.Err())
	}
	o := EStopOutcome{Result: a.res, Err: a.err, Took: time.Since(start)}
	switch {
	case a.err != nil:
		o.Status = EStopError
	case a.res.Stopped:
		o.Status, o.OK = EStopStopped, true
	default:
		o.Status, o.OK = EStopUnconfirmed, true
		if a.res.StopError != "" {
			o.Err = fmt.Errorf("stop hook failed: %s", a.res.StopError)
		}
	}
	return o
}

// Close closes every connected device of the lab.
func (l *Lab) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	entries := make([]*labEntry, 0, len(l.entries))
	for _, e := range l.entries {
		entries = append(entries, e)
	}
	l.mu.Unlock()
	var first error
	for _, e := range entries {
		e.mu.Lock()
		if e.dev != nil {
			if err := e.dev.Close(); err != nil && first == nil {
				first = err
			}
		}
		e.mu.Unlock()
	}
	return first
}
