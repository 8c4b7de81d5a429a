package binding

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/clock"
)

// Config is everything a Driver is built from. Zero durations take the
// defaults documented on each field.
type Config struct {
	Device       mhp.DeviceInfo
	Notes        string
	Instructions string
	Physical     *mhp.Physical
	// Safety is the descriptor's safety block; Safety.EStop is set when EStop is given.
	Safety   mhp.Safety
	Signals  []Signal
	Settings []Setting
	Actions  []Action

	// EStop stops all motion and energy output. It runs outside the request
	// lock, never behind a vendor call.
	EStop func(ctx context.Context) error
	// OnFault runs once when the device latches in fault; default EStop.
	OnFault func(ctx context.Context, reason string) error
	// Setup runs once in Start (connect, home, read types).
	Setup func(ctx context.Context) error
	// Verify is the adapter's own recovery check before a reset (a LADS
	// unit Stopped, a PLR machine set up, a node ready). After it passes the
	// driver reads every signal: an unreadable interlock signal or one
	// marked RequiredForRecovery refuses the reset, any other is named in
	// the answer (ResetResult.Unavailable). Without Verify the backend link
	// must be up.
	Verify func(ctx context.Context) error
	// Close releases the backend in [Driver.Close].
	Close func() error
	// Lease, when set, mirrors MHP leases onto the backend's own lock
	// (SiLA 2 LockController, a PLC's ownership flag): it runs with
	// acquire=true before a session is granted the lease — an error refuses
	// the lease — and with acquire=false when the lease ends for any reason
	// (release, expiry, the watchdog, Close).
	Lease func(ctx context.Context, holder string, acquire bool) error

	// Clock is the time source; default the system clock.
	Clock clock.Clock
	// KeepJobs is how many finished jobs are kept for jobs/status; default 256.
	KeepJobs int
	// InterlockTimeout bounds each live interlock read; default 2s.
	InterlockTimeout time.Duration
	// HookTimeout bounds a setting's Write; default 30s.
	HookTimeout time.Duration
	// VerifyTimeout bounds the Verify hook of a reset (a backend that is
	// reset and must come back up may need longer than a write); default
	// HookTimeout.
	VerifyTimeout time.Duration
	// StopTimeout bounds the EStop and OnFault hooks; default 10s.
	StopTimeout time.Duration
	// EStopAnswerTimeout bounds how long safety/estop waits for the EStop
	// hook before answering: the device latches in estop at once, and a hook
	// still running then is answered stopped:false, stop_pending:true (the
	// final word follows in notifications/safety/estop). Default 1s; at most
	// StopTimeout.
	EStopAnswerTimeout time.Duration
	// JobTimeout bounds an action's Run when the action sets none; default 1h.
	JobTimeout time.Duration
	// JobGrace is how long a Run may take to return once its context ended
	// through timeout or estop before the job is abandoned as outcome unknown;
	// default 10s.
	JobGrace time.Duration
	// PollInterval is how often subscribed, non-pushed signals are read; default 1s.
	PollInterval time.Duration
	// SessionIdle forgets a session's last-seen record after this long
	// without a request; default 10m. Sessions holding the lease or with
	// subscriptions are kept until they release, unsubscribe or end.
	SessionIdle time.Duration
	// Logger receives operational logs; default slog.Default().
	Logger *slog.Logger

	// frozen holds the shared copies the specs above point into (frozen.go).
	frozen []*frozenSpec
}

