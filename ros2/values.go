package ros2

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"sync"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/clock"
)

// ---- signals ----

// topicValue is the last value of one field of a topic, with its arrival time.
type topicValue struct {
	name, topic, typ string
	path             []pathStep
	clk              clock.Clock

	mu      sync.Mutex
	seq     uint64
	has     bool
	value   any
	at      time.Time
	bad     error // the last message did not hold a usable value
	lost    error // the link is down
	since   time.Time
	changed chan struct{}
}

func newTopicValue(name, topic, typ string, path []pathStep, clk clock.Clock) *topicValue {
	return &topicValue{name: name, topic: topic, typ: typ, path: path, clk: clk, changed: make(chan struct{})}
}

func (tv *topicValue) start() {
	tv.mu.Lock()
	tv.since = tv.clk.Now()
	tv.mu.Unlock()
}

func (tv *topicValue) onEvent(e TopicEvent) {
	tv.mu.Lock()
	defer tv.mu.Unlock()
	tv.seq++
	defer func() {
		close(tv.changed)
		tv.changed = make(chan struct{})
	}()
	if e.Err != nil {
		tv.lost = e.Err
		return
	}
	tv.lost = nil
	tv.at = e.At
	msg, err := decodeJSON(e.Msg)
	if err != nil {
		tv.has, tv.bad = false, fmt.Errorf("unparsable message on %s: %v", tv.topic, err)
		return
	}
	v, err := getPath(msg, tv.path)
	if err == nil {
		v, err = coerce(v, tv.typ)
	}
	if err != nil {
		tv.has, tv.bad = false, fmt.Errorf("message on %s: %v", tv.topic, err)
		return
	}
	tv.has, tv.bad, tv.value = true, nil, v
}

// decodeJSON decodes a message keeping integers exact: rosbridge sends
// int64 and uint64 fields as plain JSON integers, which float64 would round
// above 2^53. Integers become int64 (uint64 above MaxInt64), other numbers
// float64.
func decodeJSON(raw []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return exactNumbers(v), nil
}

func exactNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return i
		}
		if u, err := strconv.ParseUint(string(x), 10, 64); err == nil {
			return u
		}
		f, _ := strconv.ParseFloat(string(x), 64)
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = exactNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = exactNumbers(e)
		}
	}
	return v
}

// bytesField decodes a uint8[] or char[] field (fixed-size too), which
// rosbridge sends as a base64 string, into its byte values.
func bytesField(s string) ([]any, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("string is not the base64 of a uint8[]/char[] field: %v", err)
	}
	out := make([]any, len(b))
	for i, c := range b {
		out[i] = int64(c)
	}
	return out, nil
}

// coerce checks a decoded JSON value against an MHP type.
func coerce(v any, typ string) (any, error) {
	if v == nil {
		return nil, errors.New("value is null (NaN or Inf on the robot, or an empty field)")
	}
	switch typ {
	case mhp.TypeNumber:
		switch x := v.(type) {
		case float64:
			return x, nil
		case int64:
			return float64(x), nil
		case uint64:
			return float64(x), nil
		}
	case mhp.TypeInteger:
		switch x := v.(type) {
		case int64:
			return x, nil
		case uint64:
			return x, nil
		case float64:
			if x == math.Trunc(x) && math.Abs(x) <= 1<<53 {
				return int64(x), nil
			}
		}
	case mhp.TypeBoolean:
		if b, ok := v.(bool); ok {
			return b, nil
		}
	case mhp.TypeString:
		if s, ok := v.(string); ok {
			return s, nil
		}
	case mhp.TypeArray:
		switch x := v.(type) {
		case []any:
			return x, nil
		case string:
			return bytesField(x)
		}
	case mhp.TypeObject:
		if _, ok := v.(map[string]any); ok {
			return v, nil
		}
	default:
		return v, nil
	}
	return nil, fmt.Errorf("value %v (%T) is not a %s", v, v, typ)
}

// snapshot returns the value for a read, or why there is none.
func (tv *topicValue) snapshot(maxAge time.Duration) (any, time.Time, error) {
	tv.mu.Lock()
	defer tv.mu.Unlock()
	now := tv.clk.Now()
	switch {
	case tv.lost != nil:
		return nil, time.Time{}, binding.Unavailable("%s: link to rosbridge lost (%v); no fresh %s messages", tv.name, tv.lost, tv.topic)
	case tv.bad != nil:
		return nil, time.Time{}, binding.Unavailable("%s: %v", tv.name, tv.bad)
	case !tv.has:
		return nil, time.Time{}, binding.Unavailable("%s: no message on %s in the %v since subscribing (is the topic published? rosbridge drops a subscribe with a wrong msg_type silently)",
			tv.name, tv.topic, now.Sub(tv.since).Round(time.Millisecond))
	case maxAge > 0 && now.Sub(tv.at) > maxAge:
		return nil, time.Time{}, binding.Unavailable("%s: stale: last message on %s arrived %v ago, max_age_s is %v",
			tv.name, tv.topic, now.Sub(tv.at).Round(time.Millisecond), maxAge.Seconds())
	}
	return tv.value, tv.at, nil
}

func (tv *topicValue) reader(maxAge time.Duration) func(context.Context) (binding.Sample, error) {
	return func(ctx context.Context) (binding.Sample, error) {
		v, at, err := tv.snapshot(maxAge)
		if err != nil {
			return binding.Sample{}, err
		}
		return binding.Sample{Value: v, Time: at}, nil
	}
}

// waitMatch waits until a message that arrived after sequence number after
// holds want (numbers within tol).
func (tv *topicValue) waitMatch(ctx context.Context, after uint64, want any, tol float64) (any, error) {
	for {
		tv.mu.Lock()
		seq, has, v, ch := tv.seq, tv.has, tv.value, tv.changed
		tv.mu.Unlock()
		if seq > after && has && matches(v, want, tol) {
			return v, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			if !has {
				return nil, fmt.Errorf("no message on %s", tv.topic)
			}
			return nil, fmt.Errorf("last state on %s was %v", tv.topic, v)
		}
	}
}

func (tv *topicValue) sequence() uint64 {
	tv.mu.Lock()
	defer tv.mu.Unlock()
	return tv.seq
}

func matches(got, want any, tol float64) bool {
	gf, gok := mhp.Number(got)
	wf, wok := mhp.Number(want)
	if gok && wok {
		return math.Abs(gf-wf) <= tol
	}
	return reflect.DeepEqual(got, want)
}
