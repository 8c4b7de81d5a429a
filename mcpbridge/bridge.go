// Package mcpbridge is the lab's MCP server: a constant surface of nine tools
// (mhp_find, mhp_describe, mhp_read, mhp_write, mhp_invoke, mhp_job,
// mhp_estop, mhp_run, mhp_lab) whatever the number of devices, built on the
// official MCP Go SDK. Devices are found through a directory (or a map of
// named targets) and connected lazily.
//
// Approval is the host's, never the model's: an `approved` argument sent by
// the model is stripped; a confirm-gated request is put to a person through
// MCP elicitation and resent with approval only on an explicit yes; without
// elicitation it is unavailable, never silently allowed. MHP refusals come
// back as tool results with isError and the structured MHP error, so the
// model sees why and can adjust.
package mcpbridge

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/client"
	"github.com/openmhp/mhp-go/directory"
	"github.com/openmhp/mhp-go/script"
)

// Config configures a Bridge.
type Config struct {
	// Finder finds devices (directory/search) and resolves an id to its target
	// (directory/get): a directory.Remote, or Named for a fixed map.
	Finder directory.Finder
	// Dial connects to a target; default client.Dial with Client options.
	Dial func(ctx context.Context, target string) (*client.Device, error)
	// Client are the options of each device connection.
	Client client.Options
	// Script bounds mhp_run scripts.
	Script script.Options
	// Updates is how many notifications mhp_lab op=updates keeps; default 256.
	Updates int
	// CallTimeout bounds each tool call's device traffic; default 60s.
	CallTimeout time.Duration
	// Name and Version identify the MCP server; defaults "mhp-mcp", "0.1.0".
	Name, Version string
}

// Validate reports a missing finder.
func (c *Config) Validate() error {
	if c.Finder == nil {
		return errors.New("mcpbridge: Config.Finder is required (a directory or named devices)")
	}
	return nil
}

// Bridge holds the lab's device connections behind the MCP tools.
type Bridge struct {
	cfg Config

	mu      sync.Mutex
	devices map[string]*client.Device
	stops   map[string]func()
	updates []update
	dropped int
	closed  bool
	secret  [32]byte
	pending map[string]time.Time // confirmation nonces not yet answered, with expiry

	runner *script.Runner // mhp_run: concurrency cap, memory budget, bounded timeouts
}

type update struct {
	Device string         `json:"device"`
	Method string         `json:"method"`
	Params map[string]any `json:"params"`
}

// New validates cfg and makes a bridge; nothing is connected yet.
func New(cfg Config) (*Bridge, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Dial == nil {
		opts := cfg.Client
		if opts.ClientName == "" {
			opts.ClientName = "mhp-mcp"
		}
		cfg.Dial = func(ctx context.Context, target string) (*client.Device, error) {
			return client.Dial(ctx, target, opts)
		}
	}
	if cfg.Updates <= 0 {
		cfg.Updates = 256
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 60 * time.Second
	}
	if cfg.Name == "" {
		cfg.Name = "mhp-mcp"
	}
	if cfg.Version == "" {
		cfg.Version = "0.1.0"
	}
	b := &Bridge{cfg: cfg, devices: map[string]*client.Device{}, stops: map[string]func(){}, pending: map[string]time.Time{}}
	b.runner = script.NewRunner(cfg.Script)
	if _, err := rand.Read(b.secret[:]); err != nil {
		return nil, err
	}
	return b, nil
}

// confirmTTL is how long a person has to answer a confirmation.
const confirmTTL = 10 * time.Minute

// newState makes a single-use request state binding a confirmation to key.
func (b *Bridge) newState(key string) string {
	var n [16]byte
	_, _ = rand.Read(n[:])
	nonce := hex.EncodeToString(n[:])
	b.mu.Lock()
	now := time.Now()
	for k, exp := range b.pending {
		if now.After(exp) {
			delete(b.pending, k)
		}
	}
	b.pending[nonce] = now.Add(confirmTTL)
	b.mu.Unlock()
	return nonce + "." + b.sign(nonce, key)
}

func (b *Bridge) sign(nonce, key string) string {
	m := hmac.New(sha256.New, b.secret[:])
	m.Write([]byte(nonce))
	m.Write([]byte{0})
	m.Write([]byte(key))
	return hex.EncodeToString(m.Sum(nil))
}

