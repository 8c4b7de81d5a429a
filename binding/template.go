package binding

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/openmhp/mhp-go"
)

// What a driver keeps of its Config, and what drivers of one spec share.
//
// A driver holds its own hooks (the bindings' closures are its device's) and
// its device info; the specs, their shapes, the descriptor's lists, the set
// of signals a reset must read and the options (timeouts, job history,
// logger) are the same for every driver built from one spec (10,000
// simulated devices of one class), and live once in a driverTemplate found
// through the frozen table (frozen.go).

// options are the Config's timeouts, job history and logger, after the
// defaults; shared by the drivers with the same options, never changed.
type options struct {
	InterlockTimeout, HookTimeout, VerifyTimeout, StopTimeout, EStopAnswerTimeout time.Duration
	JobTimeout, JobGrace, PollInterval, SessionIdle                               time.Duration
	KeepJobs                                                                      int
	Logger                                                                        *slog.Logger
}

// hooks are the Config's device-wide hooks.
type hooks struct {
	EStop   func(ctx context.Context) error
	OnFault func(ctx context.Context, reason string) error
	Setup   func(ctx context.Context) error
	Verify  func(ctx context.Context) error
	Close   func() error
	Lease   func(ctx context.Context, holder string, acquire bool) error
}

// driverCfg is what a driver keeps of its Config: its own hooks and device
// info, and the shared options (d.cfg.HookTimeout, d.cfg.Logger read
// through the embedded pointer).
type driverCfg struct {
	*options
	hooks
	Device *mhp.DeviceInfo // the descriptor's (Driver.desc)
}

// boundSignal is a driver's signal: the spec, shared with the drivers of
// its spec (in the frozen descriptor lists), and the driver's own hook.
type boundSignal struct {
	Spec   *mhp.Signal
	Read   func(ctx context.Context) (Sample, error)
	Pushed bool
}

// boundAction is a driver's action: the spec, shared (in the frozen
// descriptor lists), and the driver's own hooks.
type boundAction struct {
	Spec           *mhp.Action
	Run            func(ctx context.Context, job *Job) (any, error)
	Validate       func(params map[string]any) error
	Pause, Resume  func(ctx context.Context, job *Job) error
	Timeout        time.Duration
	FaultOnFailure bool
}

// driverTemplate is what the drivers of one spec share: the descriptor's
// lists (and through them the frozen specs), the signals a reset must
// read, and the options. It keeps the frozen copies it points into alive.
type driverTemplate struct {
	lists    *frozenSpec
	parts    []*frozenSpec // the setting and action specs the lists share
	required map[string]bool
	opts     options
}

// freezeTemplate returns the shared copy holding the template of a driver
// built from c (after withDefaults and own) whose descriptor lists are
// lists; the driver holds it (the table's pointer to it is weak).
func freezeTemplate(c *Config, lists *frozenSpec) *frozenSpec {
	required := c.RecoverySignals()
	names := make([]string, 0, len(required))
	for n := range required {
		names = append(names, n)
	}
	sort.Strings(names)
	o := options{InterlockTimeout: c.InterlockTimeout, HookTimeout: c.HookTimeout, VerifyTimeout: c.VerifyTimeout,
		StopTimeout: c.StopTimeout, EStopAnswerTimeout: c.EStopAnswerTimeout, JobTimeout: c.JobTimeout,
		JobGrace: c.JobGrace, PollInterval: c.PollInterval, SessionIdle: c.SessionIdle, KeepJobs: c.KeepJobs, Logger: c.Logger}
	// The lists and the logger are named by address: the template holds
	// both, so neither address is reused while the entry can be found.
	key := fmt.Sprintf("template\x00%p\x00%q\x00%v %v %v %v %v %v %v %v %v %d %p", lists, strings.Join(names, "\x00"),
		o.InterlockTimeout, o.HookTimeout, o.VerifyTimeout, o.StopTimeout, o.EStopAnswerTimeout, o.JobTimeout,
		o.JobGrace, o.PollInterval, o.SessionIdle, o.KeepJobs, o.Logger)
	return freeze(key, func() *frozenSpec {
		return &frozenSpec{template: &driverTemplate{lists: lists, parts: c.frozen, required: required, opts: o}}
	})
}

// bindSignals makes a driver's signals: each spec from the shared lists,
// each hook the config's.
func bindSignals(cfg []Signal, lists *descLists) byName[boundSignal] {
	items := make([]boundSignal, len(cfg))
	for i := range cfg {
		items[i] = boundSignal{Spec: &lists.signals[i], Read: cfg[i].Read, Pushed: cfg[i].Pushed}
	}
	return byName[boundSignal]{idx: lists.signalIdx, items: items}
}

// bindActions makes a driver's actions: each spec from the shared lists,
// each hook the config's.
func bindActions(cfg []Action, lists *descLists) byName[boundAction] {
	items := make([]boundAction, len(cfg))
	for i := range cfg {
		a := &cfg[i]
		items[i] = boundAction{Spec: &lists.actions[i], Run: a.Run, Validate: a.Validate, Pause: a.Pause, Resume: a.Resume,
			Timeout: a.Timeout, FaultOnFailure: a.FaultOnFailure}
	}
	return byName[boundAction]{idx: lists.actionIdx, items: items}
}
