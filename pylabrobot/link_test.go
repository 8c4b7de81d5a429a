package pylabrobot_test

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/clock"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/pylabrobot"
	"github.com/openmhp/mhp-go/pylabrobot/plrtest"
)

// TestResetRerunsSetup: PyLabRobot's stop() (the estop) leaves the machine
// not set up, refusing everything. The reset runs setup again and verifies
// only once setup_finished reads true; with reset_setup off it is refused
// and the device stays stopped.
func TestResetRerunsSetup(t *testing.T) {
	ctx := context.Background()
	for _, rerun := range []bool{true, false} {
		f, b := bridgeFixture(t, func(c *pylabrobot.Config) { c.ResetSetup = &rerun })
		if r, err := f.dev.EStop(ctx, "test"); err != nil || !r.Stopped {
			t.Fatalf("estop: %+v %v", r, err)
		}
		if r, _ := f.dev.Read(ctx, []string{"setup_finished"}); r.Values["setup_finished"] != false {
			t.Fatalf("setup_finished after the stop: %v, want false (the fake must be PyLabRobot-like)", r.Values)
		}
		rr, err := f.dev.Reset(ctx)
		if !rerun {
			if err == nil || !strings.Contains(err.Error(), "setup_finished is false") || f.state(t) != mhp.StateEStop {
				t.Fatalf("reset with reset_setup off: %+v %v (state %s), want refused naming setup_finished", rr, err, f.state(t))
			}
			if n := len(b.Submitted("setup")); n != 0 {
				t.Fatalf("setup submitted %d times with reset_setup off", n)
			}
			continue
		}
		if err != nil || !rr.Verified || rr.State != mhp.StateIdle {
			t.Fatalf("reset: %+v %v, want verified idle", rr, err)
		}
		if n := len(b.Submitted("setup")); n != 1 {
			t.Fatalf("setup submitted %d times by the reset, want 1", n)
		}
		if r, _ := f.dev.Read(ctx, []string{"setup_finished"}); r.Values["setup_finished"] != true {
			t.Fatalf("setup_finished after the reset: %v", r.Values)
		}
		if j := f.finish(t, f.invoke(t, conformance.ActionQuick, nil)); j.State != mhp.JobDone {
			t.Fatalf("quick after the reset: %+v", j)
		}
	}
}

// TestStartsBeforeBridge: with the bridge down, the adapter serves the
// cached /describe, reports the backend down, refuses actuation not_started
// without a fault, and works when the bridge comes back; fail_fast and a
// missing cache refuse to start.
func TestStartsBeforeBridge(t *testing.T) {
	ctx := context.Background()
	cache := filepath.Join(t.TempDir(), "bridge.descriptor.json")
	first := plrtest.NewBridge()
	addr := strings.TrimPrefix(first.URL, "http://")
	cfg := fastConfig(pylabrobot.ModeBridge, first.URL)
	cfg.Device = mhp.DeviceInfo{ID: "plr-01", Class: "liquid_handler"}
	cfg.Link = adapters.LinkConfig{RetryMin: 20 * time.Millisecond, RetryMax: 100 * time.Millisecond, DescriptorCache: cache}
	d, err := pylabrobot.New(ctx, cfg, pylabrobot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := d.Descriptor()
	_ = d.Close()
	first.Close()

	for want, mut := range map[string]func(*pylabrobot.Config){
		"fail_fast":        func(c *pylabrobot.Config) { c.Link.FailFast = true },
		"descriptor_cache": func(c *pylabrobot.Config) { c.Link.DescriptorCache = "" },
	} {
		c := cfg
		mut(&c)
		if _, err := pylabrobot.New(ctx, c, pylabrobot.Options{}); err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("start with the bridge down: %v, want a refusal naming %s", err, want)
		}
	}
	f := start(t, cfg)
	if !adapters.SameDescription(f.drv.Descriptor().Actions, want.Actions) {
		t.Fatal("the cached description differs from the bridge's")
	}
	if p, _ := f.dev.Ping(ctx); p.Backend == nil || p.Backend.Connected {
		t.Fatalf("ping backend %+v, want connected:false", p.Backend)
	}
	_, err = f.dev.Invoke(ctx, mhp.InvokeRequest{Name: conformance.ActionQuick})
	if e, ok := mhp.AsError(err); !ok || e.Data["outcome"] != mhp.OutcomeNotStarted {
		t.Fatalf("invoke with the bridge down: %v, want not_started", err)
	}
	if f.state(t) != mhp.StateIdle {
		t.Fatalf("state %s with the bridge down", f.state(t))
	}
	back := plrtest.NewBridgeAt(addr)
	t.Cleanup(back.Close)
	conformance.EventuallyWithin(t, "the link up", patience, func() bool { l := f.drv.Link(); return l != nil && l.Connected })
	if j := f.finish(t, f.invoke(t, conformance.ActionQuick, nil)); j.State != mhp.JobDone {
		t.Fatalf("quick after the bridge came back: %+v", j)
	}
	// An idle drop latches nothing.
	back.Close()
	if r, _ := f.dev.Read(ctx, nil); r == nil {
		t.Fatal("read failed")
	}
	conformance.EventuallyWithin(t, "the link down", patience, func() bool { l := f.drv.Link(); return l != nil && !l.Connected })
	if f.state(t) != mhp.StateIdle {
		t.Fatalf("state %s after an idle drop, want idle", f.state(t))
	}
}

