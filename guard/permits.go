package guard

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/clock"
	"github.com/openmhp/mhp-go/evidence"
)

// Permit bounds.
const (
	DefaultPermitTTL = 5 * time.Minute
	MaxPermitTTL     = time.Hour
	// MaxPermits bounds the permits outstanding at once.
	MaxPermits = 256
)

// PermitRequest is what an operator approves: one exact request.
type PermitRequest struct {
	// Method is settings/write or actions/invoke.
	Method string `json:"method"`
	Name   string `json:"name"`
	// Value (settings/write) or Params (actions/invoke) exactly as the agent
	// will send them.
	Value  any            `json:"value,omitempty"`
	Params map[string]any `json:"params,omitempty"`
	// TTL is the permit's lifetime in seconds ([DefaultPermitTTL]; at most [MaxPermitTTL]).
	TTL float64 `json:"ttl,omitempty"`
	// Note says why, for the evidence.
	Note string `json:"note,omitempty"`
}

// Permit is a single-use approval of one exact request.
type Permit struct {
	ID           string  `json:"permitId"`
	Device       string  `json:"device"`
	Method       string  `json:"method"`
	Name         string  `json:"name"`
	ParamsDigest string  `json:"params_digest"`
	Expires      float64 `json:"expires"`
	Note         string  `json:"note,omitempty"`
}

type permitRec struct {
	Permit
	expires time.Time
	used    bool
	taken   bool // used by a request whose answer is not known yet
}

// Permits is the store of outstanding operator permits of one device.
type Permits struct {
	device string
	clk    clock.Clock

	mu sync.Mutex
	m  map[string]*permitRec
}

// NewPermits returns an empty store for the device id (clk nil: real clock).
func NewPermits(device string, clk clock.Clock) *Permits {
	if clk == nil {
		clk = clock.Real{}
	}
	return &Permits{device: device, clk: clk, m: map[string]*permitRec{}}
}

// Issue makes a permit for exactly req.
func (p *Permits) Issue(req PermitRequest) (*Permit, error) {
	var params any
	switch req.Method {
	case mhp.MethodSettingsWrite:
		if req.Params != nil {
			return nil, mhp.Errorf(mhp.CodeInvalidParams, "a settings/write permit takes value, not params").With(mhp.DataField, "params")
		}
		params = req.Value
	case mhp.MethodActionsInvoke:
		if req.Value != nil {
			return nil, mhp.Errorf(mhp.CodeInvalidParams, "an actions/invoke permit takes params, not value").With(mhp.DataField, "value")
		}
		params = req.Params
	default:
		return nil, mhp.Errorf(mhp.CodeInvalidParams, "permit method %q is not settings/write or actions/invoke", mhp.Truncate(req.Method, 64)).With(mhp.DataField, "method")
	}
	if req.Name == "" || len(req.Name) > 256 {
		return nil, mhp.Errorf(mhp.CodeInvalidParams, "permit name is empty or too long").With(mhp.DataField, "name")
	}
	ttl := DefaultPermitTTL
	if req.TTL != 0 {
		if !(req.TTL >= 1 && req.TTL <= MaxPermitTTL.Seconds()) {
			return nil, mhp.Errorf(mhp.CodeInvalidParams, "permit ttl %g s is outside 1..%g s", req.TTL, MaxPermitTTL.Seconds()).
				With(mhp.DataField, "ttl").With(mhp.DataMin, 1).With(mhp.DataMax, MaxPermitTTL.Seconds())
		}
		ttl = time.Duration(req.TTL * float64(time.Second))
	}
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("permit id: %w", err)
	}
	now := p.clk.Now()
	rec := &permitRec{Permit: Permit{ID: "permit_" + hex.EncodeToString(b[:]), Device: p.device, Method: req.Method, Name: req.Name,
		ParamsDigest: paramsDigest(params), Expires: mhp.UnixSeconds(now.Add(ttl)), Note: mhp.Truncate(req.Note, 512)}, expires: now.Add(ttl)}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pruneLocked(now)
	if len(p.m) >= MaxPermits {
		return nil, mhp.Errorf(mhp.CodeServerError, "%d permits are outstanding; let some expire or be used", MaxPermits).With(mhp.DataMax, MaxPermits)
	}
	p.m[rec.ID] = rec
	out := rec.Permit
	return &out, nil
}

func (p *Permits) pruneLocked(now time.Time) {
	for id, r := range p.m {
		if (r.used && !r.taken) || now.After(r.expires) {
			delete(p.m, id)
		}
	}
}

// paramsDigest identifies the params a permit approves: a write's value, or
// an invoke's params, where no params and an empty object are the same request.
func paramsDigest(v any) string {
	switch p := v.(type) {
	case nil:
		return evidence.Digest(map[string]any{})
	case map[string]any:
		if len(p) == 0 {
			return evidence.Digest(map[string]any{})
		}
	}
	return evidence.Digest(v)
}

// check reports why permit id does not approve the request ("" when it
// does); with take, a matching permit is marked used.
func (p *Permits) check(id, method, name, digest string, take bool) string {
	now := p.clk.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.m[id]
	switch {
	case !ok:
		return "unknown permit (never issued, already used or expired)"
	case r.used:
		return "the permit was already used"
	case now.After(r.expires):
		return "the permit expired"
	case r.Method != method:
		return fmt.Sprintf("the permit is for %s, not %s", r.Method, method)
	case r.Name != name:
		return fmt.Sprintf("the permit is for %q, not %q", r.Name, mhp.Truncate(name, 64))
	case r.ParamsDigest != digest:
		return "the permit was issued for other parameters"
	}
	if take {
		r.used, r.taken = true, true
	}
	return ""
}

// settle ends a used permit's flight: it is gone at the next prune.
func (p *Permits) settle(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r, ok := p.m[id]; ok {
		r.taken = false
	}
}

// restore makes a used permit usable again: its request was refused before
// anything reached the backend.
func (p *Permits) restore(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r, ok := p.m[id]; ok {
		r.used, r.taken = false, false
	}
}
