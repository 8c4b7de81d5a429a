package madsci

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/clock"
)

// attach gives the adapter the driver its node's word latches in fault.
func (a *adapter) attach(d *binding.Driver) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.drv = d
}

// readStatus reads GET /status and checks what the node says of itself.
func (a *adapter) readStatus(ctx context.Context) (*NodeStatus, error) {
	a.mu.Lock()
	gen := a.gen
	a.mu.Unlock()
	st, err := a.node.Status(ctx)
	a.reached(err)
	if err != nil {
		return nil, err
	}
	a.observe(st, gen)
	return st, nil
}

// reached logs when the node stops or starts answering /status, and marks
// the backend link down when the request failed below HTTP. An unreachable
// node latches nothing by itself: ping and describe say backend
// connected:false, signals read null, writes and invokes are refused
// not_started, and a job that is running ends outcome unknown (fault) when
// its own polls keep failing. Only the link's probe brings it back up.
func (a *adapter) reached(err error) {
	ok := err == nil
	if err != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return // our own deadline or Close, not the node's doing
	}
	if linkDown(err) && a.link != nil {
		a.link.Down(fmt.Errorf("madsci node %s: %w", a.cfg.NodeURL, err))
	}
	a.mu.Lock()
	changed := a.reachable != ok
	a.reachable = ok
	a.mu.Unlock()
	if !changed {
		return
	}
	if ok {
		a.log.Info("madsci node answers /status again", "node", a.cfg.NodeURL)
	} else {
		a.log.Warn("madsci node unreachable: signals read null, blocking actions are refused at node.ready", "node", a.cfg.NodeURL, "err", err)
	}
}

// observe latches the device in fault when the node reports itself errored
// or stopped. It does nothing while a reset verifies recovery or for a read
// that began before a reset (gen), when the device is already in fault or
// estop (a node stopped by our own safety_stop is expected), and after Close.
func (a *adapter) observe(st *NodeStatus, gen uint64) {
	if st == nil || (!st.Errored && !st.Stopped) {
		return
	}
	// Held across Fault so a reset cannot start between the checks and
	// the latch; Fault never calls back into the adapter.
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.drv == nil || a.closed || a.resetting > 0 || gen != a.gen {
		return
	}
	switch a.drv.State() {
	case mhp.StateFault, mhp.StateEStop:
		return
	}
	a.drv.Fault(faultReason(st))
}

// faultReason says why the node's word faulted the device.
func faultReason(st *NodeStatus) string {
	var parts []string
	if st.Errored {
		parts = append(parts, "madsci node reports errored: "+lastErrors(st.Errors, 3))
	}
	if st.Stopped {
		parts = append(parts, "madsci node reports stopped (a safety_stop not sent through MHP, or the node stopped itself); safety/reset posts the node's reset")
	}
	return strings.Join(parts, "; ")
}

// lastErrors formats the newest n of the node's errors (the node keeps the
// last 100 and never clears them, so older ones may predate this fault).
func lastErrors(errs []NodeError, n int) string {
	if len(errs) > n {
		errs = errs[len(errs)-n:]
	}
	return messages(errs)
}

// beginReset marks a verify in progress: status reads do not fault.
func (a *adapter) beginReset() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.resetting++
	a.gen++
}

// endReset ends a verify; reads that began before or during it are stale.
func (a *adapter) endReset() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.resetting--
	a.gen++
}

// close is the driver's Close hook: it stops the status watch and waits
// for a read in progress to return.
func (a *adapter) close() error {
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
	a.watch.stop()
	if a.link != nil {
		a.link.Close()
	}
	return nil
}

// startWatch starts the status watch (Setup), unless disabled or closed.
func (a *adapter) startWatch() {
	a.mu.Lock()
	closed := a.closed
	a.mu.Unlock()
	if closed || *a.cfg.StatusPoll <= 0 {
		return
	}
	a.watch.start(a.clk, *a.cfg.StatusPoll, a.cfg.RequestTimeout, func(ctx context.Context) {
		if !a.link.Connected() {
			return // the link's probe reads the node while it is down
		}
		_, _ = a.status.get(ctx) // through the signal cache: a fresh reply is not fetched twice
	})
}

// watcher runs one bounded read every period on a clock until stopped.
// Reads never overlap: the next is armed when one returns.
type watcher struct {
	mu      sync.Mutex
	clk     clock.Clock
	period  time.Duration
	bound   time.Duration
	read    func(context.Context)
	timer   clock.Timer
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	started bool
	stopped bool
}

func (w *watcher) start(clk clock.Clock, period, bound time.Duration, read func(context.Context)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started || w.stopped {
		return
	}
	w.started = true
	w.clk, w.period, w.bound, w.read = clk, period, bound, read
	w.ctx, w.cancel = context.WithCancel(context.Background())
	w.timer = clk.AfterFunc(period, w.tick)
}

func (w *watcher) tick() {
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return
	}
	w.wg.Add(1)
	ctx, cancel := context.WithTimeout(w.ctx, w.bound)
	w.mu.Unlock()
	w.read(ctx)
	cancel()
	w.mu.Lock()
	if !w.stopped {
		w.timer = w.clk.AfterFunc(w.period, w.tick)
	}
	w.mu.Unlock()
	w.wg.Done()
}

// stop disarms the watch, ends a read in progress and waits for it.
func (w *watcher) stop() {
	w.mu.Lock()
	w.stopped = true
	if w.timer != nil {
		w.timer.Stop()
	}
	if w.cancel != nil {
		w.cancel()
	}
	w.mu.Unlock()
	w.wg.Wait()
}