// Validate reports the first problem with the configuration: missing id or
// hooks, duplicate names, interlocks naming no signal, bad limits.
func (c *Config) Validate() error {
	if c.Device.ID == "" {
		return fmt.Errorf("binding: Device.ID is required")
	}
	seen := map[string]string{}
	claim := func(kind, name string) error {
		if name == "" {
			return fmt.Errorf("binding: a %s has no name", kind)
		}
		if prev, ok := seen[kind+":"+name]; ok {
			return fmt.Errorf("binding: duplicate %s %q (%s)", kind, name, prev)
		}
		seen[kind+":"+name] = kind
		return nil
	}
	signals := map[string]bool{}
	for _, s := range c.Signals {
		if err := claim("signal", s.Spec.Name); err != nil {
			return err
		}
		if s.Read == nil {
			return fmt.Errorf("binding: signal %q has no Read", s.Spec.Name)
		}
		if s.Spec.Type != "" && !mhp.IsType(s.Spec.Type) {
			return fmt.Errorf("binding: signal %q: unknown type %q", s.Spec.Name, s.Spec.Type)
		}
		signals[s.Spec.Name] = true
	}
	checkInterlocks := func(kind, name string, locks []string) error {
		for _, l := range locks {
			if !signals[l] {
				return fmt.Errorf("binding: %s %q: interlock %q names no signal", kind, name, l)
			}
		}
		return nil
	}
	for _, s := range c.Settings {
		if err := claim("setting", s.Spec.Name); err != nil {
			return err
		}
		if s.Write == nil {
			return fmt.Errorf("binding: setting %q has no Write", s.Spec.Name)
		}
		if s.Spec.Type == "" || !mhp.IsType(s.Spec.Type) {
			return fmt.Errorf("binding: setting %q: type %q is not one of number, integer, boolean, string, array, object, any", s.Spec.Name, s.Spec.Type)
		}
		if err := checkApproval(s.Spec.Approval); err != nil {
			return fmt.Errorf("binding: setting %q: %w", s.Spec.Name, err)
		}
		if err := checkLimits(s.Spec.Limits); err != nil {
			return fmt.Errorf("binding: setting %q: %w", s.Spec.Name, err)
		}
		if err := checkInterlocks("setting", s.Spec.Name, s.Spec.Interlocks); err != nil {
			return err
		}
	}
	for _, a := range c.Actions {
		if err := claim("action", a.Spec.Name); err != nil {
			return err
		}
		if a.Run == nil {
			return fmt.Errorf("binding: action %q has no Run", a.Spec.Name)
		}
		if err := checkApproval(a.Spec.Approval); err != nil {
			return fmt.Errorf("binding: action %q: %w", a.Spec.Name, err)
		}
		if d := a.Spec.Duration; d != "" && d != mhp.DurationShort && d != mhp.DurationLong {
			return fmt.Errorf("binding: action %q: duration %q is not short or long", a.Spec.Name, d)
		}
		if err := checkInterlocks("action", a.Spec.Name, a.Spec.Interlocks); err != nil {
			return err
		}
		for _, p := range a.Spec.Params {
			if p.Shape != nil {
				if err := checkLimits(p.Shape.Limits); err != nil {
					return fmt.Errorf("binding: action %q param %q: %w", a.Spec.Name, p.Name, err)
				}
			}
		}
	}
	if err := checkInterlocks("safety", "interlocks", c.Safety.Interlocks); err != nil {
		return err
	}
	if c.Safety.WatchdogS < 0 {
		return fmt.Errorf("binding: safety.watchdog_s %v is negative", c.Safety.WatchdogS)
	}
	if c.EStopAnswerTimeout < 0 {
		return fmt.Errorf("binding: EStopAnswerTimeout %v is negative", c.EStopAnswerTimeout)
	}
	stop := c.StopTimeout
	if stop <= 0 {
		stop = defaultStopTimeout
	}
	if c.EStopAnswerTimeout > stop {
		return fmt.Errorf("binding: EStopAnswerTimeout %v exceeds StopTimeout %v: the answer never waits longer than the stop may run",
			c.EStopAnswerTimeout, stop)
	}
	if c.KeepJobs < 0 {
		return fmt.Errorf("binding: KeepJobs %d is negative", c.KeepJobs)
	}
	return nil
}

func checkApproval(a mhp.Approval) error {
	switch a {
	case "", mhp.ApprovalAuto, mhp.ApprovalConfirm, mhp.ApprovalForbid:
		return nil
	}
	return fmt.Errorf("approval %q is not auto, confirm or forbid", a)
}

func checkLimits(l *mhp.Limits) error {
	if l == nil {
		return nil
	}
	if l.Min != nil && l.Max != nil && *l.Min > *l.Max {
		return fmt.Errorf("limits: min %v above max %v", *l.Min, *l.Max)
	}
	return nil
}

// defaultStopTimeout is StopTimeout's default.
const defaultStopTimeout = 10 * time.Second