// TestUnionResourceParams: a Sequence[Union[TipSpot, Trash]] parameter is
// described as an array of deck resource names with the classes it admits,
// and a Union of resources and a coordinate lists its alternatives; neither
// is a bare "any".
func TestUnionResourceParams(t *testing.T) {
	f, b := bridgeFixture(t, nil)
	desc := f.drv.Descriptor()
	drop, ok := desc.Action("drop_tips")
	if !ok {
		t.Fatal("no drop_tips")
	}
	p, _ := drop.Params.Get("tip_spots")
	if p.Type != mhp.TypeArray || p.Items == nil || p.Items.Type != mhp.TypeString ||
		!strings.Contains(p.Notes, "names of deck resources (TipSpot or Trash)") {
		t.Fatalf("tip_spots shape %+v (items %+v), want an array of resource names naming TipSpot or Trash", p, p.Items)
	}
	mv, _ := desc.Action("move_plate")
	to, _ := mv.Params.Get("to")
	// One resource alternative naming both classes: before the fix each
	// class repeated "a deck resource name".
	if !strings.Contains(to.Notes, "a deck resource name (ResourceStack or ResourceHolder)") || !strings.Contains(to.Notes, "Coordinate") ||
		strings.Count(to.Notes, "a deck resource name") != 1 {
		t.Fatalf("move_plate.to notes %q, want its alternatives, each once", to.Notes)
	}
	// Each class is named once: before, a trailing "python type Union[...]"
	// listed them all again.
	for _, class := range []string{"ResourceStack", "ResourceHolder", "Coordinate"} {
		if n := strings.Count(to.Notes, class); n != 1 {
			t.Errorf("move_plate.to notes %q name %s %d times, want once", to.Notes, class, n)
		}
	}
	if plate, _ := mv.Params.Get("plate"); plate.Notes != "name of a deck resource (Plate)" {
		t.Errorf("move_plate.plate notes %q", plate.Notes)
	}
	// The names go to the bridge as names; plrbridge resolves them.
	j := f.finish(t, f.invoke(t, "drop_tips", map[string]any{"tip_spots": []any{"tips_A1", "trash"}}))
	if j.State != mhp.JobDone {
		t.Fatalf("drop_tips: %+v", j)
	}
	sub := b.Submitted("drop_tips")
	if len(sub) != 1 || len(sub[0]["tip_spots"].([]any)) != 2 {
		t.Fatalf("submitted %v", sub)
	}
}

// TestLegacyStartsBeforeServer: the legacy server's API is fixed, so the
// adapter starts without it (no cache needed), reports it down, refuses
// not_started, and connects when it comes up.
func TestLegacyStartsBeforeServer(t *testing.T) {
	ctx := context.Background()
	first := plrtest.NewLegacyServer()
	addr := strings.TrimPrefix(first.URL, "http://")
	first.Close()
	cfg := fastConfig(pylabrobot.ModeLegacy, "http://"+addr)
	cfg.Link = adapters.LinkConfig{RetryMin: 20 * time.Millisecond, RetryMax: 100 * time.Millisecond}
	f := start(t, cfg)
	if p, _ := f.dev.Ping(ctx); p.Backend == nil || p.Backend.Connected {
		t.Fatalf("ping backend %+v, want connected:false", p.Backend)
	}
	_, err := f.dev.Invoke(ctx, mhp.InvokeRequest{Name: "setup"})
	if e, ok := mhp.AsError(err); !ok || e.Data["outcome"] != mhp.OutcomeNotStarted {
		t.Fatalf("invoke with the server down: %v, want not_started", err)
	}
	back := plrtest.NewLegacyServerAt(addr)
	t.Cleanup(back.Close)
	conformance.EventuallyWithin(t, "the link up", patience, func() bool { l := f.drv.Link(); return l != nil && l.Connected })
	if f.state(t) != mhp.StateIdle {
		t.Fatalf("state %s", f.state(t))
	}
}

// lockedBuffer is a log sink the test reads while the link writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestLinkClockAndLogger: the reconnect backoff runs on Options.LinkClock
// (no probe until that clock reaches the retry) and link changes go to
// Options.Logger.
func TestLinkClockAndLogger(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	first := plrtest.NewLegacyServer()
	addr := strings.TrimPrefix(first.URL, "http://")
	first.Close()
	cfg := fastConfig(pylabrobot.ModeLegacy, "http://"+addr)
	cfg.Device = mhp.DeviceInfo{ID: "plr-01"}
	cfg.Link = adapters.LinkConfig{RetryMin: time.Minute, RetryMax: time.Minute}
	linkClock := clock.NewManual(time.Now())
	var logs lockedBuffer
	d, err := pylabrobot.New(ctx, cfg, pylabrobot.Options{Options: adapters.Options{LinkClock: linkClock,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))}})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if linkClock.Pending() != 1 {
		t.Fatalf("%d timers on the link clock, want the one reconnect", linkClock.Pending())
	}
	back := plrtest.NewLegacyServerAt(addr)
	defer back.Close()
	if l := d.Link(); l == nil || l.Connected {
		t.Fatalf("link %+v before the link clock reached the retry, want down", l)
	}
	linkClock.Advance(time.Minute)
	conformance.EventuallyWithin(t, "the link up", patience, func() bool { l := d.Link(); return l != nil && l.Connected })
	if s := logs.String(); !strings.Contains(s, "pylabrobot legacy http://"+addr) {
		t.Fatalf("the options' logger got %q, want the link's changes", s)
	}
}
