package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/auth"
)

// Options configure a client connection. Zero values take the defaults.
type Options struct {
	// ClientName is sent as clientInfo.name (display only).
	ClientName string
	// ClientID is sent as the X-MHP-Client header over HTTP; default
	// NewClientID(ClientName), unique to each Dial, so that two processes or
	// two handles are never one client to a server that names clients by
	// that header (as the reference does when no Mhp-Session is sent).
	ClientID string
	// Token is the bearer token of an HTTP server.
	Token string
	// OperatorToken is the operator's own token (the Mhp-Operator header),
	// for operator methods such as permits/issue. Never give it to an agent.
	OperatorToken string
	// Timeout bounds each request; default 30s.
	Timeout time.Duration
	// HeartbeatEvery overrides the lease heartbeat interval (default
	// min(lease ttl, watchdog_s)/3).
	HeartbeatEvery time.Duration
	// LeaseTTL is the ttl of leases acquired on first use; default 60s.
	LeaseTTL time.Duration
	// PollEvery is Wait's jobs/status polling interval when no notification
	// comes; default 1s.
	PollEvery time.Duration
	// Plain makes the handle a bare protocol peer: no lease is acquired on
	// first use and no heartbeat renews leases. The conformance suite uses it
	// so that it sees exactly what the server answers.
	Plain bool
	// CommandRetries is how many times a write or invoke that got no answer
	// is resent with its command id, on a server that honours command ids
	// (capabilities.commandIds); default 2, negative for none. A server that
	// does not honour them never gets a resend: it might act twice.
	CommandRetries int
	// EStopTimeout is [Lab.EStopAll]'s per-device deadline, dialling included;
	// default 5s.
	EStopTimeout time.Duration
	// TLS is how an https:// server is checked and how this client shows
	// itself to a server that requires mutual TLS: the CAs to trust (a file
	// or a pool), a pinned SHA-256 of the server's certificate, a client
	// certificate. Zero: the system's roots. Ignored with HTTPClient.
	TLS auth.ClientTLS
	// HTTPClient replaces the default HTTP client.
	HTTPClient *http.Client
	// Stderr receives a stdio driver process's stderr; default [os.Stderr].
	Stderr io.Writer
	// Logger receives heartbeat and reconnect logs; default slog.Default().
	Logger *slog.Logger
	// AllowStdio lets Dial start the process of a "stdio:" target. Set it only
	// for targets the operator gave (command line, config); the default
	// refuses them, so a target from a directory or the network never runs.
	AllowStdio bool
	// Gate, when set, checks every method this connection is about to send
	// (over the wire) or call (in process) and may refuse it before it
	// leaves ([Gate]); the MCP bridge's per-caller roles are one.
	Gate Gate
	// Owner names on whose behalf an in-process connection acts: its session
	// label is Owner/ClientName#hex, as a transport labels an authenticated
	// client's session, instead of inproc_<hex>. Display only (receipts,
	// leases, the guard name it); it grants nothing. Over the wire the
	// server makes the label.
	Owner string
}

func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = 60 * time.Second
	}
	if o.PollEvery <= 0 {
		o.PollEvery = time.Second
	}
	if o.EStopTimeout <= 0 {
		o.EStopTimeout = 5 * time.Second
	}
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.ClientName == "" {
		o.ClientName = "mhp-go"
	}
	if o.ClientID == "" {
		o.ClientID = NewClientID(o.ClientName)
	}
	return o
}

// Device is a handle on one MHP device: it implements [mhp.Device] (over the
// wire or in process) with its own session, and adds leases on first use,
// a lease heartbeat, Wait, and the Get/Set/Run conveniences. It is safe for
// concurrent use.
type Device struct {
	base  mhp.Device
	conn  conn // nil in process
	opts  Options
	log   *slog.Logger
	close func() error

	mu      sync.Mutex
	info    mhp.InitializeResult
	lease   *heartbeat
	wd      float64 // watchdog_s, once known
	wdKnown bool
	closed  bool
}

var _ mhp.Device = (*Device)(nil)

