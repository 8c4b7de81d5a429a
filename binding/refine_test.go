package binding

import (
	"context"
	"io"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/openmhp/mhp-go"
)

// refineTestConfig: signal t without a unit, signal u with one; setting sp
// with the config's limits 0..100, setting free without limits, setting on
// a boolean. writes counts the values that reached the backend.
func refineTestConfig(id string, writes *atomic.Int64) Config {
	read := func(context.Context) (Sample, error) { return Sample{Value: 1.0}, nil }
	write := func(context.Context, any) (WriteStatus, error) {
		writes.Add(1)
		return Applied, nil
	}
	return Config{
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Device: mhp.DeviceInfo{ID: id, Class: "test"},
		Signals: []Signal{{Spec: mhp.Signal{Name: "t", Type: mhp.TypeNumber}, Read: read},
			{Spec: mhp.Signal{Name: "u", Type: mhp.TypeNumber, Unit: "K"}, Read: read}},
		Settings: []Setting{
			{Spec: mhp.Setting{Name: "sp", Type: mhp.TypeNumber, Limits: mhp.Range(0, 100)}, Write: write},
			{Spec: mhp.Setting{Name: "free", Type: mhp.TypeNumber}, Write: write},
			{Spec: mhp.Setting{Name: "on", Type: mhp.TypeBoolean}, Write: write},
		},
	}
}

// serverSays is what an OPC UA server's EngineeringUnits and EURange say
// of every item: a unit for each, the range 0..50 for both numbers.
func serverSays() Refinement {
	return Refinement{
		SignalUnits:  map[string]string{"t": "degC", "u": "degC"},
		SettingUnits: map[string]string{"sp": "degC", "free": "degC"},
		Limits:       map[string]*mhp.Limits{"sp": mhp.Range(0, 50), "free": mhp.Range(0, 50)},
	}
}

func newRefineDriver(t *testing.T, id string) (*Driver, *atomic.Int64) {
	t.Helper()
	var writes atomic.Int64
	d, err := New(refineTestConfig(id, &writes))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, &writes
}

// Refine fills in units and limits the specs leave open and nothing else:
// the config's 0..100 stays (never loosened, nor changed), the unbounded
// setting is held to 0..50 by the limits gate (dry run and write alike,
// nothing reaching the backend), describe, safety/limits and Descriptor
// show the refined specs, and a second identical Refine changes nothing.
func TestRefineFillsInWhatTheSpecLeftOpen(t *testing.T) {
	d, writes := newRefineDriver(t, "r")
	ctx := mhp.WithSession(context.Background(), "s")
	if _, err := d.Write(ctx, mhp.WriteRequest{Name: "free", Value: 80.0}); err != nil {
		t.Fatalf("before the refinement: %v", err)
	}
	changed, err := d.Refine(serverSays())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"setting free", "setting sp", "signal t"}
	if len(changed) != len(want) {
		t.Fatalf("changed %v, want %v", changed, want)
	}
	for i := range want {
		if changed[i] != want[i] {
			t.Fatalf("changed %v, want %v", changed, want)
		}
	}
	desc, err := d.Describe(ctx, mhp.DescribeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	sp, _ := desc.Setting("sp")
	free, _ := desc.Setting("free")
	ts, _ := desc.Signal("t")
	us, _ := desc.Signal("u")
	switch {
	case ts.Unit != "degC" || us.Unit != "K":
		t.Fatalf("signal units %q %q, want degC (filled in) and K (the config's)", ts.Unit, us.Unit)
	case sp.Unit != "degC" || *sp.Limits.Max != 100:
		t.Fatalf("sp %+v %+v: want the unit filled in and the config's limits 0..100 kept", sp, sp.Limits)
	case free.Limits == nil || *free.Limits.Max != 50:
		t.Fatalf("free's limits %+v, want 0..50", free.Limits)
	}
	if lim, _ := d.Limits(ctx); lim.Settings["free"].Limits == nil || lim.Settings["free"].Unit != "degC" {
		t.Fatalf("safety/limits %+v", lim.Settings["free"])
	}
	if c := d.Descriptor(); c.Settings[1].Limits == nil || *c.Settings[1].Limits.Max != 50 {
		t.Fatalf("Descriptor %+v", c.Settings[1])
	}
	before := writes.Load()
	for _, dry := range []bool{true, false} {
		_, err := d.Write(ctx, mhp.WriteRequest{Name: "free", Value: 80.0, DryRun: dry})
		if e, ok := mhp.AsError(err); !ok || e.Code != mhp.CodeLimitViolation || e.Data[mhp.DataGate] != mhp.GateLimits {
			t.Fatalf("write 80 beyond the refined 0..50 (dry %v): %v", dry, err)
		}
	}
	if r, err := d.Write(ctx, mhp.WriteRequest{Name: "sp", Value: 80.0}); err != nil || !r.Applied {
		t.Fatalf("sp 80 is inside the config's limits, which the refinement must not change: %+v %v", r, err)
	}
	if got := writes.Load() - before; got != 1 {
		t.Fatalf("%d writes reached the backend, want 1 (sp's)", got)
	}
	again, err := d.Refine(serverSays())
	if err != nil || len(again) != 0 {
		t.Fatalf("a second refinement changed %v (%v)", again, err)
	}
}

