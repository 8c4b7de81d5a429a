package directory_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/directory"
)

func labCards() []directory.Card {
	return []directory.Card{
		{DeviceInfo: mhp.DeviceInfo{ID: "thermocycler-0411", Class: "thermocycler", Make: "Bio-Rad", Model: "C1000", Location: "bay 12", Tags: []string{"pcr", "heating"}},
			Notes: "96-well block.", Signals: []string{"block_temperature", "lid_closed"}, Actions: []string{"run_protocol"}, Target: "t-0411"},
		{DeviceInfo: mhp.DeviceInfo{ID: "thermocycler-0412", Class: "thermocycler", Location: "bay 12", Tags: []string{"pcr"}},
			Signals: []string{"block_temperature"}, Actions: []string{"run_protocol"}, Target: "t-0412"},
		{DeviceInfo: mhp.DeviceInfo{ID: "thermocycler-0900", Class: "thermocycler", Location: "bay 120", Tags: []string{"pcr"}},
			Signals: []string{"block_temperature"}, Actions: []string{"run_protocol"}, Target: "t-0900"},
		{DeviceInfo: mhp.DeviceInfo{ID: "arm-0003", Class: "robot_arm", Location: "bay 12", Tags: []string{"plates"}},
			Actions: []string{"pick_plate", "place_plate"}, Target: "a-0003"},
		{DeviceInfo: mhp.DeviceInfo{ID: "hotplate-0007", Class: "hotplate", Location: "bay 3", Description: "Heats flasks to 300 C"},
			Settings: []string{"target_temperature"}, Target: "h-0007"},
	}
}

func TestRankingAndExactFilters(t *testing.T) {
	x := directory.NewIndex(labCards())
	got := x.Rank("heat a 96-well plate to 95 C for PCR in bay 12", directory.Filter{}, 3)
	if len(got) != 3 || got[0].Card.ID != "thermocycler-0411" {
		t.Fatalf("ranking: %+v", got)
	}
	// Location is exact: "bay 12" never matches "bay 120".
	for _, s := range x.Rank("pcr", directory.Filter{Location: "bay 12"}, 0) {
		if s.Card.Location != "bay 12" {
			t.Fatalf("location filter let %s (%s) through", s.Card.ID, s.Card.Location)
		}
	}
	if n := len(x.Rank("", directory.Filter{Class: "thermo"}, 0)); n != 0 {
		t.Fatalf("class filter is not exact: %d matches for a prefix", n)
	}
	if got := x.Rank("", directory.Filter{Tags: []string{"pcr", "heating"}}, 0); len(got) != 1 || got[0].Card.ID != "thermocycler-0411" {
		t.Fatalf("tags filter: %+v", got)
	}
	if got := x.Rank("pick_plate", directory.Filter{}, 1); len(got) != 1 || got[0].Card.ID != "arm-0003" {
		t.Fatalf("capability name search: %+v", got)
	}
	x.Remove("arm-0003")
	if got := x.Rank("pick plate", directory.Filter{}, 0); len(got) != 0 {
		t.Fatalf("removed card still found: %+v", got)
	}
}