// Dial connects to target and runs initialize:
//
//   - "http://host:port" (or https): JSON-RPC over POST /rpc, notifications
//     on GET /events;
//   - "stdio:<command line>": starts the command (split on spaces, with
//     '…' and "…" quoting) and speaks over its stdin and stdout; Close
//     closes its stdin and kills it if it has not exited within a second.
//     Refused unless [Options.AllowStdio] (see [ErrCommandTarget]).
//
// For an in-process device use Connect.
func Dial(ctx context.Context, target string, opts Options) (*Device, error) {
	opts = opts.withDefaults()
	switch {
	case strings.HasPrefix(target, "http://"), strings.HasPrefix(target, "https://"):
		if opts.HTTPClient == nil && !opts.TLS.IsZero() {
			hc, err := tlsHTTPClient(opts.TLS)
			if err != nil {
				return nil, err
			}
			opts.HTTPClient = hc
		}
		ls := &listeners{}
		hc := newHTTPConn(target, opts, ls)
		d := &Device{conn: hc, opts: opts, log: opts.Logger, close: hc.close}
		d.base = &wire{c: hc, ls: ls, timeout: opts.Timeout, gate: opts.Gate}
		hc.reinit = d.reinitialize
		if err := d.initialize(ctx); err != nil {
			hc.close()
			return nil, err
		}
		hc.startEvents()
		return d, nil
	case IsCommandTarget(target):
		if !opts.AllowStdio {
			return nil, ErrCommandTarget(target)
		}
		return dialCommand(ctx, strings.TrimPrefix(target, "stdio:"), opts)
	}
	return nil, fmt.Errorf("client: target %q is not http://host:port or stdio:<command>", target)
}

// DialStream speaks to a stream server ([transport.Server.ServeStdio]) over r
// and w, and runs initialize. Close closes w (if it is an [io.Closer]), which
// ends the server's session.
func DialStream(ctx context.Context, r io.Reader, w io.Writer, opts Options) (*Device, error) {
	opts = opts.withDefaults()
	closer := func() error {
		if c, ok := w.(io.Closer); ok {
			return c.Close()
		}
		return nil
	}
	return newStreamDevice(ctx, r, w, closer, opts)
}

func newStreamDevice(ctx context.Context, r io.Reader, w io.Writer, closer func() error, opts Options) (*Device, error) {
	ls := &listeners{}
	sc := newStreamConn(r, w, closer, ls)
	d := &Device{conn: sc, opts: opts, log: opts.Logger, close: sc.close}
	d.base = &wire{c: sc, ls: ls, timeout: opts.Timeout, gate: opts.Gate}
	if err := d.initialize(ctx); err != nil {
		sc.close()
		return nil, err
	}
	return d, nil
}