// consumeState checks a request state against key and uses it up.
func (b *Bridge) consumeState(state, key string) bool {
	nonce, mac, ok := strings.Cut(state, ".")
	if !ok || !hmac.Equal([]byte(mac), []byte(b.sign(nonce, key))) {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	exp, ok := b.pending[nonce]
	delete(b.pending, nonce)
	return ok && time.Now().Before(exp)
}

// Close closes every device connection (their leases end with them).
func (b *Bridge) Close() error {
	b.mu.Lock()
	devs := b.devices
	b.devices = map[string]*client.Device{}
	for _, stop := range b.stops {
		stop()
	}
	b.closed = true
	b.mu.Unlock()
	var errs []error
	for _, d := range devs {
		errs = append(errs, d.Close())
	}
	return errors.Join(errs...)
}

// Device returns the connected device with the id, resolving its target
// through the finder and dialling on first use.
func (b *Bridge) Device(ctx context.Context, id string) (mhp.Device, error) { return b.device(ctx, id) }

// Names lists the devices connected so far.
func (b *Bridge) Names() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]string, 0, len(b.devices))
	for n := range b.devices {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (b *Bridge) device(ctx context.Context, id string) (*client.Device, error) {
	if id == "" {
		return nil, mhp.Errorf(mhp.CodeInvalidParams, "name a device (its id from mhp_find)").With("field", "device")
	}
	b.mu.Lock()
	if d, ok := b.devices[id]; ok {
		b.mu.Unlock()
		return d, nil
	}
	closed := b.closed
	b.mu.Unlock()
	if closed {
		return nil, errors.New("mcpbridge: closed")
	}
	res, err := b.cfg.Finder.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if res == nil || res.Target == "" {
		return nil, mhp.Errorf(mhp.CodeUnknownName, "device %q has no target in the directory", id).With("name", id)
	}
	d, err := b.cfg.Dial(ctx, res.Target)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s at %s: %w", mhp.Truncate(id, 120), mhp.Truncate(res.Target, 120), err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if prev, ok := b.devices[id]; ok { // lost a race with another call
		d.Close()
		return prev, nil
	}
	b.devices[id] = d
	b.stops[id] = d.Listen(func(n mhp.Notification) { b.record(id, n) })
	return d, nil
}

// record keeps a bounded buffer of notifications for mhp_lab op=updates.
func (b *Bridge) record(id string, n mhp.Notification) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.updates = append(b.updates, update{Device: id, Method: n.Method, Params: n.Params})
	if over := len(b.updates) - b.cfg.Updates; over > 0 {
		b.updates = append(b.updates[:0], b.updates[over:]...)
		b.dropped += over
	}
}

func (b *Bridge) drainUpdates() ([]update, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out, dropped := b.updates, b.dropped
	b.updates, b.dropped = nil, 0
	return out, dropped
}

// Named is a Finder over a fixed map of names to targets (mhp-mcp
// thermo=http://…): cards are fetched from the devices on the first search,
// and the names are the ids the model uses.
type Named struct {
	Targets map[string]string
	Client  client.Options

	once sync.Once
	lab  *client.Lab
	mu   sync.Mutex
	dir  *directory.Directory
}

func (n *Named) init() {
	n.once.Do(func() { n.lab = client.NewLab(n.Targets, n.Client) })
}

// Get resolves a name to its target (no connection is made).
func (n *Named) Get(ctx context.Context, id string) (*directory.Result, error) {
	t, ok := n.Targets[id]
	if !ok {
		names := make([]string, 0, len(n.Targets))
		for k := range n.Targets {
			names = append(names, k)
		}
		sort.Strings(names)
		return nil, mhp.Errorf(mhp.CodeUnknownName, "no device %q (this lab has %v)", id, names).With("name", id)
	}
	return &directory.Result{Card: directory.Card{DeviceInfo: mhp.DeviceInfo{ID: id}, Target: t}}, nil
}

// Search indexes the devices' cards on first use, then searches them with live state.
func (n *Named) Search(ctx context.Context, q directory.Query) ([]directory.Result, error) {
	n.init()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.dir == nil {
		idx := directory.NewIndex(nil)
		for name := range n.Targets {
			card := directory.Card{DeviceInfo: mhp.DeviceInfo{ID: name}, Target: n.Targets[name]}
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if d, err := n.lab.Device(cctx, name); err == nil {
				if desc, err := d.Describe(cctx, mhp.DescribeRequest{Detail: mhp.DetailCard}); err == nil {
					card = directory.CardFrom(desc, n.Targets[name])
					card.ID = name
				}
			}
			cancel()
			idx.Add(card)
		}
		dir, err := directory.New(directory.Config{Index: idx, PingStdio: true /* the operator's own targets */, Pinger: directory.PingerFunc(func(ctx context.Context, target string) (mhp.DeviceState, error) {
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
		})})
		if err != nil {
			return nil, err
		}
		n.dir = dir
	}
	return n.dir.Search(ctx, q)
}

// Close closes the connections used for cards and pings.
func (n *Named) Close() error {
	n.init()
	return n.lab.Close()
}

// jsonText renders a value for a tool result's text content.
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// result is a successful tool result with structured content.
func result(v any) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: jsonText(v)}}, StructuredContent: v}
}

// failure is a tool result with isError and the structured MHP error.
func failure(err error) *mcp.CallToolResult {
	me, ok := mhp.AsError(err)
	if !ok {
		me = mhp.Errorf(mhp.CodeInternal, "%v", err)
	}
	body := map[string]any{"mhpError": me, "code": me.Code.String()}
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: me.Code.String() + ": " + me.Message + " " + jsonText(me)}},
		StructuredContent: body}
}
