package binding

import (
	"context"
	"log/slog"
	"testing"
	"time"
)

// TestDriverTemplateShared: drivers of one spec and one set of options
// share one template (the options, the signals a reset must read, the
// descriptor lists their signal and action specs point into) while each
// keeps its own hooks and device info; other options make another
// template; a caller changing the recovery set it was handed changes no
// driver.
func TestDriverTemplateShared(t *testing.T) {
	mk := func(id string, mod func(*Config)) *Driver {
		cfg := frozenTestConfig(id, 100, 1.0)
		cfg.Signals[0].Spec.RequiredForRecovery = true
		if mod != nil {
			mod(&cfg)
		}
		d, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return d
	}
	var readB bool
	a := mk("a", nil)
	b := mk("b", func(c *Config) {
		c.Signals[0].Read = func(context.Context) (Sample, error) { readB = true; return Sample{Value: 2.0}, nil }
	})
	c := mk("c", func(c *Config) { c.HookTimeout = time.Minute })
	l := mk("l", func(c *Config) { c.Logger = slog.New(slog.DiscardHandler) })

	if a.tmpl != b.tmpl || a.cfg.options != b.cfg.options || a.signals.at("t").Spec != b.signals.at("t").Spec ||
		a.actions.at("run").Spec != b.actions.at("run").Spec || a.signals.at("t").Spec != &a.desc.Signals[0] {
		t.Fatal("drivers of one spec and one set of options do not share their template")
	}
	if a.tmpl == c.tmpl || c.cfg.HookTimeout != time.Minute || a.cfg.HookTimeout != 30*time.Second {
		t.Fatalf("a driver with another HookTimeout shares the template (hook timeouts %s, %s)", a.cfg.HookTimeout, c.cfg.HookTimeout)
	}
	if a.tmpl == l.tmpl || l.cfg.Logger == a.cfg.Logger {
		t.Fatal("a driver with another logger shares the template")
	}
	if a.desc.ID != "a" || b.desc.ID != "b" || a.cfg.Device.ID != "a" {
		t.Fatalf("device info shared: %q %q %q", a.desc.ID, b.desc.ID, a.cfg.Device.ID)
	}
	if r, err := b.Read(context.Background(), []string{"t"}); err != nil || r.Values["t"] != 2.0 || !readB {
		t.Fatalf("b's own Read hook: %v %v", r, err)
	}
	if r, err := a.Read(context.Background(), []string{"t"}); err != nil || r.Values["t"] != 1.0 {
		t.Fatalf("a's own Read hook: %v %v", r, err)
	}
	rs := a.RecoverySignals()
	if !rs["t"] {
		t.Fatalf("recovery signals %v, want t", rs)
	}
	rs["t"] = false
	delete(rs, "t")
	if !b.RecoverySignals()["t"] || !a.required["t"] {
		t.Fatal("a change to the recovery set handed out reached the shared one")
	}
}