func dialCommand(ctx context.Context, cmdline string, opts Options) (*Device, error) {
	args, err := SplitCommand(cmdline)
	if err != nil {
		return nil, err
	}
	if len(args) == 0 {
		return nil, fmt.Errorf("client: stdio target has no command")
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stderr = opts.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("client: starting %q: %w", args[0], err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	var once sync.Once
	closer := func() error {
		once.Do(func() {
			_ = stdin.Close()
			select {
			case <-exited:
			case <-time.After(time.Second):
				_ = cmd.Process.Kill()
				<-exited
			}
		})
		return nil
	}
	d, err := newStreamDevice(ctx, stdout, stdin, closer, opts)
	if err != nil {
		closer()
		return nil, err
	}
	return d, nil
}

// SplitCommand splits a command line on spaces, honouring '…' and "…"
// quotes and backslash escapes outside single quotes.
func SplitCommand(s string) ([]string, error) {
	var args []string
	var cur strings.Builder
	inArg := false
	var quote rune
	escaped := false
	for _, r := range s {
		switch {
		case escaped:
			cur.WriteRune(r)
			escaped = false
		case r == '\\' && quote != '\'':
			escaped, inArg = true, true
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inArg = r, true
		case r == ' ' || r == '\t' || r == '\n':
			if inArg {
				args = append(args, cur.String())
				cur.Reset()
				inArg = false
			}
		default:
			cur.WriteRune(r)
			inArg = true
		}
	}
	if quote != 0 || escaped {
		return nil, fmt.Errorf("client: unterminated quote or escape in %q", s)
	}
	if inArg {
		args = append(args, cur.String())
	}
	return args, nil
}

// Connect returns a handle on an in-process device with its own session
// (a random id). Close ends the session (EndSession: its lease is released);
// it does not close dev.
func Connect(dev mhp.Device, opts Options) *Device {
	opts = opts.withDefaults()
	var b [12]byte
	_, _ = rand.Read(b[:])
	id := "inproc_" + hex.EncodeToString(b[:])
	if opts.Owner != "" {
		id = ownedLabel(opts.Owner, opts.ClientName, b[:4])
	}
	probe := dev // capabilities are the device's own, not the gate's
	if opts.Gate != nil {
		dev = &gated{dev: dev, gate: opts.Gate}
	}
	d := &Device{opts: opts, log: opts.Logger}
	d.base = &inproc{Device: mhp.AsSession(dev, id), raw: dev, session: id}
	d.close = func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		dev.EndSession(mhp.WithSession(ctx, id))
		return nil
	}
	d.info.Session = id
	d.info.ProtocolVersion = mhp.ProtocolVersion
	ctx, cancel := context.WithTimeout(context.Background(), opts.Timeout)
	defer cancel()
	if desc, err := dev.Describe(mhp.WithSession(ctx, id), mhp.DescribeRequest{Detail: mhp.DetailFull}); err == nil {
		// Decorators (guard, saved methods) wrap the device: look through them.
		_, res := mhp.Find[mhp.ResourceProvider](probe)
		cids, _ := mhp.Find[mhp.CommandIDer](probe)
		d.info.Device = mhp.DeviceInfo{ID: desc.ID, Class: desc.Class, Make: desc.Make, Model: desc.Model}
		d.info.Capabilities = mhp.Capabilities{Signals: len(desc.Signals) > 0, Settings: len(desc.Settings) > 0,
			Actions: len(desc.Actions) > 0, Subscribe: len(desc.Signals) > 0, Lease: true, EStop: desc.Safety.EStop,
			Resources: res, CommandIDs: cids != nil && cids.HonoursCommandIDs()}
	}
	return d
}

// inproc is an in-process device seen as one session.
type inproc struct {
	mhp.Device
	raw     mhp.Device
	session string
}

// ListResources implements mhp.ResourceProvider when the device does.
func (p *inproc) ListResources(ctx context.Context) ([]string, error) {
	rp, ok := mhp.Find[mhp.ResourceProvider](p.raw)
	if !ok {
		return nil, errNoResources()
	}
	return rp.ListResources(mhp.WithSession(ctx, p.session))
}

// ReadResource implements mhp.ResourceProvider when the device does.
func (p *inproc) ReadResource(ctx context.Context, path string) (*mhp.Resource, error) {
	rp, ok := mhp.Find[mhp.ResourceProvider](p.raw)
	if !ok {
		return nil, errNoResources()
	}
	return rp.ReadResource(mhp.WithSession(ctx, p.session), path)
}

func errNoResources() *mhp.Error {
	return mhp.Errorf(mhp.CodeNotSupported, "this device serves no resources (capability resources is false)").
		With(mhp.DataCapability, "resources")
}

// initialize runs the handshake and records the session and capabilities.
func (d *Device) initialize(ctx context.Context) error {
	w := d.base.(*wire)
	var res mhp.InitializeResult
	params := map[string]any{"protocolVersion": mhp.ProtocolVersion,
		"clientInfo": map[string]any{"name": d.opts.ClientName, "version": "mhp-go"}}
	if err := w.call(ctx, mhp.MethodInitialize, params, &res); err != nil {
		return err
	}
	supported := false
	for _, v := range mhp.SupportedVersions() {
		if v == res.ProtocolVersion {
			supported = true
		}
	}
	if !supported {
		return mhp.Errorf(mhp.CodeServerError, "initialize: the server answered protocol version %q, which this client does not speak (%v)",
			res.ProtocolVersion, mhp.SupportedVersions())
	}
	if hc, ok := d.conn.(*httpConn); ok {
		hc.setSession(res.Session)
	}
	d.mu.Lock()
	d.info = res
	d.mu.Unlock()
	return nil
}

// reinitialize opens a new session after the server forgot ours; any lease
// of the old session is gone, so the heartbeat stops.
func (d *Device) reinitialize(ctx context.Context) error {
	d.log.Warn("mhp session expired on the server: initializing again", "old", d.Session())
	d.stopHeartbeat()
	return d.initialize(ctx)
}

// Session returns the server-issued session id.
func (d *Device) Session() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.info.Session
}

// Info returns the initialize result: protocol version, device card and capabilities.
func (d *Device) Info() mhp.InitializeResult {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.info
}

