package mcpbridge

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/client"
	"github.com/openmhp/mhp-go/clock"
	"github.com/openmhp/mhp-go/directory"
)

// Card retries of Named: a device down when its card was first fetched is
// tried again at the next search after CardRetryMin, doubling up to
// CardRetryMax while it stays down.
const (
	CardRetryMin = time.Second
	CardRetryMax = time.Minute
)

// Named is a Finder over a fixed map of names to targets (mhp-mcp
// thermo=http://…): cards are fetched from the devices on the first search,
// and the names are the ids the model uses. A device that did not answer is
// indexed by its name only and its card is fetched again at later searches,
// with backoff, until it answers.
type Named struct {
	Targets map[string]string
	// Simulated names the targets the host knows to be simulated (the
	// operator's --simulated NAME): the policy's hardware gate reads it,
	// never the devices' own tags ([HostSimulated]).
	Simulated map[string]bool
	Client    client.Options
	// Clock times the card retries; default the real clock.
	Clock clock.Clock

	once    sync.Once
	lab     *client.Lab
	mu      sync.Mutex
	idx     *directory.Index
	dir     *directory.Directory
	pending map[string]*cardRetry // names whose card is not fetched yet
}

type cardRetry struct {
	next time.Time
	wait time.Duration
}

func (n *Named) init() {
	n.once.Do(func() {
		n.lab = client.NewLab(n.Targets, n.Client)
		if n.Clock == nil {
			n.Clock = clock.Real{}
		}
	})
}

// IsSimulated implements [HostSimulated].
func (n *Named) IsSimulated(id string) bool { return n.Simulated[id] }

// Get resolves a name to its target (no connection is made).
func (n *Named) Get(ctx context.Context, id string) (*directory.Result, error) {
	t, ok := n.Targets[id]
	if !ok {
		names := make([]string, 0, len(n.Targets))
		for k := range n.Targets {
			names = append(names, k)
		}
		sort.Strings(names)
		return nil, mhp.Errorf(mhp.CodeUnknownName, "no device %q (this lab has %v)", id, names).With(mhp.DataName, id)
	}
	return &directory.Result{Card: directory.Card{DeviceInfo: mhp.DeviceInfo{ID: id}, Target: t}}, nil
}

// Search indexes the devices' cards on first use (retrying the missing ones
// later), then searches them with live state.
func (n *Named) Search(ctx context.Context, q directory.Query) ([]directory.Result, error) {
	n.init()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.dir == nil {
		n.idx = directory.NewIndex(nil)
		n.pending = map[string]*cardRetry{}
		for name, target := range n.Targets {
			n.idx.Add(directory.Card{DeviceInfo: mhp.DeviceInfo{ID: name}, Target: target})
			n.pending[name] = &cardRetry{}
		}
		dir, err := directory.New(directory.Config{Index: n.idx, PingStdio: true /* the operator's own targets */, Pinger: directory.PingerFunc(n.ping)})
		if err != nil {
			return nil, err
		}
		n.dir = dir
	}
	n.fetchCards(ctx)
	return n.dir.Search(ctx, q)
}

// fetchCards fetches, in parallel, the cards due for a try.
func (n *Named) fetchCards(ctx context.Context) {
	now := n.Clock.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	got := map[string]directory.Card{}
	for name, r := range n.pending {
		if now.Before(r.next) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			d, err := n.lab.Device(cctx, name)
			if err != nil {
				return
			}
			desc, err := d.Describe(cctx, mhp.DescribeRequest{Detail: mhp.DetailCard})
			if err != nil {
				return
			}
			card := directory.CardFrom(desc, n.Targets[name])
			card.ID = name
			mu.Lock()
			got[name] = card
			mu.Unlock()
		}()
	}
	wg.Wait()
	for name, r := range n.pending {
		if card, ok := got[name]; ok {
			n.idx.Add(card)
			delete(n.pending, name)
			continue
		}
		if now.Before(r.next) {
			continue
		}
		r.wait = min(max(2*r.wait, CardRetryMin), CardRetryMax)
		r.next = now.Add(r.wait)
	}
}

func (n *Named) ping(ctx context.Context, target string) (mhp.DeviceState, error) {
	for name, t := range n.Targets {
		if t == target {
			d, err := n.lab.Device(ctx, name)
			if err != nil {
				return "", err
			}
			p, err := d.Ping(ctx)
			if err != nil {
				return "", err
			}
			return p.State, nil
		}
	}
	return "", fmt.Errorf("unknown target %s", target)
}

// Close closes the connections used for cards and pings.
func (n *Named) Close() error {
	n.init()
	return n.lab.Close()
}
