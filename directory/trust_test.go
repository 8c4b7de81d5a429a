package directory_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/directory"
)

type countingDescriber struct{ calls atomic.Int32 }

func (c *countingDescriber) DescribeCard(context.Context, string) (*mhp.Description, error) {
	c.calls.Add(1)
	return nil, context.Canceled
}

// A stdio: card is answered unreachable with the reason, and the pinger
// (which would start its command) is never asked about it.
func TestStdioCardsAreNeverPinged(t *testing.T) {
	cards := []directory.Card{
		{DeviceInfo: mhp.DeviceInfo{ID: "evil-01", Class: "thermocycler"}, Target: "stdio:touch /tmp/pwned"},
		{DeviceInfo: mhp.DeviceInfo{ID: "evil-02", Class: "thermocycler"}, Target: "  stdio:touch /tmp/pwned"},
		{DeviceInfo: mhp.DeviceInfo{ID: "good-01", Class: "thermocycler"}, Target: "http://good"},
	}
	var mu sync.Mutex
	var pinged []string
	pinger := directory.PingerFunc(func(_ context.Context, target string) (mhp.DeviceState, error) {
		mu.Lock()
		defer mu.Unlock()
		pinged = append(pinged, target)
		return mhp.StateIdle, nil
	})
	d, err := directory.New(directory.Config{Index: directory.NewIndex(cards), Pinger: pinger})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := d.Search(ctx, directory.Query{Class: "thermocycler"})
	if err != nil || len(res) != 3 {
		t.Fatalf("search: %+v %v", res, err)
	}
	for _, r := range res {
		if r.ID == "good-01" {
			if r.State != mhp.StateIdle {
				t.Errorf("good-01: %+v", r)
			}
			continue
		}
		if r.State != mhp.StateUnreachable || r.Error != directory.NotPinged {
			t.Errorf("%s: state %q error %q, want unreachable with %q", r.ID, r.State, r.Error, directory.NotPinged)
		}
	}
	idle, err := d.Search(ctx, directory.Query{Class: "thermocycler", State: "idle"})
	if err != nil || len(idle) != 1 || idle[0].ID != "good-01" {
		t.Fatalf("idle search matched a stdio card: %+v %v", idle, err)
	}
	got, err := d.Get(ctx, "evil-01")
	if err != nil || got.State != mhp.StateUnreachable || got.Error != directory.NotPinged {
		t.Fatalf("get: %+v %v", got, err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, p := range pinged {
		if directory.IsCommandTarget(p) {
			t.Fatalf("the pinger was asked about %q", p)
		}
	}
	// An operator's own name=target map may opt in.
	trusted, _ := directory.New(directory.Config{Index: directory.NewIndex(cards[:1]), Pinger: directory.PingerFunc(
		func(context.Context, string) (mhp.DeviceState, error) { return mhp.StateBusy, nil }), PingStdio: true})
	if r, err := trusted.Get(ctx, "evil-01"); err != nil || r.State != mhp.StateBusy {
		t.Fatalf("PingStdio: %+v %v", r, err)
	}
}

func TestCrawlNeverStartsStdioTargets(t *testing.T) {
	var desc countingDescriber
	x := directory.NewIndex(nil)
	res := directory.Crawl(context.Background(), x, &desc, []string{"stdio:touch /tmp/pwned", "stdio:sh -c 'id'"})
	if desc.calls.Load() != 0 || x.Len() != 0 {
		t.Fatalf("crawl described %d stdio targets, indexed %d", desc.calls.Load(), x.Len())
	}
	for _, r := range res {
		if r.Err == nil || !strings.Contains(r.Err.Error(), "never starts") {
			t.Fatalf("crawl of %s: %v", r.Target, r.Err)
		}
	}
}

func TestUnknownIDIsNotEchoedWhole(t *testing.T) {
	d, _ := directory.New(directory.Config{Index: directory.NewIndex(nil)})
	id := strings.Repeat("x", 900<<10)
	_, err := d.Get(context.Background(), id)
	me, ok := mhp.AsError(err)
	if !ok || me.Code != mhp.CodeUnknownName {
		t.Fatalf("get of an unknown id: %v", err)
	}
	if b, _ := json.Marshal(me); len(b) > 2048 {
		t.Fatalf("the error echoes %d bytes of a %d-byte id", len(b), len(id))
	}
}