// Close stops the heartbeat and ends the connection and its session (the
// server releases the session's lease). It is safe to call twice.
func (d *Device) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	d.mu.Unlock()
	held := d.HoldsLease()
	d.stopHeartbeat()
	if held {
		// A clean close gives the lease back. Ending the session alone keeps
		// it on a watchdog device, so that a client that dies mid-protocol
		// trips the watchdog instead of silently handing the device over.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = d.base.Release(ctx)
		cancel()
	}
	return d.close()
}

// ---- mhp.Device ----

// Describe implements [mhp.Device].
func (d *Device) Describe(ctx context.Context, req mhp.DescribeRequest) (*mhp.Description, error) {
	return d.base.Describe(ctx, req)
}

// Read implements [mhp.Device].
func (d *Device) Read(ctx context.Context, names []string) (*mhp.ReadResult, error) {
	return d.base.Read(ctx, names)
}

// Subscribe implements [mhp.Device].
func (d *Device) Subscribe(ctx context.Context, names []string) (*mhp.SubscribeResult, error) {
	return d.base.Subscribe(ctx, names)
}

// Unsubscribe implements [mhp.Device].
func (d *Device) Unsubscribe(ctx context.Context, names []string) error {
	return d.base.Unsubscribe(ctx, names)
}

// Write implements [mhp.Device]; a write refused for want of a lease
// (reason lease_required) acquires one and is sent again, once.
//
// On a server that honours command ids (capabilities.commandIds), and unless
// [Options.Plain], a write that is not a dry run carries a fresh commandId (one
// per intent) and is resent with the same id after a transport failure (see
// [Options.CommandRetries]). Other servers never see the field.
func (d *Device) Write(ctx context.Context, req mhp.WriteRequest) (*mhp.WriteResult, error) {
	if !req.DryRun && req.CommandID == "" && d.commandIDs() {
		req.CommandID = NewCommandID()
	}
	send := func() (*mhp.WriteResult, error) {
		return retrySent(ctx, d, req.CommandID, func() (*mhp.WriteResult, error) { return d.base.Write(ctx, req) })
	}
	res, err := send()
	if d.leaseRetry(ctx, err) {
		return send()
	}
	return res, err
}

// Invoke implements [mhp.Device], with the lease on first use of Write.
// It carries a command id and is resent after a transport failure as Write is.
func (d *Device) Invoke(ctx context.Context, req mhp.InvokeRequest) (*mhp.InvokeResult, error) {
	if !req.DryRun && req.CommandID == "" && d.commandIDs() {
		req.CommandID = NewCommandID()
	}
	send := func() (*mhp.InvokeResult, error) {
		return retrySent(ctx, d, req.CommandID, func() (*mhp.InvokeResult, error) { return d.base.Invoke(ctx, req) })
	}
	res, err := send()
	if d.leaseRetry(ctx, err) {
		return send()
	}
	return res, err
}

// Job implements [mhp.Device] (jobs/status).
func (d *Device) Job(ctx context.Context, id string) (*mhp.Job, error) { return d.base.Job(ctx, id) }

// Jobs implements [mhp.Device] (jobs/list).
func (d *Device) Jobs(ctx context.Context, req mhp.JobsRequest) ([]mhp.Job, error) {
	return d.base.Jobs(ctx, req)
}

// CancelJob implements [mhp.Device] (jobs/cancel).
func (d *Device) CancelJob(ctx context.Context, id string) (*mhp.Job, error) {
	return d.base.CancelJob(ctx, id)
}

// PauseJob implements [mhp.Device] (jobs/pause).
func (d *Device) PauseJob(ctx context.Context, id string) (*mhp.Job, error) {
	return d.base.PauseJob(ctx, id)
}

// ResumeJob implements [mhp.Device] (jobs/resume), with the lease on first use.
func (d *Device) ResumeJob(ctx context.Context, id string) (*mhp.Job, error) {
	j, err := d.base.ResumeJob(ctx, id)
	if d.leaseRetry(ctx, err) {
		return d.base.ResumeJob(ctx, id)
	}
	return j, err
}

// Acquire implements [mhp.Device] (session/acquire) and starts the heartbeat
// that renews the lease (unless [Options.Plain]).
func (d *Device) Acquire(ctx context.Context, ttl time.Duration) (*mhp.Lease, error) {
	l, err := d.base.Acquire(ctx, ttl)
	if err != nil {
		return nil, err
	}
	if !d.opts.Plain {
		d.startHeartbeat(ctx, l)
	}
	return l, nil
}

