package pylabrobot

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
)

// linkDown reports whether err shows the bridge (or legacy server)
// unreachable: the request failed below HTTP and not by our own context.
func linkDown(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var ue *url.Error
	return errors.As(err, &ue) || adapters.Unreachable(err)
}

// cachedDescription is the start without the bridge: its /describe as the
// descriptor cache kept it, or an error saying how to start anyway.
func cachedDescription(cfg Config, cause error) (*Description, error) {
	if cfg.Link.FailFast {
		return nil, fmt.Errorf("%w (link.fail_fast is set: not starting without the bridge)", cause)
	}
	if cfg.Link.DescriptorCache == "" {
		return nil, adapters.NeverReached(fmt.Errorf("%w; the device's items come from the bridge's /describe, so starting before the bridge needs link.descriptor_cache (written on the first start with the bridge up)", cause))
	}
	var d Description
	if _, err := adapters.LoadDescriptor(cfg.Link.DescriptorCache, Kind, cfg.URL, &d); err != nil {
		return nil, adapters.NeverReached(fmt.Errorf("%w; and no usable descriptor cache: %v", cause, err))
	}
	return &d, nil
}

// newLink follows the backend with probe, timed by the options' LinkClock;
// down is why it was not there at start (nil: it was).
func newLink(cfg Config, opt Options, probe func(context.Context) error, down error) *adapters.Link {
	l := adapters.NewLink(adapters.LinkOptions{Name: "pylabrobot " + cfg.Mode + " " + cfg.URL, Config: cfg.Link, Probe: probe,
		ProbeTimeout: 2 * cfg.RequestTimeout, Clock: opt.LinkClock, Logger: opt.Logger})
	if down != nil {
		l.Down(down)
	} else {
		l.Up()
	}
	return l
}

// probe is the bridge link's reconnect attempt: the bridge answers /state
// and describes the machine as it did when the device was built.
func (b *bridgeAdapter) probe(ctx context.Context) error {
	if _, err := b.m.State(ctx); err != nil {
		return err
	}
	d, err := b.m.Describe(ctx)
	if err != nil {
		return err
	}
	if !adapters.SameDescription(gated(d), gated(b.desc)) {
		return adapters.DescriptionChanged("plrbridge "+b.cfg.URL, "its machine's methods or state")
	}
	return nil
}

// gated is the part of /describe the device's items and gates were built
// from: the machine's class, its stop, its methods and the names of its
// state. A state attribute's type is left out: the bridge reads it from the
// value, which may be None before setup and a number after.
func gated(d *Description) map[string]any {
	names := make([]string, 0, len(d.State))
	for _, s := range d.State {
		names = append(names, s.Name)
	}
	return map[string]any{"class": d.Machine.Class, "stop": d.Machine.Stop, "methods": d.Methods, "state": names}
}

// lost marks the link down when err shows the bridge unreachable.
func (b *bridgeAdapter) lost(err error) {
	if b.link != nil && linkDown(err) {
		b.link.Down(fmt.Errorf("plrbridge %s: %w", b.cfg.URL, err))
	}
}

// SetupMethod is the machine method a reset runs again when the machine is
// not set up (PyLabRobot's setup()).
const SetupMethod = "setup"

// verify is the reset's check. PyLabRobot's stop() (the estop) tears the
// backend down: setup_finished reads false and the machine refuses every
// command until setup() runs again. So when the bridge serves
// setup_finished and it reads false, the reset runs setup (reset_setup,
// default on) and verifies only once setup_finished reads true; without a
// setup method, or with reset_setup off, the reset is refused saying so.
// The other state values are signals, read by the binding after this check.
func (b *bridgeAdapter) verify(ctx context.Context) error {
	st, err := b.m.State(ctx)
	if err != nil {
		b.lost(err)
		return fmt.Errorf("bridge /state: %w", err)
	}
	// Other state values are signals: the binding reads them after this
	// check (an unreadable interlock or required one refuses the reset).
	if why, bad := st.Errors["setup_finished"]; bad {
		return fmt.Errorf("bridge /state: setup_finished unreadable: %v", why)
	}
	done, tracked := st.Values["setup_finished"].(bool)
	if !tracked || done {
		b.state.invalidate()
		return nil
	}
	has := false
	for _, m := range b.desc.Methods {
		has = has || m.Name == SetupMethod
	}
	if !has || !*b.cfg.ResetSetup {
		return errors.New("the machine is not set up (setup_finished is false) and would refuse every command; run its setup (reset_setup is off or the bridge has no setup method)")
	}
	if err := b.runTask(ctx, SetupMethod); err != nil {
		return fmt.Errorf("re-running setup after the stop: %w", err)
	}
	st, err = b.m.State(ctx)
	if err != nil {
		return fmt.Errorf("bridge /state after setup: %w", err)
	}
	if v, _ := st.Values["setup_finished"].(bool); !v {
		return errors.New("setup ran but setup_finished still reads false")
	}
	b.state.invalidate()
	return nil
}

// runTask submits a method without params and follows it to its end
// (long-polling when the bridge offers it, failed polls under the poll
// policy), within ctx.
func (b *bridgeAdapter) runTask(ctx context.Context, method string) error {
	t, err := b.t.Submit(ctx, method, map[string]any{}, 0)
	if err != nil {
		return err
	}
	p := b.newTaskPoll(t)
	for {
		switch t.Status {
		case TaskDone:
			return nil
		case TaskQueued, TaskRunning:
		default:
			return fmt.Errorf("%s ended %s: %s", method, t.Status, t.Error)
		}
		next, err := p.next(ctx, t)
		switch {
		case next != nil:
			t = next
		case ctx.Err() != nil:
			return fmt.Errorf("%s: no end state in time (task %s)", method, t.ID)
		case err != nil:
			return err
		}
	}
}

func (s *stateCache) invalidate() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.val = nil
}

// notSent wraps a submit that could not reach the bridge.
func notSent(method string, err error) *mhp.Error {
	return adapters.NotSent("pylabrobot: "+method, err)
}
