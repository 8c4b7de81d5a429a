// Package mcpbridge is the lab's MCP server: a constant surface of ten tools
// (mhp_find, mhp_describe, mhp_read, mhp_write, mhp_invoke, mhp_job,
// mhp_estop, mhp_run, mhp_lab, mhp_evidence) whatever the number of devices,
// built on the official MCP Go SDK, plus the operator's mhp_permit. Devices
// are found through a directory (or a map of named targets) and connected
// lazily.
//
// Sessions: each MCP session (over Streamable HTTP, each client) has its own
// device connections, so its own MHP sessions and leases: one client never
// acts under another's lease, and a session's leases end with it
// (HTTPOptions.SessionTimeout closes idle ones; Config.MaxSessions bounds
// them). mhp_estop without a device stops every device any session has
// connected: estop is anyone's.
//
// Approval is the host's, never the model's: an `approved` argument sent by
// the model is stripped; a confirm-gated request is put to a person through
// MCP elicitation and resent with approval only on an explicit yes; without
// elicitation it is unavailable, never silently allowed. An operator's permit
// is the other approval: mhp_permit (listed only with the policy's
// operator_tools and Config.OperatorToken, which the operator gives, never
// the model) issues a single-use permit for one exact request over a
// connection of its own that carries the operator token; the model passes its
// id as permit_id (or permitId) on mhp_write or mhp_invoke, which sends it as
// permitId. A refused permit is the answer (no elicitation is offered in its
// place). MHP refusals come
// back as tool results with isError and the structured MHP error, so the
// model sees why and can adjust; so do scripts that stop on an error.
//
// Arguments are checked against the tool's input schema before anything
// reaches a device (an InvalidParams isError result naming the argument).
// Every result fits in ResultBudget bytes: bigger answers are shrunk with a
// note saying how to ask for less, and mhp_lab op=updates pages. Waits
// (mhp_invoke wait_s, mhp_job op=wait) extend the call's deadline by their
// length and answer "still running" when they end first; they forward the
// job's progress to a _meta.progressToken, and a cancelled mhp_invoke
// (notifications/cancelled) cancels the job it started. Calls are served
// concurrently, so mhp_estop and ping answer while a call is in flight.
//
// Command ids: every write and invoke that is not a dry run carries one id
// per intent (when the device advertises capabilities.commandIds). The
// bridge makes it before the first attempt and binds it into the
// confirmation's request state, so the confirmed resend is the same intent;
// the client resends with the same id after a transport failure, and the
// device replays its first answer instead of acting twice.
//
// Evidence and methods: mhp_evidence reads a device's evidence head and a
// page of receipts (evidence/head, evidence/list; filter by command_id or
// session label); mhp_describe's methods argument lists, finds or gets saved
// methods, and mhp_invoke's method runs one.
//
// Policy is the host policy of seed 001 (enabled, allow_hardware,
// operator_tools, allow_external_sessions; safe default: enabled only).
// LineTransport is stdio that answers a bad line with a JSON-RPC error and
// goes on.
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
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/client"
	"github.com/openmhp/mhp-go/clock"
	"github.com/openmhp/mhp-go/directory"
	"github.com/openmhp/mhp-go/host"
	"github.com/openmhp/mhp-go/onboard"
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
	// Updates is how many notifications each MCP session keeps for mhp_lab
	// op=updates (the oldest are dropped and counted); default 256.
	Updates int
	// CallTimeout bounds each tool call; default 60s. A call that waits
	// (wait_s, timeout_s, or a script's own Timeout) gets that much more.
	CallTimeout time.Duration
	// Name and Version identify the MCP server; defaults "mhp-mcp", "0.1.0".
	Name, Version string
	// Policy is the host policy; the zero value is not the default: New
	// takes DefaultPolicy when Policy is nil.
	Policy *Policy
	// MaxSessions bounds the MCP sessions served at once (each holds its own
	// device connections); default 64.
	MaxSessions int
	// MaxInFlight bounds the tool calls one MCP session runs at once; more
	// are refused (mhp_estop never is); default 16.
	MaxInFlight int
	// OperatorToken is the operator's token for the devices (the operator
	// gives it on the command line, never the model): with it and the
	// policy's operator_tools, mhp_permit issues permits over a separate
	// connection that carries it. The model's own connections never do.
	OperatorToken string
	// OperatorDial connects to a target for mhp_permit; default client.Dial
	// with Client options and OperatorToken.
	OperatorDial func(ctx context.Context, target string) (*client.Device, error)
	// DialWith connects to a target with the given client options; the
	// bridge uses it for an MCP caller's connections, whose options carry
	// the caller's role gate and name (roles.go). Default: the fleet's
	// DialWith with Fleet, else client.Dial, when Dial is not given; with
	// Dial given and DialWith not, a caller below operator is refused.
	DialWith func(ctx context.Context, target string, opts client.Options) (*client.Device, error)

	// Fleet is the host's fleet: with it, mhp_lab has the fleet ops (scan,
	// add, remove, locate), and it is the finder, the dial and the
	// simulated decision when those are not given.
	Fleet *host.Fleet
	// Simulated is the host's word on which devices are simulated (a
	// fleet's simulated twin, a hosted sim:* package): only those are
	// actuated without the policy's allow_hardware. Nil: the fleet's
	// decision with Fleet, else the finder's [HostSimulated] if it has one,
	// else every device is hardware. A device's own tags are never consulted.
	Simulated func(id string) bool
	// Onboard is the onboarding interview: with it, mhp_lab has onboard,
	// new, write and validate (needs Fleet).
	Onboard *onboard.Interview
	// SessionIdle is how long an MCP session over HTTP may show no life (no
	// request, no open GET stream) before the bridge stops renewing its
	// device leases and releases them, so a client that vanished without
	// DELETE does not hold the devices, nor feed their watchdogs, until the
	// session timeout. Default DefaultSessionIdle; MinSessionIdle to
	// MaxSessionIdle.
	SessionIdle time.Duration
	// Clock reads the time of a session's signs of life and of the idle
	// sweep; default the real clock.
	Clock clock.Clock
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
	cfg    Config
	policy Policy

	mu       sync.Mutex
	local    *session // calls without an MCP session, and Device/Names
	sessions map[*mcp.ServerSession]*session
	closed   bool
	secret   [32]byte
	pending  map[string]time.Time // confirmation nonces not yet answered, with expiry
	streams  map[string]int       // open GET streams by MCP session id
	done     chan struct{}        // closed by Close: stops the idle watcher
	closing  sync.WaitGroup       // sessions closing because their MCP session ended

	runner *script.Runner // mhp_run: concurrency cap, memory budget, bounded timeouts
	op     operatorDial   // the default operator dial, with options (nil dial: Config.OperatorDial given)
}