// Renew implements [mhp.Device] (session/renew).
func (d *Device) Renew(ctx context.Context) (*mhp.Lease, error) { return d.base.Renew(ctx) }

// Release implements [mhp.Device] (session/release) and stops the heartbeat.
func (d *Device) Release(ctx context.Context) error {
	d.stopHeartbeat()
	return d.base.Release(ctx)
}

// Limits implements [mhp.Device] (safety/limits).
func (d *Device) Limits(ctx context.Context) (*mhp.LimitsReport, error) { return d.base.Limits(ctx) }

// EStop implements [mhp.Device] (safety/estop).
func (d *Device) EStop(ctx context.Context, reason string) (*mhp.EStopResult, error) {
	return d.base.EStop(ctx, reason)
}

// Reset implements [mhp.Device] (safety/reset), with the lease on first use.
func (d *Device) Reset(ctx context.Context) (*mhp.ResetResult, error) {
	r, err := d.base.Reset(ctx)
	if d.leaseRetry(ctx, err) {
		return d.base.Reset(ctx)
	}
	return r, err
}

// Ping implements [mhp.Device].
func (d *Device) Ping(ctx context.Context) (*mhp.PingResult, error) { return d.base.Ping(ctx) }

// Listen implements [mhp.Device]: fn receives this connection's notifications
// (over the wire: signals/update only for signals this session subscribed).
func (d *Device) Listen(fn func(mhp.Notification)) func() { return d.base.Listen(fn) }

// EndSession implements [mhp.Device]: the server forgets this session (its
// lease is released). The handle stays usable over HTTP (the next call
// initializes again).
func (d *Device) EndSession(ctx context.Context) {
	d.stopHeartbeat()
	d.base.EndSession(ctx)
}

// ListResources lists the device package's resources (resources/list).
func (d *Device) ListResources(ctx context.Context) ([]string, error) {
	return d.base.(mhp.ResourceProvider).ListResources(ctx)
}

// ReadResource reads one resource of the device package (resources/read).
func (d *Device) ReadResource(ctx context.Context, path string) (*mhp.Resource, error) {
	return d.base.(mhp.ResourceProvider).ReadResource(ctx, path)
}

// ---- conveniences ----

// Get reads one signal. An unavailable signal is an error naming why.
func (d *Device) Get(ctx context.Context, name string) (any, error) {
	r, err := d.Read(ctx, []string{name})
	if err != nil {
		return nil, err
	}
	if why, ok := r.Unavailable[name]; ok {
		return nil, mhp.Errorf(mhp.CodeDeviceFault, "signal %s is unavailable: %s", name, why).
			With(mhp.DataName, name).With(mhp.DataReason, "unavailable")
	}
	v, ok := r.Values[name]
	if !ok {
		return nil, mhp.Errorf(mhp.CodeUnknownName, "the answer has no signal %q", name).With(mhp.DataName, name)
	}
	return v, nil
}

// Set writes one setting (acquiring the lease on first use where needed).
func (d *Device) Set(ctx context.Context, name string, value any) (*mhp.WriteResult, error) {
	return d.Write(ctx, mhp.WriteRequest{Name: name, Value: value})
}

// Run invokes an action and returns its job (not waiting for it; see Wait).
func (d *Device) Run(ctx context.Context, action string, params map[string]any) (*mhp.Job, error) {
	res, err := d.Invoke(ctx, mhp.InvokeRequest{Name: action, Params: params})
	if err != nil {
		return nil, err
	}
	if res.Job == nil {
		return nil, mhp.Errorf(mhp.CodeInternal, "actions/invoke %s: the answer has no job", action)
	}
	return res.Job, nil
}

// Wait blocks until the job is terminal and returns it. It listens for the
// job's notifications and polls jobs/status every PollEvery as a fallback
// (a dropped notification costs at most one interval). It returns ctx's
// error, as an [*mhp.Error] with reason "transport", when ctx ends first.
func (d *Device) Wait(ctx context.Context, jobID string) (*mhp.Job, error) {
	notified := make(chan *mhp.Job, 1)
	stop := d.Listen(func(n mhp.Notification) {
		j := n.Job()
		if j == nil || j.ID != jobID || !j.State.Terminal() {
			return
		}
		select {
		case notified <- j:
		default:
		}
	})
	defer stop()
	t := time.NewTicker(d.opts.PollEvery)
	defer t.Stop()
	for {
		j, err := d.Job(ctx, jobID)
		if err != nil && !IsTransportError(err) {
			return nil, err
		}
		if err == nil && j.State.Terminal() {
			return j, nil
		}
		select {
		case j := <-notified:
			return j, nil
		case <-t.C:
		case <-ctx.Done():
			return nil, transportError("wait "+jobID, false, "%v", ctx.Err())
		}
	}
}

