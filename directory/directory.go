package directory

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/openmhp/mhp-go"
)

// maxEchoedID caps an id echoed back in an error.
const maxEchoedID = 256

// Pinger asks a device for its live state.
type Pinger interface {
	Ping(ctx context.Context, target string) (mhp.DeviceState, error)
}

// PingerFunc adapts a function to Pinger.
type PingerFunc func(ctx context.Context, target string) (mhp.DeviceState, error)

// Ping calls f.
func (f PingerFunc) Ping(ctx context.Context, target string) (mhp.DeviceState, error) {
	return f(ctx, target)
}

// Config configures a Directory; zero fields take the defaults named.
type Config struct {
	// Index holds the cards; required.
	Index *Index
	// Pinger fills in live state; required unless every query passes live:false.
	Pinger Pinger
	// PingTimeout bounds each ping; default 500ms.
	PingTimeout time.Duration
	// Wave is how many candidates are pinged at a time; default 16.
	Wave int
	// MaxPings bounds the pings of one search; default 256.
	MaxPings int
	// DefaultLimit is the result count when a query gives none; default 5. MaxLimit caps it; default 50.
	DefaultLimit, MaxLimit int
	// PingStdio lets the Pinger see "stdio:" targets. Leave it false unless
	// every card's target is the operator's own (a name=target map): pinging
	// a stdio target starts its command, and a directory built from a
	// manifest, probes or the network must never run one. Without it such
	// cards are answered unreachable without a ping (see NotPinged).
	PingStdio bool
}

// NotPinged is the error of a stdio: card a directory does not ping: it would
// have to start the card's command on the directory's host.
const NotPinged = "not pinged: its target is a stdio: command, which a directory never starts; " +
	"only the operator who runs that command can reach the device"

// IsCommandTarget reports whether a target is a command line ("stdio:…"):
// reaching it means starting a process on the host that dials it.
func IsCommandTarget(target string) bool {
	return strings.HasPrefix(strings.TrimSpace(target), "stdio:")
}

// Validate reports a missing index.
func (c *Config) Validate() error {
	if c.Index == nil {
		return fmt.Errorf("directory: Config.Index is required")
	}
	return nil
}

// Directory answers directory/search and directory/get.
type Directory struct{ cfg Config }

// New validates cfg and applies defaults.
func New(cfg Config) (*Directory, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.PingTimeout <= 0 {
		cfg.PingTimeout = 500 * time.Millisecond
	}
	if cfg.Wave <= 0 {
		cfg.Wave = 16
	}
	if cfg.MaxPings <= 0 {
		cfg.MaxPings = 256
	}
	if cfg.DefaultLimit <= 0 {
		cfg.DefaultLimit = 5
	}
	if cfg.MaxLimit <= 0 {
		cfg.MaxLimit = 50
	}
	return &Directory{cfg: cfg}, nil
}

// Index returns the directory's index.
func (d *Directory) Index() *Index { return d.cfg.Index }

// Query is directory/search's params.
type Query struct {
	Query    string   `json:"query,omitempty"`
	Class    string   `json:"class,omitempty"`
	State    string   `json:"state,omitempty"`
	Location string   `json:"location,omitempty"`
	Tags     []string `json:"tags,omitempty"`
	Limit    int      `json:"limit,omitempty"`
	// Live false skips pinging (identity only); default true.
	Live *bool `json:"live,omitempty"`
}

// Result is one device found: its card, live state and score.
type Result struct {
	Card
	// State is the live state from a ping, "unreachable", or empty when not pinged.
	State mhp.DeviceState `json:"state,omitempty"`
	Score float64         `json:"score"`
	// Error says why a device is unreachable.
	Error string `json:"error,omitempty"`
}

var states = map[string]bool{string(mhp.StateIdle): true, string(mhp.StateBusy): true, string(mhp.StateFault): true,
	string(mhp.StateEStop): true, string(mhp.StateUnreachable): true}

// Search ranks, filters, pings and returns at most Limit results.
func (d *Directory) Search(ctx context.Context, q Query) ([]Result, error) {
	live := q.Live == nil || *q.Live
	if q.State != "" && !states[q.State] {
		return nil, mhp.Errorf(mhp.CodeInvalidParams, "state %q is not one of idle, busy, fault, estop, unreachable", q.State).With(mhp.DataField, "state")
	}
	if q.State != "" && !live {
		return nil, mhp.Errorf(mhp.CodeInvalidParams, "a state filter needs live state: drop live:false").With(mhp.DataField, "live")
	}
	if q.Limit < 0 {
		return nil, mhp.Errorf(mhp.CodeInvalidParams, "limit %d is negative", q.Limit).With(mhp.DataField, "limit")
	}
	limit := q.Limit
	if limit == 0 {
		limit = d.cfg.DefaultLimit
	}
	if limit > d.cfg.MaxLimit {
		limit = d.cfg.MaxLimit
	}
	if live && d.cfg.Pinger == nil {
		return nil, mhp.Errorf(mhp.CodeNotSupported, "this directory has no way to ping devices: pass live:false")
	}
	f := Filter{Class: q.Class, Location: q.Location, Tags: q.Tags}
	if !live {
		ranked := d.cfg.Index.Rank(q.Query, f, limit)
		out := make([]Result, len(ranked))
		for i, s := range ranked {
			out[i] = Result{Card: s.Card, Score: s.Score}
		}
		return out, nil
	}
	if q.State == "" {
		ranked := d.cfg.Index.Rank(q.Query, f, limit)
		return d.pingAll(ctx, ranked), nil
	}
	// With a state filter, ping the best candidates in waves until enough match.
	ranked := d.cfg.Index.Rank(q.Query, f, d.cfg.MaxPings)
	var out []Result
	for start := 0; start < len(ranked) && len(out) < limit; start += d.cfg.Wave {
		end := min(start+d.cfg.Wave, len(ranked))
		for _, r := range d.pingAll(ctx, ranked[start:end]) {
			if string(r.State) == q.State && len(out) < limit {
				out = append(out, r)
			}
		}
		if ctx.Err() != nil {
			break
		}
	}
	return out, nil
}

// Get returns one device by id, always pinged.
func (d *Directory) Get(ctx context.Context, id string) (*Result, error) {
	c, ok := d.cfg.Index.Card(id)
	if !ok {
		short := mhp.Truncate(id, maxEchoedID)
		return nil, mhp.Errorf(mhp.CodeUnknownName, "no device %q in the directory", short).With(mhp.DataKind, "device").With(mhp.DataName, short)
	}
	if d.cfg.Pinger == nil {
		return &Result{Card: c}, nil
	}
	r := d.pingAll(ctx, []Scored{{Card: c}})
	return &r[0], nil
}

// pingAll pings every card in parallel with the ping timeout.
func (d *Directory) pingAll(ctx context.Context, cards []Scored) []Result {
	out := make([]Result, len(cards))
	var wg sync.WaitGroup
	for i, s := range cards {
		out[i] = Result{Card: s.Card, Score: s.Score}
		if !d.cfg.PingStdio && IsCommandTarget(s.Card.Target) {
			out[i].State, out[i].Error = mhp.StateUnreachable, NotPinged
			continue
		}
		wg.Add(1)
		go func(r *Result) {
			defer wg.Done()
			pctx, cancel := context.WithTimeout(ctx, d.cfg.PingTimeout)
			defer cancel()
			st, err := d.cfg.Pinger.Ping(pctx, r.Target)
			if err != nil {
				r.State, r.Error = mhp.StateUnreachable, err.Error()
				return
			}
			r.State = st
		}(&out[i])
	}
	wg.Wait()
	return out
}
