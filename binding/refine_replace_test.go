package binding

import (
	"context"
	"slices"
	"testing"

	"github.com/openmhp/mhp-go"
)

// TestRefineReplacesAnEarlierRefinement: what a later refinement says
// (the server's EURange narrowed, moved or widened at a later connection,
// its units renamed) replaces what an earlier one filled in: describe,
// safety/limits and the limits gate follow the latest, and a write the
// latest range refuses reaches nothing. What the config states never
// moves, whatever is refined, and an aspect or item a refinement does not
// name keeps the earlier value; an empty unit or empty limits clear
// nothing. Before, Refine filled in only what was still empty, so the
// first range stayed for the life of the driver.
func TestRefineReplacesAnEarlierRefinement(t *testing.T) {
	d, writes := newRefineDriver(t, "replace")
	ctx := mhp.WithSession(context.Background(), "s")
	if _, err := d.Refine(serverSays()); err != nil { // free 0..50, units degC
		t.Fatal(err)
	}
	free := func() *mhp.Setting {
		desc, err := d.Describe(ctx, mhp.DescribeRequest{})
		if err != nil {
			t.Fatal(err)
		}
		s, _ := desc.Setting("free")
		return s
	}
	write := func(name string, v float64) error {
		_, err := d.Write(ctx, mhp.WriteRequest{Name: name, Value: v})
		return err
	}
	refused := func(err error) bool {
		e, ok := mhp.AsError(err)
		return ok && e.Code == mhp.CodeLimitViolation && e.Data[mhp.DataGate] == mhp.GateLimits
	}
	steps := []struct {
		name    string
		r       Refinement
		changed []string
		min     float64 // free's limits after the step
		max     float64
		unit    string // free's unit after the step
		inside  float64
		outside float64
	}{
		{"narrowed", Refinement{Limits: map[string]*mhp.Limits{"free": mhp.Range(0, 30)}}, []string{"setting free"}, 0, 30, "degC", 25, 40},
		{"moved", Refinement{Limits: map[string]*mhp.Limits{"free": mhp.Range(20, 60)}}, []string{"setting free"}, 20, 60, "degC", 55, 10},
		{"units renamed, range kept", Refinement{SettingUnits: map[string]string{"free": "K"}, SignalUnits: map[string]string{"t": "K"}},
			[]string{"setting free", "signal t"}, 20, 60, "K", 55, 10},
		{"widened", Refinement{Limits: map[string]*mhp.Limits{"free": mhp.Range(0, 80)}}, []string{"setting free"}, 0, 80, "K", 75, 90},
		{"empty says nothing", Refinement{Limits: map[string]*mhp.Limits{"free": {}}, SettingUnits: map[string]string{"free": ""}}, nil, 0, 80, "K", 75, 90},
		{"the same again", Refinement{Limits: map[string]*mhp.Limits{"free": mhp.Range(0, 80)}}, nil, 0, 80, "K", 75, 90},
		{"config's never move", Refinement{Limits: map[string]*mhp.Limits{"sp": mhp.Range(0, 10)}, SignalUnits: map[string]string{"u": "degC"}}, nil, 0, 80, "K", 75, 90},
	}
	for _, st := range steps {
		changed, err := d.Refine(st.r)
		if err != nil || !slices.Equal(changed, st.changed) {
			t.Fatalf("%s: changed %v (%v), want %v", st.name, changed, err, st.changed)
		}
		s := free()
		if s.Limits == nil || *s.Limits.Min != st.min || *s.Limits.Max != st.max || s.Unit != st.unit {
			t.Fatalf("%s: free described %q %+v, want %s %g..%g", st.name, s.Unit, s.Limits, st.unit, st.min, st.max)
		}
		if lim, _ := d.Limits(ctx); lim.Settings["free"].Limits == nil || *lim.Settings["free"].Limits.Max != st.max {
			t.Fatalf("%s: safety/limits %+v, want max %g", st.name, lim.Settings["free"], st.max)
		}
		before := writes.Load()
		if err := write("free", st.outside); !refused(err) {
			t.Fatalf("%s: free %g outside %g..%g: %v, want LimitViolation at the limits gate", st.name, st.outside, st.min, st.max, err)
		}
		if writes.Load() != before {
			t.Fatalf("%s: the refused write reached the backend", st.name)
		}
		if err := write("free", st.inside); err != nil {
			t.Fatalf("%s: free %g inside %g..%g: %v", st.name, st.inside, st.min, st.max, err)
		}
		if err := write("sp", 80); err != nil {
			t.Fatalf("%s: sp 80 is inside the config's 0..100, which no refinement moves: %v", st.name, err)
		}
		desc := d.Descriptor()
		if sp, _ := desc.Setting("sp"); *sp.Limits.Max != 100 {
			t.Fatalf("%s: the config's limits of sp moved: %+v", st.name, sp.Limits)
		}
		if u, _ := desc.Signal("u"); u.Unit != "K" {
			t.Fatalf("%s: the config's unit of u moved: %q", st.name, u.Unit)
		}
	}
}
