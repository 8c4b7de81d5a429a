package opcua

import (
	"fmt"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/opcua/opcuatest"
)

// cappedSetting is a second setting on the setpoint node whose config
// states its limits, 10..20: what the server says never moves them.
var cappedSetting = fmt.Sprintf(`  - name: capped
    type: number
    node: "%s"
    limits: {min: 10, max: 20}
`, opcuatest.NodeID(conformance.SettingSetpoint))

// described is setting name's unit and limits as describe shows them.
func described(t *testing.T, d *binding.Driver, name string) *mhp.Setting {
	t.Helper()
	desc, err := mhp.AsSession(d, "s").Describe(ctxT(t), mhp.DescribeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	s, ok := desc.Setting(name)
	if !ok {
		t.Fatalf("no setting %s described", name)
	}
	return s
}

// hasRange says whether l is exactly lo..hi.
func hasRange(l *mhp.Limits, lo, hi float64) bool {
	return l != nil && l.Min != nil && l.Max != nil && *l.Min == lo && *l.Max == hi
}

// TestRefinementFollowsAChangedEURange: the server's EURange of setpoint
// changes between connections (narrowed, moved and widened, then narrowed
// inside a config range). After each reconnection describe, safety/limits
// and the limits gate follow the new range for the setting the config left
// without limits; a write outside it is refused at the limits gate with
// nothing reaching the server, one inside is applied. The setting whose
// config states 10..20 keeps 10..20 throughout, and once the EURange is
// narrower than that its writes are refused by the adapter's range check.
// Whether the server was up when the file was loaded (Probe read the first
// range) or came up later (the first connection did). Before, the first
// range stayed in describe and at the limits gate for the life of the
// process.
func TestRefinementFollowsAChangedEURange(t *testing.T) {
	for _, upAtLoad := range []bool{true, false} {
		t.Run(fmt.Sprintf("server up at load %v", upAtLoad), func(t *testing.T) {
			srv, d := loadWithServer(t, upAtLoad, "", cappedSetting)
			ctx := ctxT(t)
			dev := mhp.AsSession(d, "s")
			conformance.EventuallyWithin(t, "describe to show the first EURange 0..100", 10*time.Second, func() bool {
				return hasRange(described(t, d, conformance.SettingSetpoint).Limits, 0, 100)
			})
			for _, st := range []struct {
				lo, hi, inside, outside float64
			}{
				{0, 50, 40, 70},    // narrowed
				{5, 80, 70, 2},     // moved, wider at the top
				{0, 150, 120, 160}, // widened beyond the first range
			} {
				if err := srv.SetEURange(conformance.SettingSetpoint, st.lo, st.hi); err != nil {
					t.Fatal(err)
				}
				srv.DropConnections()
				conformance.EventuallyWithin(t, fmt.Sprintf("describe to show the EURange %g..%g", st.lo, st.hi), 10*time.Second, func() bool {
					return hasRange(described(t, d, conformance.SettingSetpoint).Limits, st.lo, st.hi)
				})
				if c := described(t, d, "capped"); !hasRange(c.Limits, 10, 20) {
					t.Fatalf("EURange %g..%g: the config's limits of capped moved: %+v", st.lo, st.hi, c.Limits)
				}
				if lim, err := dev.Limits(ctx); err != nil || !hasRange(lim.Settings[conformance.SettingSetpoint].Limits, st.lo, st.hi) {
					t.Fatalf("EURange %g..%g: safety/limits %+v %v", st.lo, st.hi, lim.Settings[conformance.SettingSetpoint], err)
				}
				linkUp(t, d)
				before, _ := srv.In.Written(conformance.SettingSetpoint)
				for _, dry := range []bool{true, false} {
					_, err := dev.Write(ctx, mhp.WriteRequest{Name: conformance.SettingSetpoint, Value: st.outside, DryRun: dry})
					if e, ok := mhp.AsError(err); !ok || e.Code != mhp.CodeLimitViolation || e.Data[mhp.DataGate] != mhp.GateLimits {
						t.Fatalf("EURange %g..%g: write %g (dry run %v): %v, want LimitViolation at the limits gate", st.lo, st.hi, st.outside, dry, err)
					}
				}
				if after, _ := srv.In.Written(conformance.SettingSetpoint); after != before {
					t.Fatalf("EURange %g..%g: the refused write reached the server: %v -> %v", st.lo, st.hi, before, after)
				}
				conformance.EventuallyWithin(t, fmt.Sprintf("a write of %g inside %g..%g", st.inside, st.lo, st.hi), 5*time.Second, func() bool {
					r, err := dev.Write(ctx, mhp.WriteRequest{Name: conformance.SettingSetpoint, Value: st.inside})
					return err == nil && r.Applied
				})
				_, err := dev.Write(ctx, mhp.WriteRequest{Name: "capped", Value: 30.0, DryRun: true})
				if e, ok := mhp.AsError(err); !ok || e.Code != mhp.CodeLimitViolation || e.Data[mhp.DataGate] != mhp.GateLimits {
					t.Fatalf("EURange %g..%g: capped 30 is outside the config's 10..20: %v", st.lo, st.hi, err)
				}
			}
			// Narrower than the config's 10..20: the config is wrong for this
			// server now; its limits still do not move, and the adapter's own
			// check refuses capped's writes.
			if err := srv.SetEURange(conformance.SettingSetpoint, 0, 15); err != nil {
				t.Fatal(err)
			}
			srv.DropConnections()
			conformance.EventuallyWithin(t, "describe to show the EURange 0..15", 10*time.Second, func() bool {
				return hasRange(described(t, d, conformance.SettingSetpoint).Limits, 0, 15)
			})
			if c := described(t, d, "capped"); !hasRange(c.Limits, 10, 20) {
				t.Fatalf("the config's limits of capped moved to the narrower EURange: %+v", c.Limits)
			}
			linkUp(t, d)
			_, err := dev.Write(ctx, mhp.WriteRequest{Name: "capped", Value: 12.0})
			if e, ok := mhp.AsError(err); !ok || e.Code != mhp.CodeServerError || e.Data["reason"] != "config_range" {
				t.Fatalf("capped 12 with its config range wider than the EURange 0..15: %v, want the adapter's config_range refusal", err)
			}
		})
	}
}

// TestNodeRefinementFollowsARestartedServersRange: node-opcua 2.186.4
// restarted on its port with Plant.Setpoint's EURange moved from 0..100 to
// 0..50: after the reconnection describe and the limits gate show 0..50
// for the setting the config left without limits (a dry run of 70 is
// refused at the limits gate), a write inside it is applied, and the
// setting whose config states 10..20 keeps 10..20.
func TestNodeRefinementFollowsARestartedServersRange(t *testing.T) {
	p := startNode(t)
	cfg := plcConfig(p.url)
	cfg.Settings[0].Unit, cfg.Settings[0].Interlocks = "", nil
	cfg.Settings = append(cfg.Settings, SettingItem{Setting: mhp.Setting{Name: "capped", Type: mhp.TypeNumber, Limits: mhp.Range(10, 20)},
		Node: testNS + "Plant.Setpoint"})
	d := startDriver(t, cfg, nil)
	linkUp(t, d)
	conformance.EventuallyWithin(t, "describe to show node-opcua's EURange 0..100", 10*time.Second, func() bool {
		return hasRange(described(t, d, "setpoint").Limits, 0, 100)
	})
	p.kill()
	p.env = []string{"MHP_EURANGE=0,50"}
	p.start()
	conformance.EventuallyWithin(t, "describe to show the restarted server's EURange 0..50", 60*time.Second, func() bool {
		return hasRange(described(t, d, "setpoint").Limits, 0, 50)
	})
	if c := described(t, d, "capped"); !hasRange(c.Limits, 10, 20) {
		t.Fatalf("the config's limits of capped moved: %+v", c.Limits)
	}
	linkUp(t, d)
	ctx := ctxT(t)
	dev := mhp.AsSession(d, "s")
	_, err := dev.Write(ctx, mhp.WriteRequest{Name: "setpoint", Value: 70.0, DryRun: true})
	if e, ok := mhp.AsError(err); !ok || e.Code != mhp.CodeLimitViolation || e.Data[mhp.DataGate] != mhp.GateLimits {
		t.Fatalf("setpoint 70 outside the new EURange 0..50: %v, want LimitViolation at the limits gate", err)
	}
	conformance.EventuallyWithin(t, "a write of 40 inside 0..50", 10*time.Second, func() bool {
		r, err := dev.Write(ctx, mhp.WriteRequest{Name: "setpoint", Value: 40.0})
		return err == nil && r.Applied
	})
}