// New validates cfg and makes a bridge; nothing is connected yet.
func New(cfg Config) (*Bridge, error) {
	if f := cfg.Fleet; f != nil {
		if cfg.Finder == nil {
			cfg.Finder = f.Finder()
		}
		if cfg.Dial == nil {
			cfg.Dial = f.Dial
			if cfg.DialWith == nil {
				cfg.DialWith = func(ctx context.Context, target string, opts client.Options) (*client.Device, error) {
					opts.OperatorToken = "" // the model's connections never carry it
					return f.DialWith(ctx, target, opts)
				}
			}
		}
		if cfg.Simulated == nil {
			cfg.Simulated = f.Simulated
		}
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Dial == nil {
		opts := cfg.Client
		if opts.ClientName == "" {
			opts.ClientName = "mhp-mcp"
		}
		opts.OperatorToken = "" // the model's connections never carry it
		cfg.Dial = func(ctx context.Context, target string) (*client.Device, error) {
			return client.Dial(ctx, target, opts)
		}
		if cfg.DialWith == nil {
			cfg.DialWith = func(ctx context.Context, target string, opts client.Options) (*client.Device, error) {
				opts.OperatorToken = ""
				return client.Dial(ctx, target, opts)
			}
		}
	}
	var op operatorDial
	if cfg.OperatorDial == nil {
		opts := cfg.Client
		if opts.ClientName == "" {
			opts.ClientName = "mhp-mcp-operator"
		}
		opts.OperatorToken = cfg.OperatorToken
		opDial := func(ctx context.Context, target string, o client.Options) (*client.Device, error) {
			return client.Dial(ctx, target, o)
		}
		if f := cfg.Fleet; f != nil { // a hosted device: an in-process operator connection
			opDial = f.DialWith
		}
		cfg.OperatorDial = func(ctx context.Context, target string) (*client.Device, error) {
			return opDial(ctx, target, opts)
		}
		op = operatorDial{dial: opDial, opts: opts} // an operator caller's own name on it (roles.go)
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
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = 64
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = 16
	}
	if cfg.SessionIdle == 0 {
		cfg.SessionIdle = DefaultSessionIdle
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.SessionIdle < MinSessionIdle || cfg.SessionIdle > MaxSessionIdle {
		return nil, fmt.Errorf("mcpbridge: SessionIdle %v is outside %v..%v", cfg.SessionIdle, MinSessionIdle, MaxSessionIdle)
	}
	b := &Bridge{cfg: cfg, policy: DefaultPolicy(), sessions: map[*mcp.ServerSession]*session{}, pending: map[string]time.Time{},
		streams: map[string]int{}, done: make(chan struct{})}
	if cfg.Policy != nil {
		b.policy = *cfg.Policy
	}
	b.op = op
	b.local = newSession(b)
	b.runner = script.NewRunner(cfg.Script)
	if _, err := rand.Read(b.secret[:]); err != nil {
		return nil, err
	}
	go b.watchIdle()
	return b, nil
}

// confirmTTL is how long a person has to answer a confirmation; at most
// maxPending confirmations are outstanding (the oldest is forgotten first).
const (
	confirmTTL = 10 * time.Minute
	maxPending = 1024
)

// newState makes a single-use request state binding a confirmation to key
// and to the command id of the request's first attempt (cmd, may be empty):
// the confirmed resend carries the same id, so the device sees one intent.
func (b *Bridge) newState(key, cmd string) string {
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
	if len(b.pending) >= maxPending { // a flood of asks evicts the oldest
		oldest, first := "", time.Time{}
		for k, exp := range b.pending {
			if oldest == "" || exp.Before(first) {
				oldest, first = k, exp
			}
		}
		delete(b.pending, oldest)
	}
	b.pending[nonce] = now.Add(confirmTTL)
	b.mu.Unlock()
	return nonce + "." + cmd + "." + b.sign(nonce, key+"\x00"+cmd)
}

func (b *Bridge) sign(nonce, key string) string {
	m := hmac.New(sha256.New, b.secret[:])
	m.Write([]byte(nonce))
	m.Write([]byte{0})
	m.Write([]byte(key))
	return hex.EncodeToString(m.Sum(nil))
}

// consumeState checks a request state against key, uses it up and returns
// the command id it carries.
func (b *Bridge) consumeState(state, key string) (cmd string, ok bool) {
	nonce, rest, ok1 := strings.Cut(state, ".")
	cmd, mac, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || !hmac.Equal([]byte(mac), []byte(b.sign(nonce, key+"\x00"+cmd))) {
		return "", false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	exp, ok := b.pending[nonce]
	delete(b.pending, nonce)
	return cmd, ok && time.Now().Before(exp)
}

// Close closes every session's device connections (their leases end with them).
func (b *Bridge) Close() error {
	b.mu.Lock()
	if !b.closed {
		close(b.done)
	}
	b.closed = true
	b.mu.Unlock()
	var errs []error
	for _, s := range b.allSessions() {
		errs = append(errs, s.close())
	}
	// Sessions whose MCP session ended just before (a signal ends the
	// stream first) release their leases before Close returns and the
	// process exits.
	b.closing.Wait()
	return errors.Join(errs...)
}

// Policy returns the host policy in force.
func (b *Bridge) Policy() Policy { return b.policy }

// Device returns the device with the id for a caller without an MCP session
// (its own lab, separate from every MCP session's), resolving its target
// through the finder and dialling on first use.
func (b *Bridge) Device(ctx context.Context, id string) (mhp.Device, error) {
	return b.local.device(ctx, id)
}

// Names lists the devices Device connected so far.
func (b *Bridge) Names() []string { return b.local.Names() }

// jsonText renders a value for a tool result's text content.
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