// A refinement that names an item the driver lacks, or carries limits
// that cannot apply, is refused and changes nothing.
func TestRefineRefusesWhatCannotApply(t *testing.T) {
	nan := math.NaN()
	cases := []struct {
		name string
		r    Refinement
		code mhp.Code
	}{
		{"unknown signal", Refinement{SignalUnits: map[string]string{"nope": "K"}}, mhp.CodeUnknownName},
		{"unknown setting", Refinement{SettingUnits: map[string]string{"nope": "K"}}, mhp.CodeUnknownName},
		{"limits of an unknown setting", Refinement{Limits: map[string]*mhp.Limits{"nope": mhp.Range(0, 1)}}, mhp.CodeUnknownName},
		{"min above max", Refinement{Limits: map[string]*mhp.Limits{"free": mhp.Range(5, 1)}}, mhp.CodeInvalidValue},
		{"NaN bound", Refinement{Limits: map[string]*mhp.Limits{"free": {Min: &nan}}}, mhp.CodeInvalidValue},
		{"numeric limits on a boolean", Refinement{Limits: map[string]*mhp.Limits{"on": mhp.Range(0, 1)}}, mhp.CodeInvalidValue},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, _ := newRefineDriver(t, "x")
			// A valid part beside the bad one: all or nothing.
			c.r.SignalUnits = mergeUnits(c.r.SignalUnits, "t", "degC")
			_, err := d.Refine(c.r)
			if e, ok := mhp.AsError(err); !ok || e.Code != c.code {
				t.Fatalf("got %v, want code %d", err, c.code)
			}
			if d.refined.Load() != nil || d.Descriptor().Signals[0].Unit != "" {
				t.Fatal("a refused refinement changed the driver")
			}
		})
	}
}

func mergeUnits(m map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for a, b := range m {
		out[a] = b
	}
	return out
}