func TestLiveState(t *testing.T) {
	x := directory.NewIndex(labCards())
	states := map[string]mhp.DeviceState{"t-0411": mhp.StateBusy, "t-0412": mhp.StateIdle}
	pinger := directory.PingerFunc(func(ctx context.Context, target string) (mhp.DeviceState, error) {
		if s, ok := states[target]; ok {
			return s, nil
		}
		<-ctx.Done() // a dead device never answers
		return "", errors.New("no answer: " + ctx.Err().Error())
	})
	d, err := directory.New(directory.Config{Index: x, Pinger: pinger})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	idle, err := d.Search(ctx, directory.Query{Query: "pcr thermocycler", State: "idle", Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(idle) != 1 || idle[0].ID != "thermocycler-0412" || idle[0].State != mhp.StateIdle {
		t.Fatalf("idle search: %+v", idle)
	}
	all, _ := d.Search(ctx, directory.Query{Query: "pcr thermocycler", Limit: 3})
	byID := map[string]mhp.DeviceState{}
	for _, r := range all {
		byID[r.ID] = r.State
	}
	if byID["thermocycler-0411"] != mhp.StateBusy || byID["thermocycler-0900"] != mhp.StateUnreachable {
		t.Fatalf("live states: %v", byID)
	}
	off := false
	noLive, _ := d.Search(ctx, directory.Query{Query: "pcr", Live: &off})
	if len(noLive) == 0 || noLive[0].State != "" {
		t.Fatalf("live:false pinged: %+v", noLive)
	}
	if _, err := d.Search(ctx, directory.Query{State: "idle", Live: &off}); mhp.CodeOf(err) != mhp.CodeInvalidParams {
		t.Fatalf("state filter without live: %v", err)
	}
	got, err := d.Get(ctx, "thermocycler-0900")
	if err != nil || got.State != mhp.StateUnreachable {
		t.Fatalf("get dead device: %+v %v", got, err)
	}
	if _, err := d.Get(ctx, "nope"); mhp.CodeOf(err) != mhp.CodeUnknownName {
		t.Fatalf("get unknown: %v", err)
	}
}

func TestManifest(t *testing.T) {
	good := []byte("devices:\n  - {id: tc-1, class: thermocycler, location: bay 1, target: 'http://x:1'}\n")
	m, err := directory.ParseManifest("lab.yaml", good)
	if err != nil || len(m.Devices) != 1 || m.Devices[0].Location != "bay 1" {
		t.Fatalf("%+v %v", m, err)
	}
	for _, bad := range []string{
		"devices:\n  - {id: TC-1, target: x}\n",
		"devices:\n  - {id: tc-1}\n",
		"devices:\n  - {id: tc-1, target: x}\n  - {id: tc-1, target: y}\n",
	} {
		if _, err := directory.ParseManifest("lab.yaml", []byte(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func synthetic(n int) []directory.Card {
	classes := []string{"thermocycler", "robot_arm", "plate_reader", "liquid_handler", "incubator", "centrifuge", "hotplate", "microscope"}
	out := make([]directory.Card, n)
	for i := range out {
		c := classes[i%len(classes)]
		out[i] = directory.Card{DeviceInfo: mhp.DeviceInfo{ID: fmt.Sprintf("%s-%04d", c, i), Class: c,
			Location: fmt.Sprintf("bay %d", i%40+1), Tags: []string{c[:4], "lab"}},
			Signals: []string{"temperature", "door_closed"}, Actions: []string{"run", "stop"}, Target: fmt.Sprint(i)}
	}
	return out
}

func benchSearch(b *testing.B, n int) {
	x := directory.NewIndex(synthetic(n))
	b.ResetTimer()
	for b.Loop() {
		if got := x.Rank("heat a 96-well plate for pcr in bay 12 thermocycler", directory.Filter{Class: "thermocycler"}, 3); len(got) != 3 {
			b.Fatal(len(got))
		}
	}
}

func BenchmarkSearch2000(b *testing.B)   { benchSearch(b, 2000) }
func BenchmarkSearch100000(b *testing.B) { benchSearch(b, 100000) }

func TestServerAndRemote(t *testing.T) {
	d, _ := directory.New(directory.Config{Index: directory.NewIndex(labCards()),
		Pinger: directory.PingerFunc(func(ctx context.Context, target string) (mhp.DeviceState, error) { return mhp.StateIdle, nil })})
	srv := httptest.NewServer(d.Handler())
	defer srv.Close()
	r := &directory.Remote{URL: srv.URL}
	ctx := context.Background()
	res, err := r.Search(ctx, directory.Query{Query: "pcr", Class: "thermocycler", Location: "bay 12", State: "idle", Limit: 3})
	if err != nil || len(res) != 2 || res[0].Location != "bay 12" || res[1].Location != "bay 12" || res[0].State != mhp.StateIdle || res[0].Score <= 0 {
		t.Fatalf("remote search: %+v %v", res, err)
	}
	got, err := r.Get(ctx, "arm-0003")
	if err != nil || got.Target != "a-0003" {
		t.Fatalf("remote get: %+v %v", got, err)
	}
	if _, err := r.Get(ctx, "missing"); mhp.CodeOf(err) != mhp.CodeUnknownName {
		t.Fatalf("remote get unknown: %v", err)
	}
	if _, err := r.Search(ctx, directory.Query{State: "sleeping"}); mhp.CodeOf(err) != mhp.CodeInvalidParams {
		t.Fatalf("bad state: %v", err)
	}
}

// The top n of a ranking (a heap of n, filters applied before scoring) is
// the first n of the full ranking, with removed and replaced cards gone.
func TestRankTopNIsThePrefixOfTheFullRanking(t *testing.T) {
	cards := synthetic(3000)
	x := directory.NewIndex(cards)
	for i := 0; i < len(cards); i += 7 {
		x.Remove(cards[i].ID)
	}
	c := cards[10]
	c.Tags = append(c.Tags, "moved")
	c.Location = "bay 12"
	x.Add(c) // replaced: the old card is gone
	queries := []string{"thermocycler bay 12", "plate reader lab", "door_closed run", "robot arm bay 3 temperature"}
	filters := []directory.Filter{{}, {Class: "thermocycler"}, {Location: "bay 12"}, {Tags: []string{"lab"}}, {Class: "nope"}}
	for _, q := range queries {
		for _, f := range filters {
			full := x.Rank(q, f, 0)
			for _, s := range full {
				if s.Card.ID == cards[7].ID || (f.Class != "" && s.Card.Class != f.Class) ||
					(f.Location != "" && s.Card.Location != f.Location) {
					t.Fatalf("%q %+v: %s should not rank", q, f, s.Card.ID)
				}
			}
			for _, n := range []int{1, 3, 10, 50} {
				top := x.Rank(q, f, n)
				want := full[:min(n, len(full))]
				if len(top) != len(want) {
					t.Fatalf("%q %+v n=%d: %d results, want %d", q, f, n, len(top), len(want))
				}
				for i := range top {
					if top[i].Card.ID != want[i].Card.ID || top[i].Score != want[i].Score {
						t.Fatalf("%q %+v n=%d #%d: %s %.2f, want %s %.2f", q, f, n, i, top[i].Card.ID, top[i].Score, want[i].Card.ID, want[i].Score)
					}
				}
			}
			for i := 1; i < len(full); i++ {
				a, b := full[i-1], full[i]
				if a.Score < b.Score || (a.Score == b.Score && a.Card.ID > b.Card.ID) {
					t.Fatalf("%q %+v: not best first at %d: %s %.2f then %s %.2f", q, f, i, a.Card.ID, a.Score, b.Card.ID, b.Score)
				}
			}
		}
	}
}
