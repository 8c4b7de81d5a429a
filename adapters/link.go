package adapters

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/clock"
)

// LinkConfig is the `link:` block every adapter config shares: how the
// adapter treats a backend that is not there.
//
//	link:
//	  fail_fast: false          # true: refuse to start while the backend is unreachable
//	  retry_min: 500ms          # first reconnect wait (jittered), doubling ...
//	  retry_max: 30s            # ... up to this
//	  descriptor_cache: node.descriptor.json   # self-describing backends only
//
// By default an adapter starts whatever its backend does: it serves, reports
// the backend down (ping and device/describe carry "backend"), refuses
// actuation with outcome not_started, and reconnects with bounded, jittered
// backoff until the backend is back; no restart is needed.
type LinkConfig struct {
	// FailFast refuses to start while the backend is unreachable (the
	// behaviour before the link was tracked).
	FailFast bool `yaml:"fail_fast,omitempty"`
	// RetryMin is the first wait between reconnect attempts; default 500ms.
	RetryMin time.Duration `yaml:"retry_min,omitempty"`
	// RetryMax caps the wait between attempts; default 30s.
	RetryMax time.Duration `yaml:"retry_max,omitempty"`
	// DescriptorCache is a file where a self-describing adapter (SiLA 2
	// Feature Definitions, a MADSci node's /info, a PyLabRobot bridge's
	// /describe) keeps what the backend last described; relative to the
	// config file. Each successful start from the backend writes it; a start
	// with the backend down serves it. Without it, such an adapter cannot
	// start before its backend (there is nothing to describe).
	DescriptorCache string `yaml:"descriptor_cache,omitempty"`
}

// Defaults returns l with zero fields at their defaults.
func (l LinkConfig) Defaults() LinkConfig {
	if l.RetryMin <= 0 {
		l.RetryMin = 500 * time.Millisecond
	}
	if l.RetryMax <= 0 {
		l.RetryMax = 30 * time.Second
	}
	if l.RetryMax < l.RetryMin {
		l.RetryMax = l.RetryMin
	}
	return l
}

// Validate reports a negative duration.
func (l LinkConfig) Validate() error {
	if l.RetryMin < 0 || l.RetryMax < 0 {
		return fmt.Errorf("link: retry_min and retry_max must not be negative (got %v, %v)", l.RetryMin, l.RetryMax)
	}
	return nil
}

// Backoff yields reconnect waits: RetryMin doubling up to RetryMax, each
// drawn uniformly from its upper half so that many adapters restarted
// together do not reconnect in step. The zero Backoff is not usable; build
// it with NewBackoff.
type Backoff struct {
	min, max time.Duration
	n        int
	rnd      func() float64
}

// NewBackoff returns a backoff between min and max (defaults as LinkConfig).
// rnd returns a float in [0,1); nil uses math/rand/v2.
func NewBackoff(min, max time.Duration, rnd func() float64) *Backoff {
	l := LinkConfig{RetryMin: min, RetryMax: max}.Defaults()
	if rnd == nil {
		rnd = rand.Float64
	}
	return &Backoff{min: l.RetryMin, max: l.RetryMax, rnd: rnd}
}

// Next returns the next wait, in [d/2, d] where d doubles from min to max.
func (b *Backoff) Next() time.Duration {
	d := b.min
	for i := 0; i < b.n && d < b.max; i++ {
		d *= 2
	}
	if d > b.max {
		d = b.max
	}
	if d < b.max {
		b.n++
	}
	half := d / 2
	return half + time.Duration(b.rnd()*float64(d-half))
}

// Reset starts the sequence again (after a successful connect).
func (b *Backoff) Reset() { b.n = 0 }

