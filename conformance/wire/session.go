package wire

import (
	"context"
	"encoding/json"
	"fmt"
	"math"

	"github.com/openmhp/mhp-go"
)

// checker holds what the checks share.
type checker struct {
	target string
	opts   Options
	main   *session // an initialized session: sees exactly what the server answers
	desc   *desc    // the full descriptor, read leniently
}

func (c *checker) http() bool { return c.main != nil && c.main.c.HTTP() }

// dial opens a bare connection (a new client identity).
func (c *checker) dial() (*Conn, error) {
	return Dial(c.target, DialOptions{Token: c.opts.Token, Stderr: c.opts.Stderr, HTTPClient: c.opts.HTTPClient})
}

// open dials and initializes with the newest protocol version.
func (c *checker) open(ctx context.Context) (*session, error) {
	conn, err := c.dial()
	if err != nil {
		return nil, err
	}
	s := &session{c: conn}
	r, err := conn.Call(ctx, "initialize", InitParams(mhp.ProtocolVersion, "mhp-wire"))
	if err == nil && r.Error != nil {
		err = r.Error.Err()
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("initialize: %w", err)
	}
	if err := json.Unmarshal(r.Result, &s.init); err != nil || s.init == nil {
		conn.Close()
		return nil, fmt.Errorf("initialize: the result is not an object: %.200s", r.Result)
	}
	return s, nil
}

// session is an initialized connection.
type session struct {
	c    *Conn
	init map[string]any // the initialize result
}

func (s *session) close() { _ = s.c.Close() }

// call sends a request: the decoded result, or the error object, or a
// transport error.
func (s *session) call(ctx context.Context, method string, params any) (any, *Error, error) {
	r, err := s.c.Call(ctx, method, params)
	if err != nil {
		return nil, nil, err
	}
	if r.Error != nil {
		return nil, r.Error, nil
	}
	if len(r.Result) == 0 {
		return nil, nil, fmt.Errorf("%s: the answer has neither result nor error", method)
	}
	var v any
	if err := json.Unmarshal(r.Result, &v); err != nil {
		return nil, nil, fmt.Errorf("%s: unreadable result: %v", method, err)
	}
	return v, nil, nil
}

// result is call with the error object as an error.
func (s *session) result(ctx context.Context, method string, params any) (any, error) {
	v, e, err := s.call(ctx, method, params)
	if err != nil {
		return nil, err
	}
	if e != nil {
		return nil, e.Err()
	}
	return v, nil
}

// refusal is the outcome of a request expected to be refused: "" when it
// was refused with one of codes (none given: any code), else why not.
func refusal(v any, e *Error, err error, codes ...mhp.Code) (got string, ok bool) {
	if err != nil {
		return "no answer: " + err.Error(), false
	}
	if e == nil {
		return fmt.Sprintf("accepted: %s", short(v)), false
	}
	if len(codes) == 0 {
		return e.String(), true
	}
	for _, c := range codes {
		if e.Code == c {
			return e.String(), true
		}
	}
	return e.String(), false
}

func short(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 160 {
		return string(b[:160]) + "…"
	}
	return string(b)
}

// desc is a descriptor read leniently: items may be objects or bare names,
// identity may sit at the top level or under "device".
type desc struct {
	ID                         string
	MHP                        string
	Signals, Settings, Actions []item
	EStop                      *bool
}

// item is one signal, setting or action.
type item struct {
	Name, Type, Approval string
	Interlocks           []string
	Limits               lims
	// Params are an action's declared parameter names (nil when undeclared or prose).
	Params []string
	// Full is false for a bare name.
	Full bool
}

// lims is {min,max} and/or {enum}.
type lims struct {
	Min, Max *float64
	Enum     []any
}

func (l lims) empty() bool { return l.Min == nil && l.Max == nil && len(l.Enum) == 0 }

func (l lims) String() string {
	s := ""
	if l.Min != nil {
		s += fmt.Sprintf("min %g ", *l.Min)
	}
	if l.Max != nil {
		s += fmt.Sprintf("max %g ", *l.Max)
	}
	if len(l.Enum) > 0 {
		s += "enum " + short(l.Enum) + " "
	}
	if s == "" {
		return "none"
	}
	return s[:len(s)-1]
}

func (l lims) equal(o lims) bool {
	feq := func(a, b *float64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }
	return feq(l.Min, o.Min) && feq(l.Max, o.Max) && short(l.Enum) == short(o.Enum)
}

func num(v any) (*float64, bool) {
	f, ok := v.(float64)
	if !ok || math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, false
	}
	return &f, true
}

// parseLims reads {min,max,enum} or [min,max].
func parseLims(v any) lims {
	var l lims
	switch x := v.(type) {
	case map[string]any:
		l.Min, _ = num(x["min"])
		l.Max, _ = num(x["max"])
		l.Enum, _ = x["enum"].([]any)
	case []any:
		if len(x) == 2 {
			l.Min, _ = num(x[0])
			l.Max, _ = num(x[1])
		}
	}
	return l
}

func str(m map[string]any, k string) string { s, _ := m[k].(string); return s }

func strs(v any) []string {
	l, _ := v.([]any)
	var out []string
	for _, x := range l {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// deviceID reads the id at the top level or under "device".
func deviceID(m map[string]any) string {
	if id := str(m, "id"); id != "" {
		return id
	}
	if d, ok := m["device"].(map[string]any); ok {
		return str(d, "id")
	}
	return ""
}

func parseItems(v any) []item {
	l, _ := v.([]any)
	var out []item
	for _, x := range l {
		switch it := x.(type) {
		case string:
			out = append(out, item{Name: it})
		case map[string]any:
			i := item{Name: str(it, "name"), Type: str(it, "type"), Approval: str(it, "approval"), Full: true,
				Interlocks: strs(it["interlocks"]), Limits: parseLims(it["limits"])}
			switch p := it["params"].(type) {
			case map[string]any:
				for k := range p {
					i.Params = append(i.Params, k)
				}
			case []any:
				for _, e := range p {
					if s, ok := e.(string); ok {
						i.Params = append(i.Params, s)
					} else if m, ok := e.(map[string]any); ok && str(m, "name") != "" {
						i.Params = append(i.Params, str(m, "name"))
					}
				}
			}
			out = append(out, i)
		}
	}
	return out
}

func parseDescriptor(v any) (*desc, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("the descriptor is not an object: %s", short(v))
	}
	d := &desc{ID: deviceID(m), MHP: str(m, "mhp"), Signals: parseItems(m["signals"]),
		Settings: parseItems(m["settings"]), Actions: parseItems(m["actions"])}
	if d.ID == "" {
		return nil, fmt.Errorf("the descriptor names no device id (at the top level or under device)")
	}
	if s, ok := m["safety"].(map[string]any); ok {
		if b, ok := s["estop"].(bool); ok {
			d.EStop = &b
		}
	}
	return d, nil
}