// withDefaults returns a copy of c with every zero option at its default.
func (c Config) withDefaults() Config {
	c.own()
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.KeepJobs == 0 {
		c.KeepJobs = 256
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.InterlockTimeout, 2*time.Second)
	def(&c.HookTimeout, 30*time.Second)
	def(&c.VerifyTimeout, c.HookTimeout)
	def(&c.StopTimeout, defaultStopTimeout)
	def(&c.EStopAnswerTimeout, min(time.Second, c.StopTimeout))
	def(&c.JobTimeout, time.Hour)
	def(&c.JobGrace, 10*time.Second)
	def(&c.PollInterval, time.Second)
	def(&c.SessionIdle, 10*time.Minute)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.EStop != nil {
		c.Safety.EStop = true
	}
	for i := range c.Settings {
		if c.Settings[i].Spec.Approval == "" {
			c.Settings[i].Spec.Approval = mhp.ApprovalAuto
		}
	}
	for i := range c.Actions {
		a := &c.Actions[i].Spec
		if a.Approval == "" {
			a.Approval = mhp.ApprovalAuto
		}
		if a.Duration == "" {
			a.Duration = mhp.DurationLong
		}
	}
	return c
}

// own gives c its own copies of the binding lists and their specs, so that
// neither the caller's Config nor a Descriptor handed out shares the limits
// and shapes the gates enforce.
func (c *Config) own() {
	c.Signals = append([]Signal(nil), c.Signals...)
	c.Settings = append([]Setting(nil), c.Settings...)
	c.frozen = make([]*frozenSpec, 0, len(c.Settings)+len(c.Actions))
	for i := range c.Settings {
		var f *frozenSpec
		c.Settings[i].Spec, f = freezeSetting(c.Settings[i].Spec)
		c.Settings[i].shape = f.shape
		c.frozen = append(c.frozen, f)
	}
	c.Actions = append([]Action(nil), c.Actions...)
	for i := range c.Actions {
		var f *frozenSpec
		c.Actions[i].Spec, f = freezeAction(c.Actions[i].Spec)
		c.frozen = append(c.frozen, f)
	}
	c.Safety.Interlocks = append([]string(nil), c.Safety.Interlocks...)
}

func cloneSetting(s mhp.Setting) mhp.Setting {
	s.Limits = cloneLimits(s.Limits)
	s.Interlocks = append([]string(nil), s.Interlocks...)
	return s
}

func cloneAction(a mhp.Action) mhp.Action {
	a.Interlocks = append([]string(nil), a.Interlocks...)
	if a.Params != nil {
		ps := make(mhp.Params, len(a.Params))
		for i, p := range a.Params {
			ps[i] = mhp.Param{Name: p.Name, Shape: cloneShape(p.Shape)}
		}
		a.Params = ps
	}
	a.Returns = cloneShape(a.Returns)
	if a.Examples != nil {
		ex := make([]map[string]any, len(a.Examples))
		for i, e := range a.Examples {
			ex[i], _ = copyValue(e).(map[string]any)
		}
		a.Examples = ex
	}
	return a
}

func cloneShape(s *mhp.Shape) *mhp.Shape {
	if s == nil {
		return nil
	}
	c := *s
	c.Limits = cloneLimits(s.Limits)
	c.Items = cloneShape(s.Items)
	if s.Properties != nil {
		c.Properties = make(map[string]*mhp.Shape, len(s.Properties))
		for k, v := range s.Properties {
			c.Properties[k] = cloneShape(v)
		}
	}
	c.Required = append([]string(nil), s.Required...)
	c.Default = copyValue(s.Default)
	return &c
}

func cloneLimits(l *mhp.Limits) *mhp.Limits {
	if l == nil {
		return nil
	}
	c := *l
	f := func(p *float64) *float64 {
		if p == nil {
			return nil
		}
		v := *p
		return &v
	}
	n := func(p *int) *int {
		if p == nil {
			return nil
		}
		v := *p
		return &v
	}
	c.Min, c.Max, c.ExclusiveMin, c.ExclusiveMax = f(l.Min), f(l.Max), f(l.ExclusiveMin), f(l.ExclusiveMax)
	c.MinLength, c.MaxLength = n(l.MinLength), n(l.MaxLength)
	if l.Enum != nil {
		c.Enum = make([]any, len(l.Enum))
		for i, v := range l.Enum {
			c.Enum[i] = copyValue(v)
		}
	}
	return &c
}