// LinkOptions configure a Link.
type LinkOptions struct {
	// Name names the backend in logs ("madsci node http://...").
	Name string
	// Config gives the backoff bounds.
	Config LinkConfig
	// Probe makes one connection attempt or health check, bounded by
	// ProbeTimeout; nil means the backend is up and may be used. A probe
	// that finds the backend but refuses it (its description changed)
	// returns an error too: the link stays down with that error.
	Probe func(ctx context.Context) error
	// ProbeTimeout bounds one Probe; default 10s.
	ProbeTimeout time.Duration
	// Clock times the waits; default the real clock.
	Clock clock.Clock
	// Rand is the jitter source (see NewBackoff).
	Rand func() float64
	// Logger receives link changes; default slog.Default().
	Logger *slog.Logger
}

// Link follows an adapter's connection to its backend: it reports every
// change to the driver (binding.Driver.SetLink) and, while the link is down,
// probes the backend with bounded, jittered backoff until a probe succeeds.
// Adapters call Down when a call shows the backend unreachable; only a
// successful Probe brings the link up again.
type Link struct {
	o LinkOptions

	mu      sync.Mutex
	set     func(bool, error)
	up      bool
	known   bool // up/err were set at least once
	err     error
	backoff *Backoff
	timer   clock.Timer
	probing bool
	started bool
	closed  bool
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	changes chan struct{}
}

// NewLink returns a link, not yet reporting and not yet probing.
func NewLink(o LinkOptions) *Link {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.ProbeTimeout <= 0 {
		o.ProbeTimeout = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	o.Config = o.Config.Defaults()
	ctx, cancel := context.WithCancel(context.Background())
	return &Link{o: o, backoff: NewBackoff(o.Config.RetryMin, o.Config.RetryMax, o.Rand), ctx: ctx, cancel: cancel,
		changes: make(chan struct{})}
}

// Attach gives the link the driver's SetLink and reports the current state
// to it, if one is known.
func (l *Link) Attach(set func(connected bool, err error)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.set = set
	if l.known {
		set(l.up, l.err)
	}
}

// Connected reports whether the link is up.
func (l *Link) Connected() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.up
}

// Err is why the link is down, or nil.
func (l *Link) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.up {
		return nil
	}
	return l.err
}

// Changed returns a channel closed at the next change of the link (tests
// and supervisors wait on it instead of sleeping).
func (l *Link) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changes
}

// Up marks the link up (after the adapter's own successful connect at
// start); later recoveries go through Probe.
func (l *Link) Up() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.setLocked(true, nil)
}

// Down marks the link down with err and, once started, schedules probes.
func (l *Link) Down(err error) {
	if err == nil {
		err = errors.New("link down")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.setLocked(false, err)
	l.armLocked()
}

// Start begins probing if the link is down. Before Start, Down only records.
func (l *Link) Start() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.started = true
	if l.known && !l.up {
		l.armLocked()
	}
}

// Close stops probing and waits for a probe in progress to return.
func (l *Link) Close() {
	l.mu.Lock()
	l.closed = true
	if l.timer != nil {
		l.timer.Stop()
	}
	l.cancel()
	l.mu.Unlock()
	l.wg.Wait()
}

func (l *Link) setLocked(up bool, err error) {
	transition := !l.known || l.up != up
	changed := transition || (err != nil && (l.err == nil || err.Error() != l.err.Error()))
	wasUp := l.known && l.up
	l.known, l.up, l.err = true, up, err
	if up {
		l.backoff.Reset()
	}
	if l.set != nil {
		l.set(up, err)
	}
	if !changed {
		return
	}
	close(l.changes)
	l.changes = make(chan struct{})
	switch {
	case !transition: // the same state for another reason: no log
	case up:
		l.o.Logger.Info("backend link up", "backend", l.o.Name)
	case wasUp || err != nil:
		l.o.Logger.Warn("backend link down; reconnecting", "backend", l.o.Name, "err", err)
	}
}

// armLocked schedules the next probe unless one is pending or running.
func (l *Link) armLocked() {
	if !l.started || l.closed || l.up || l.probing || l.timer != nil || l.o.Probe == nil {
		return
	}
	wait := l.backoff.Next()
	l.timer = l.o.Clock.AfterFunc(wait, l.probe)
}