// Scope acquires the lease for ttl (renewed by the heartbeat) and returns a
// release func that releases it; call it when the work is done (it is safe
// to call twice).
func (d *Device) Scope(ctx context.Context, ttl time.Duration) (release func(), err error) {
	if _, err := d.Acquire(ctx, ttl); err != nil {
		return nil, err
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.opts.Timeout)
			defer cancel()
			if err := d.Release(rctx); err != nil {
				d.log.Warn("mhp lease release failed", "session", d.Session(), "err", err)
			}
		})
	}, nil
}

// ---- leases ----

// leaseRetry reports whether err asks for a lease the client can take: it
// acquires one (nothing was sent to the backend, so the request may be sent
// again). Only once per call, and never with Options.Plain.
func (d *Device) leaseRetry(ctx context.Context, err error) bool {
	if err == nil || d.opts.Plain {
		return false
	}
	e, ok := mhp.AsError(err)
	if !ok || e.Code != mhp.CodeNotLeased || e.Data == nil || e.Data[mhp.DataReason] != mhp.ReasonLeaseRequired {
		return false
	}
	if _, aerr := d.Acquire(ctx, d.opts.LeaseTTL); aerr != nil {
		d.log.Info("mhp lease on first use refused", "session", d.Session(), "err", aerr)
		return false
	}
	return true
}

// heartbeat renews a lease until stopped or lost.
type heartbeat struct {
	stop chan struct{}
	done chan struct{}
}

func (d *Device) watchdog(ctx context.Context) float64 {
	d.mu.Lock()
	if d.wdKnown {
		defer d.mu.Unlock()
		return d.wd
	}
	d.mu.Unlock()
	lim, err := d.base.Limits(ctx)
	if err != nil {
		return 0
	}
	d.mu.Lock()
	d.wd, d.wdKnown = lim.WatchdogS, true
	d.mu.Unlock()
	return lim.WatchdogS
}

// heartbeatEvery is min(ttl, watchdog)/3 unless Options.HeartbeatEvery.
func (d *Device) heartbeatEvery(ctx context.Context, l *mhp.Lease) time.Duration {
	if d.opts.HeartbeatEvery > 0 {
		return d.opts.HeartbeatEvery
	}
	window := time.Duration(l.TTL * float64(time.Second))
	if window <= 0 {
		window = d.opts.LeaseTTL
	}
	if wd := d.watchdog(ctx); wd > 0 {
		if w := time.Duration(wd * float64(time.Second)); w < window {
			window = w
		}
	}
	every := window / 3
	if every < 10*time.Millisecond {
		every = 10 * time.Millisecond
	}
	return every
}

func (d *Device) startHeartbeat(ctx context.Context, l *mhp.Lease) {
	every := d.heartbeatEvery(ctx, l)
	d.stopHeartbeat()
	hb := &heartbeat{stop: make(chan struct{}), done: make(chan struct{})}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return
	}
	d.lease = hb
	d.mu.Unlock()
	go d.beat(hb, every)
}

func (d *Device) beat(hb *heartbeat, every time.Duration) {
	defer close(hb.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-hb.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), every*2+time.Second)
		_, err := d.base.Renew(ctx)
		cancel()
		if err == nil {
			continue
		}
		if e, ok := mhp.AsError(err); ok && e.Code == mhp.CodeNotLeased {
			d.log.Warn("mhp lease lost: heartbeat stopped", "session", d.Session(), "err", err)
			d.mu.Lock()
			if d.lease == hb {
				d.lease = nil
			}
			d.mu.Unlock()
			return
		}
		d.log.Info("mhp lease renew failed; retrying", "session", d.Session(), "err", err)
	}
}

func (d *Device) stopHeartbeat() {
	d.mu.Lock()
	hb := d.lease
	d.lease = nil
	d.mu.Unlock()
	if hb != nil {
		close(hb.stop)
		<-hb.done
	}
}

// HoldsLease reports whether the heartbeat is renewing a lease.
func (d *Device) HoldsLease() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lease != nil
}
