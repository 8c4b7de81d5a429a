package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"sync/atomic"

	"github.com/openmhp/mhp-go"
)

// The device/describe answer of a tier (card, summary, full) is the same
// bytes request after request except its live members, state and backend:
// rendering it (mhp.Description.MarshalJSON builds maps of every item and
// marshals them) costs more than the rest of the request. The server keeps
// each tier's encoding, cut at the live members, and splices the current
// state and backend in.
//
// The key is the descriptor the device answered, compared shallowly (the
// same strings, the same item lists by address and length, the same
// physical record): a device that changes its descriptor at run time
// (binding's refinement) answers new lists, and the next describe renders
// again. Lists are never changed in place: drivers built from the same spec
// share them (binding's frozen specs).

// describeCache holds one rendered answer per tier.
type describeCache struct {
	card, summary, full atomic.Pointer[renderedDescription]
}

// renderedDescription is one tier's answer cut at its live members: the
// static members' bytes, with the places of state and backend.
type renderedDescription struct {
	desc       mhp.Descriptor // the key, compared with sameDescriptor
	detail     string
	stateEmpty bool // the key: rendered with an empty state
	hasBackend bool // the key: rendered with a backend link
	segs       []segment
}

// segment is one member of a rendered answer: static bytes ("key":value),
// or a live member written from the answer at hand.
type segment struct {
	static []byte
	live   liveMember
}

type liveMember int

const (
	liveNone liveMember = iota
	liveState
	liveBackend
)

// slot is the cache entry of a tier (nil: the tier is not cached).
func (c *describeCache) slot(detail string) *atomic.Pointer[renderedDescription] {
	switch detail {
	case mhp.DetailCard:
		return &c.card
	case mhp.DetailSummary:
		return &c.summary
	case mhp.DetailFull:
		return &c.full
	}
	return nil
}

// describe answers device/describe: the device's description, encoded
// once per tier and descriptor (a select is rendered each time).
func (s *Server) describe(ctx context.Context, _ *session, req mhp.DescribeRequest) (any, error) {
	d, err := s.dev.Describe(ctx, req)
	if err != nil || d == nil {
		return d, err
	}
	return s.encodeDescription(d)
}

// encodeDescription is d's JSON (an encodedResult, or a splicedResult from
// the cache when d's tier was rendered for the same descriptor).
func (s *Server) encodeDescription(d *mhp.Description) (json.Marshaler, error) {
	c := s.dcache.Load()
	if c == nil {
		c = &describeCache{}
		if !s.dcache.CompareAndSwap(nil, c) {
			c = s.dcache.Load()
		}
	}
	slot := c.slot(d.Detail)
	if slot == nil {
		b, err := d.MarshalJSON()
		return encodedResult(b), err
	}
	if r := slot.Load(); r != nil && r.matches(d) {
		return splicedResult{r, d}, nil
	}
	b, err := d.MarshalJSON()
	if err != nil {
		return nil, err
	}
	if r, ok := cut(d, b); ok {
		slot.Store(r)
	}
	return encodedResult(b), nil
}

// matches reports whether r was rendered from d's descriptor, tier and
// kind of live members.
func (r *renderedDescription) matches(d *mhp.Description) bool {
	return r.detail == d.Detail && r.stateEmpty == (d.State == "") && r.hasBackend == (d.Backend != nil) &&
		sameDescriptor(&r.desc, &d.Descriptor)
}

// cut splits b, d's rendering, at its members: "state" and "backend" are
// live, every other member static. ok is false when b is not an object of
// members cut can follow (then nothing is cached).
func cut(d *mhp.Description, b []byte) (*renderedDescription, bool) {
	r := &renderedDescription{desc: d.Descriptor, detail: d.Detail, stateEmpty: d.State == "", hasBackend: d.Backend != nil}
	static := bytes.Clone(b)
	ok := eachMember(static, func(key, member []byte) bool {
		switch string(key) {
		case "state":
			r.segs = append(r.segs, segment{live: liveState})
		case "backend":
			r.segs = append(r.segs, segment{live: liveBackend})
		default:
			r.segs = append(r.segs, segment{static: member})
		}
		return true
	})
	return r, ok
}