func (l *Link) probe() {
	l.mu.Lock()
	l.timer = nil
	if l.closed || l.up {
		l.mu.Unlock()
		return
	}
	l.probing = true
	l.wg.Add(1)
	l.mu.Unlock()
	defer l.wg.Done()
	ctx, cancel := context.WithTimeout(l.ctx, l.o.ProbeTimeout)
	err := l.o.Probe(ctx)
	cancel()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.probing = false
	if l.closed {
		return
	}
	if err == nil {
		l.setLocked(true, nil)
		return
	}
	l.setLocked(false, err)
	l.armLocked()
}

// Unreachable reports whether err shows that a request never reached the
// backend: the connection could not be made (refused, no route, no such
// host, a dial timeout). A request that failed after its connection was
// made is not unreachable: it may have been received.
func Unreachable(err error) bool {
	if err == nil {
		return false
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, syscall.ENETUNREACH)
}

// NotSent is the error of a request refused because the backend could not
// be reached: nothing was sent, so the outcome is not_started and no fault
// latches. It never returns nil, so it returns the concrete [*mhp.Error].
func NotSent(what string, err error) *mhp.Error {
	return mhp.Errorf(mhp.CodeServerError, "%s: backend unreachable, nothing was sent: %v", what, err).
		With(mhp.DataReason, mhp.ReasonBackendUnavailable).With(mhp.DataOutcome, mhp.OutcomeNotStarted)
}

// DescriptorFile is a cached backend description (see
// LinkConfig.DescriptorCache).
type DescriptorFile struct {
	// Adapter and Backend say what the description is of (kind and URL);
	// a cache of another backend is refused.
	Adapter string `json:"adapter"`
	Backend string `json:"backend"`
	// Saved is when it was written (RFC 3339).
	Saved string `json:"saved"`
	// Description is the adapter's own raw form of what the backend said.
	Description json.RawMessage `json:"description"`
}

// SaveDescriptor writes the description atomically (temp file + rename).
func SaveDescriptor(path, adapter, backend string, description any) error {
	raw, err := json.Marshal(description)
	if err != nil {
		return err
	}
	f := DescriptorFile{Adapter: adapter, Backend: backend, Saved: time.Now().UTC().Format(time.RFC3339), Description: raw}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("descriptor cache %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("descriptor cache %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("descriptor cache %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("descriptor cache %s: %w", path, err)
	}
	return nil
}

// LoadDescriptor reads a cached description into out; it refuses a cache
// written for another adapter kind or backend.
func LoadDescriptor(path, adapter, backend string, out any) (*DescriptorFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("descriptor cache: %w", err)
	}
	var f DescriptorFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("descriptor cache %s: %w", path, err)
	}
	if f.Adapter != adapter || f.Backend != backend {
		return nil, fmt.Errorf("descriptor cache %s describes %s %s, not %s %s", path, f.Adapter, f.Backend, adapter, backend)
	}
	if err := json.Unmarshal(f.Description, out); err != nil {
		return nil, fmt.Errorf("descriptor cache %s: %w", path, err)
	}
	return &f, nil
}

// SameDescription reports whether two descriptions marshal to the same
// canonical JSON (object keys sorted). A backend whose description changed
// after the device was built must not silently change what the gates check:
// adapters keep the link down until a restart adopts the new description.
func SameDescription(a, b any) bool {
	ca, err1 := canonical(a)
	cb, err2 := canonical(b)
	return err1 == nil && err2 == nil && bytes.Equal(ca, cb)
}

func canonical(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var x any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&x); err != nil {
		return nil, err
	}
	return json.Marshal(x) // maps marshal with sorted keys
}

// DescriptionChanged is the link error of a backend that came back
// describing itself differently from what the device serves.
func DescriptionChanged(backend, what string) error {
	return fmt.Errorf("%s describes itself differently than when this device was built (%s); actuation stays refused: restart the adapter to adopt the new description", backend, strings.TrimSpace(what))
}
