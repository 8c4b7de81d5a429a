package manual

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/auth"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/clock"
)

// Outcomes a person reports in operator/answer.
const (
	// OutcomeDone: the person did it.
	OutcomeDone = "done"
	// OutcomeFailed: the person tried and it failed; what happened is known.
	OutcomeFailed = "failed"
	// OutcomeCouldNot: the person could not do it; nothing was done.
	OutcomeCouldNot = "could_not"
	// OutcomeCancelled: the person stopped the work after a cancel.
	OutcomeCancelled = "cancelled"
)

// Person is who answered: the authenticated identity when the transport
// gave one, else the session's public label.
type Person struct {
	Name    string `json:"name,omitempty"`
	Role    string `json:"role,omitempty"`
	Via     string `json:"via,omitempty"`
	Session string `json:"session,omitempty"`
}

// Label is the person's name, or the session label.
func (p Person) Label() string {
	if p.Name != "" {
		return p.Name
	}
	if p.Session != "" {
		return p.Session
	}
	return "unknown"
}

// PersonFrom reads who is calling from ctx (auth.FromContext, falling back
// to mhp.SessionFrom).
func PersonFrom(ctx context.Context) Person {
	p := Person{Session: mhp.SessionFrom(ctx)}
	if id, ok := auth.FromContext(ctx); ok {
		p.Name, p.Role, p.Via = id.Name, string(id.Role), id.Via
	}
	return p
}

// answer is a person's word on a waiting job.
type answer struct {
	outcome string
	note    string
	values  map[string]any
	by      Person
	at      time.Time
}

// reading is a value a person recorded.
type reading struct {
	value any
	by    Person
	at    time.Time
	note  string
}

// request is a setting write waiting for the person's confirmation.
type request struct {
	value       any
	by          Person
	at          time.Time
	instruction string
}

// waiting is a job waiting for the person.
type waiting struct {
	action      string
	instruction string
	since       time.Time
	answer      chan answer
}

// operator holds what the person recorded and what waits for them.
type operator struct {
	cfg   Config
	clk   clock.Clock
	types map[string]string // signal -> type
	drv   *binding.Driver

	mu       sync.Mutex
	readings map[string]reading
	requests map[string]request
	jobs     map[string]*waiting
	estop    *request // the stop asked of the person, until confirmed
	stopOK   bool     // the person confirmed the last stop
}

func (o *operator) now() time.Time { return o.clk.Now() }

func (o *operator) notify(method string, params map[string]any) {
	if o.drv != nil {
		o.drv.Notify(method, params)
	}
}

func (o *operator) maxAge(signal string) time.Duration {
	if s, ok := o.cfg.Signals[signal]; ok && s.MaxAgeS > 0 {
		return seconds(s.MaxAgeS)
	}
	return seconds(o.cfg.ReadingMaxAgeS)
}

// read is a signal's Read: the last recorded value with its time, or
// unavailable when there is none or it is too old.
func (o *operator) read(name string) (binding.Sample, error) {
	o.mu.Lock()
	r, ok := o.readings[name]
	o.mu.Unlock()
	if !ok {
		return binding.Sample{}, binding.Unavailable("%s: nobody has recorded it yet (operator/record)", name)
	}
	age := o.now().Sub(r.at)
	if max := o.maxAge(name); age > max {
		return binding.Sample{}, binding.Unavailable("%s: recorded %s ago by %s, older than its max age %s", name,
			age.Round(time.Second), r.by.Label(), max)
	}
	return binding.Sample{Value: r.value, Time: r.at}, nil
}

// checkValue checks a recorded value against the signal's type.
func checkValue(typ string, v any) (any, error) {
	switch typ {
	case mhp.TypeNumber:
		if f, ok := toFloat(v); ok {
			return f, nil
		}
	case mhp.TypeInteger:
		if f, ok := toFloat(v); ok && f == float64(int64(f)) {
			return int64(f), nil
		}
	case mhp.TypeBoolean:
		if b, ok := v.(bool); ok {
			return b, nil
		}
	case mhp.TypeString:
		if s, ok := v.(string); ok && !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 && r != '\t' }) {
			return s, nil
		}
	default:
		if v != nil {
			return v, nil
		}
	}
	return nil, fmt.Errorf("%v is not a %s", v, typ)
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int64:
		return float64(x), true
	case int:
		return float64(x), true
	}
	return 0, false
}

// record stores a reading (operator/record, or the values of an answer).
func (o *operator) record(ctx context.Context, signal string, v any, note string) (reading, error) {
	typ, ok := o.types[signal]
	if !ok {
		return reading{}, mhp.Errorf(mhp.CodeUnknownName, "operator/record: no signal %q", signal).
			With(mhp.DataKind, "signal").With(mhp.DataName, signal)
	}
	val, err := checkValue(typ, v)
	if err != nil {
		return reading{}, mhp.Errorf(mhp.CodeInvalidValue, "operator/record %s: %v", signal, err).With(mhp.DataField, "value")
	}
	r := reading{value: val, by: PersonFrom(ctx), at: o.now(), note: mhp.Truncate(note, 1024)}
	o.mu.Lock()
	o.readings[signal] = r
	o.mu.Unlock()
	return r, nil
}

// format renders a value in an instruction.
func format(v any) string {
	switch x := v.(type) {
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case int64:
		return strconv.FormatInt(x, 10)
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}

func expand(text string, vals map[string]any) string {
	return placeholder.ReplaceAllStringFunc(text, func(m string) string {
		if v, ok := vals[m[1:len(m)-1]]; ok {
			return format(v)
		}
		return m
	})
}