// splice writes d's answer: the static members as rendered, the live
// ones from d.
func (r *renderedDescription) splice(d *mhp.Description) (encodedResult, error) {
	n := 2
	for _, sg := range r.segs {
		n += len(sg.static) + 1
	}
	return r.appendTo(make([]byte, 0, n+64), d)
}

// appendTo appends d's answer to b.
func (r *renderedDescription) appendTo(b []byte, d *mhp.Description) ([]byte, error) {
	b = append(b, '{')
	for i, sg := range r.segs {
		if i > 0 {
			b = append(b, ',')
		}
		switch sg.live {
		case liveNone:
			b = append(b, sg.static...)
			continue
		case liveState:
			b = append(b, `"state":`...)
			if out, ok := appendPlain(b, string(d.State)); ok {
				b = out
				continue
			}
			v, err := json.Marshal(d.State)
			if err != nil {
				return nil, err
			}
			b = append(b, v...)
		case liveBackend:
			b = append(b, `"backend":`...)
			v, err := json.Marshal(d.Backend)
			if err != nil {
				return nil, err
			}
			b = append(b, v...)
		}
	}
	return append(b, '}'), nil
}

// splicedResult is a description answered from the cache, spliced straight
// into the answer's buffer (encodeResponse).
type splicedResult struct {
	r *renderedDescription
	d *mhp.Description
}

// MarshalJSON splices the answer (for the paths that marshal a Response
// with encoding/json: stdio, tests).
func (sr splicedResult) MarshalJSON() ([]byte, error) { return sr.r.splice(sr.d) }

// eachMember calls f with the name and the whole text ("name":value) of
// each member of the JSON object b (valid JSON) in order, until f returns
// false. It reports false when b is not an object or a name is written
// with an escape.
func eachMember(b []byte, f func(key, member []byte) bool) bool {
	d := dupScanner{b: b, membersOnly: true}
	d.ws()
	if d.i >= len(b) || b[d.i] != '{' {
		return false
	}
	d.i++
	for {
		d.ws()
		if d.i >= len(b) {
			return false
		}
		switch b[d.i] {
		case '}':
			return true
		case ',':
			d.i++
			continue
		}
		start := d.i
		raw := d.str()
		if len(raw) < 2 || bytes.IndexByte(raw, '\\') >= 0 {
			return false
		}
		d.ws()
		if d.i >= len(b) || b[d.i] != ':' {
			return false
		}
		d.i++
		d.value(1, kindOther)
		if !f(raw[1:len(raw)-1], b[start:d.i]) {
			return true
		}
	}
}

// sameDescriptor reports whether a and b are the same descriptor, shallowly:
// equal strings and numbers, the same lists (address and length) and the
// same physical record. TestSameDescriptorCoversEveryField holds it to the
// descriptor's fields.
func sameDescriptor(a, b *mhp.Descriptor) bool {
	ai, bi := &a.DeviceInfo, &b.DeviceInfo
	return a.MHP == b.MHP && ai.ID == bi.ID && ai.Class == bi.Class && ai.Make == bi.Make && ai.Model == bi.Model &&
		ai.Serial == bi.Serial && ai.Location == bi.Location && sameList(ai.Tags, bi.Tags) && ai.Description == bi.Description &&
		a.Notes == b.Notes && a.Instructions == b.Instructions && a.Physical == b.Physical &&
		sameList(a.Signals, b.Signals) && sameList(a.Settings, b.Settings) && sameList(a.Actions, b.Actions) &&
		a.Safety.EStop == b.Safety.EStop && sameList(a.Safety.Interlocks, b.Safety.Interlocks) &&
		a.Safety.WatchdogS == b.Safety.WatchdogS && a.Safety.Notes == b.Safety.Notes && sameList(a.Resources, b.Resources)
}

// sameList reports whether a and b are the same list: the same length and
// the same first element (or both empty; nil and empty render alike).
func sameList[T any](a, b []T) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}