// Two drivers built from one config share its frozen specs. Refining one
// leaves the other, and the shared copy, as they were; a third driver
// refined to the same content shares the refined copy with the first.
func TestRefinedSpecsAreCopiesNotEdits(t *testing.T) {
	a, _ := newRefineDriver(t, "a")
	b, bWrites := newRefineDriver(t, "b")
	c, _ := newRefineDriver(t, "c")
	sharedFree := a.settings.at("free").Spec
	if b.settings.at("free").shape != a.settings.at("free").shape || &a.desc.Settings[0] != &b.desc.Settings[0] {
		t.Fatal("drivers of one config do not share their frozen specs")
	}
	for _, d := range []*Driver{a, c} {
		if _, err := d.Refine(serverSays()); err != nil {
			t.Fatal(err)
		}
	}
	if sharedFree.Limits != nil || a.settings.at("free").Spec.Limits != nil || a.desc.Settings[1].Limits != nil {
		t.Fatal("the refinement edited the shared frozen spec")
	}
	bd := b.Descriptor()
	if bd.Settings[1].Limits != nil || bd.Signals[0].Unit != "" || b.refined.Load() != nil {
		t.Fatalf("refining a changed b: %+v", bd.Settings[1])
	}
	ctx := mhp.WithSession(context.Background(), "s")
	if _, err := b.Write(ctx, mhp.WriteRequest{Name: "free", Value: 80.0}); err != nil || bWrites.Load() != 1 {
		t.Fatalf("b's gates changed with a's refinement: %v", err)
	}
	ra, rc := a.refined.Load(), c.refined.Load()
	if ra.settings.at("free").shape != rc.settings.at("free").shape || &ra.desc.Settings[0] != &rc.desc.Settings[0] {
		t.Fatal("drivers refined to one content do not share the refined copy")
	}
	if ra.settings.items[1].Write == nil || &ra.settings.items[0] == &a.settings.items[0] {
		t.Fatal("the refined view does not hold the driver's own bindings, copied")
	}
}

// Writes racing a refinement (run under -race): each is judged by one
// view, old or new: accepted and sent, or refused by the limits gate with
// nothing sent; a write that starts after Refine returned is refused. Two
// refinements racing each other both land.
func TestRefineRacesWrites(t *testing.T) {
	d, writes := newRefineDriver(t, "race")
	ctx := mhp.WithSession(context.Background(), "s")
	var refinedDone atomic.Bool
	var accepted, refused, lateAccepted atomic.Int64
	underway := make(chan struct{}) // closed once writes pass the old view
	var once sync.Once
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				late := refinedDone.Load()
				_, err := d.Write(ctx, mhp.WriteRequest{Name: "free", Value: 80.0})
				switch e, _ := mhp.AsError(err); {
				case err == nil:
					if accepted.Add(1) == 20 {
						once.Do(func() { close(underway) })
					}
					if late {
						lateAccepted.Add(1)
					}
				case e != nil && e.Code == mhp.CodeLimitViolation:
					refused.Add(1)
				case e != nil && e.Code == mhp.CodeDeviceBusy:
				default:
					t.Errorf("write: %v", err)
					return
				}
				_, _ = d.Describe(ctx, mhp.DescribeRequest{})
				_, _ = d.Limits(ctx)
			}
		}()
	}
	// The writers accept until the refinement lands (or all fail early).
	go func() { wg.Wait(); once.Do(func() { close(underway) }) }()
	<-underway
	var rw sync.WaitGroup
	units := Refinement{SignalUnits: map[string]string{"t": "degC"}, SettingUnits: map[string]string{"free": "degC"}}
	limits := Refinement{Limits: map[string]*mhp.Limits{"free": mhp.Range(0, 50)}}
	for _, r := range []Refinement{units, limits} {
		rw.Add(1)
		go func() {
			defer rw.Done()
			if _, err := d.Refine(r); err != nil {
				t.Error(err)
			}
		}()
	}
	rw.Wait()
	refinedDone.Store(true)
	wg.Wait()
	if lateAccepted.Load() != 0 {
		t.Fatalf("%d writes started after Refine returned passed the old limits", lateAccepted.Load())
	}
	if writes.Load() != accepted.Load() {
		t.Fatalf("%d writes reached the backend, %d were accepted: a refused write was sent", writes.Load(), accepted.Load())
	}
	desc := d.Descriptor()
	if desc.Signals[0].Unit != "degC" || desc.Settings[1].Unit != "degC" || desc.Settings[1].Limits == nil {
		t.Fatalf("racing refinements lost one: %+v %+v", desc.Signals[0], desc.Settings[1])
	}
	if _, err := d.Write(ctx, mhp.WriteRequest{Name: "free", Value: 80.0}); err == nil {
		t.Fatal("a write beyond the refined limits passed")
	}
	t.Logf("accepted %d, refused %d", accepted.Load(), refused.Load())
}
