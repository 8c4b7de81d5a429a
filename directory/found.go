package directory

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Found is a search answer as an agent reads it (mhp_find): the fields every
// result shares, said once in Common, then each result with only its own
// fields. Three thermocyclers in bay 12 differ in id and target; their class,
// make, model, tags, description, item names, state and often their score
// are the same, and repeating them costs the agent's context three times
// over. No field is dropped: a result is Common merged with its entry.
//
// The directory/search wire answer keeps the spec's shape (§3.2: every
// result a whole card); Found is the host's rendering of it. With fewer than
// two results nothing is hoisted and Common is empty.
type Found struct {
	// Common holds the fields equal in every result; absent when nothing is shared.
	Common map[string]json.RawMessage `json:"common,omitempty"`
	// Results are the results in rank order, each without the Common fields.
	Results []map[string]json.RawMessage `json:"results"`
}

// neverHoisted are the fields that name one device: kept in each entry even
// when equal (a single result, or duplicates), so an entry is never anonymous.
var neverHoisted = map[string]bool{"id": true}

// Compact renders results as Found: the fields whose JSON is equal in every
// result move to Common.
func Compact(results []Result) (*Found, error) {
	out := &Found{Results: make([]map[string]json.RawMessage, len(results))}
	for i, r := range results {
		b, err := json.Marshal(r)
		if err != nil {
			return nil, fmt.Errorf("directory: rendering result %d: %w", i, err)
		}
		if err := json.Unmarshal(b, &out.Results[i]); err != nil {
			return nil, fmt.Errorf("directory: rendering result %d: %w", i, err)
		}
	}
	if len(out.Results) < 2 {
		return out, nil
	}
	first := out.Results[0]
	for k, v := range first {
		if neverHoisted[k] {
			continue
		}
		shared := true
		for _, r := range out.Results[1:] {
			if w, ok := r[k]; !ok || !bytes.Equal(v, w) {
				shared = false
				break
			}
		}
		if !shared {
			continue
		}
		if out.Common == nil {
			out.Common = map[string]json.RawMessage{}
		}
		out.Common[k] = v
	}
	for k := range out.Common {
		for _, r := range out.Results {
			delete(r, k)
		}
	}
	return out, nil
}

// Expand is the inverse of Compact: each result with Common merged in. A
// field both in Common and in an entry is refused: the answer would say two
// things about one device.
func (f *Found) Expand() ([]Result, error) {
	out := make([]Result, len(f.Results))
	for i, r := range f.Results {
		merged := make(map[string]json.RawMessage, len(r)+len(f.Common))
		for k, v := range f.Common {
			merged[k] = v
		}
		for k, v := range r {
			if _, dup := merged[k]; dup {
				return nil, fmt.Errorf("directory: result %d sets %q, which common sets too", i, k)
			}
			merged[k] = v
		}
		b, err := json.Marshal(merged)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, &out[i]); err != nil {
			return nil, fmt.Errorf("directory: result %d: %w", i, err)
		}
	}
	return out, nil
}

// DecodeFound reads a search answer in either shape: the wire's
// {"results":[card...]} or Found's {"common":{...},"results":[...]}.
func DecodeFound(b []byte) ([]Result, error) {
	var f Found
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("directory: search answer: %w", err)
	}
	return f.Expand()
}
